/*
 * coll_body.h - the one collective test body that every backend of
 * areal/comm/coll.h runs: compiled into the CPU test (test_collectives.c,
 * host buffers) and into the GPU test (worker/nccl/gpu/gpu_test_ncclpg.c,
 * device buffers), so the CPU and NCCL backends are held to the same checks.
 *
 * The body sees a group only through areal_coll_* and its buffers only
 * through a coll_mem adapter (allocate in the group's memory, copy in and
 * out), so it cannot tell the backends apart. Expected values come from the
 * group's member list and a closed-form input cb_v(global rank, i), never
 * from the operation under test. Inputs are small integers, so sums and
 * maxima are exact in every type (bf16 holds integers up to 256 exactly);
 * only a float average may round differently (NCCL scales before it sums),
 * within (n + 2) * u * sum|x| / n where u is the type's unit roundoff.
 *
 * Header-only (static functions): each test binary compiles its own copy, and
 * the GPU build needs no extra object. Rejected: one test program linked
 * against both backends (the CPU test must build and run where CUDA is
 * absent).
 */
#ifndef AREAL_TEST_COLL_BODY_H
#define AREAL_TEST_COLL_BODY_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/comm/coll.h"

#define CB_OK        0
#define CB_COMM_FAIL 2 /* a comm call failed (message on stderr) */
#define CB_WRONG     3 /* a result was wrong */
#define CB_MAX       16
#define CB_SMALL     37
#define CB_LARGE     40000      /* 160 KB of fp32: the CPU backend's ring path */
#define CB_BUF       (4u << 20) /* bytes per buffer: 16 blocks of CB_LARGE 4-byte elements */

/* Buffers in the group's memory: alloc/release, and copies from/to host memory. */
typedef struct coll_mem {
    void *(*alloc)(size_t bytes);
    void (*release)(void *p);
    int (*to_group)(void *dst, const void *host, size_t bytes); /* 0 or -1 */
    int (*to_host)(void *host, const void *src, size_t bytes);  /* 0 or -1 */
    /* memory of the other kind (host for a device group), or NULL where none exists */
    void *(*foreign)(size_t bytes);
    void (*foreign_release)(void *p);
} coll_mem;

/* The input of global rank r at element i: an integer in -5..5. */
static inline int cb_v(int r, size_t i) {
    return (int)(((size_t)(r + 1) * 7 + i * 3 + (size_t)r * i) % 11) - 5;
}

static inline void cb_put(void *buf, areal_dtype t, size_t i, double x) {
    switch (t) {
    case AREAL_DT_F32:
        ((float *)buf)[i] = (float)x;
        break;
    case AREAL_DT_BF16:
        ((uint16_t *)buf)[i] = areal_f32_to_bf16((float)x);
        break;
    case AREAL_DT_F16:
        ((uint16_t *)buf)[i] = areal_f32_to_f16((float)x);
        break;
    case AREAL_DT_I32:
        ((int32_t *)buf)[i] = (int32_t)x;
        break;
    default:
        ((int64_t *)buf)[i] = (int64_t)x;
        break;
    }
}

static inline double cb_get(const void *buf, areal_dtype t, size_t i) {
    switch (t) {
    case AREAL_DT_F32:
        return ((const float *)buf)[i];
    case AREAL_DT_BF16:
        return areal_bf16_to_f32(((const uint16_t *)buf)[i]);
    case AREAL_DT_F16:
        return areal_f16_to_f32(((const uint16_t *)buf)[i]);
    case AREAL_DT_I32:
        return ((const int32_t *)buf)[i];
    default:
        return (double)((const int64_t *)buf)[i];
    }
}

/* The expected reduction over members m[0..n) at element i, rounded as type t stores it. */
static inline double cb_expect(const int *m, int n, size_t i, areal_redop op, areal_dtype t) {
    long s = 0, mx = -1000;
    for (int j = 0; j < n; j++) {
        s += cb_v(m[j], i);
        mx = cb_v(m[j], i) > mx ? cb_v(m[j], i) : mx;
    }
    if (op == AREAL_MAX)
        return (double)mx;
    if (op == AREAL_SUM)
        return (double)s;
    if (t == AREAL_DT_I32 || t == AREAL_DT_I64)
        return (double)(s / n);
    float avg = (float)s / (float)n;
    uint8_t tmp[8];
    cb_put(tmp, t, 0, avg);
    return cb_get(tmp, t, 0);
}

