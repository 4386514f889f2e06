/*
 * gpu_test_ncclpg.c - the NCCL backend on real GPUs (make test-gpu).
 *
 * One rank process per GPU (NCCL refuses two ranks on one GPU). Every op x
 * dtype runs on device buffers and is compared with values the host
 * computes from the same inputs: integers exactly, floats within
 * (n + 2) * u * sum|inputs| where u is the type's unit roundoff (2^-24 fp32,
 * 2^-11 fp16, 2^-8 bf16; NCCL reduces 16-bit types in their own precision).
 * Data movement (gather, broadcast, all-to-all, send/recv) is exact. With
 * one GPU every op runs at group size 1 on several groups at once through
 * the same store/id path, and the multi-rank checks say they need two GPUs.
 * The role's groups, built by the library's builder over the NCCL factory,
 * also run the shared collective body (worker/tests/coll_body.h, the one the
 * CPU test runs) through areal/comm/coll.h on device buffers, including the
 * refusal of a host pointer at entry.
 * Without a CUDA device the binary says so loudly and exits 0 (a skip).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "areal/comm/role_groups.h"
#include "areal/groups.h"
#include "areal/strategy.h"
#include "coll_body.h"
#include "gpu_util.h"

#define COUNT      1031
#define BIG_COUNT  (1u << 22)
#define TIMEOUT_MS 60000

static int g_world = 1, g_ngpu = 1;

static const areal_dtype TYPES[] = {AREAL_DT_F32, AREAL_DT_BF16, AREAL_DT_F16, AREAL_DT_I32,
                                    AREAL_DT_I64};
#define NTYPES (sizeof TYPES / sizeof TYPES[0])

static bool is_float(areal_dtype t) {
    return areal_dtype_is_float(t);
}

/* Input of member r for reductions, element i (exact in every type). */
static double red_val(areal_dtype t, int r, size_t i) {
    double v = (double)((r + 1) * (int)(i % 13 + 1));
    if (t == AREAL_DT_I32)
        v += (double)(i % 1000) * 1000.0;
    if (t == AREAL_DT_I64)
        v += (double)(i % 3) * 8589934592.0; /* 2^33: needs 64 bits */
    return v;
}

/* Value that member r sends in block j, element i (distinct per origin, exact). */
static double mv_val(areal_dtype t, int r, int j, size_t i) {
    if (is_float(t))
        return (double)((r * 7 + j * 3 + (int)(i % 97)) % 200 - 100);
    double v = (double)r * 1e6 + (double)j * 1e3 + (double)(i % 1000);
    return t == AREAL_DT_I64 ? v + 8589934592.0 * (double)(r + 1) : v;
}

static double unit_roundoff(areal_dtype t) {
    return t == AREAL_DT_BF16 ? 1.0 / 256 : t == AREAL_DT_F16 ? 1.0 / 2048 : 1.0 / 16777216;
}

typedef struct ctx {
    int rank;
    areal_ncclpg *g;
    size_t esz;
    areal_dtype t;
    void *din, *dout; /* device */
    void *hin, *hout; /* host */
    int bad;          /* mismatches */
} ctx;

/* Compares n elements of h (type t) with want[], with tolerance tol[] (NULL = exact). */
static void check(ctx *c, const char *op, const void *h, const double *want, const double *tol,
                  size_t n) {
    for (size_t i = 0; i < n; i++) {
        double got = gpu_get(h, c->t, i), lim = tol == NULL ? 0.0 : tol[i];
        if (fabs(got - want[i]) > lim || isnan(got)) {
            if (c->bad < 5)
                fprintf(stderr,
                        "rank %d group %s: %s %s element %zu: got %.17g, want %.17g (bound %g)\n",
                        c->rank, areal_ncclpg_name(c->g), op, areal_dtype_name(c->t), i, got,
                        want[i], lim);
            c->bad++;
            return;
        }
    }
}

