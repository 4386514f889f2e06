/*
 * test_pod_rank.c - a trainer process's rank, world and rendezvous from its
 * pod's environment (areal/train/pod_rank.h), as the operator writes it
 * (operator/tests/test_desired.c checks that side): one-rank pods take their
 * first rank, a pod of several ranks asks for the launcher and each launched
 * process takes RANK, the fallbacks to MASTER_ADDR / MASTER_PORT + 1, every
 * bad value named; `train` in such a pod is routed to the launcher
 * (areal_cmd_train_wants_ranks) and a pod made for another layout exits 2
 * naming WORLD_SIZE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "areal/podenv.h"
#include "areal/train/cmd.h"
#include "areal/train/pod_rank.h"

/* A pod of the operator's: rank slice first..first+n-1 of world 2, the group at w-trainer-0. */
static areal_train_pod_env pod(const char *first, const char *n) {
    return (areal_train_pod_env){.world = "2",
                                 .first_rank = first,
                                 .pod_ranks = n,
                                 .trainer_addr = "w-trainer-0.w",
                                 .trainer_port = "29501",
                                 .master_addr = "w-trainer-0.w",
                                 .master_port = "29500"};
}

static void one_rank_pods_are_their_first_rank(void **state) {
    (void)state;
    areal_train_pod_rank r;
    areal_error e;
    for (int i = 0; i < 2; i++) {
        char first[16];
        snprintf(first, sizeof first, "%d", i);
        areal_train_pod_env env = pod(first, "1");
        assert_int_equal(areal_train_pod_rank_parse(&env, 2, &r, &e), AREAL_OK);
        assert_true(r.in_pod);
        assert_false(r.launch);
        assert_int_equal(r.rank, i);
        assert_int_equal(r.world, 2);
        assert_string_equal(r.master, "w-trainer-0.w:29501");
    }
}

static void a_pod_of_two_ranks_asks_for_the_launcher(void **state) {
    (void)state;
    areal_train_pod_rank r;
    areal_error e;
    areal_train_pod_env env = pod("0", "2");
    assert_int_equal(areal_train_pod_rank_parse(&env, 2, &r, &e), AREAL_OK);
    assert_true(r.launch);
    assert_int_equal(r.first, 0);
    assert_int_equal(r.n, 2);
    env.rank = "1"; /* as the launcher starts the second */
    assert_int_equal(areal_train_pod_rank_parse(&env, 2, &r, &e), AREAL_OK);
    assert_false(r.launch);
    assert_int_equal(r.rank, 1);
    /* a pod holding ranks 2..3 of 4 cannot be rank 1 */
    env = pod("2", "2");
    env.world = "4";
    env.rank = "1";
    assert_int_equal(areal_train_pod_rank_parse(&env, 4, &r, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "RANK 1 is not one of the pod's ranks 2..3"));
    env.rank = "3";
    assert_int_equal(areal_train_pod_rank_parse(&env, 4, &r, &e), AREAL_OK);
    assert_int_equal(r.rank, 3);
}

static void the_rendezvous_falls_back_to_the_master(void **state) {
    (void)state;
    areal_train_pod_rank r;
    areal_error e;
    areal_train_pod_env env = pod("1", "1");
    env.trainer_addr = NULL;
    env.trainer_port = NULL;
    env.master_addr = "m-trainer-0.m";
    env.master_port = "31000";
    assert_int_equal(areal_train_pod_rank_parse(&env, 2, &r, &e), AREAL_OK);
    assert_string_equal(r.master, "m-trainer-0.m:31001");
    env.master_port = NULL;
    assert_int_equal(areal_train_pod_rank_parse(&env, 2, &r, &e), AREAL_OK);
    assert_string_equal(r.master, "m-trainer-0.m:29501");
    env.master_addr = NULL;
    assert_int_equal(areal_train_pod_rank_parse(&env, 2, &r, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "AREAL_TRAINER_ADDR"));
    /* one rank needs no rendezvous */
    env.world = "1";
    env.first_rank = "0";
    assert_int_equal(areal_train_pod_rank_parse(&env, 1, &r, &e), AREAL_OK);
    assert_true(r.in_pod);
    assert_int_equal(r.rank, 0);
    assert_string_equal(r.master, "");
}

static void outside_a_pod_nothing_is_read(void **state) {
    (void)state;
    areal_train_pod_rank r;
    areal_error e;
    areal_train_pod_env env = pod("1", "1");
    env.world = NULL;
    assert_int_equal(areal_train_pod_rank_parse(&env, 2, &r, &e), AREAL_OK);
    assert_false(r.in_pod);
}