/* The bound on |got - expected| at element i (0: exact); see the top of the file. */
static inline double cb_tol(const int *m, int n, size_t i, areal_redop op, areal_dtype t) {
    if (op != AREAL_AVG || !areal_dtype_is_float(t))
        return 0.0;
    double mag = 0, u = t == AREAL_DT_BF16 ? 1.0 / 256 : t == AREAL_DT_F16 ? 1.0 / 2048 : 0x1p-24;
    for (int j = 0; j < n; j++)
        mag += fabs((double)cb_v(m[j], i));
    return (n + 2) * u * mag / n + u;
}

typedef struct cb_ctx {
    areal_coll *g;
    const coll_mem *mm;
    int n, me, gr, m[CB_MAX];
    uint8_t *ha, *hb; /* host staging */
    void *da, *db;    /* group memory */
} cb_ctx;

#define CB_CHECK(cond)                                                                             \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d %s group %s: check failed at line %d: %s\n", k->gr,           \
                    areal_coll_backend(k->g), areal_coll_name(k->g), __LINE__, #cond);             \
            return CB_WRONG;                                                                       \
        }                                                                                          \
    } while (0)

#define CB_COMM(call)                                                                              \
    do {                                                                                           \
        if ((call) != AREAL_OK) {                                                                  \
            fprintf(stderr, "rank %d: %s\n", k->gr, e.msg);                                        \
            return CB_COMM_FAIL;                                                                   \
        }                                                                                          \
    } while (0)

/* Host staging <-> group memory, for n elements of t. */
#define CB_UP(dst, n, t)   CB_CHECK(k->mm->to_group((dst), k->ha, (n)*areal_dtype_size(t)) == 0)
#define CB_DOWN(src, n, t) CB_CHECK(k->mm->to_host(k->hb, (src), (n)*areal_dtype_size(t)) == 0)

static const areal_dtype cb_types[] = {AREAL_DT_F32, AREAL_DT_BF16, AREAL_DT_F16, AREAL_DT_I32,
                                       AREAL_DT_I64};

static inline int cb_all_reduce(cb_ctx *k, size_t cnt, areal_dtype t, areal_redop op) {
    areal_error e;
    for (size_t i = 0; i < cnt; i++)
        cb_put(k->ha, t, i, cb_v(k->gr, i));
    CB_UP(k->da, cnt, t);
    CB_COMM(areal_coll_all_reduce(k->g, k->da, cnt, t, op, &e));
    CB_DOWN(k->da, cnt, t);
    for (size_t i = 0; i < cnt; i++)
        CB_CHECK(fabs(cb_get(k->hb, t, i) - cb_expect(k->m, k->n, i, op, t)) <=
                 cb_tol(k->m, k->n, i, op, t));
    return CB_OK;
}

static inline int cb_reductions(cb_ctx *k, int salt) {
    areal_error e;
    int rc;
    for (int x = 0; x < 3; x++)
        if ((rc = cb_all_reduce(k, CB_SMALL, cb_types[(salt + x) % 5],
                                (areal_redop)((salt / 5 + x) % 3))) != CB_OK)
            return rc;
    if (salt % 3 == 0 &&
        (rc = cb_all_reduce(k, CB_LARGE, cb_types[salt % 5], (areal_redop)(salt % 3))) != CB_OK)
        return rc;
    /* reduce-scatter: block me of the reduction over members of v(rank, j*cnt + i) */
    for (int ti = salt % 2; ti < 5; ti += 2) {
        areal_dtype t = cb_types[ti];
        areal_redop op = (areal_redop)((salt + ti) % 3);
        size_t cnt = salt % 6 == 2 && ti < 4 ? CB_LARGE : CB_SMALL;
        for (size_t i = 0; i < (size_t)k->n * cnt; i++)
            cb_put(k->ha, t, i, cb_v(k->gr, i));
        CB_UP(k->da, (size_t)k->n * cnt, t);
        CB_COMM(areal_coll_reduce_scatter(k->g, k->da, k->db, cnt, t, op, &e));
        CB_DOWN(k->db, cnt, t);
        for (size_t i = 0; i < cnt; i++) {
            size_t at = (size_t)k->me * cnt + i;
            CB_CHECK(fabs(cb_get(k->hb, t, i) - cb_expect(k->m, k->n, at, op, t)) <=
                     cb_tol(k->m, k->n, at, op, t));
        }
    }
    return CB_OK;
}

