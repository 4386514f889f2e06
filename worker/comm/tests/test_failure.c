/*
 * test_failure.c - a rank that dies or stops answering mid-collective makes
 * every other rank's operation fail within twice the deadline, with an
 * error naming the group and a peer rank; later operations fail at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "areal/comm/comm.h"
#include "ranks.h"

#define DEADLINE_MS 1500
#define WORLD       5
#define VICTIM      2

/* Collectives in a loop until one fails; the error must name the group and a peer. */
static int loop_until_failure(areal_comm *c, void *arg) {
    (void)arg;
    int n = areal_comm_world(c), ranks[RANKS_MAX];
    for (int j = 0; j < n; j++)
        ranks[j] = j;
    areal_error e;
    areal_pg *g = NULL;
    if (areal_comm_group(c, "world", ranks, n, &g, &e) != AREAL_OK)
        return 10;
    size_t cnt = 1u << 20;
    float *buf = calloc(cnt, sizeof *buf), *out = calloc(cnt, sizeof *out);
    int rc = 0;
    for (int it = 0; it < 100000; it++) {
        /* small and large all-reduce (tree, ring) and all-to-all (every peer at once) */
        int r = it % 3 == 2
                    ? areal_pg_all_to_all(g, buf, out, cnt / (size_t)n, AREAL_DT_F32, &e)
                    : areal_pg_all_reduce(g, buf, it % 3 ? cnt : 16, AREAL_DT_F32, AREAL_SUM, &e);
        if (r != AREAL_OK) {
            rc = strstr(e.msg, "group world") && strstr(e.msg, "rank ") ? RANK_COMM_FAIL
                                                                        : RANK_WRONG;
            fprintf(stderr, "rank %d: %s\n", areal_comm_rank(c), e.msg);
            /* the group stays broken: the next call fails at once, same message */
            areal_error e2;
            int64_t t0 = areal_now_ms();
            if (areal_pg_barrier(g, &e2) != AREAL_EIO || strcmp(e.msg, e2.msg) != 0 ||
                areal_now_ms() - t0 > 100)
                rc = RANK_WRONG;
            break;
        }
    }
    free(buf);
    free(out);
    areal_pg_destroy(g);
    return rc;
}

/*
 * Starts the ranks (split into `pods`, see ranks.h), hits the victim with sig
 * after 500 ms, returns ms until all others ended.
 */
static int64_t hit_and_time(int sig, int pods, int *worst) {
    pid_t pids[WORLD];
    ranks_store store;
    assert_int_equal(
        ranks_start_pods(&store, WORLD, pods, DEADLINE_MS, loop_until_failure, NULL, pids), 0);
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 500000000L};
    nanosleep(&ts, NULL);
    kill(pids[VICTIM], sig);
    int64_t t0 = areal_now_ms(), last = t0;
    *worst = 0;
    for (int r = 0; r < WORLD; r++) {
        if (r == VICTIM)
            continue;
        int st = 0;
        waitpid(pids[r], &st, 0);
        last = areal_now_ms();
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
        if (code != RANK_COMM_FAIL)
            *worst = code > *worst ? code : *worst;
    }
    kill(pids[VICTIM], SIGKILL);
    waitpid(pids[VICTIM], NULL, 0);
    ranks_store_stop(&store);
    return last - t0;
}

static void killed_rank_fails_everyone_in_time(void **state) {
    (void)state;
    int worst = 0;
    int64_t took = hit_and_time(SIGKILL, 0, &worst);
    fprintf(stderr, "after SIGKILL every rank failed within %lld ms\n", (long long)took);
    assert_int_equal(worst, 0);
    assert_true(took <= 2 * DEADLINE_MS);
}

static void stopped_rank_fails_everyone_in_time(void **state) {
    (void)state;
    int worst = 0;
    int64_t took = hit_and_time(SIGSTOP, 0, &worst);
    fprintf(stderr, "after SIGSTOP every rank failed within %lld ms\n", (long long)took);
    assert_int_equal(worst, 0);
    assert_true(took <= 2 * DEADLINE_MS);
}

