/*
 * k_linear_infer.c - y = x W^T (+ b) for the inference paths (the KV-cache
 * step of generate.h and the paged step of paged.h), on the model's pool.
 *
 * Why not sgemm, as the training layers use: (1) decode is T = 1..a few
 * rows, where OpenBLAS spends as long packing W as multiplying (the decode
 * step ran at a fifth of the copy bandwidth), and (2) nothing promises that
 * its per-element arithmetic is the same for every T, so a row's logits
 * could depend on which other rows share its step (the engine's greedy
 * tokens must not depend on the batch). Here every output element is ONE
 * fused multiply-add chain over k = 0 .. n_in - 1 in order, from 0, then the
 * old y (beta 1) and the bias are added: the same operations whatever T,
 * the tile the element falls in or the thread that runs it. Results are
 * batch-invariant by construction.
 *
 * The shape is sgemm's: W is packed per task, a panel of COLS output
 * columns at a time, k-major (8 columns per vector), and a 6 x 16 register
 * tile (12 accumulators, two panel loads and six broadcasts per k) runs over
 * it, so large T runs near the FMA peak; one row at a time for the rest
 * (decode), where the packing is a transpose in registers that keeps pace
 * with memory. Columns past n_out in the last panel are packed as zeros and
 * never stored. Work is split over panels on the pool (one pool for the
 * whole step; OpenBLAS threads would spin beside it). AVX2+FMA is chosen at
 * run time (the build targets baseline x86-64); elsewhere a scalar loop with
 * the same chain per element runs.
 *
 * A first version used 8-lane dot products (both operands contiguous, no
 * packing): fine for decode, but half of sgemm at T >= 32, which is where
 * prefill and large batches live.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_X86 1
#include <immintrin.h>
#endif

#define COLS 64 /* output columns per task (a multiple of 16) */

typedef struct lin_ctx {
    float *y;
    const float *x, *w, *b;
    const float *wp; /* W's packed twin (infer_pack.c), or NULL: pack per call */
    int T, n_in, n_out;
    float beta;
} lin_ctx;

/* The scalar reference of the chain (no AVX2, or an exotic build). */
static void panel_generic(const lin_ctx *c, int o0, int o1) {
    for (int t = 0; t < c->T; t++) {
        const float *xr = c->x + (size_t)t * c->n_in;
        float *yr = c->y + (size_t)t * c->n_out;
        for (int o = o0; o < o1; o++) {
            const float *wr = c->w + (size_t)o * c->n_in;
            float s = 0;
            for (int i = 0; i < c->n_in; i++)
                s = __builtin_fmaf(xr[i], wr[i], s);
            if (c->beta != 0.0f)
                s = yr[o] + s;
            if (c->b != NULL)
                s += c->b[o];
            yr[o] = s;
        }
    }
}

#ifdef HAVE_X86
/* The inner loops are not address-instrumented, as OpenBLAS (which they
 * replace on these paths) is not: instrumented, every vector load carries a
 * shadow check and the sanitized suite's model-heavy tests (a training loop
 * generating through this file) ran past their time limit. Their bounds come
 * from (T, n_in, n_out), which the callers check, and the release tests hold
 * their results to the references; UBSan, the wrappers and the panel buffer
 * stay instrumented. */
#define AVX __attribute__((target("avx2,fma"), no_sanitize_address))

