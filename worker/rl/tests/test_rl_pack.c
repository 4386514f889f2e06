/*
 * test_rl_pack.c - micro-batch packing against AReaL's own ffd_allocate
 * (fixtures/rl-pack.json, from make_rl_fixtures.py): the same micro-batches
 * for every case; the bound on tokens; errors naming a too-long sequence;
 * and the DP split that keeps every group on one rank, balanced in tokens.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "areal/rl/pack.h"
#include "rl_test_util.h"

static void ffd_matches_areal(void **st) {
    (void)st;
    json_t *fx = rl_load_fixture("rl-pack.json");
    assert_non_null(fx);
    size_t ci;
    json_t *cs;
    json_array_foreach(json_object_get(fx, "cases"), ci, cs) {
        int64_t lens[128];
        int n = 0;
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(cs, "lens"), i, v) lens[n++] = json_integer_value(v);
        int64_t cap = json_integer_value(json_object_get(cs, "capacity"));
        int min_mbs = (int)json_integer_value(json_object_get(cs, "min_groups"));
        int mb_of[128], n_mbs = 0;
        areal_error err;
        if (areal_pack_ffd(lens, n, cap, min_mbs, mb_of, &n_mbs, &err) != AREAL_OK)
            fail_msg("case %zu: %s", ci, err.msg);
        json_t *groups = json_object_get(cs, "groups");
        assert_int_equal((size_t)n_mbs, json_array_size(groups));
        /* AReaL's group g holds exactly the sequences we put in micro-batch g */
        size_t g;
        json_t *gr;
        int seen = 0;
        json_array_foreach(groups, g, gr) {
            int64_t load = 0;
            json_array_foreach(gr, i, v) {
                int s = (int)json_integer_value(v);
                if (mb_of[s] != (int)g)
                    fail_msg("case %zu: sequence %d in micro-batch %d, AReaL's %zu", ci, s,
                             mb_of[s], g);
                load += lens[s];
                seen++;
            }
            assert_true(load <= cap);
        }
        assert_int_equal(seen, n);
    }
    json_decref(fx);
}

static void ffd_bounds_and_errors(void **st) {
    (void)st;
    int64_t lens[6] = {5, 5, 5, 5, 5, 5};
    int mb_of[6], n_mbs;
    areal_error err;
    assert_int_equal(areal_pack_ffd(lens, 6, 10, 1, mb_of, &n_mbs, &err), AREAL_OK);
    assert_int_equal(n_mbs, 3);
    int count[3] = {0};
    for (int i = 0; i < 6; i++)
        count[mb_of[i]]++;
    assert_true(count[0] == 2 && count[1] == 2 && count[2] == 2);
    /* unbounded: exactly min_mbs micro-batches */
    assert_int_equal(areal_pack_ffd(lens, 6, 0, 2, mb_of, &n_mbs, &err), AREAL_OK);
    assert_int_equal(n_mbs, 2);
    lens[3] = 11;
    assert_int_equal(areal_pack_ffd(lens, 6, 10, 1, mb_of, &n_mbs, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "sequence 3 has 11 tokens"));
    assert_non_null(strstr(err.msg, "max_tokens_per_mb"));
    assert_int_equal(areal_pack_ffd(lens, 6, 100, 7, mb_of, &n_mbs, &err), AREAL_EINVAL);
    assert_int_equal(areal_pack_ffd(lens, 0, 100, 1, mb_of, &n_mbs, &err), AREAL_EINVAL);
}

static void dp_split_keeps_groups_whole(void **st) {
    (void)st;
    /* 8 groups of 4 over 2 ranks, group token totals 40, 8, 30, 12, 20, 4, 16, 10 */
    int64_t lens[32];
    const int64_t tot[8] = {40, 8, 30, 12, 20, 4, 16, 10};
    for (int g = 0; g < 8; g++)
        for (int k = 0; k < 4; k++)
            lens[4 * g + k] = tot[g] / 4 + (k == 0 ? tot[g] % 4 : 0);
    int rank_of[32];
    areal_error err;
    assert_int_equal(areal_split_groups_dp(lens, 32, 4, 2, rank_of, &err), AREAL_OK);
    int64_t load[2] = {0, 0};
    int groups[2] = {0, 0};
    for (int g = 0; g < 8; g++) {
        for (int k = 1; k < 4; k++)
            assert_int_equal(rank_of[4 * g + k], rank_of[4 * g]);
        load[rank_of[4 * g]] += tot[g];
        groups[rank_of[4 * g]]++;
    }
    assert_int_equal(groups[0], 4);
    assert_int_equal(groups[1], 4);
    /* 140 tokens: greedy gets within the largest group's reach of 70 each */
    assert_true(load[0] + load[1] == 140);
    assert_true(load[0] >= 60 && load[0] <= 80);
    assert_int_equal(areal_split_groups_dp(lens, 32, 4, 3, rank_of, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "8 groups do not split evenly over 3"));
    assert_int_equal(areal_split_groups_dp(lens, 30, 4, 2, rank_of, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "not whole groups of 4"));
    /* one rank gets everything */
    assert_int_equal(areal_split_groups_dp(lens, 32, 4, 1, rank_of, &err), AREAL_OK);
    for (int i = 0; i < 32; i++)
        assert_int_equal(rank_of[i], 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ffd_matches_areal),
        cmocka_unit_test(ffd_bounds_and_errors),
        cmocka_unit_test(dp_split_keeps_groups_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