static int up(ctx *c, size_t n) {
    return cudaMemcpy(c->din, c->hin, n * c->esz, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
}
static int down(ctx *c, const void *d, size_t n) {
    return cudaMemcpy(c->hout, d, n * c->esz, cudaMemcpyDeviceToHost) == cudaSuccess ? 0 : -1;
}

static int op_fail(ctx *c, const char *op, const areal_error *e) {
    fprintf(stderr, "rank %d group %s: %s %s: %s\n", c->rank, areal_ncclpg_name(c->g), op,
            areal_dtype_name(c->t), e->msg);
    return GPU_RANK_FAIL;
}

/* Expected reduction over the n members of inputs red_val(r, base + i). */
static void expect_red(areal_dtype t, areal_redop op, int n, size_t base, size_t cnt, double *want,
                       double *tol) {
    for (size_t i = 0; i < cnt; i++) {
        double s = 0, m = -INFINITY, mag = 0;
        for (int r = 0; r < n; r++) {
            uint64_t one = 0; /* aligned for every type */
            gpu_put(&one, t, 0, red_val(t, r, base + i));
            double v = gpu_get(&one, t, 0);
            s += v;
            mag += fabs(v);
            m = v > m ? v : m;
        }
        want[i] = op == AREAL_SUM ? s : op == AREAL_MAX ? m : is_float(t) ? s / n : floor(s / n);
        tol[i] = is_float(t) ? (n + 2) * unit_roundoff(t) * mag : 0.0;
    }
}

static int run_reductions(ctx *c, double *want, double *tol) {
    int n = areal_ncclpg_size(c->g), me = areal_ncclpg_rank(c->g);
    areal_error e;
    static const areal_redop OPS[] = {AREAL_SUM, AREAL_AVG, AREAL_MAX};
    for (size_t k = 0; k < 3; k++) {
        areal_redop op = OPS[k];
        char name[64];
        snprintf(name, sizeof name, "all_reduce(%s)", areal_redop_name(op));
        for (size_t i = 0; i < COUNT; i++)
            gpu_put(c->hin, c->t, i, red_val(c->t, me, i));
        if (up(c, COUNT) != 0 ||
            areal_ncclpg_all_reduce(c->g, c->din, COUNT, c->t, op, &e) != AREAL_OK)
            return op_fail(c, name, &e);
        if (down(c, c->din, COUNT) != 0)
            return GPU_RANK_FAIL;
        expect_red(c->t, op, n, 0, COUNT, want, tol);
        check(c, name, c->hout, want, tol, COUNT);

        snprintf(name, sizeof name, "reduce_scatter(%s)", areal_redop_name(op));
        for (size_t i = 0; i < (size_t)n * COUNT; i++)
            gpu_put(c->hin, c->t, i, red_val(c->t, me, i));
        if (up(c, (size_t)n * COUNT) != 0 ||
            areal_ncclpg_reduce_scatter(c->g, c->din, c->dout, COUNT, c->t, op, &e) != AREAL_OK)
            return op_fail(c, name, &e);
        if (down(c, c->dout, COUNT) != 0)
            return GPU_RANK_FAIL;
        expect_red(c->t, op, n, (size_t)me * COUNT, COUNT, want, tol);
        check(c, name, c->hout, want, tol, COUNT);
    }
    return 0;
}

static int run_movement(ctx *c, double *want) {
    int n = areal_ncclpg_size(c->g), me = areal_ncclpg_rank(c->g);
    areal_error e;
    /* all_gather */
    for (size_t i = 0; i < COUNT; i++)
        gpu_put(c->hin, c->t, i, mv_val(c->t, me, 0, i));
    if (up(c, COUNT) != 0 ||
        areal_ncclpg_all_gather(c->g, c->din, c->dout, COUNT, c->t, &e) != AREAL_OK)
        return op_fail(c, "all_gather", &e);
    if (down(c, c->dout, (size_t)n * COUNT) != 0)
        return GPU_RANK_FAIL;
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < COUNT; i++)
            want[(size_t)j * COUNT + i] = mv_val(c->t, j, 0, i);
    check(c, "all_gather", c->hout, want, NULL, (size_t)n * COUNT);
    /* broadcast from every root */
    for (int ro = 0; ro < n; ro++) {
        for (size_t i = 0; i < COUNT; i++)
            gpu_put(c->hin, c->t, i, me == ro ? mv_val(c->t, ro, 1, i) : -1.0);
        if (up(c, COUNT) != 0 ||
            areal_ncclpg_broadcast(c->g, c->din, COUNT, c->t, ro, &e) != AREAL_OK)
            return op_fail(c, "broadcast", &e);
        if (down(c, c->din, COUNT) != 0)
            return GPU_RANK_FAIL;
        for (size_t i = 0; i < COUNT; i++)
            want[i] = mv_val(c->t, ro, 1, i);
        check(c, "broadcast", c->hout, want, NULL, COUNT);
    }
    /* all_to_all */
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < COUNT; i++)
            gpu_put(c->hin, c->t, (size_t)j * COUNT + i, mv_val(c->t, me, j, i));
    if (up(c, (size_t)n * COUNT) != 0 ||
        areal_ncclpg_all_to_all(c->g, c->din, c->dout, COUNT, c->t, &e) != AREAL_OK)
        return op_fail(c, "all_to_all", &e);
    if (down(c, c->dout, (size_t)n * COUNT) != 0)
        return GPU_RANK_FAIL;
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < COUNT; i++)
            want[(size_t)j * COUNT + i] = mv_val(c->t, j, me, i);
    check(c, "all_to_all", c->hout, want, NULL, (size_t)n * COUNT);
    /* all_to_allv: member a sends (a + b) % 3 * 100 + 1 elements to member b */
    size_t sc[GPU_MAX_RANKS], sd[GPU_MAX_RANKS], rc[GPU_MAX_RANKS], rd[GPU_MAX_RANKS], so = 0,
                                                                                       ro = 0;
    for (int j = 0; j < n; j++) {
        sc[j] = rc[j] = (size_t)((me + j) % 3) * 100 + 1;
        sd[j] = so;
        rd[j] = ro;
        so += sc[j];
        ro += rc[j];
        for (size_t i = 0; i < sc[j]; i++)
            gpu_put(c->hin, c->t, sd[j] + i, mv_val(c->t, me, j, i));
        for (size_t i = 0; i < rc[j]; i++)
            want[rd[j] + i] = mv_val(c->t, j, me, i);
    }
    if (up(c, so) != 0 ||
        areal_ncclpg_all_to_allv(c->g, c->din, sc, sd, c->dout, rc, rd, c->t, &e) != AREAL_OK)
        return op_fail(c, "all_to_allv", &e);
    if (down(c, c->dout, ro) != 0)
        return GPU_RANK_FAIL;
    check(c, "all_to_allv", c->hout, want, NULL, ro);
    /* send/recv between members 0 and 1, both ways */
    for (int from = 0; n >= 2 && from < 2 && me < 2; from++) {
        int rc2;
        if (me == from) {
            for (size_t i = 0; i < COUNT; i++)
                gpu_put(c->hin, c->t, i, mv_val(c->t, me, 5, i));
            rc2 = up(c, COUNT) != 0 ? AREAL_EIO
                                    : areal_ncclpg_send(c->g, c->din, COUNT, c->t, 1 - me, &e);
        } else {
            rc2 = areal_ncclpg_recv(c->g, c->dout, COUNT, c->t, from, &e);
            if (rc2 == AREAL_OK && down(c, c->dout, COUNT) == 0) {
                for (size_t i = 0; i < COUNT; i++)
                    want[i] = mv_val(c->t, from, 5, i);
                check(c, "send/recv", c->hout, want, NULL, COUNT);
            }
        }
        if (rc2 != AREAL_OK)
            return op_fail(c, me == from ? "send" : "recv", &e);
    }
    if (areal_ncclpg_barrier(c->g, &e) != AREAL_OK)
        return op_fail(c, "barrier", &e);
    return 0;
}

