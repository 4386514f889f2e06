/*
 * gemm.h - bf16 matrix products with fp32 accumulation through cuBLASLt, in
 * row-major terms (the layout of every tensor of the model):
 *     C[M,N] = alpha * op(A) op(B) + beta * C (+ bias[N] per column)
 * with op(A) [M,K] (A stored [M,K], or [K,M] when trans_a), op(B) [K,N] (B
 * stored [K,N], or [N,K] when trans_b - nn.Linear's weight: y = x W^T is
 * trans_b = 1). C is bf16 or fp32 (fp32 for weight gradients accumulated with
 * beta = 1). The handle owns a cuBLASLt handle and a workspace; one per
 * stream/thread.
 *
 * Checked in kernels/gpu/gpu_test_gemm.c against a double-precision product
 * of the same bf16 inputs. Device pointers; returns AREAL_OK, AREAL_EINVAL,
 * AREAL_ENOMEM or AREAL_EIO (cuBLASLt's status named). Built only where nvcc
 * and cuBLASLt are found (kernels/module.mk).
 */
#ifndef AREAL_KERNELS_GEMM_H
#define AREAL_KERNELS_GEMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "areal/error.h"

typedef struct areal_k_gemm areal_k_gemm;

/* A handle with a workspace of `workspace` bytes (0: 32 MiB, what Hopper's
 * fastest kernels ask for). *out is NULL on failure. */
int areal_k_gemm_create(size_t workspace, areal_k_gemm **out, areal_error *err);
/* Frees the handle; NULL is a no-op. The caller synchronises its streams first. */
void areal_k_gemm_destroy(areal_k_gemm *g);

typedef enum areal_k_gemm_out { AREAL_K_OUT_BF16 = 0, AREAL_K_OUT_F32 = 1 } areal_k_gemm_out;

typedef struct areal_k_gemm_args {
    int M, N, K;
    int trans_a, trans_b;
    const uint16_t *A; /* bf16; row stride lda (0: the packed width) */
    const uint16_t *B; /* bf16; row stride ldb (0: packed) */
    void *C;           /* bf16 or fp32 per c_type; row stride ldc (0: N) */
    size_t lda, ldb, ldc;
    areal_k_gemm_out c_type;
    float alpha, beta;
    const uint16_t *bias; /* bf16 [N] added to every row (NULL: none); bf16 C only */
} areal_k_gemm_args;

/* Enqueues the product on `stream` (cudaStream_t as void *). M, N, K >= 1. */
int areal_k_gemm_run(areal_k_gemm *g, const areal_k_gemm_args *a, void *stream, areal_error *err);

#ifdef __cplusplus
}
#endif

#endif