/*
 * All ranks in one pod: every byte moves through shared memory, so a dead
 * peer is seen only through its Unix socket (the liveness channel) and a
 * failed one through the segment's broken mark.
 */
static void killed_rank_in_one_pod_fails_everyone_in_time(void **state) {
    (void)state;
    int worst = 0;
    int64_t took = hit_and_time(SIGKILL, 1, &worst);
    fprintf(stderr, "one pod, after SIGKILL every rank failed within %lld ms\n", (long long)took);
    assert_int_equal(worst, 0);
    assert_true(took <= 2 * DEADLINE_MS);
    took = hit_and_time(SIGSTOP, 1, &worst);
    fprintf(stderr, "one pod, after SIGSTOP every rank failed within %lld ms\n", (long long)took);
    assert_int_equal(worst, 0);
    assert_true(took <= 2 * DEADLINE_MS);
}

/* Two pods (ranks 0-2 and 3-4): shared memory inside each, TCP between them. */
static void killed_rank_in_a_pod_fails_everyone_in_time(void **state) {
    (void)state;
    int worst = 0;
    int64_t took = hit_and_time(SIGKILL, 2, &worst);
    fprintf(stderr, "two pods, after SIGKILL every rank failed within %lld ms\n", (long long)took);
    assert_int_equal(worst, 0);
    assert_true(took <= 2 * DEADLINE_MS);
    took = hit_and_time(SIGSTOP, 2, &worst);
    fprintf(stderr, "two pods, after SIGSTOP every rank failed within %lld ms\n", (long long)took);
    assert_int_equal(worst, 0);
    assert_true(took <= 2 * DEADLINE_MS);
}

/* A member that never joins: group creation fails naming it, within the connect timeout. */
static int lonely(areal_comm *c, void *arg) {
    (void)arg;
    int ranks[] = {0, 1};
    areal_pg *g = NULL;
    areal_error e;
    if (areal_comm_rank(c) == 1)
        return 0; /* never creates the group */
    int64_t t0 = areal_now_ms();
    int rc = areal_comm_group(c, "pair", ranks, 2, &g, &e);
    int64_t took = areal_now_ms() - t0;
    fprintf(stderr, "%s (%lld ms)\n", e.msg, (long long)took);
    return rc == AREAL_EIO && strstr(e.msg, "rank 1") && strstr(e.msg, "pair") &&
                   took < 2 * DEADLINE_MS + 1000
               ? 0
               : RANK_WRONG;
}

static void absent_member_is_named(void **state) {
    (void)state;
    assert_int_equal(ranks_run(2, DEADLINE_MS, lonely, NULL), 0);
}

/* Members that disagree on a group's member list: the lower rank names the other and both sizes. */
static int mismatched(areal_comm *c, void *arg) {
    (void)arg;
    int two[] = {0, 1}, three[] = {0, 1, 2};
    areal_pg *g = NULL;
    areal_error e;
    int r = areal_comm_rank(c);
    if (r == 2)
        return 0;
    int rc = areal_comm_group(c, "mix", r == 0 ? two : three, r == 0 ? 2 : 3, &g, &e);
    if (rc == AREAL_OK) {
        areal_pg_destroy(g);
        return RANK_WRONG;
    }
    if (r == 1)
        return 0; /* it waits for rank 2 and times out; rank 0's message is the one checked */
    fprintf(stderr, "%s\n", e.msg);
    return rc == AREAL_EINVAL && strstr(e.msg, "rank 1 creates it with 3 members") &&
                   strstr(e.msg, "mix")
               ? 0
               : RANK_WRONG;
}

static void mismatched_member_lists_are_named(void **state) {
    (void)state;
    assert_int_equal(ranks_run(3, DEADLINE_MS, mismatched, NULL), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(killed_rank_fails_everyone_in_time),
        cmocka_unit_test(stopped_rank_fails_everyone_in_time),
        cmocka_unit_test(killed_rank_in_a_pod_fails_everyone_in_time),
        cmocka_unit_test(killed_rank_in_one_pod_fails_everyone_in_time),
        cmocka_unit_test(absent_member_is_named),
        cmocka_unit_test(mismatched_member_lists_are_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
