/*
 * test_slots.c - the one-round shared-memory collectives (src/pg_small.c)
 * and the switch between them and the ring/tree paths (src/pg_coll.c).
 *
 * Every collective runs at element counts just below, at and just above
 * each size threshold (all-reduce: the one-round, two-stage and ring
 * switches), with odd counts and several types, on groups of one
 * pod (all members share the segment: the slot paths), of one pod with
 * shared memory off and of separate pods (the socket paths): expected values
 * from the closed-form inputs of coll_body.h, never from the operation.
 * Fractional fp32 sums must come out bit-identical on every member, and an
 * all-to-allv whose counts disagree between two members fails on every
 * member with both lengths named, instead of hanging.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#include <cmocka.h>

#include "areal/comm/comm.h"
#include "coll_body.h"
#include "ranks.h"

/* The thresholds of pg_coll.c, in bytes; the counts below straddle them. */
#define AR_BYTES   (64u << 10)  /* all-reduce, 2 members: one round below, the ring above */
#define AR1_BYTES  (16u << 10)  /* all-reduce, 3+ members: one round below, two stages above */
#define AR2_BYTES  (256u << 10) /* all-reduce, 3+ members: two stages below, the ring above */
#define MOVE_BYTES (256u << 10) /* gathered/scattered total, broadcast */
#define SLOT_BYTES (256u << 10) /* the slot size up to 16 local members (shm.c) */
#define A2A_MANY   5            /* all-to-all: any block takes the slots, in rounds of a piece */

/* pg_small.c's piece per peer for n members: the slot after its table, split n ways. */
static size_t a2a_piece(int n) {
    size_t hdr = (16 * (size_t)n + 8 + 63) / 64 * 64;
    return (SLOT_BYTES - hdr) / (size_t)n / 64 * 64;
}

/* Counts around the threshold of `bytes` for elements of es bytes (n of them per unit). */
static void around(size_t bytes, size_t es, size_t *c) {
    size_t at = bytes / es;
    c[0] = at - 1, c[1] = at, c[2] = at + 1, c[3] = 1, c[4] = 37;
}

static int thresholds(areal_comm *c, void *arg) {
    (void)arg;
    int n = areal_comm_world(c), me = areal_comm_rank(c), ranks[RANKS_MAX], rc = 0;
    for (int j = 0; j < n; j++)
        ranks[j] = j;
    areal_error e;
    areal_pg *g = NULL;
    size_t big = 4 * MOVE_BYTES; /* bytes per buffer: more than any count below needs */
    if ((size_t)n * (A2A_MANY * a2a_piece(n) + 4) > 2 * big)
        return RANK_WRONG; /* the all-to-all would not fit: the test is wrong */
    uint8_t *a = malloc(big * 2), *b = malloc(big * 2);
    if (a == NULL || b == NULL || areal_comm_group(c, "world", ranks, n, &g, &e) != AREAL_OK) {
        free(a);
        free(b);
        return RANK_COMM_FAIL;
    }
    size_t cs[5];
    /* all-reduce: fp32, bf16 (reduced in fp32: the same element counts), int64 */
    static const areal_dtype art[] = {AREAL_DT_F32, AREAL_DT_BF16, AREAL_DT_I64};
    static const size_t arb[] = {AR1_BYTES, AR_BYTES, AR2_BYTES};
    for (int ti = 0; ti < 9; ti++) {
        areal_dtype t = art[ti % 3];
        around(arb[ti / 3], t == AREAL_DT_I64 ? 8 : 4, cs);
        for (int x = 0; x < 5; x++) {
            areal_redop op = (areal_redop)((ti + x) % 3);
            for (size_t i = 0; i < cs[x]; i++)
                cb_put(a, t, i, cb_v(me, i));
            RANK_COMM(areal_pg_all_reduce(g, a, cs[x], t, op, &e));
            for (size_t i = 0; i < cs[x]; i++)
                RANK_CHECK(fabs(cb_get(a, t, i) - cb_expect(ranks, n, i, op, t)) <=
                           cb_tol(ranks, n, i, op, t));
        }
    }
    /* all-gather (int32) and reduce-scatter (fp32 and fp16): the total straddles MOVE_BYTES */
    around(MOVE_BYTES / (size_t)n, 4, cs);
    for (int x = 0; x < 5; x++) {
        for (size_t i = 0; i < cs[x]; i++)
            cb_put(a, AREAL_DT_I32, i, cb_v(me, i));
        RANK_COMM(areal_pg_all_gather(g, a, b, cs[x], AREAL_DT_I32, &e));
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < cs[x]; i++)
                RANK_CHECK(cb_get(b, AREAL_DT_I32, (size_t)j * cs[x] + i) == cb_v(j, i));
        areal_dtype t = x % 2 ? AREAL_DT_F16 : AREAL_DT_F32;
        areal_redop op = (areal_redop)(x % 3);
        for (size_t i = 0; i < (size_t)n * cs[x]; i++)
            cb_put(a, t, i, cb_v(me, i));
        RANK_COMM(areal_pg_reduce_scatter(g, a, b, cs[x], t, op, &e));
        for (size_t i = 0; i < cs[x]; i++) {
            size_t at = (size_t)me * cs[x] + i;
            RANK_CHECK(fabs(cb_get(b, t, i) - cb_expect(ranks, n, at, op, t)) <=
                       cb_tol(ranks, n, at, op, t));
        }
    }
    /* broadcast from a different root each time, back to back (slot reuse by parity) */
    around(MOVE_BYTES, 4, cs);
    for (int x = 0; x < 5; x++) {
        int root = x % n;
        for (size_t i = 0; i < cs[x]; i++)
            cb_put(a, AREAL_DT_F32, i, me == root ? cb_v(root, i + (size_t)x) : 99);
        RANK_COMM(areal_pg_broadcast(g, a, cs[x], AREAL_DT_F32, root, &e));
        for (size_t i = 0; i < cs[x]; i++)
            RANK_CHECK(cb_get(a, AREAL_DT_F32, i) == cb_v(root, i + (size_t)x));
    }
    /* all-to-all: blocks straddle one piece (one round or two) and A2A_MANY pieces (five or six) */
    size_t a2c[10];
    around(a2a_piece(n), 4, a2c);
    around(A2A_MANY * a2a_piece(n), 4, a2c + 5);
    for (int x = 0; x < 10; x++) {
        size_t k = a2c[x];
        for (size_t i = 0; i < (size_t)n * k; i++)
            cb_put(a, AREAL_DT_I32, i, cb_v(me, i));
        RANK_COMM(areal_pg_all_to_all(g, a, b, k, AREAL_DT_I32, &e));
        for (int s = 0; s < n; s++)
            for (size_t i = 0; i < k; i++)
                RANK_CHECK(cb_get(b, AREAL_DT_I32, (size_t)s * k + i) ==
                           cb_v(s, (size_t)me * k + i));
    }
    /*
     * all-to-allv mixing blocks in one call: of six rounds, of two (the
     * rounds every member takes part in are the most any member needs, so
     * members with only small blocks join them too) and small ones
     */
    size_t sc[RANKS_MAX], sd[RANKS_MAX], rcn[RANKS_MAX], rd[RANKS_MAX], so = 0, ro = 0;
    size_t large = A2A_MANY * a2a_piece(n) / 8 + 3, mid = a2a_piece(n) / 8 + 5;
