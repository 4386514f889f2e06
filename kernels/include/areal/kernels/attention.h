/*
 * attention.h - causal grouped-query attention over packed variable-length
 * sequences on device buffers, forward and backward, flash-style: the L x L
 * probabilities are never stored; the forward keeps one fp32 log-sum-exp per
 * (token, head) and the backward recomputes the probabilities from it.
 *
 * Twin of worker/model's k_attention.c (which keeps P and runs on BLAS); the
 * shapes and the packing (cu_seqlens) are the same: q [T, nh*hd], k and v
 * [T, nkv*hd], out [T, nh*hd], token t of sequence s at row cu[s] + i, keys of
 * a query limited to its own sequence and to j <= i. nh % nkv == 0 (GQA:
 * query head h reads KV head h / (nh / nkv)). hd <= 256.
 *
 * Why our own kernels and not cuDNN's SDPA: cuDNN's fused attention is only
 * reachable through its graph API (the C++ cudnn-frontend, not in the
 * registry's wheels, or several hundred lines of backend descriptors per
 * graph), and its varlen ("ragged") support needs padded batch offsets
 * (k_attention_tc.cu's top comment has the whole case).
 *
 * Three pairs: areal_k_attn_fwd / _bwd pick the kernels (what callers use);
 * areal_k_attn_tc_* are the tensor-core kernels (bf16 mma.sync, fp32
 * accumulation, FlashAttention-2 style; hd 64 and 128 with 16-byte aligned
 * buffers only, see attention_plan.h); areal_k_attn_ref_* the scalar ones
 * (any hd up to 256: the reference and the fallback). All three compute the
 * same function and share lse and delta conventions, so a forward of one and
 * a backward of another agree.
 *
 * Types: q, k, v, out, dout, dq, dk, dv are bf16 bit patterns (uint16_t);
 * lse and the scratch are fp32; cu (int32, n_seqs + 1 entries) is a device
 * array. Backward *writes* dq, dk and dv. `stream` is a cudaStream_t as
 * void * (NULL: the default stream). Each function returns AREAL_OK,
 * AREAL_EINVAL (a NULL buffer or bad shape, named in err) or AREAL_EIO (the
 * launch failed, with CUDA's reason). Built only where nvcc is found.
 */
#ifndef AREAL_KERNELS_ATTENTION_H
#define AREAL_KERNELS_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "areal/error.h"

typedef struct areal_k_attn_shape {
    int T;       /* packed tokens */
    int n_seqs;  /* sequences in cu */
    int max_len; /* max over s of cu[s+1] - cu[s] (sizes the grid) */
    int nh, nkv, hd;
    float scale; /* usually 1 / sqrt(hd) */
} areal_k_attn_shape;

/* out = softmax(scale q k^T, causal, per sequence) v; lse[t * nh + h] = the
 * natural log of the softmax's denominator (with the max folded in). The
 * tensor-core kernels where they serve s and the buffers, else the scalar. */
int areal_k_attn_fwd(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k,
                     const uint16_t *v, const int32_t *cu, areal_k_attn_shape s, void *stream,
                     areal_error *err);

/* dq, dk, dv from dout and the forward's out and lse. `delta` is fp32 scratch
 * of T * nh floats (rowsum(dout * out) per token and head). */
int areal_k_attn_bwd(uint16_t *dq, uint16_t *dk, uint16_t *dv, float *delta, const uint16_t *dout,
                     const uint16_t *out, const float *lse, const uint16_t *q, const uint16_t *k,
                     const uint16_t *v, const int32_t *cu, areal_k_attn_shape s, void *stream,
                     areal_error *err);

/* the tensor-core kernels alone: as above, but AREAL_EINVAL (naming the
 * reason) when hd is not 64 or 128 or a buffer is not 16-byte aligned */
int areal_k_attn_tc_fwd(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k,
                        const uint16_t *v, const int32_t *cu, areal_k_attn_shape s, void *stream,
                        areal_error *err);
int areal_k_attn_tc_bwd(uint16_t *dq, uint16_t *dk, uint16_t *dv, float *delta,
                        const uint16_t *dout, const uint16_t *out, const float *lse,
                        const uint16_t *q, const uint16_t *k, const uint16_t *v, const int32_t *cu,
                        areal_k_attn_shape s, void *stream, areal_error *err);

/* the scalar kernels alone (any hd in 1..256) */
int areal_k_attn_ref_fwd(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, const int32_t *cu, areal_k_attn_shape s, void *stream,
                         areal_error *err);
int areal_k_attn_ref_bwd(uint16_t *dq, uint16_t *dk, uint16_t *dv, float *delta,
                         const uint16_t *dout, const uint16_t *out, const float *lse,
                         const uint16_t *q, const uint16_t *k, const uint16_t *v, const int32_t *cu,
                         areal_k_attn_shape s, void *stream, areal_error *err);

#ifdef __cplusplus
}
#endif

#endif
