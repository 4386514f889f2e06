/*
 * k_swiglu.c - the SiLU-gated MLP activation h = silu(g) * u with
 * silu(g) = g * sigmoid(g), and an element-wise add. Both are flat loops
 * split across the pool.
 */
#include <math.h>

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