/* p[k * 8 + j] = W[o + j][k] for k < n_in, j < 8 (rows past n_out: zeros). */
AVX static void pack8(float *p, const lin_ctx *c, int o) {
    int n_in = c->n_in, k = 0;
    const float *r[8];
    bool full = o + 8 <= c->n_out;
    for (int j = 0; j < 8; j++)
        r[j] = o + j < c->n_out ? c->w + (size_t)(o + j) * n_in : NULL;
    if (full)
        for (; k + 8 <= n_in; k += 8) { /* 8 x 8 transpose in registers */
            __m256 a0 = _mm256_loadu_ps(r[0] + k), a1 = _mm256_loadu_ps(r[1] + k),
                   a2 = _mm256_loadu_ps(r[2] + k), a3 = _mm256_loadu_ps(r[3] + k),
                   a4 = _mm256_loadu_ps(r[4] + k), a5 = _mm256_loadu_ps(r[5] + k),
                   a6 = _mm256_loadu_ps(r[6] + k), a7 = _mm256_loadu_ps(r[7] + k);
            __m256 t0 = _mm256_unpacklo_ps(a0, a1), t1 = _mm256_unpackhi_ps(a0, a1),
                   t2 = _mm256_unpacklo_ps(a2, a3), t3 = _mm256_unpackhi_ps(a2, a3),
                   t4 = _mm256_unpacklo_ps(a4, a5), t5 = _mm256_unpackhi_ps(a4, a5),
                   t6 = _mm256_unpacklo_ps(a6, a7), t7 = _mm256_unpackhi_ps(a6, a7);
            __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                   u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
                   u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
                   u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
            float *d = p + (size_t)k * 8;
            _mm256_storeu_ps(d + 0, _mm256_permute2f128_ps(u0, u4, 0x20));
            _mm256_storeu_ps(d + 8, _mm256_permute2f128_ps(u1, u5, 0x20));
            _mm256_storeu_ps(d + 16, _mm256_permute2f128_ps(u2, u6, 0x20));
            _mm256_storeu_ps(d + 24, _mm256_permute2f128_ps(u3, u7, 0x20));
            _mm256_storeu_ps(d + 32, _mm256_permute2f128_ps(u0, u4, 0x31));
            _mm256_storeu_ps(d + 40, _mm256_permute2f128_ps(u1, u5, 0x31));
            _mm256_storeu_ps(d + 48, _mm256_permute2f128_ps(u2, u6, 0x31));
            _mm256_storeu_ps(d + 56, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
    for (; k < n_in; k++)
        for (int j = 0; j < 8; j++)
            p[(size_t)k * 8 + j] = r[j] != NULL ? r[j][k] : 0.0f;
}

/* y[t][o .. o + 8) from the chain sums a (beta, bias; only columns < n_out). */
AVX static inline void store8(const lin_ctx *c, int t, int o, __m256 a) {
    float *y = c->y + (size_t)t * c->n_out + o;
    int n = c->n_out - o < 8 ? c->n_out - o : 8;
    if (n == 8) {
        if (c->beta != 0.0f)
            a = _mm256_add_ps(_mm256_loadu_ps(y), a);
        if (c->b != NULL)
            a = _mm256_add_ps(a, _mm256_loadu_ps(c->b + o));
        _mm256_storeu_ps(y, a);
        return;
    }
    float l[8];
    _mm256_storeu_ps(l, a);
    for (int j = 0; j < n; j++) {
        float s = l[j];
        if (c->beta != 0.0f)
            s = y[j] + s;
        if (c->b != NULL)
            s += c->b[o + j];
        y[j] = s;
    }
}

/* Six rows t .. t + 5 by 16 columns (two packed blocks p0, p1). */
AVX static void k6x16(const lin_ctx *c, int t, int o, const float *p0, const float *p1) {
    int n_in = c->n_in;
    const float *x0 = c->x + (size_t)t * n_in, *x1 = x0 + n_in, *x2 = x1 + n_in, *x3 = x2 + n_in,
                *x4 = x3 + n_in, *x5 = x4 + n_in;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00,
           a30 = a00, a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00;
    for (int k = 0; k < n_in; k++) {
        __m256 w0 = _mm256_loadu_ps(p0 + (size_t)k * 8), w1 = _mm256_loadu_ps(p1 + (size_t)k * 8);
        __m256 v = _mm256_broadcast_ss(x0 + k);
        a00 = _mm256_fmadd_ps(v, w0, a00);
        a01 = _mm256_fmadd_ps(v, w1, a01);
        v = _mm256_broadcast_ss(x1 + k);
        a10 = _mm256_fmadd_ps(v, w0, a10);
        a11 = _mm256_fmadd_ps(v, w1, a11);
        v = _mm256_broadcast_ss(x2 + k);
        a20 = _mm256_fmadd_ps(v, w0, a20);
        a21 = _mm256_fmadd_ps(v, w1, a21);
        v = _mm256_broadcast_ss(x3 + k);
        a30 = _mm256_fmadd_ps(v, w0, a30);
        a31 = _mm256_fmadd_ps(v, w1, a31);
        v = _mm256_broadcast_ss(x4 + k);
        a40 = _mm256_fmadd_ps(v, w0, a40);
        a41 = _mm256_fmadd_ps(v, w1, a41);
        v = _mm256_broadcast_ss(x5 + k);
        a50 = _mm256_fmadd_ps(v, w0, a50);
        a51 = _mm256_fmadd_ps(v, w1, a51);
    }
    store8(c, t, o, a00);
    store8(c, t, o + 8, a01);
    store8(c, t + 1, o, a10);
    store8(c, t + 1, o + 8, a11);
    store8(c, t + 2, o, a20);
    store8(c, t + 2, o + 8, a21);
    store8(c, t + 3, o, a30);
    store8(c, t + 3, o + 8, a31);
    store8(c, t + 4, o, a40);
    store8(c, t + 4, o + 8, a41);
    store8(c, t + 5, o, a50);
    store8(c, t + 5, o + 8, a51);
}

/* One row t by n_blk packed blocks (up to 4 at once: independent chains). */
AVX static void k1xN(const lin_ctx *c, int t, int o, const float *p, int n_blk) {
    int n_in = c->n_in;
    const float *x0 = c->x + (size_t)t * n_in;
    size_t bs = (size_t)n_in * 8;
    int b = 0;
    for (; b + 4 <= n_blk; b += 4) {
        const float *q0 = p + b * bs, *q1 = q0 + bs, *q2 = q1 + bs, *q3 = q2 + bs;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int k = 0; k < n_in; k++) {
            __m256 v = _mm256_broadcast_ss(x0 + k);
            a0 = _mm256_fmadd_ps(v, _mm256_loadu_ps(q0 + (size_t)k * 8), a0);
            a1 = _mm256_fmadd_ps(v, _mm256_loadu_ps(q1 + (size_t)k * 8), a1);
            a2 = _mm256_fmadd_ps(v, _mm256_loadu_ps(q2 + (size_t)k * 8), a2);
            a3 = _mm256_fmadd_ps(v, _mm256_loadu_ps(q3 + (size_t)k * 8), a3);
        }
        store8(c, t, o + b * 8, a0);
        store8(c, t, o + b * 8 + 8, a1);
        store8(c, t, o + b * 8 + 16, a2);
        store8(c, t, o + b * 8 + 24, a3);
    }
    for (; b < n_blk; b++) {
        const float *q0 = p + b * bs;
        __m256 a0 = _mm256_setzero_ps();
        for (int k = 0; k < n_in; k++)
            a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(x0 + k), _mm256_loadu_ps(q0 + (size_t)k * 8),
                                 a0);
        store8(c, t, o + b * 8, a0);
    }
}