/* Creates this rank's groups: all ranks forward and reversed, or three solo groups. */
static int make_groups(areal_store *st, int rank, int world, int ngpu, areal_ncclpg **gs, int *ng) {
    int fwd[GPU_MAX_RANKS], rev[GPU_MAX_RANKS];
    for (int r = 0; r < world; r++) {
        fwd[r] = r;
        rev[r] = world - 1 - r;
    }
    const char *names[3] = {"all", "rev", NULL};
    const int *lists[3] = {fwd, rev, NULL};
    *ng = 2;
    if (world == 1) {
        names[0] = "solo/a", names[1] = "solo/b", names[2] = "solo/c";
        lists[2] = fwd;
        *ng = 3;
    }
    for (int k = 0; k < *ng; k++) {
        areal_ncclpg_config cfg = {.store = st,
                                   .name = names[k],
                                   .ranks = lists[k],
                                   .n = world,
                                   .rank = rank,
                                   .device = rank % ngpu,
                                   .timeout_ms = TIMEOUT_MS};
        areal_error e;
        if (areal_ncclpg_create(&cfg, &gs[k], &e) != AREAL_OK) {
            fprintf(stderr, "rank %d: create %s: %s\n", rank, names[k], e.msg);
            return GPU_RANK_FAIL;
        }
    }
    return 0;
}

