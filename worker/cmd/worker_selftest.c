/*
 * worker_selftest.c - areal-worker --selftest: every group of the job runs
 * eight collective checks.
 *
 * Expected values come from the plan's member list (areal_comm_role_group) and a
 * closed-form input x(rank, i) (small integers: exact in every type), never
 * from the operation under test. Each group's failure count is summed over
 * the group for its summary line (printed by its first member), and over the
 * world for the verdict (printed by rank 0). A comm error ends the rank at
 * once (exit 1; the pod launcher then stops the others).
 */
#include "worker_selftest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/comm/role_groups.h"

#define N_CHECKS 8
#define CNT      1000
#define BIG      100000

static int x(int r, size_t i) {
    return (int)(((size_t)r * 31 + i * 7) % 13) - 6;
}

typedef struct ctx {
    areal_coll *g;
    const int *m; /* members' global ranks, from the layout */
    int n, me, gr;
    int64_t *a, *b; /* scratch, BIG * n elements of 8 bytes each */
} ctx;

static long sum_at(const ctx *k, size_t i) {
    long s = 0;
    for (int j = 0; j < k->n; j++)
        s += x(k->m[j], i);
    return s;
}

static int max_at(const ctx *k, size_t i) {
    int v = -100;
    for (int j = 0; j < k->n; j++)
        v = x(k->m[j], i) > v ? x(k->m[j], i) : v;
    return v;
}

/* Runs check `which`; returns 0 ok, 1 wrong, -1 comm error (in e). */
static int run_check(const ctx *k, int which, areal_error *e) {
    areal_coll *g = k->g;
    int n = k->n, me = k->me, gr = k->gr;
    int64_t *a64 = k->a, *b64 = k->b;
    float *af = (float *)k->a;
    int32_t *a32 = (int32_t *)k->a, *b32 = (int32_t *)k->b;
    uint16_t *ah = (uint16_t *)k->a, *bh = (uint16_t *)k->b;
    switch (which) {
    case 0: /* all_reduce int64 sum */
        for (size_t i = 0; i < CNT; i++)
            a64[i] = x(gr, i);
        if (areal_coll_all_reduce(g, a64, CNT, AREAL_DT_I64, AREAL_SUM, e))
            return -1;
        for (size_t i = 0; i < CNT; i++)
            if (a64[i] != sum_at(k, i))
                return 1;
        return 0;
    case 1: /* all_reduce fp32 max, ring-sized */
        for (size_t i = 0; i < BIG; i++)
            af[i] = (float)x(gr, i);
        if (areal_coll_all_reduce(g, af, BIG, AREAL_DT_F32, AREAL_MAX, e))
            return -1;
        for (size_t i = 0; i < BIG; i++)
            if (af[i] != (float)max_at(k, i))
                return 1;
        return 0;
    case 2: /* all_reduce bf16 avg (fp32 accumulation, one rounding) */
        for (size_t i = 0; i < CNT; i++)
            ah[i] = areal_f32_to_bf16((float)x(gr, i));
        if (areal_coll_all_reduce(g, ah, CNT, AREAL_DT_BF16, AREAL_AVG, e))
            return -1;
        for (size_t i = 0; i < CNT; i++)
            if (ah[i] != areal_f32_to_bf16((float)sum_at(k, i) / (float)n))
                return 1;
        return 0;
    case 3: /* reduce_scatter int32 sum */
        for (size_t i = 0; i < (size_t)n * CNT; i++)
            a32[i] = x(gr, i);
        if (areal_coll_reduce_scatter(g, a32, b32, CNT, AREAL_DT_I32, AREAL_SUM, e))
            return -1;
        for (size_t i = 0; i < CNT; i++)
            if (b32[i] != sum_at(k, (size_t)me * CNT + i))
                return 1;
        return 0;
    case 4: /* all_gather fp16 */
        for (size_t i = 0; i < CNT; i++)
            ah[i] = areal_f32_to_f16((float)x(gr, i));
        if (areal_coll_all_gather(g, ah, bh, CNT, AREAL_DT_F16, e))
            return -1;
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < CNT; i++)
                if (areal_f16_to_f32(bh[(size_t)j * CNT + i]) != (float)x(k->m[j], i))
                    return 1;
        return 0;
    case 5: /* broadcast fp32 from the last member, chain-sized */
        for (size_t i = 0; i < BIG; i++)
            af[i] = me == n - 1 ? (float)x(gr, i) : -99.0f;
        if (areal_coll_broadcast(g, af, BIG, AREAL_DT_F32, n - 1, e))
            return -1;
        for (size_t i = 0; i < BIG; i++)
            if (af[i] != (float)x(k->m[n - 1], i))
                return 1;
        return 0;
    case 6: /* all_to_all int64 */
        for (size_t i = 0; i < (size_t)n * CNT; i++)
            a64[i] = x(gr, i);
        if (areal_coll_all_to_all(g, a64, b64, CNT, AREAL_DT_I64, e))
            return -1;
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < CNT; i++)
                if (b64[(size_t)j * CNT + i] != x(k->m[j], (size_t)me * CNT + i))
                    return 1;
        return 0;
    default:
        return areal_coll_barrier(g, e) ? -1 : 0;
    }
}