/* 8 x 8 transpose: on return a[i] holds column i of the rows given. */
#define TRANSPOSE8(a0, a1, a2, a3, a4, a5, a6, a7)                                                 \
    do {                                                                                           \
        __m256 t0 = _mm256_unpacklo_ps(a0, a1), t1 = _mm256_unpackhi_ps(a0, a1),                   \
               t2 = _mm256_unpacklo_ps(a2, a3), t3 = _mm256_unpackhi_ps(a2, a3),                   \
               t4 = _mm256_unpacklo_ps(a4, a5), t5 = _mm256_unpackhi_ps(a4, a5),                   \
               t6 = _mm256_unpacklo_ps(a6, a7), t7 = _mm256_unpackhi_ps(a6, a7);                   \
        __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),         \
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),         \
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),         \
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);         \
        a0 = _mm256_permute2f128_ps(u0, u4, 0x20);                                                 \
        a1 = _mm256_permute2f128_ps(u1, u5, 0x20);                                                 \
        a2 = _mm256_permute2f128_ps(u2, u6, 0x20);                                                 \
        a3 = _mm256_permute2f128_ps(u3, u7, 0x20);                                                 \
        a4 = _mm256_permute2f128_ps(u0, u4, 0x31);                                                 \
        a5 = _mm256_permute2f128_ps(u1, u5, 0x31);                                                 \
        a6 = _mm256_permute2f128_ps(u2, u6, 0x31);                                                 \
        a7 = _mm256_permute2f128_ps(u3, u7, 0x31);                                                 \
    } while (0)