#define A2AV_COUNT(s, d)                                                                           \
    ((((s) + (d)) % 3 == 0)   ? large                                                              \
     : (((s) + (d)) % 3 == 1) ? ((s) == 1 ? mid : (size_t)((s) + 2 * (d) + 1))                     \
                              : (size_t)((s) + 2 * (d) + 1))
    for (int j = 0; j < n; j++) {
        sc[j] = A2AV_COUNT(me, j);
        sd[j] = so;
        so += sc[j];
        rcn[j] = A2AV_COUNT(j, me);
        rd[j] = ro;
        ro += rcn[j];
    }
    for (size_t i = 0; i < so; i++)
        cb_put(a, AREAL_DT_I64, i, cb_v(me, i));
    RANK_COMM(areal_pg_all_to_allv(g, a, sc, sd, b, rcn, rd, AREAL_DT_I64, &e));
    for (int s = 0; s < n; s++) {
        size_t off = 0; /* where member s put its block for me */
        for (int d = 0; d < me; d++)
            off += A2AV_COUNT(s, d);
        for (size_t i = 0; i < rcn[s]; i++)
            RANK_CHECK(cb_get(b, AREAL_DT_I64, rd[s] + i) == cb_v(s, off + i));
    }
    RANK_COMM(areal_pg_barrier(g, &e));
out:
    free(a);
    free(b);
    areal_pg_destroy(g);
    return rc;
}

static void every_path_is_right_around_the_thresholds(void **state) {
    (void)state;
    static const int worlds[] = {2, 3, 8};
    for (int w = 0; w < 3; w++) {
        int n = worlds[w];
        fprintf(stderr, "%d ranks: one pod (slots), shared memory off, separate pods\n", n);
        assert_int_equal(ranks_run_pods(n, 1, 30000, thresholds, NULL), 0);
        assert_int_equal(ranks_run_opts(n, 1, (1u << n) - 1, 30000, thresholds, NULL), 0);
        assert_int_equal(ranks_run_pods(n, n, 30000, thresholds, NULL), 0);
    }
}

/*
 * Fractional fp32 all-reduce (the one-round slots, the two-stage slots with
 * pieces of unequal size, and above the thresholds the ring): every member
 * holds the same bits, and the sum is within n * 2^-23 * sum|x|.
 */
