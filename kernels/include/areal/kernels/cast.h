/*
 * cast.h - element-type conversions on device buffers: bf16 <-> fp32, the
 * first CUDA kernels (weights arrive in bf16 and the reference path is fp32).
 *
 * Bit-exact twins of lib/base's areal_bf16_to_f32 / areal_f32_to_bf16
 * (areal/dtype.h): round to nearest even, NaN stays a quiet NaN with its top
 * payload bits, and kernels/gpu/gpu_test_kernels.c checks every result against
 * the CPU twin. Plain C header: the stream is a cudaStream_t passed as void *
 * (NULL: the default stream), so callers need no CUDA headers.
 *
 * Built only where nvcc is found (kernels/module.mk).
 */
#ifndef AREAL_KERNELS_CAST_H
#define AREAL_KERNELS_CAST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* areal/error.h is C, without a guard of its own */
#endif

#include "areal/error.h"

/*
 * dst[i] = bf16 src[i] widened to fp32, for i < n; src and dst are device
 * pointers. Enqueued on `stream`; the results are ready once it is synchronised.
 * Returns AREAL_OK, AREAL_EINVAL (a NULL buffer with n > 0) or AREAL_EIO (the
 * launch failed; err names CUDA's reason).
 */
int areal_k_bf16_to_f32(const uint16_t *src, float *dst, size_t n, void *stream, areal_error *err);

/* dst[i] = fp32 src[i] rounded to bf16 (nearest even; NaN quiet). As above. */
int areal_k_f32_to_bf16(const float *src, uint16_t *dst, size_t n, void *stream, areal_error *err);

#ifdef __cplusplus
}
#endif

#endif
