/*
 * paged.h - the rollout engine's KV cache on the GPU: fixed-size blocks from
 * one pool, a block table per sequence, the append of each decode step's new
 * keys and values, and decode attention (one query row per sequence) over
 * the blocks.
 *
 * Cache layout (both caches): bf16 [n_blocks][block_size][nkv][hd]; key j of
 * sequence b lives in block table[b * max_blocks + j / block_size] at row
 * j % block_size. The table and the lengths are device int32 arrays the
 * caller keeps valid (entries < n_blocks; the kernels trust them, as the CPU
 * engine trusts its own block lists). Twin of worker/model's k_attn_decode
 * over the same keys; kernels/gpu/gpu_test_paged.c checks it.
 *
 * Types: bf16 bit patterns (uint16_t) for q, out, the caches and the new
 * rows. `stream` is a cudaStream_t as void * (NULL: the default stream).
 * Returns AREAL_OK, AREAL_EINVAL (NULL buffer or bad shape, named in err) or
 * AREAL_EIO (the launch failed, with CUDA's reason). Built only where nvcc is.
 */
#ifndef AREAL_KERNELS_PAGED_H
#define AREAL_KERNELS_PAGED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "areal/error.h"

typedef struct areal_k_paged_shape {
    int B;           /* sequences in the step */
    int nh, nkv, hd; /* nh % nkv == 0, hd <= 256 */
    int block_size;  /* rows per block, >= 1 */
    int max_blocks;  /* the block table's row length */
    float scale;
} areal_k_paged_shape;

/* Writes row pos[b] of sequence b: k_new/v_new are [B][nkv * hd]. */
int areal_k_paged_append(uint16_t *k_cache, uint16_t *v_cache, const uint16_t *k_new,
                         const uint16_t *v_new, const int32_t *table, const int32_t *pos,
                         areal_k_paged_shape s, void *stream, areal_error *err);

/* out[b] = softmax(scale q[b] K_b^T) V_b over the n_keys[b] >= 1 keys of
 * sequence b; q and out are [B][nh * hd]. */
int areal_k_paged_decode(uint16_t *out, const uint16_t *q, const uint16_t *k_cache,
                         const uint16_t *v_cache, const int32_t *table, const int32_t *n_keys,
                         areal_k_paged_shape s, void *stream, areal_error *err);

#ifdef __cplusplus
}
#endif

#endif