/* Decode (T < 6): one full block of 8 columns at o for every row, W read in
 * place and transposed in registers (no panel: W passes once, from memory to
 * the FMAs). The same chain per element as the packed kernels. */
AVX static void k_direct(const lin_ctx *c, int o) {
    int n_in = c->n_in, T = c->T, k = 0;
    const float *r0 = c->w + (size_t)o * n_in, *r1 = r0 + n_in, *r2 = r1 + n_in, *r3 = r2 + n_in,
                *r4 = r3 + n_in, *r5 = r4 + n_in, *r6 = r5 + n_in, *r7 = r6 + n_in;
    __m256 acc[5];
    for (int t = 0; t < T; t++)
        acc[t] = _mm256_setzero_ps();
    for (; k + 8 <= n_in; k += 8) {
        __m256 a0 = _mm256_loadu_ps(r0 + k), a1 = _mm256_loadu_ps(r1 + k),
               a2 = _mm256_loadu_ps(r2 + k), a3 = _mm256_loadu_ps(r3 + k),
               a4 = _mm256_loadu_ps(r4 + k), a5 = _mm256_loadu_ps(r5 + k),
               a6 = _mm256_loadu_ps(r6 + k), a7 = _mm256_loadu_ps(r7 + k);
        TRANSPOSE8(a0, a1, a2, a3, a4, a5, a6, a7);
        for (int t = 0; t < T; t++) {
            const float *xk = c->x + (size_t)t * n_in + k;
            __m256 v = acc[t];
            v = _mm256_fmadd_ps(_mm256_broadcast_ss(xk + 0), a0, v);
            v = _mm256_fmadd_ps(_mm256_broadcast_ss(xk + 1), a1, v);
            v = _mm256_fmadd_ps(_mm256_broadcast_ss(xk + 2), a2, v);
            v = _mm256_fmadd_ps(_mm256_broadcast_ss(xk + 3), a3, v);
            v = _mm256_fmadd_ps(_mm256_broadcast_ss(xk + 4), a4, v);
            v = _mm256_fmadd_ps(_mm256_broadcast_ss(xk + 5), a5, v);
            v = _mm256_fmadd_ps(_mm256_broadcast_ss(xk + 6), a6, v);
            v = _mm256_fmadd_ps(_mm256_broadcast_ss(xk + 7), a7, v);
            acc[t] = v;
        }
    }
    for (; k < n_in; k++) { /* the tail: column k of the 8 rows */
        __m256 wk = _mm256_set_ps(r7[k], r6[k], r5[k], r4[k], r3[k], r2[k], r1[k], r0[k]);
        for (int t = 0; t < T; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(c->x + (size_t)t * n_in + k), wk, acc[t]);
    }
    for (int t = 0; t < T; t++)
        store8(c, t, o, acc[t]);
}

