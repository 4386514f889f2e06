/*
 * test_coll_bytes.c - the comm runtime's byte counters (areal_coll_bytes_of,
 * areal/comm/coll.h) against transfers whose volume is known in closed form,
 * on k forked ranks over sockets and over shared memory:
 *   ring all-reduce of N bytes (above the small-message size): 2(k-1)/k N
 *   sent and received per rank, and so for the two-stage all-reduce through
 *   the shared-memory slots (each member's piece is read by its reducer,
 *   each reduced piece by the k-1 others; 192 KiB, k | N); reduce-scatter and all-gather of k
 * blocks of B bytes: (k-1) B each way; all-to-all of k blocks of B: (k-1) B; send / recv of B: B on
 * the one side; an async all-reduce counts as all_reduce. Each operation's bytes must land under
 * its own kind and nowhere else. The sizes are above the small-message paths, whose algorithms may
 * change; a small all-reduce over sockets is checked for conservation only (over every rank, bytes
 * sent equal bytes received). Over shared memory small messages may take a one-round path through
 * the segment, where a member writes its input once and reads every peer's: not a pairwise
 * transfer, so not checked here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "areal/comm/coll.h"
#include "areal/comm/comm.h"
#include "ranks.h"

#define BIG_F32   (12u << 14) /* 768 KiB of fp32: the ring path, k | N for k = 3, 4 */
#define MID_F32   (12u << 12) /* 192 KiB: over shared memory the two-stage slot all-reduce */
#define BLOCK_F32 (1u << 14)  /* 64 KiB blocks */

/* after - before, per kind; 0 when every other kind than k is unchanged and k moved (s, r). */
static int moved_only(const areal_coll_bytes *before, const areal_coll_bytes *after,
                      areal_coll_kind k, uint64_t s, uint64_t r) {
    for (int i = 0; i < AREAL_COLL_KIND_COUNT; i++) {
        uint64_t ds = after->sent[i] - before->sent[i], dr = after->recv[i] - before->recv[i];
        uint64_t ws = i == (int)k ? s : 0, wr = i == (int)k ? r : 0;
        if (ds != ws || dr != wr) {
            fprintf(stderr, "kind %s: sent %llu received %llu, want %llu and %llu\n",
                    areal_coll_kind_name((areal_coll_kind)i), (unsigned long long)ds,
                    (unsigned long long)dr, (unsigned long long)ws, (unsigned long long)wr);
            return 1;
        }
    }
    return 0;
}

