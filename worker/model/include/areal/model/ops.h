/*
 * ops.h - the kernel ops table the model's layers call through: one
 * implementation per device, chosen when the model is made, so the layer code
 * (model_fwd.c, model_bwd.c, moe.c) is written once for the CPU fp32
 * reference and for the coming CUDA kernels (kernels/).
 *
 * Every entry takes the implementation's context first (the CPU one: the
 * model's areal_pool, NULL for serial; a CUDA one: its stream and handles)
 * and buffers of the implementation's memory. Shapes and the accumulate /
 * overwrite rules are those of the CPU kernels (model/src/kernels.h): row-
 * major floats, nn.Linear's [out, in] weights, forwards write their outputs,
 * backwards add (+=) into parameter and input gradients unless the entry says
 * it writes. Rejected: a switch on a device enum in each layer (every new
 * kernel would edit the layers) and function pointers per layer (the layers
 * share kernels).
 */
#ifndef AREAL_MODEL_OPS_H
#define AREAL_MODEL_OPS_H

#include <stddef.h>
#include <stdint.h>

/* Attention shape: query heads, key/value heads, head size, score scale. */
typedef struct areal_attn_dims {
    int nh, nkv, hd;
    float scale;
} areal_attn_dims;

typedef struct areal_ops {
    const char *name; /* "cpu" */
    /* y[T,O] = x[T,I] W^T (+ b); beta 0 overwrites y, 1 adds to it */
    void (*linear_fwd)(void *ctx, float *y, const float *x, const float *w, const float *b, int T,
                       int n_in, int n_out, float beta);
    /* dx[T,I] += dy W, dw[O,I] += dy^T x, db[O] += sum_t dy (each when not NULL) */
    void (*linear_bwd)(void *ctx, float *dx, float *dw, float *db, const float *dy, const float *x,
                       const float *w, int T, int n_in, int n_out);
    /* HF RMSNorm over rows of D: y = w * x * rstd; rstd[rows] saved */
    void (*rmsnorm_fwd)(void *ctx, float *y, float *rstd, const float *x, const float *w,
                        size_t rows, int D, float eps);
    void (*rmsnorm_bwd)(void *ctx, float *dx, float *dw, const float *dy, const float *x,
                        const float *w, const float *rstd, size_t rows, int D);
    /* rotate-half RoPE in place on x[T, nh, hd] at positions pos[T]; bwd: the transpose */
    void (*rope_fwd)(void *ctx, float *x, const int32_t *pos, const float *inv_freq, int T, int nh,
                     int hd);
    void (*rope_bwd)(void *ctx, float *dx, const int32_t *pos, const float *inv_freq, int T, int nh,
                     int hd);
    /* causal GQA attention per packed sequence; att saved at att_off (the CPU layout) */
    void (*attn_fwd)(void *ctx, float *out, float *att, const float *q, const float *k,
                     const float *v, const int32_t *cu, int n_seqs, const size_t *att_off,
                     areal_attn_dims d);
    void (*attn_bwd)(void *ctx, float *dq, float *dk, float *dv, const float *dout,
                     const float *att, const float *q, const float *k, const float *v,
                     const int32_t *cu, int n_seqs, const size_t *att_off, areal_attn_dims d,
                     float *scratch);
    /* h = silu(g) * u over n; bwd writes dg, du */
    void (*swiglu_fwd)(void *ctx, float *h, const float *g, const float *u, size_t n);
    void (*swiglu_bwd)(void *ctx, float *dg, float *du, const float *dh, const float *g,
                       const float *u, size_t n);
    /* y = a + b over n */
    void (*add)(void *ctx, float *y, const float *a, const float *b, size_t n);
} areal_ops;

/* The CPU fp32 implementation (OpenBLAS products, element-wise loops on the pool). */
const areal_ops *areal_ops_cpu(void);

#endif