static const char *const check_names[N_CHECKS] = {"all_reduce(int64,sum)", "all_reduce(fp32,max)",
                                                  "all_reduce(bf16,avg)",  "reduce_scatter(int32)",
                                                  "all_gather(fp16)",      "broadcast(fp32)",
                                                  "all_to_all(int64)",     "barrier"};

/* Checks one group; returns its failure count on this rank, or -1 after a comm error. */
static int check_one(areal_comm *c, areal_coll *g, const int *m, int64_t *a, int64_t *b) {
    ctx k = {.g = g,
             .m = m,
             .n = areal_coll_size(g),
             .me = areal_coll_rank(g),
             .gr = areal_comm_rank(c),
             .a = a,
             .b = b};
    areal_error e;
    int bad = 0;
    char failed[256] = "";
    if (m[k.me] != k.gr || areal_coll_global_rank(g, k.me) != k.gr)
        bad++;
    for (int w = 0; w < N_CHECKS; w++) {
        int r = run_check(&k, w, &e);
        if (r < 0) {
            fprintf(stderr, "areal-worker rank %d: selftest: %s\n", k.gr, e.msg);
            return -1;
        }
        if (r > 0) {
            bad++;
            size_t used = strlen(failed);
            snprintf(failed + used, sizeof failed - used, " %s", check_names[w]);
        }
    }
    if (bad)
        fprintf(stderr, "areal-worker rank %d: selftest group %s: wrong result in%s\n", k.gr,
                areal_coll_name(g), failed);
    int32_t total = bad;
    if (areal_coll_all_reduce(g, &total, 1, AREAL_DT_I32, AREAL_SUM, &e)) {
        fprintf(stderr, "areal-worker rank %d: selftest: %s\n", k.gr, e.msg);
        return -1;
    }
    if (k.me == 0) {
        char ranks[256];
        int used = 0;
        for (int j = 0; j < k.n && used < (int)sizeof ranks - 16; j++)
            used += snprintf(ranks + used, sizeof ranks - (size_t)used, "%s%d", j ? "," : "", m[j]);
        printf("selftest group %-14s size %2d ranks [%s]: %s\n", areal_coll_name(g), k.n, ranks,
               total == 0 ? "ok (8 checks)" : "FAILED");
        fflush(stdout);
    }
    return bad;
}

int worker_selftest(areal_comm *c, const areal_role_plan *role, areal_coll *const *groups,
                    areal_coll *wg) {
    int world = areal_comm_world(c), rank = areal_comm_rank(c);
    int64_t *a = malloc(sizeof *a * BIG * (size_t)world);
    int64_t *b = malloc(sizeof *b * BIG * (size_t)world);
    int *m = malloc(sizeof *m * (size_t)world);
    int bad = 0, ngroups = 0;
    if (a == NULL || b == NULL || m == NULL) {
        fprintf(stderr, "areal-worker rank %d: selftest: out of memory\n", rank);
        bad = -1;
    }
    for (int k = 0; role != NULL && bad >= 0 && k < AREAL_GROUP_KIND_COUNT; k++) {
        if (groups[k] == NULL)
            continue;
        int n = 0;
        if (areal_comm_role_group(role, (areal_group_kind)k, rank, m, &n) < 0 ||
            n != areal_coll_size(groups[k])) {
            bad++;
            continue;
        }
        int r = check_one(c, groups[k], m, a, b);
        bad = r < 0 ? -1 : bad + r;
        ngroups++;
    }
    if (bad >= 0) {
        for (int r = 0; r < world; r++)
            m[r] = r;
        int r = check_one(c, wg, m, a, b);
        bad = r < 0 ? -1 : bad + r;
        ngroups++;
    }
    free(a);
    free(b);
    free(m);
    if (bad < 0)
        return 1;
    int32_t total[2] = {bad, ngroups};
    areal_error e;
    if (areal_coll_all_reduce(wg, total, 2, AREAL_DT_I32, AREAL_SUM, &e)) {
        fprintf(stderr, "areal-worker rank %d: selftest: %s\n", rank, e.msg);
        return 1;
    }
    if (rank == 0) {
        printf("selftest: %d rank(s), %d group membership(s) checked: %s\n", world, (int)total[1],
               total[0] == 0 ? "all ok" : "FAILED");
        fflush(stdout);
    }
    return total[0] == 0 ? 0 : 1;
}
