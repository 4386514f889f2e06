/*
 * k_swiglu.c - the SiLU-gated MLP activation h = silu(g) * u with
 * silu(g) = g * sigmoid(g), and an element-wise add. Both are flat loops
 * split across the pool.
 *
 * The KV-cache paths take k_swiglu_infer: the same formula with exp from
 * k_vexp.h, eight lanes at a time (libm's scalar expf was 5% of the rollout
 * server's CPU at 128 requests). Training keeps libm's expf, so its numbers
 * do not move; the two differ by about 1 ulp of exp, far inside the 1e-5 the
 * inference logprobs are held to against a training forward.
 */
#include <math.h>

#include "k_vexp.h"
#include "kernels.h"

typedef struct sw_ctx {
    float *h, *dg, *du;
    const float *g, *u, *dh;
} sw_ctx;

static void fwd_range(void *c, size_t b, size_t e) {
    sw_ctx *k = c;
    for (size_t i = b; i < e; i++) {
        float g = k->g[i];
        k->h[i] = g / (1.0f + expf(-g)) * k->u[i];
    }
}

void k_swiglu_fwd(areal_pool *p, float *h, const float *g, const float *u, size_t n) {
    sw_ctx k = {.h = h, .g = g, .u = u};
    areal_pool_for(p, n, 4096, fwd_range, &k);
}

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

static void bwd_range(void *c, size_t b, size_t e) {
    sw_ctx *k = c;
    for (size_t i = b; i < e; i++) {
        float g = k->g[i], s = 1.0f / (1.0f + expf(-g));
        float dh = k->dh[i];
        k->du[i] = dh * g * s;
        k->dg[i] = dh * k->u[i] * s * (1.0f + g * (1.0f - s));
    }
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