static int rank_every_op(int rank, int world, int ngpu, int port, void *arg) {
    (void)arg;
    areal_store *st = gpu_store(port);
    if (st == NULL)
        return GPU_RANK_FAIL;
    areal_ncclpg *gs[3] = {NULL, NULL, NULL};
    int ng = 0, rc = make_groups(st, rank, world, ngpu, gs, &ng);
    size_t cap = (size_t)world * COUNT * 8;
    ctx c = {.rank = rank};
    double *want = malloc(sizeof *want * (size_t)world * COUNT);
    double *tol = malloc(sizeof *tol * (size_t)world * COUNT);
    c.hin = malloc(cap);
    c.hout = malloc(cap);
    if (rc == 0 &&
        (want == NULL || tol == NULL || c.hin == NULL || c.hout == NULL ||
         cudaMalloc(&c.din, cap) != cudaSuccess || cudaMalloc(&c.dout, cap) != cudaSuccess))
        rc = GPU_RANK_FAIL;
    /* the groups interleave: each type runs on every group before the next type */
    for (size_t ti = 0; rc == 0 && ti < NTYPES; ti++)
        for (int k = 0; rc == 0 && k < ng; k++) {
            c.g = gs[k];
            c.t = TYPES[ti];
            c.esz = areal_dtype_size(c.t);
            rc = run_reductions(&c, want, tol);
            if (rc == 0)
                rc = run_movement(&c, want);
        }
    if (rc == 0 && c.bad > 0)
        rc = GPU_RANK_WRONG;
    if (rc == 0 && rank == 0)
        printf("rank 0: every op x %zu dtypes on %d group(s) of size %d: ok\n", NTYPES, ng, world);
    for (int k = 0; k < 3; k++)
        areal_ncclpg_destroy(gs[k]);
    cudaFree(c.din);
    cudaFree(c.dout);
    free(c.hin);
    free(c.hout);
    free(want);
    free(tol);
    areal_store_close(st);
    return rc;
}

static void every_op_every_dtype(void **state) {
    (void)state;
    assert_int_equal(gpu_run_ranks(g_world, g_ngpu, 240, rank_every_op, NULL), 0);
}

/* A large fp32 sum: every element checked. */
static int rank_big(int rank, int world, int ngpu, int port, void *arg) {
    (void)arg;
    areal_store *st = gpu_store(port);
    if (st == NULL)
        return GPU_RANK_FAIL;
    int ranks[GPU_MAX_RANKS];
    areal_ncclpg_config cfg = gpu_world_group(st, "big", ranks, rank, world, ngpu, TIMEOUT_MS);
    areal_ncclpg *g = NULL;
    areal_error e;
    float *h = malloc(sizeof *h * BIG_COUNT);
    void *d = NULL;
    int rc = h == NULL ? GPU_RANK_FAIL : 0;
    if (rc == 0 && areal_ncclpg_create(&cfg, &g, &e) != AREAL_OK) {
        fprintf(stderr, "rank %d: create big: %s\n", rank, e.msg);
        rc = GPU_RANK_FAIL;
    }
    if (rc == 0 && cudaMalloc(&d, sizeof *h * BIG_COUNT) != cudaSuccess)
        rc = GPU_RANK_FAIL;
    for (size_t i = 0; rc == 0 && i < BIG_COUNT; i++)
        h[i] = (float)((rank + 1) * (int)(i % 1001));
    if (rc == 0 &&
        (cudaMemcpy(d, h, sizeof *h * BIG_COUNT, cudaMemcpyHostToDevice) != cudaSuccess ||
         areal_ncclpg_all_reduce(g, d, BIG_COUNT, AREAL_DT_F32, AREAL_SUM, &e) != AREAL_OK ||
         cudaMemcpy(h, d, sizeof *h * BIG_COUNT, cudaMemcpyDeviceToHost) != cudaSuccess)) {
        fprintf(stderr, "rank %d: big all_reduce: %s\n", rank, e.msg);
        rc = GPU_RANK_FAIL;
    }
    double tri = (double)world * (world + 1) / 2;
    for (size_t i = 0; rc == 0 && i < BIG_COUNT; i++)
        if (h[i] != (float)(tri * (double)(i % 1001))) {
            fprintf(stderr, "rank %d: big all_reduce element %zu: got %g want %g\n", rank, i,
                    (double)h[i], tri * (double)(i % 1001));
            rc = GPU_RANK_WRONG;
        }
    areal_ncclpg_destroy(g);
    cudaFree(d);
    free(h);
    areal_store_close(st);
    return rc;
}

