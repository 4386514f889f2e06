/*
 * k_rmsnorm.c - RMSNorm as HF Qwen2/Qwen3/Llama compute it:
 * r = 1 / sqrt(mean(x^2) + eps), y = w * (x * r), per row of D.
 *
 * Rows run in parallel; the backward saves r (rstd) from the forward and
 * recomputes x * r. The weight gradient is a sum over rows, done serially in
 * a second pass (a per-thread partial buffer was rejected as not worth it at
 * these sizes: the pass is O(rows * D) with no BLAS-sized work).
 */
#include <math.h>

#include "kernels.h"

typedef struct rms_ctx {
    float *y, *rstd, *dx;
    const float *x, *w, *dy, *rs;
    int D;
    float eps;
} rms_ctx;

static void fwd_rows(void *c, size_t b, size_t e) {
    rms_ctx *k = c;
    int D = k->D;
    for (size_t r = b; r < e; r++) {
        const float *x = k->x + r * D;
        float *y = k->y + r * D;
        double ss = 0;
        for (int i = 0; i < D; i++)
            ss += (double)x[i] * x[i];
        float rs = 1.0f / sqrtf((float)(ss / D) + k->eps);
        if (k->rstd != NULL)
            k->rstd[r] = rs;
        for (int i = 0; i < D; i++)
            y[i] = k->w[i] * (x[i] * rs);
    }
}

void k_rmsnorm_fwd(areal_pool *p, float *y, float *rstd, const float *x, const float *w,
                   size_t rows, int D, float eps) {
    rms_ctx k = {.y = y, .rstd = rstd, .x = x, .w = w, .D = D, .eps = eps};
    areal_pool_for(p, rows, 16, fwd_rows, &k);
}

static void bwd_rows(void *c, size_t b, size_t e) {
    rms_ctx *k = c;
    int D = k->D;
    for (size_t r = b; r < e; r++) {
        const float *x = k->x + r * D, *dy = k->dy + r * D;
        float *dx = k->dx + r * D;
        float rs = k->rs[r];
        double dot = 0; /* sum_i (dy_i w_i) x_i */
        for (int i = 0; i < D; i++)
            dot += (double)dy[i] * k->w[i] * x[i];
        float c2 = (float)(dot / D) * rs * rs * rs;
        for (int i = 0; i < D; i++)
            dx[i] += dy[i] * k->w[i] * rs - x[i] * c2;
    }
}

void k_rmsnorm_bwd(areal_pool *p, float *dx, float *dw, const float *dy, const float *x,
                   const float *w, const float *rstd, size_t rows, int D) {
    rms_ctx k = {.dx = dx, .x = x, .w = w, .dy = dy, .rs = rstd, .D = D};
    areal_pool_for(p, rows, 16, bwd_rows, &k);
    if (dw != NULL)
        for (size_t r = 0; r < rows; r++)
            for (int i = 0; i < D; i++)
                dw[i] += dy[r * D + i] * (x[r * D + i] * rstd[r]);
}
