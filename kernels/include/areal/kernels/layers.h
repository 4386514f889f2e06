/*
 * layers.h - the element-wise and row-wise layer kernels of the GPU model on
 * device buffers: RMSNorm, RoPE, SwiGLU and the residual add, forward and
 * backward. Twins of worker/model's CPU kernels (k_rmsnorm.c, k_rope.c,
 * k_swiglu.c), with the same shapes and formulas; kernels/gpu/gpu_test_layers.c
 * checks each against them.
 *
 * Types: activations and their gradients are bf16 (uint16_t bit patterns);
 * statistics (rstd), parameter gradients (dw) and the arithmetic are fp32.
 * Unlike the CPU twins, backward *writes* dx (the GPU model keeps one gradient
 * buffer per activation) and *accumulates* dw (+=, fp32). All pointers are
 * device pointers; `stream` is a cudaStream_t as void * (NULL: the default
 * stream); results are ready once the stream is synchronised. Every function
 * returns AREAL_OK, AREAL_EINVAL (a NULL buffer or a bad shape, named in err)
 * or AREAL_EIO (the launch failed, with CUDA's reason).
 *
 * Built only where nvcc is found (kernels/module.mk).
 */
#ifndef AREAL_KERNELS_LAYERS_H
#define AREAL_KERNELS_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "areal/error.h"

/* y[rows,D] = w * x / sqrt(mean(x^2) + eps) per row; rstd[rows] (fp32) receives
 * 1/sqrt(...) for the backward (NULL: not kept). w is bf16 [D]. D >= 1. */
int areal_k_rmsnorm_fwd(uint16_t *y, float *rstd, const uint16_t *x, const uint16_t *w, size_t rows,
                        int D, float eps, void *stream, areal_error *err);
/* dx[rows,D] = (writes) the input gradient; dw[D] += the weight gradient (fp32;
 * NULL: not wanted), from dy, x, w and the forward's rstd. */
int areal_k_rmsnorm_bwd(uint16_t *dx, float *dw, const uint16_t *dy, const uint16_t *x,
                        const uint16_t *w, const float *rstd, size_t rows, int D, void *stream,
                        areal_error *err);

/* Rotate-half RoPE in place on x[T, nh, hd] (hd even): for i < hd/2, angle
 * pos[t] * inv_freq[i] (fp32 [hd/2]). bwd applies the transpose rotation to dx. */
int areal_k_rope_fwd(uint16_t *x, const int32_t *pos, const float *inv_freq, int T, int nh, int hd,
                     void *stream, areal_error *err);
int areal_k_rope_bwd(uint16_t *dx, const int32_t *pos, const float *inv_freq, int T, int nh, int hd,
                     void *stream, areal_error *err);

/* h[n] = silu(g) * u. bwd writes dg, du from dh. */
int areal_k_swiglu_fwd(uint16_t *h, const uint16_t *g, const uint16_t *u, size_t n, void *stream,
                       areal_error *err);
int areal_k_swiglu_bwd(uint16_t *dg, uint16_t *du, const uint16_t *dh, const uint16_t *g,
                       const uint16_t *u, size_t n, void *stream, areal_error *err);

/* y[n] = a + b (the residual add; y may alias a or b). */
int areal_k_add(uint16_t *y, const uint16_t *a, const uint16_t *b, size_t n, void *stream,
                areal_error *err);

#ifdef __cplusplus
}
#endif

#endif