static void big_all_reduce_is_exact(void **state) {
    (void)state;
    assert_int_equal(gpu_run_ranks(g_world, g_ngpu, 120, rank_big, NULL), 0);
}

/* The groups of a real layout (areal/groups.h) over the ranks present. */
static areal_strategy strategy_for(int world) {
    areal_strategy s = areal_strategy_single();
    if (world % 2 == 0) {
        s.tp = 2;
        s.dp = world / 2;
        if (s.dp % 2 == 0) {
            s.pp = 2;
            s.dp /= 2;
        }
    } else {
        s.dp = world;
    }
    s.edp = 0;
    return s;
}

/* The shared body's buffers for the NCCL backend: device memory; foreign = host memory. */
static void *dev_alloc(size_t bytes) {
    void *p = NULL;
    return cudaMalloc(&p, bytes) == cudaSuccess ? p : NULL;
}
static void dev_release(void *p) {
    if (p != NULL)
        cudaFree(p);
}
static int dev_up(void *dst, const void *host, size_t bytes) {
    return cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
}
static int dev_down(void *host, const void *src, size_t bytes) {
    return cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost) == cudaSuccess ? 0 : -1;
}
static void *host_alloc(size_t bytes) {
    return malloc(bytes);
}
static const coll_mem device_mem = {.alloc = dev_alloc,
                                    .release = dev_release,
                                    .to_group = dev_up,
                                    .to_host = dev_down,
                                    .foreign = host_alloc,
                                    .foreign_release = free};

/*
 * The role's groups from the library's builder over the NCCL factory: each
 * is the group the layout names, and each runs the shared collective body
 * (coll_body.h), the same one the CPU backend's test runs.
 */
static int rank_layout(int rank, int world, int ngpu, int port, void *arg) {
    (void)arg;
    areal_store *st = gpu_store(port);
    if (st == NULL)
        return GPU_RANK_FAIL;
    areal_strategy s = strategy_for(world);
    areal_layout l;
    areal_role_plan role;
    areal_error e;
    if (areal_layout_init(&l, &s, &e) != AREAL_OK ||
        areal_comm_role_of_strategy(&s, &role, &e) != AREAL_OK) {
        fprintf(stderr, "rank %d: layout: %s\n", rank, e.msg);
        areal_store_close(st);
        return GPU_RANK_FAIL;
    }
    areal_coll *gs[AREAL_GROUP_KIND_COUNT] = {0};
    areal_ncclpg_site site = {
        .store = st, .rank = rank, .device = rank % ngpu, .timeout_ms = TIMEOUT_MS};
    areal_coll_factory f = areal_ncclpg_coll_factory(&site, world);
    coll_bufs bufs;
    int rc = 0, used = 0, have = coll_bufs_init(&bufs, &device_mem) == 0;
    if (!have) {
        fprintf(stderr, "rank %d: no memory for the shared body's buffers\n", rank);
        rc = GPU_RANK_FAIL;
    } else if (areal_comm_role_groups(&role, &f, gs, &e) != AREAL_OK) {
        fprintf(stderr, "rank %d: role groups: %s\n", rank, e.msg);
        rc = GPU_RANK_FAIL;
    }
    for (int k = 0; rc == 0 && k < AREAL_GROUP_KIND_COUNT; k++) {
        int gi = areal_group_index(&l, (areal_group_kind)k, rank);
        if ((gi < 0) != (gs[k] == NULL)) {
            fprintf(stderr, "rank %d: kind %s: group presence differs from the layout\n", rank,
                    areal_group_kind_name((areal_group_kind)k));
            rc = GPU_RANK_WRONG;
            break;
        }
        if (gs[k] == NULL)
            continue;
        used++;
        int members[GPU_MAX_RANKS];
        int n = areal_group_ranks(&l, (areal_group_kind)k, gi, members);
        int same = n == areal_coll_size(gs[k]) && areal_coll_mem(gs[k]) == AREAL_MEM_DEVICE &&
                   areal_coll_device(gs[k]) == rank % ngpu;
        for (int j = 0; same && j < n; j++)
            same = areal_coll_global_rank(gs[k], j) == members[j];
        if (!same) {
            fprintf(stderr, "rank %d: group %s: size, members or memory differ from the layout\n",
                    rank, areal_coll_name(gs[k]));
            rc = GPU_RANK_WRONG;
            break;
        }
        /* every salt on the first kinds, so every type/op combination runs on NCCL */
        for (int salt = k; rc == 0 && salt < (k < 2 ? k + 30 : k + 1); salt++)
            rc = coll_body_run(gs[k], &bufs, rank, salt);
    }
    if (rc == 0 && rank == 0)
        printf("rank 0: %d role groups (dp=%d tp=%d pp=%d) passed the shared body\n", used, s.dp,
               s.tp, s.pp);
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(gs[k]);
    if (have)
        coll_bufs_free(&bufs);
    areal_store_close(st);
    return rc;
}