static int counted(areal_comm *c, void *arg) {
    int sockets = arg != NULL;
    int me = areal_comm_rank(c), k = areal_comm_world(c), rc = 0;
    areal_error e = {0};
    areal_coll *g = NULL;
    areal_coll_work *w = NULL;
    float *a = calloc((size_t)BIG_F32 * 2, sizeof *a), *b = calloc((size_t)BIG_F32 * 2, sizeof *b);
    int ranks[RANKS_MAX];
    for (int r = 0; r < k; r++)
        ranks[r] = r;
    areal_coll_factory f = areal_comm_coll_factory(c);
    RANK_CHECK(a != NULL && b != NULL);
    RANK_COMM(f.group(f.ctx, "bytes", ranks, k, &g, &e));
    areal_coll_bytes s0, s1, zero;
    memset(&zero, 0, sizeof zero);
    areal_coll_bytes_of(g, &s0);
    RANK_CHECK(moved_only(&zero, &s0, AREAL_COLL_OTHER, 0, 0) == 0); /* a new group moved nothing */
    uint64_t N = (uint64_t)BIG_F32 * 4, B = (uint64_t)BLOCK_F32 * 4, K = (uint64_t)k;

    RANK_COMM(areal_coll_all_reduce(g, a, BIG_F32, AREAL_DT_F32, AREAL_SUM, &e));
    areal_coll_bytes_of(g, &s1);
    RANK_CHECK(
        moved_only(&s0, &s1, AREAL_COLL_ALL_REDUCE, 2 * (K - 1) * N / K, 2 * (K - 1) * N / K) == 0);

    s0 = s1;
    uint64_t M = (uint64_t)MID_F32 * 4;
    RANK_COMM(areal_coll_all_reduce(g, a, MID_F32, AREAL_DT_F32, AREAL_SUM, &e));
    areal_coll_bytes_of(g, &s1);
    RANK_CHECK(
        moved_only(&s0, &s1, AREAL_COLL_ALL_REDUCE, 2 * (K - 1) * M / K, 2 * (K - 1) * M / K) == 0);

    s0 = s1;
    RANK_COMM(areal_coll_all_reduce_async(g, a, BIG_F32, AREAL_DT_F32, AREAL_SUM, &w, &e));
    RANK_COMM(areal_coll_work_wait(w, &e));
    areal_coll_bytes_of(g, &s1);
    RANK_CHECK(
        moved_only(&s0, &s1, AREAL_COLL_ALL_REDUCE, 2 * (K - 1) * N / K, 2 * (K - 1) * N / K) == 0);

    s0 = s1;
    RANK_COMM(areal_coll_reduce_scatter(g, a, b, BLOCK_F32, AREAL_DT_F32, AREAL_SUM, &e));
    areal_coll_bytes_of(g, &s1);
    RANK_CHECK(moved_only(&s0, &s1, AREAL_COLL_REDUCE_SCATTER, (K - 1) * B, (K - 1) * B) == 0);

    s0 = s1;
    RANK_COMM(areal_coll_all_gather(g, a, b, BLOCK_F32, AREAL_DT_F32, &e));
    areal_coll_bytes_of(g, &s1);
    RANK_CHECK(moved_only(&s0, &s1, AREAL_COLL_ALL_GATHER, (K - 1) * B, (K - 1) * B) == 0);

    s0 = s1;
    RANK_COMM(areal_coll_all_to_all(g, a, b, BLOCK_F32, AREAL_DT_F32, &e));
    areal_coll_bytes_of(g, &s1);
    RANK_CHECK(moved_only(&s0, &s1, AREAL_COLL_ALL_TO_ALL, (K - 1) * B, (K - 1) * B) == 0);

    /* point to point: rank 0 sends B to the last rank, which only receives */
    s0 = s1;
    if (me == 0)
        RANK_COMM(areal_coll_send(g, a, BLOCK_F32, AREAL_DT_F32, k - 1, &e));
    if (me == k - 1)
        RANK_COMM(areal_coll_recv(g, b, BLOCK_F32, AREAL_DT_F32, 0, &e));
    areal_coll_bytes_of(g, &s1);
    if (me == 0)
        RANK_CHECK(moved_only(&s0, &s1, AREAL_COLL_SEND, B, 0) == 0);
    else if (me == k - 1)
        RANK_CHECK(moved_only(&s0, &s1, AREAL_COLL_RECV, 0, B) == 0);
    else
        RANK_CHECK(moved_only(&s0, &s1, AREAL_COLL_OTHER, 0, 0) == 0);

    /* small all-reduce: whatever the algorithm, what the ranks sent is what they received */
    if (!sockets)
        goto out;
    s0 = s1;
    RANK_COMM(areal_coll_all_reduce(g, a, 100, AREAL_DT_F32, AREAL_SUM, &e));
    areal_coll_bytes_of(g, &s1);
    float moved[2] = {(float)(s1.sent[AREAL_COLL_ALL_REDUCE] - s0.sent[AREAL_COLL_ALL_REDUCE]),
                      (float)(s1.recv[AREAL_COLL_ALL_REDUCE] - s0.recv[AREAL_COLL_ALL_REDUCE])};
    RANK_CHECK(moved[0] + moved[1] > 0 || k == 1);
    RANK_COMM(areal_coll_all_reduce(g, moved, 2, AREAL_DT_F32, AREAL_SUM, &e));
    RANK_CHECK(moved[0] == moved[1] && moved[0] > 0);
out:
    areal_coll_destroy(g);
    free(a);
    free(b);
    return rc;
}

static void counters_match_the_transfers_over_sockets(void **state) {
    (void)state;
    int sockets = 1;
    assert_int_equal(ranks_run(4, 20000, counted, &sockets), 0);
    assert_int_equal(ranks_run(3, 20000, counted, &sockets), 0);
}

static void counters_match_the_transfers_over_shared_memory(void **state) {
    (void)state;
    assert_int_equal(ranks_run_pods(4, 1, 20000, counted, NULL), 0);
    assert_int_equal(ranks_run_pods(3, 1, 20000, counted, NULL), 0);
}

static void kind_names_round_trip(void **state) {
    (void)state;
    for (int k = 0; k < AREAL_COLL_KIND_COUNT; k++)
        assert_int_equal(areal_coll_kind_of(areal_coll_kind_name((areal_coll_kind)k)), k);
    assert_int_equal(areal_coll_kind_of("gather_scatter"), AREAL_COLL_OTHER);
    assert_int_equal(areal_coll_kind_of(NULL), AREAL_COLL_OTHER);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kind_names_round_trip),
        cmocka_unit_test(counters_match_the_transfers_over_sockets),
        cmocka_unit_test(counters_match_the_transfers_over_shared_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
