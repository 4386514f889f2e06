/*
 * k_swiglu.c - the SiLU-gated MLP activation h = silu(g) * u with
 * silu(g) = g * sigmoid(g), and an element-wise add. Both are flat loops
 * split across the pool.
 *
 * Every path takes exp from k_vexp.h, eight lanes at a time: libm's scalar
 * expf was 5% of the rollout server's CPU at 128 requests, and (forward and
 * backward together) ~4% of the bench model's training step. The forward is
 * one kernel for training and the KV-cache paths (k_swiglu_fwd is
 * k_swiglu_infer), so a training forward and an inference step activate
 * bit for bit alike; the vector exp is ~1 ulp from libm's, far inside the
 * 1e-4 the training step is held to against torch. The scalar tails run the
 * lane arithmetic (exp_lane), so a row's numbers do not depend on where the
 * eight-lane body ends.
 */
#include <math.h>

#include "k_vexp.h"
#include "kernels.h"

typedef struct sw_ctx {
    float *h, *dg, *du;
    const float *g, *u, *dh;
} sw_ctx;

static float silu_mul_lane(float g, float u) {
    return g / (1.0f + exp_lane(-g)) * u;
}

#ifdef KV_HAVE_X86
__attribute__((target("avx2,fma"))) static void infer_avx2(float *h, const float *g, const float *u,
                                                           size_t b, size_t e) {
    __m256 one = _mm256_set1_ps(1.0f), neg = _mm256_set1_ps(-0.0f);
    size_t i = b;
    for (; i + 8 <= e; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i);
        __m256 d = _mm256_add_ps(one, exp_avx2(_mm256_xor_ps(gv, neg)));
        _mm256_storeu_ps(h + i, _mm256_mul_ps(_mm256_div_ps(gv, d), _mm256_loadu_ps(u + i)));
    }
    for (; i < e; i++)
        h[i] = silu_mul_lane(g[i], u[i]);
}
#endif

static void infer_range(void *c, size_t b, size_t e) {
    sw_ctx *k = c;
#ifdef KV_HAVE_X86
    if (kv_have_avx2()) {
        infer_avx2(k->h, k->g, k->u, b, e);
        return;
    }
#endif
    for (size_t i = b; i < e; i++)
        k->h[i] = silu_mul_lane(k->g[i], k->u[i]);
}

void k_swiglu_infer(areal_pool *p, float *h, const float *g, const float *u, size_t n) {
    sw_ctx k = {.h = h, .g = g, .u = u};
    areal_pool_for(p, n, 4096, infer_range, &k);
}

void k_swiglu_fwd(areal_pool *p, float *h, const float *g, const float *u, size_t n) {
    k_swiglu_infer(p, h, g, u, n);
}

/* One element of the backward: s = sigmoid(g), du = dh g s, dg = dh u s (1 + g (1 - s)). */
static void bwd_lane(sw_ctx *k, size_t i) {
    float g = k->g[i], s = 1.0f / (1.0f + exp_lane(-g));
    float dh = k->dh[i];
    k->du[i] = dh * g * s;
    k->dg[i] = dh * k->u[i] * s * (1.0f + g * (1.0f - s));
}

#ifdef KV_HAVE_X86
/* bwd_lane eight at a time, the same operations in the same order; returns the tail's start. */
__attribute__((target("avx2,fma"))) static size_t bwd_avx2(sw_ctx *k, size_t b, size_t e) {
    __m256 one = _mm256_set1_ps(1.0f), neg = _mm256_set1_ps(-0.0f);
    size_t i = b;
    for (; i + 8 <= e; i += 8) {
        __m256 g = _mm256_loadu_ps(k->g + i), dh = _mm256_loadu_ps(k->dh + i);
        __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, exp_avx2(_mm256_xor_ps(g, neg))));
        _mm256_storeu_ps(k->du + i, _mm256_mul_ps(_mm256_mul_ps(dh, g), s));
        __m256 t = _mm256_mul_ps(_mm256_mul_ps(dh, _mm256_loadu_ps(k->u + i)), s);
        __m256 f = _mm256_add_ps(one, _mm256_mul_ps(g, _mm256_sub_ps(one, s)));
        _mm256_storeu_ps(k->dg + i, _mm256_mul_ps(t, f));
    }
    return i;
}
#endif

static void bwd_range(void *c, size_t b, size_t e) {
    sw_ctx *k = c;
#ifdef KV_HAVE_X86
    if (kv_have_avx2())
        b = bwd_avx2(k, b, e);
#endif
    for (size_t i = b; i < e; i++)
        bwd_lane(k, i);
}

void k_swiglu_bwd(areal_pool *p, float *dg, float *du, const float *dh, const float *g,
                  const float *u, size_t n) {
    sw_ctx k = {.dg = dg, .du = du, .g = g, .u = u, .dh = dh};
    areal_pool_for(p, n, 4096, bwd_range, &k);
}

typedef struct add_ctx {
    float *y;
    const float *a, *b;
} add_ctx;

static void add_range(void *c, size_t b, size_t e) {
    add_ctx *k = c;
    for (size_t i = b; i < e; i++)
        k->y[i] = k->a[i] + k->b[i];
}

void k_add(areal_pool *p, float *y, const float *a, const float *b, size_t n) {
    add_ctx k = {y, a, b};
    areal_pool_for(p, n, 4096, add_range, &k);
}