static void role_groups_pass_the_shared_body(void **state) {
    (void)state;
    assert_int_equal(gpu_run_ranks(g_world, g_ngpu, 120, rank_layout, NULL), 0);
}

/* The id is where the key naming says, and a re-created group uses a new one. */
static int rank_store(int rank, int world, int ngpu, int port, void *arg) {
    (void)arg;
    areal_store *st = gpu_store(port);
    if (st == NULL)
        return GPU_RANK_FAIL;
    int ranks[GPU_MAX_RANKS];
    areal_ncclpg_config cfg = gpu_world_group(st, "again", ranks, rank, world, ngpu, TIMEOUT_MS);
    int rc = 0;
    areal_error e;
    for (int gen = 0; gen < 2 && rc == 0; gen++) {
        areal_ncclpg *g = NULL;
        if (areal_ncclpg_create(&cfg, &g, &e) != AREAL_OK) {
            fprintf(stderr, "rank %d: create again (%d): %s\n", rank, gen, e.msg);
            rc = GPU_RANK_FAIL;
            break;
        }
        char key[64], id[256];
        size_t n = 0;
        snprintf(key, sizeof key, "nccl/again/%d/id", gen);
        if (areal_store_get(st, key, 1000, id, sizeof id, &n, &e) != AREAL_OK || n != 128) {
            fprintf(stderr, "rank %d: %s: %zu bytes (%s)\n", rank, key, n, e.msg);
            rc = GPU_RANK_WRONG;
        }
        if (rc == 0 && areal_ncclpg_barrier(g, &e) != AREAL_OK) {
            fprintf(stderr, "rank %d: barrier: %s\n", rank, e.msg);
            rc = GPU_RANK_FAIL;
        }
        areal_ncclpg_destroy(g);
    }
    areal_store_close(st);
    return rc;
}

static void store_carries_one_id_per_creation(void **state) {
    (void)state;
    assert_int_equal(gpu_run_ranks(g_world, g_ngpu, 120, rank_store, NULL), 0);
}

/* A member that never joins: creation fails within the deadline, for leader and follower. */
static int rank_missing(int rank, int world, int ngpu, int port, void *arg) {
    (void)rank, (void)world, (void)arg;
    areal_store *st = gpu_store(port);
    if (st == NULL)
        return GPU_RANK_FAIL;
    int rc = 0;
    for (int me = 0; me < 2 && rc == 0; me++) {
        const int ranks[] = {0, 1};
        areal_ncclpg_config cfg = {.store = st,
                                   .name = me == 0 ? "lonely/leader" : "lonely/follower",
                                   .ranks = ranks,
                                   .n = 2,
                                   .rank = me,
                                   .device = 0 % ngpu,
                                   .timeout_ms = 3000};
        areal_ncclpg *g = NULL;
        areal_error e;
        double t0 = gpu_now_ms();
        int r = areal_ncclpg_create(&cfg, &g, &e);
        double ms = gpu_now_ms() - t0;
        printf("missing peer (this rank is member %d): %d after %.0f ms: %s\n", me, r, ms, e.msg);
        if (r != AREAL_EIO || g != NULL || strstr(e.msg, cfg.name) == NULL || ms < 2500 ||
            ms > 20000) {
            fprintf(stderr, "missing peer (member %d): wanted AREAL_EIO naming %s after ~3 s\n", me,
                    cfg.name);
            areal_ncclpg_destroy(g);
            rc = GPU_RANK_WRONG;
        }
    }
    areal_store_close(st);
    return rc;
}

