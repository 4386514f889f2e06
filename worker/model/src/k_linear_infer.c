/*
 * k_linear_infer.c - y = x W^T (+ b) for the inference paths (the KV-cache
 * step of generate.h and the paged step of paged.h), on the model's pool.
 *
 * Why not sgemm, as the training layers use: (1) decode is T = 1..a few
 * rows, where OpenBLAS packs the whole weight matrix per call (reads and
 * writes W once more than the product needs: the decode step ran at a fifth
 * of the copy bandwidth), and (2) its per-element arithmetic is not
 * guaranteed the same for every T, so a row's logits could depend on which
 * other rows share its step (the engine's greedy tokens must not depend on
 * the batch). Here every output element is computed the same way whatever
 * T, the tile it falls in or the thread that runs it: 8 lanes accumulate
 * x[i] * w[i] over i = lane (mod 8) with fused multiply-adds, the lanes are
 * summed in one fixed tree, the tail (n_in % 8) is added in order, then the
 * old y (beta 1) and the bias. So results are batch-invariant by
 * construction, and W is streamed once per call (rows of W stay in cache
 * while tiles of 4 rows of x pass over them).
 *
 * Work is split over output columns in chunks of 32 rows of W on the pool
 * (one thread pool for the whole step; OpenBLAS threads would spin beside
 * it). AVX2+FMA is chosen at run time when the CPU has it (the build targets
 * baseline x86-64); elsewhere a portable loop with the same lane structure
 * runs (same per-element arithmetic within one process, which is all the
 * invariance needs).
 */
#include <stdbool.h>

#include "kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_X86 1
#include <immintrin.h>
#endif

#define COL_CHUNK 32 /* rows of W per task: 64-176 KB for n_in 512-1408, L2-resident */

typedef struct lin_ctx {
    float *y;
    const float *x, *w, *b;
    int T, n_in, n_out;
    float beta;
} lin_ctx;

/* Finishes one element from its 8 lane sums: the fixed tree, tail, beta, bias. */
static inline float finish(const float acc[8], const float *x, const float *w, int n8, int n_in,
                           float old, float beta, const float *b, int o) {
    float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    for (int i = n8; i < n_in; i++)
        s += x[i] * w[i];
    if (beta != 0.0f)
        s = old + s;
    if (b != NULL)
        s += b[o];
    return s;
}

static void chunk_generic(const lin_ctx *c, int o0, int o1) {
    int n_in = c->n_in, n8 = n_in & ~7;
    for (int t = 0; t < c->T; t++) {
        const float *xr = c->x + (size_t)t * n_in;
        float *yr = c->y + (size_t)t * c->n_out;
        for (int o = o0; o < o1; o++) {
            const float *wr = c->w + (size_t)o * n_in;
            float acc[8] = {0};
            for (int i = 0; i < n8; i += 8)
                for (int l = 0; l < 8; l++)
                    acc[l] = __builtin_fmaf(xr[i + l], wr[i + l], acc[l]);
            yr[o] = finish(acc, xr, wr, n8, n_in, yr[o], c->beta, c->b, o);
        }
    }
}

#ifdef HAVE_X86

/* Lane sums of one element, finished into y (row t, column o): the tree of
 * finish(), ((l0 + l2) + (l1 + l3)) with l_k = a_k + a_(k+4), in SSE. */
__attribute__((target("avx2,fma"), always_inline)) static inline void put(const lin_ctx *c, int t,
                                                                          int o, __m256 a) {
    int n_in = c->n_in, n8 = n_in & ~7;
    __m128 l = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 m = _mm_add_ps(l, _mm_movehl_ps(l, l));
    float s = _mm_cvtss_f32(_mm_add_ss(m, _mm_shuffle_ps(m, m, 0x55)));
    float *y = c->y + (size_t)t * c->n_out + o;
    if (n8 < n_in) {
        const float *x = c->x + (size_t)t * n_in, *w = c->w + (size_t)o * n_in;
        for (int i = n8; i < n_in; i++)
            s += x[i] * w[i];
    }
    if (c->beta != 0.0f)
        s = *y + s;
    if (c->b != NULL)
        s += c->b[o];
    *y = s;
}

/* Four rows of x by two rows of W: eight accumulators in registers (the
 * compute-bound shape: 8 FMAs per 6 loads). */