static inline int cb_movement(cb_ctx *k, int salt) {
    areal_error e;
    int n = k->n, me = k->me;
    /* all-gather */
    areal_dtype t = cb_types[salt % 5];
    for (size_t i = 0; i < CB_SMALL; i++)
        cb_put(k->ha, t, i, cb_v(k->gr, i));
    CB_UP(k->da, CB_SMALL, t);
    CB_COMM(areal_coll_all_gather(k->g, k->da, k->db, CB_SMALL, t, &e));
    CB_DOWN(k->db, (size_t)n * CB_SMALL, t);
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < CB_SMALL; i++)
            CB_CHECK(cb_get(k->hb, t, (size_t)j * CB_SMALL + i) == cb_v(k->m[j], i));
    /* broadcast from the last member: small (tree) and 400 KB (chain of 2 segments) */
    size_t bc[] = {CB_SMALL, 100000};
    for (int x = 0; x < (salt % 3 == 1 ? 2 : 1); x++) {
        for (size_t i = 0; i < bc[x]; i++)
            cb_put(k->ha, AREAL_DT_F32, i, me == n - 1 ? cb_v(k->gr, i) : 99);
        CB_UP(k->da, bc[x], AREAL_DT_F32);
        CB_COMM(areal_coll_broadcast(k->g, k->da, bc[x], AREAL_DT_F32, n - 1, &e));
        CB_DOWN(k->da, bc[x], AREAL_DT_F32);
        for (size_t i = 0; i < bc[x]; i++)
            CB_CHECK(cb_get(k->hb, AREAL_DT_F32, i) == cb_v(k->m[n - 1], i));
    }
    /* all-to-all: element i of block j sent by member s is v(m[s], j*SMALL + i) */
    for (size_t i = 0; i < (size_t)n * CB_SMALL; i++)
        cb_put(k->ha, AREAL_DT_I32, i, cb_v(k->gr, i));
    CB_UP(k->da, (size_t)n * CB_SMALL, AREAL_DT_I32);
    CB_COMM(areal_coll_all_to_all(k->g, k->da, k->db, CB_SMALL, AREAL_DT_I32, &e));
    CB_DOWN(k->db, (size_t)n * CB_SMALL, AREAL_DT_I32);
    for (int s = 0; s < n; s++)
        for (size_t i = 0; i < CB_SMALL; i++)
            CB_CHECK(cb_get(k->hb, AREAL_DT_I32, (size_t)s * CB_SMALL + i) ==
                     cb_v(k->m[s], (size_t)me * CB_SMALL + i));
    /* all-to-allv: member s sends (s + d) % 4 elements to member d */
    size_t sc[CB_MAX], sd[CB_MAX], rcn[CB_MAX], rd[CB_MAX], so = 0, ro = 0;
    for (int j = 0; j < n; j++) {
        sc[j] = (size_t)(me + j) % 4;
        sd[j] = so;
        so += sc[j];
        rcn[j] = (size_t)(j + me) % 4;
        rd[j] = ro;
        ro += rcn[j];
    }
    for (size_t i = 0; i < so; i++)
        cb_put(k->ha, AREAL_DT_I64, i, cb_v(k->gr, i));
    CB_UP(k->da, so, AREAL_DT_I64);
    CB_COMM(areal_coll_all_to_allv(k->g, k->da, sc, sd, k->db, rcn, rd, AREAL_DT_I64, &e));
    CB_DOWN(k->db, ro, AREAL_DT_I64);
    for (int s = 0; s < n; s++) {
        size_t off = 0; /* where member s put its block for me */
        for (int d = 0; d < me; d++)
            off += (size_t)(s + d) % 4;
        for (size_t i = 0; i < rcn[s]; i++)
            CB_CHECK(cb_get(k->hb, AREAL_DT_I64, rd[s] + i) == cb_v(k->m[s], off + i));
    }
    /* send/recv around the ring: even members send first (odd n: the last pair waits) */
    if (n > 1) {
        int next = (me + 1) % n, prev = (me + n - 1) % n;
        for (size_t i = 0; i < CB_SMALL; i++)
            cb_put(k->ha, AREAL_DT_I32, i, cb_v(k->gr, i));
        CB_UP(k->da, CB_SMALL, AREAL_DT_I32);
        if (me % 2 == 0) {
            CB_COMM(areal_coll_send(k->g, k->da, CB_SMALL, AREAL_DT_I32, next, &e));
            CB_COMM(areal_coll_recv(k->g, k->db, CB_SMALL, AREAL_DT_I32, prev, &e));
        } else {
            CB_COMM(areal_coll_recv(k->g, k->db, CB_SMALL, AREAL_DT_I32, prev, &e));
            CB_COMM(areal_coll_send(k->g, k->da, CB_SMALL, AREAL_DT_I32, next, &e));
        }
        CB_DOWN(k->db, CB_SMALL, AREAL_DT_I32);
        for (size_t i = 0; i < CB_SMALL; i++)
            CB_CHECK(cb_get(k->hb, AREAL_DT_I32, i) == cb_v(k->m[prev], i));
    }
    return CB_OK;
}