static void missing_member_fails_within_the_deadline(void **state) {
    (void)state;
    assert_int_equal(gpu_run_ranks(1, g_ngpu, 60, rank_missing, NULL), 0);
}

/* With two or more GPUs: rank 1 skips an all_reduce; rank 0 times out and is broken after. */
static int rank_op_deadline(int rank, int world, int ngpu, int port, void *arg) {
    (void)arg;
    areal_store *st = gpu_store(port);
    if (st == NULL)
        return GPU_RANK_FAIL;
    int ranks[GPU_MAX_RANKS];
    areal_ncclpg_config cfg = gpu_world_group(st, "late", ranks, rank, world, ngpu, TIMEOUT_MS);
    areal_ncclpg *g = NULL;
    areal_error e;
    int rc = 0;
    float *d = NULL;
    if (areal_ncclpg_create(&cfg, &g, &e) != AREAL_OK ||
        cudaMalloc((void **)&d, 4096) != cudaSuccess) {
        fprintf(stderr, "rank %d: create late: %s\n", rank, e.msg);
        rc = GPU_RANK_FAIL;
    }
    if (rc == 0 && rank != 1) {
        areal_ncclpg_set_timeout(g, 3000);
        double t0 = gpu_now_ms();
        int r = areal_ncclpg_all_reduce(g, d, 1024, AREAL_DT_F32, AREAL_SUM, &e);
        double ms = gpu_now_ms() - t0;
        if (rank == 0)
            printf("op deadline: %d after %.0f ms: %s\n", r, ms, e.msg);
        if (r != AREAL_EIO || strstr(e.msg, "late") == NULL ||
            strstr(e.msg, "all_reduce") == NULL || ms > 20000)
            rc = GPU_RANK_WRONG;
        if (areal_ncclpg_barrier(g, &e) != AREAL_EIO) /* broken from now on */
            rc = GPU_RANK_WRONG;
        if (rank == 0)
            areal_store_set(st, "late/done", "1", 1, &e);
    } else if (rc == 0) {
        areal_store_wait(st, "late/done", 30000, &e); /* alive but silent */
        areal_ncclpg_set_timeout(g, 3000);            /* its peers are gone: do not wait long */
    }
    areal_ncclpg_destroy(g);
    cudaFree(d);
    areal_store_close(st);
    return rc;
}

static void silent_member_fails_an_op_within_the_deadline(void **state) {
    (void)state;
    if (g_world < 2) {
        print_message("SKIPPED: the op deadline across ranks needs >= 2 GPUs\n");
        skip();
    }
    assert_int_equal(gpu_run_ranks(g_world, g_ngpu, 90, rank_op_deadline, NULL), 0);
}

int main(void) {
    char why[AREAL_ERROR_MSG_MAX + 16];
    int n = gpu_probe(why, sizeof why);
    if (n < 1) {
        printf("\n"
               "************************************************************\n"
               "*** SKIP gpu_test_ncclpg: %s\n"
               "*** The NCCL backend's GPU tests did NOT run.\n"
               "************************************************************\n",
               why);
        return 0;
    }
    g_ngpu = n;
    g_world = n < GPU_MAX_RANKS ? n : GPU_MAX_RANKS;
    printf("gpu_test_ncclpg: %d CUDA device(s): %d rank process(es), one per GPU\n", n, g_world);
    if (g_world < 2)
        printf("*** NOTE: one GPU: every op runs at group size 1 (three groups at once);\n"
               "*** multi-rank checks (send/recv, cross-rank reductions, op deadline) need >= 2 "
               "GPUs.\n");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_op_every_dtype),
        cmocka_unit_test(big_all_reduce_is_exact),
        cmocka_unit_test(role_groups_pass_the_shared_body),
        cmocka_unit_test(store_carries_one_id_per_creation),
        cmocka_unit_test(missing_member_fails_within_the_deadline),
        cmocka_unit_test(silent_member_fails_an_op_within_the_deadline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