__attribute__((target("avx2,fma"))) static void k4x2(const lin_ctx *c, int t, int o) {
    int n_in = c->n_in, n8 = n_in & ~7;
    const float *x0 = c->x + (size_t)t * n_in, *x1 = x0 + n_in, *x2 = x1 + n_in, *x3 = x2 + n_in;
    const float *w0 = c->w + (size_t)o * n_in, *w1 = w0 + n_in;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00,
           a30 = a00, a31 = a00;
    for (int i = 0; i < n8; i += 8) {
        __m256 v0 = _mm256_loadu_ps(w0 + i), v1 = _mm256_loadu_ps(w1 + i), xv;
        xv = _mm256_loadu_ps(x0 + i);
        a00 = _mm256_fmadd_ps(xv, v0, a00);
        a01 = _mm256_fmadd_ps(xv, v1, a01);
        xv = _mm256_loadu_ps(x1 + i);
        a10 = _mm256_fmadd_ps(xv, v0, a10);
        a11 = _mm256_fmadd_ps(xv, v1, a11);
        xv = _mm256_loadu_ps(x2 + i);
        a20 = _mm256_fmadd_ps(xv, v0, a20);
        a21 = _mm256_fmadd_ps(xv, v1, a21);
        xv = _mm256_loadu_ps(x3 + i);
        a30 = _mm256_fmadd_ps(xv, v0, a30);
        a31 = _mm256_fmadd_ps(xv, v1, a31);
    }
    put(c, t, o, a00);
    put(c, t, o + 1, a01);
    put(c, t + 1, o, a10);
    put(c, t + 1, o + 1, a11);
    put(c, t + 2, o, a20);
    put(c, t + 2, o + 1, a21);
    put(c, t + 3, o, a30);
    put(c, t + 3, o + 1, a31);
}

/* One row of x by four rows of W (decode: four independent streams of W). */
__attribute__((target("avx2,fma"))) static void k1x4(const lin_ctx *c, int t, int o) {
    int n_in = c->n_in, n8 = n_in & ~7;
    const float *x0 = c->x + (size_t)t * n_in, *w0 = c->w + (size_t)o * n_in, *w1 = w0 + n_in,
                *w2 = w1 + n_in, *w3 = w2 + n_in;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < n8; i += 8) {
        __m256 xv = _mm256_loadu_ps(x0 + i);
        a0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w0 + i), a0);
        a1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w1 + i), a1);
        a2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w2 + i), a2);
        a3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w3 + i), a3);
    }
    put(c, t, o, a0);
    put(c, t, o + 1, a1);
    put(c, t, o + 2, a2);
    put(c, t, o + 3, a3);
}

__attribute__((target("avx2,fma"))) static void k1x1(const lin_ctx *c, int t, int o) {
    int n_in = c->n_in, n8 = n_in & ~7;
    const float *x0 = c->x + (size_t)t * n_in, *w0 = c->w + (size_t)o * n_in;
    __m256 a = _mm256_setzero_ps();
    for (int i = 0; i < n8; i += 8)
        a = _mm256_fmadd_ps(_mm256_loadu_ps(x0 + i), _mm256_loadu_ps(w0 + i), a);
    put(c, t, o, a);
}

/* Columns [o0, o1) of every row: 4 x 2 tiles, then the rows left one by one. */
__attribute__((target("avx2,fma"))) static void chunk_avx2(const lin_ctx *c, int o0, int o1) {
    int t = 0;
    for (; t + 4 <= c->T; t += 4) {
        int o = o0;
        for (; o + 2 <= o1; o += 2)
            k4x2(c, t, o);
        for (; o < o1; o++)
            for (int r = 0; r < 4; r++)
                k1x1(c, t + r, o);
    }
    for (; t < c->T; t++) {
        int o = o0;
        for (; o + 4 <= o1; o += 4)
            k1x4(c, t, o);
        for (; o < o1; o++)
            k1x1(c, t, o);
    }
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
    for (size_t k = begin; k < end; k++) {
        int o0 = (int)k * COL_CHUNK, o1 = o0 + COL_CHUNK < c->n_out ? o0 + COL_CHUNK : c->n_out;
#ifdef HAVE_X86
        if (have_avx2()) {
            chunk_avx2(c, o0, o1);
            continue;
        }
#endif
        chunk_generic(c, o0, o1);
    }
}

#ifdef HAVE_X86
__attribute__((target("avx2,fma"))) static float dot_avx2(const float *a, const float *b, int n) {
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
    if (T <= 0 || n_out <= 0)
        return;
    lin_ctx c = {y, x, w, b, T, n_in, n_out, beta};
    size_t chunks = ((size_t)n_out + COL_CHUNK - 1) / COL_CHUNK;
    areal_pool_for(p, chunks, 1, lin_tasks, &c);
}