/*
 * Async forms in issue order: an all-reduce, then an all-gather of the same
 * buffer (it must see the reduced values), then a broadcast, waited after a
 * blocking all-reduce on the same group.
 */
static inline int cb_async(cb_ctx *k) {
    areal_error e;
    int n = k->n;
    size_t big = CB_LARGE, gat = (size_t)n * CB_SMALL;
    uint8_t *h = k->ha;
    for (size_t i = 0; i < big; i++)
        cb_put(h, AREAL_DT_I64, i, cb_v(k->gr, i));
    CB_UP(k->da, big, AREAL_DT_I64);
    /* db holds the gather output (n*SMALL i64), then at +gat*8 the broadcast (big f32) */
    uint8_t *bc = (uint8_t *)k->db + gat * 8;
    for (size_t i = 0; i < big; i++)
        cb_put(h, AREAL_DT_F32, i, k->me == n - 1 ? (float)cb_v(k->gr, i) : 0.0f);
    CB_CHECK(k->mm->to_group(bc, h, big * 4) == 0);
    areal_coll_work *w1 = NULL, *w2 = NULL, *w3 = NULL;
    CB_COMM(areal_coll_all_reduce_async(k->g, k->da, big, AREAL_DT_I64, AREAL_SUM, &w1, &e));
    CB_COMM(areal_coll_all_gather_async(k->g, k->da, k->db, CB_SMALL, AREAL_DT_I64, &w2, &e));
    CB_COMM(areal_coll_broadcast_async(k->g, bc, big, AREAL_DT_F32, n - 1, &w3, &e));
    CB_COMM(areal_coll_barrier(k->g, &e)); /* blocking: runs after the queued ones */
    int done = 0;
    areal_coll_work_test(w1, &done);
    CB_CHECK(done == 1);
    CB_COMM(areal_coll_work_wait(w1, &e));
    CB_COMM(areal_coll_work_wait(w2, &e));
    CB_COMM(areal_coll_work_wait(w3, &e));
    CB_DOWN(k->da, big, AREAL_DT_I64);
    for (size_t i = 0; i < big; i++)
        CB_CHECK(cb_get(k->hb, AREAL_DT_I64, i) == cb_expect(k->m, n, i, AREAL_SUM, AREAL_DT_I64));
    CB_DOWN(k->db, gat, AREAL_DT_I64);
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < CB_SMALL; i++)
            CB_CHECK(cb_get(k->hb, AREAL_DT_I64, (size_t)j * CB_SMALL + i) ==
                     cb_expect(k->m, n, i, AREAL_SUM, AREAL_DT_I64));
    CB_CHECK(k->mm->to_host(k->hb, bc, big * 4) == 0);
    for (size_t i = 0; i < big; i++)
        CB_CHECK(cb_get(k->hb, AREAL_DT_F32, i) == cb_v(k->m[n - 1], i));
    return CB_OK;
}