/* Columns [o0, o1) of every row, from the packed panel p. */
AVX static void panel_avx2(const lin_ctx *c, int o0, int o1, float *p) {
    int n_blk = (o1 - o0 + 7) / 8;
    size_t bs = (size_t)c->n_in * 8;
    if (c->wp != NULL) { /* packed once for the model: read in place */
        p = (float *)c->wp + (size_t)(o0 / 8) * bs;
        if (c->T < 6) { /* one row at a time: the panel stays in L2 for the next */
            for (int t = 0; t < c->T; t++)
                k1xN(c, t, o0, p, n_blk);
            return;
        }
    } else if (c->T < 6) { /* decode: W in place, a packed panel only for a partial last block */
        int b = 0;
        for (; b < n_blk && o0 + b * 8 + 8 <= c->n_out; b++)
            k_direct(c, o0 + b * 8);
        if (b < n_blk) {
            pack8(p, c, o0 + b * 8);
            for (int t = 0; t < c->T; t++)
                k1xN(c, t, o0 + b * 8, p, 1);
        }
        return;
    }
    for (int b = 0; c->wp == NULL && b < n_blk; b++)
        pack8(p + b * bs, c, o0 + b * 8);
    int t = 0;
    for (; t + 6 <= c->T; t += 6) {
        int b = 0;
        for (; b + 2 <= n_blk; b += 2)
            k6x16(c, t, o0 + b * 8, p + b * bs, p + (b + 1) * bs);
        for (int r = 0; b < n_blk && r < 6; r++) /* an odd last block */
            k1xN(c, t + r, o0 + b * 8, p + b * bs, 1);
    }
    for (; t < c->T; t++)
        k1xN(c, t, o0, p, n_blk);
}

static bool have_avx2(void) {
    static int known; /* 0 unknown, 1 no, 2 yes; a benign race: every thread computes the same */
    if (known == 0)
        known = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 2 : 1;
    return known == 2;
}
#endif

static void lin_tasks(void *cv, size_t begin, size_t end) {
    const lin_ctx *c = cv;
#ifdef HAVE_X86
    bool avx2 = have_avx2();
    float *p = avx2 && c->wp == NULL ? malloc(sizeof(float) * (size_t)c->n_in * COLS) : NULL;
#endif
    for (size_t k = begin; k < end; k++) {
        int o0 = (int)k * COLS, o1 = o0 + COLS < c->n_out ? o0 + COLS : c->n_out;
#ifdef HAVE_X86
        if (p != NULL || (avx2 && c->wp != NULL)) {
            panel_avx2(c, o0, o1, p);
            continue;
        }
#endif
        panel_generic(c, o0, o1); /* also when the panel could not be allocated: same sums */
    }
#ifdef HAVE_X86
    free(p);
#endif
}

#ifdef HAVE_X86
AVX static float dot_avx2(const float *a, const float *b, int n) {
    int n8 = n & ~7;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n8; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    __m128 l = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    __m128 m = _mm_add_ps(l, _mm_movehl_ps(l, l));
    float s = _mm_cvtss_f32(_mm_add_ss(m, _mm_shuffle_ps(m, m, 0x55)));
    for (int i = n8; i < n; i++)
        s += a[i] * b[i];
    return s;
}
#endif

float k_dot_lanes(const float *a, const float *b, int n) {
#ifdef HAVE_X86
    if (have_avx2())
        return dot_avx2(a, b, n);
#endif
    int n8 = n & ~7;
    float acc[8] = {0};
    for (int i = 0; i < n8; i += 8)
        for (int l = 0; l < 8; l++)
            acc[l] = __builtin_fmaf(a[i + l], b[i + l], acc[l]);
    float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    for (int i = n8; i < n; i++)
        s += a[i] * b[i];
    return s;
}

void k_linear_infer(areal_pool *p, float *y, const float *x, const float *w, const float *b, int T,
                    int n_in, int n_out, float beta) {
    k_linear_infer_packed(p, y, x, w, NULL, b, T, n_in, n_out, beta);
}

void k_linear_infer_packed(areal_pool *p, float *y, const float *x, const float *w, const float *wp,
                           const float *b, int T, int n_in, int n_out, float beta) {
    if (T <= 0 || n_out <= 0)
        return;
    lin_ctx c = {y, x, w, b, wp, T, n_in, n_out, beta};
    size_t chunks = ((size_t)n_out + COLS - 1) / COLS;
    areal_pool_for(p, chunks, 1, lin_tasks, &c);
}
