/*
 * attention_plan.h - the host-side half of the tensor-core attention
 * (kernels/src/k_attention_tc.cu): which shapes it serves, its tiles, grids
 * and shared memory, the cu_seqlens check and the FLOP count the benches
 * use. Plain C with no CUDA types, so `make test` checks it on a machine
 * without a GPU (tests/test_attn_plan.c); the .cu file static_asserts that
 * its tiles are these.
 *
 * The tensor-core kernels serve hd 64 and 128 only (one template instance
 * each: the head dimension is the inner loop of every mma tile, and the two
 * sizes are the Qwen2/Qwen3 ones); any other hd goes to the scalar kernel
 * (areal_k_attn_ref_fwd / _bwd in attention.h), which stays the reference.
 */
#ifndef AREAL_KERNELS_ATTENTION_PLAN_H
#define AREAL_KERNELS_ATTENTION_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/kernels/attention.h"

#ifdef __cplusplus
extern "C" {
#endif

/* tiles (rows of queries / keys per block; the backward's dK/dV kernel walks
 * query tiles of AREAL_K_ATTN_TC_BQ rows to keep its accumulators in
 * registers) and threads per block (4 warps, 16 rows each) */
#define AREAL_K_ATTN_TC_BM      64
#define AREAL_K_ATTN_TC_BN      64
#define AREAL_K_ATTN_TC_BQ      32
#define AREAL_K_ATTN_TC_THREADS 128
/* shared-memory rows are padded by 8 bf16 (16 bytes): row g and row g + 1 of
 * a fragment load then start 4 banks apart, so a warp's loads hit 32 banks */
#define AREAL_K_ATTN_TC_PAD 8

typedef struct areal_k_attn_plan {
    int tc;          /* 1: the tensor-core kernels serve this shape; 0: the scalar ones */
    const char *why; /* when tc is 0: why not (static text) */
    unsigned grid_fwd[3], grid_dkdv[3], grid_dq[3]; /* x: tiles, y: heads, z: sequences */
    size_t smem_fwd, smem_dkdv, smem_dq;            /* dynamic shared memory, bytes */
} areal_k_attn_plan;

/* The plan of shape s. AREAL_OK with p->tc 1 (tensor cores) or 0 (p->why
 * says why the scalar kernel serves it); AREAL_EINVAL when s is no valid
 * shape at all (err names the field). Only reads s. */
int areal_k_attn_plan_make(areal_k_attn_shape s, areal_k_attn_plan *p, areal_error *err);

/* Whether a host copy of cu (n_seqs + 1 offsets) packs s: cu[0] == 0, no
 * length negative, cu[n_seqs] == s.T and s.max_len >= every length.
 * AREAL_OK or AREAL_EINVAL naming the first bad entry and the fix. The
 * kernels read cu on the device and cannot check it; a caller that has the
 * host copy (the GPU model builds it) checks it here once per batch. */
int areal_k_attn_check_cu(const int32_t *cu, areal_k_attn_shape s, areal_error *err);

/* FlashAttention's FLOP count for causal attention over the sequences of a
 * host cu: forward 4 * sum_s len_s^2 / 2 * nh * hd (QK^T and PV over the
 * causal half, as FlashAttention's benchmarks count it); the backward is 2.5 times it
 * (five products instead of two). */
double areal_k_attn_flops_fwd(const int32_t *cu, int n_seqs, int nh, int hd);

#ifdef __cplusplus
}
#endif

#endif