/* A buffer of the wrong memory kind is refused before the backend sees it; the group stays usable.
 */
static inline int cb_wrong_memory(cb_ctx *k) {
    areal_error e;
    if (k->mm->foreign == NULL)
        return CB_OK;
    void *f = k->mm->foreign(4096);
    CB_CHECK(f != NULL);
    int rc = areal_coll_all_reduce(k->g, f, 16, AREAL_DT_F32, AREAL_SUM, &e);
    int named = strstr(e.msg, "memory") != NULL && strstr(e.msg, areal_coll_name(k->g)) != NULL;
    areal_coll_work *w = NULL;
    int rc2 = areal_coll_broadcast_async(k->g, f, 16, AREAL_DT_F32, 0, &w, &e);
    int rc3 = areal_coll_all_gather(k->g, k->da, f, 4, AREAL_DT_F32, &e);
    k->mm->foreign_release(f);
    CB_CHECK(rc == AREAL_EINVAL && named);
    CB_CHECK(rc2 == AREAL_EINVAL && w == NULL);
    CB_CHECK(rc3 == AREAL_EINVAL && strstr(e.msg, "out") != NULL);
    return CB_OK;
}

/*
 * The body's buffers: host staging and two in the group's memory, made once
 * per rank process and reused by every run. (Reused, not made per run: a
 * forked rank that churns through large blocks makes ASan recycle its
 * quarantine, which can block on an allocator lock the parent's store thread
 * held at fork time.)
 */
typedef struct coll_bufs {
    const coll_mem *mm;
    uint8_t *ha, *hb;
    void *da, *db;
} coll_bufs;

/* Returns 0, or -1 when a buffer cannot be made (then nothing is held). */
static inline int coll_bufs_init(coll_bufs *b, const coll_mem *mm) {
    b->mm = mm;
    b->ha = malloc(CB_BUF);
    b->hb = malloc(CB_BUF);
    b->da = mm->alloc(CB_BUF);
    b->db = mm->alloc(CB_BUF);
    if (b->ha && b->hb && b->da && b->db)
        return 0;
    free(b->ha);
    free(b->hb);
    if (b->da)
        mm->release(b->da);
    if (b->db)
        mm->release(b->db);
    return -1;
}

static inline void coll_bufs_free(coll_bufs *b) {
    free(b->ha);
    free(b->hb);
    b->mm->release(b->da);
    b->mm->release(b->db);
}

/*
 * Runs the body on group g with buffers b (gr is this process's global
 * rank). The type/op combinations and the large sizes rotate with `salt`, so
 * that callers covering several groups and salts see every combination while
 * one call stays short. Returns CB_OK, CB_COMM_FAIL or CB_WRONG.
 */
static inline int coll_body_run(areal_coll *g, const coll_bufs *b, int gr, int salt) {
    cb_ctx kk = {.g = g, .mm = b->mm, .gr = gr}, *k = &kk;
    areal_error e;
    k->n = areal_coll_size(g);
    k->me = areal_coll_rank(g);
    CB_CHECK(k->n >= 1 && k->n <= CB_MAX && k->me >= 0 && k->me < k->n);
    for (int j = 0; j < k->n; j++)
        k->m[j] = areal_coll_global_rank(g, j);
    CB_CHECK(k->m[k->me] == gr && areal_coll_global_rank(g, k->n) == -1);
    k->ha = b->ha;
    k->hb = b->hb;
    k->da = b->da;
    k->db = b->db;
    int rc = cb_reductions(k, salt);
    if (rc == CB_OK)
        rc = cb_movement(k, salt);
    if (rc == CB_OK && salt % 4 == 0)
        rc = cb_async(k);
    if (rc == CB_OK)
        rc = cb_wrong_memory(k);
    if (rc == CB_OK && areal_coll_barrier(g, &e) != AREAL_OK) {
        fprintf(stderr, "rank %d: %s\n", gr, e.msg);
        rc = CB_COMM_FAIL;
    }
    return rc;
}

#endif