static void bad_values_are_named(void **state) {
    (void)state;
    areal_train_pod_rank r;
    areal_error e;
    areal_train_pod_env env = pod("0", "1");
    env.world = "4";
    assert_int_equal(areal_train_pod_rank_parse(&env, 2, &r, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "WORLD_SIZE is 4 but the trainer's layout has 2 ranks"));
    env = pod("1", "2");
    assert_int_equal(areal_train_pod_rank_parse(&env, 2, &r, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "ranks 1..2"));
    env = pod("x", "1");
    assert_int_equal(areal_train_pod_rank_parse(&env, 2, &r, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "AREAL_POD_FIRST_RANK='x'"));
    env = pod("0", "1");
    env.trainer_port = "70000";
    assert_int_equal(areal_train_pod_rank_parse(&env, 2, &r, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "AREAL_TRAINER_PORT='70000'"));
    env.trainer_port = "29500";
    assert_int_equal(areal_train_pod_rank_parse(&env, 2, &r, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "both 29500"));
    env = pod("0", "1");
    env.rank = "-1";
    assert_int_equal(areal_train_pod_rank_parse(&env, 2, &r, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "RANK='-1'"));
}

static void clear_env(void) {
    const char *names[] = {AREAL_ENV_RANK,        AREAL_ENV_WORLD_SIZE,   AREAL_ENV_FIRST_RANK,
                           AREAL_ENV_POD_RANKS,   AREAL_ENV_TRAINER_ADDR, AREAL_ENV_TRAINER_PORT,
                           AREAL_ENV_MASTER_ADDR, AREAL_ENV_MASTER_PORT,  AREAL_ENV_ALLOCATION,
                           AREAL_ENV_ROLE,        "AREAL_CONFIG"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unsetenv(names[i]);
}

static void train_in_a_pod_of_two_ranks_wants_the_launcher(void **state) {
    (void)state;
    clear_env();
    char *argv[] = {"train", "--job-dir", "/j", NULL};
    assert_false(areal_cmd_train_wants_ranks(3, argv));
    setenv(AREAL_ENV_WORLD_SIZE, "2", 1);
    setenv(AREAL_ENV_POD_RANKS, "2", 1);
    assert_true(areal_cmd_train_wants_ranks(3, argv));
    char *help[] = {"train", "--help", NULL};
    assert_false(areal_cmd_train_wants_ranks(2, help));
    char *ranked[] = {"train", "--rank", "0", NULL};
    assert_false(areal_cmd_train_wants_ranks(3, ranked));
    char *tiny[] = {"tiny", NULL};
    assert_false(areal_cmd_train_wants_ranks(1, tiny));
    setenv(AREAL_ENV_RANK, "1", 1); /* a launched rank */
    assert_false(areal_cmd_train_wants_ranks(3, argv));
    unsetenv(AREAL_ENV_RANK);
    setenv(AREAL_ENV_POD_RANKS, "1", 1);
    assert_false(areal_cmd_train_wants_ranks(3, argv));
    clear_env();
}

/* `train` in a pod made for another layout: exit 2, one line naming WORLD_SIZE. */
static void a_pod_of_another_world_exits_2(void **state) {
    (void)state;
    clear_env();
    setenv(AREAL_ENV_ALLOCATION, "sglang:d1+fsdp:d2", 1);
    setenv(AREAL_ENV_ROLE, "trainer", 1);
    setenv(AREAL_ENV_WORLD_SIZE, "3", 1);
    setenv(AREAL_ENV_FIRST_RANK, "1", 1);
    setenv(AREAL_ENV_POD_RANKS, "1", 1);
    char *argv[] = {"train", "--job-dir", "/nonexistent", "--model", "/nonexistent", NULL};
    char buf[4096] = "";
    FILE *out = fopen("/dev/null", "w"), *err = fmemopen(buf, sizeof buf - 1, "w");
    assert_non_null(out);
    assert_non_null(err);
    assert_int_equal(areal_cmd_train_run(5, argv, out, err), 2);
    fclose(err);
    fclose(out);
    assert_non_null(strstr(buf, "WORLD_SIZE is 3 but the trainer's layout has 2 ranks"));
    clear_env();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_rank_pods_are_their_first_rank),
        cmocka_unit_test(a_pod_of_two_ranks_asks_for_the_launcher),
        cmocka_unit_test(the_rendezvous_falls_back_to_the_master),
        cmocka_unit_test(outside_a_pod_nothing_is_read),
        cmocka_unit_test(bad_values_are_named),
        cmocka_unit_test(train_in_a_pod_of_two_ranks_wants_the_launcher),
        cmocka_unit_test(a_pod_of_another_world_exits_2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
