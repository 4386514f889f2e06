/*
 * optim.h - the optimizer step on device buffers: the global gradient norm,
 * clipping, and AdamW on fp32 master weights that also refreshes their bf16
 * copies (the weights the forward reads). No host round trip: the norm and
 * the clip factor stay on the device and AdamW reads the factor from there.
 *
 * Semantics are PyTorch's: torch.nn.utils.clip_grad_norm_ (factor
 * min(1, max_norm / (norm + 1e-6))) and torch.optim.AdamW (decoupled weight
 * decay p -= lr * wd * p, bias-corrected moments). Checked in
 * kernels/gpu/gpu_test_optim.c against a double-precision reference.
 * Device pointers; stream as in layers.h; returns AREAL_OK, AREAL_EINVAL or
 * AREAL_EIO. Built only where nvcc is found.
 */
#ifndef AREAL_KERNELS_OPTIM_H
#define AREAL_KERNELS_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "areal/error.h"

/* *acc += sum_i g[i]^2 (fp32 g [n], one double on the device). Zero *acc before
 * the first tensor, then call once per gradient tensor. */
int areal_k_sumsq(const float *g, size_t n, double *acc, void *stream, areal_error *err);

/* From *acc (the sum of squares): *norm = sqrt(*acc) and *scale = min(1,
 * max_norm / (*norm + 1e-6)); max_norm <= 0 means no clipping (*scale = 1).
 * norm may be NULL. All three are device pointers. */
int areal_k_clip_scale(const double *acc, float max_norm, float *scale, float *norm, void *stream,
                       areal_error *err);

typedef struct areal_k_adamw_cfg {
    float lr, beta1, beta2, eps, weight_decay;
    int step; /* 1 for the first step (bias correction) */
} areal_k_adamw_cfg;

/*
 * One AdamW step over n parameters: g = grad * (*scale) (scale NULL: 1);
 * m, v (fp32) updated; master (fp32) updated; bf16 (NULL: not kept) = master
 * rounded to bf16. step >= 1, lr >= 0, 0 <= beta < 1, eps > 0.
 */
int areal_k_adamw(float *master, uint16_t *bf16, const float *grad, float *m, float *v, size_t n,
                  const float *scale, areal_k_adamw_cfg cfg, void *stream, areal_error *err);

#ifdef __cplusplus
}
#endif

#endif