static int identical(areal_comm *c, void *arg) {
    (void)arg;
    int n = areal_comm_world(c), me = areal_comm_rank(c), ranks[RANKS_MAX], rc = 0;
    for (int j = 0; j < n; j++)
        ranks[j] = j;
    areal_error e;
    areal_pg *g = NULL;
    size_t cnts[] = {1001,
                     AR1_BYTES / 4 + 1,
                     AR_BYTES / 4,
                     AR_BYTES / 4 + 1,
                     AR2_BYTES / 4 - 1,
                     AR2_BYTES / 4 + 1};
    float *x = malloc(sizeof *x * (AR2_BYTES / 4 + 1));
    uint32_t *all = malloc(sizeof *all * (size_t)n);
    if (x == NULL || all == NULL || areal_comm_group(c, "world", ranks, n, &g, &e) != AREAL_OK) {
        free(x);
        free(all);
        return RANK_COMM_FAIL;
    }
    for (int k = 0; k < 6; k++) {
        for (size_t i = 0; i < cnts[k]; i++)
            x[i] = (float)sin((double)(me * 977 + (int)i)) * 3.7f;
        RANK_COMM(areal_pg_all_reduce(g, x, cnts[k], AREAL_DT_F32, AREAL_SUM, &e));
        uint32_t h = 2166136261u; /* FNV-1a over the result's bytes */
        for (size_t i = 0; i < cnts[k] * sizeof *x; i++)
            h = (h ^ ((const uint8_t *)x)[i]) * 16777619u;
        RANK_COMM(areal_pg_all_gather(g, &h, all, 1, AREAL_DT_I32, &e));
        for (int j = 0; j < n; j++)
            RANK_CHECK(all[j] == all[0]);
        for (size_t i = 0; i < cnts[k]; i++) {
            double exact = 0, mag = 0;
            for (int j = 0; j < n; j++) {
                double xj = (float)sin((double)(j * 977 + (int)i)) * 3.7f;
                exact += xj;
                mag += fabs(xj);
            }
            RANK_CHECK(fabs(x[i] - exact) <= n * ldexp(1.0, -23) * mag);
        }
    }
out:
    free(x);
    free(all);
    areal_pg_destroy(g);
    return rc;
}

static void every_member_gets_the_same_bits(void **state) {
    (void)state;
    assert_int_equal(ranks_run_pods(5, 1, 30000, identical, NULL), 0);
    assert_int_equal(ranks_run_pods(8, 1, 30000, identical, NULL), 0);
}

/*
 * Member 1 expects one element more from member 0 than member 0 sends: it
 * fails naming both lengths, the others in the same or the next operation.
 */
static int disagree(areal_comm *c, void *arg) {
    (void)arg;
    int n = areal_comm_world(c), me = areal_comm_rank(c), ranks[RANKS_MAX];
    for (int j = 0; j < n; j++)
        ranks[j] = j;
    areal_error e;
    areal_pg *g = NULL;
    if (areal_comm_group(c, "world", ranks, n, &g, &e) != AREAL_OK)
        return RANK_COMM_FAIL;
    int32_t in[64] = {0}, out[64];
    size_t sc[RANKS_MAX], sd[RANKS_MAX], rcn[RANKS_MAX], rd[RANKS_MAX];
    for (int j = 0; j < n; j++) {
        sc[j] = rcn[j] = 2;
        sd[j] = rd[j] = (size_t)j * 4;
    }
    if (me == 1)
        rcn[0] = 3;
    int r = areal_pg_all_to_allv(g, in, sc, sd, out, rcn, rd, AREAL_DT_I32, &e);
    if (me == 1 && r == AREAL_EIO &&
        (strstr(e.msg, "sends 8 bytes") == NULL || strstr(e.msg, "expects 12") == NULL))
        r = AREAL_EINVAL; /* failed, but without naming both lengths */
    /* the others may have taken their blocks already: their next operation fails */
    if (r == AREAL_OK)
        r = areal_pg_barrier(g, &e);
    int rc = r == AREAL_EIO && strstr(e.msg, "group world") != NULL ? RANK_COMM_FAIL : RANK_WRONG;
    fprintf(stderr, "rank %d: %s\n", me, r == AREAL_OK ? "succeeded" : e.msg);
    areal_pg_destroy(g);
    return rc;
}

static void disagreeing_counts_fail_everyone_by_name(void **state) {
    (void)state;
    int64_t t0 = areal_now_ms();
    assert_int_equal(ranks_run_pods(4, 1, 20000, disagree, NULL), RANK_COMM_FAIL);
    assert_true(areal_now_ms() - t0 < 10000); /* not the 20 s deadline */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_path_is_right_around_the_thresholds),
        cmocka_unit_test(every_member_gets_the_same_bits),
        cmocka_unit_test(disagreeing_counts_fail_everyone_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
