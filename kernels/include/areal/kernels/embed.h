/*
 * embed.h - the token embedding on device buffers (gather forward, scatter-add
 * backward) and a seeded uniform fill for benchmarks that need weights
 * without a checkpoint. Twin of the CPU model's embedding rows
 * (worker/model/src/model_fwd.c copies row tokens[t]; model_bwd.c adds
 * dres[t] into that row's gradient); worker/gpu's gpu_test_model checks both
 * through the whole model's loss and embedding gradient.
 *
 * Types: the table and activations are bf16 bit patterns (uint16_t); the
 * table's gradient is fp32 (accumulated with atomics: token ids repeat).
 * Device pointers; `stream` a cudaStream_t as void * (NULL: the default
 * stream). Returns AREAL_OK, AREAL_EINVAL (NULL buffer or bad shape, named in
 * err) or AREAL_EIO (the launch failed). Ids are trusted (the caller checked
 * them against the vocabulary, as areal_batch_check does). Built only where
 * nvcc is found.
 */
#ifndef AREAL_KERNELS_EMBED_H
#define AREAL_KERNELS_EMBED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "areal/error.h"

/* y[t, :] = table[tok[t], :] for t < T (rows of H). */
int areal_k_embed_fwd(uint16_t *y, const uint16_t *table, const int32_t *tok, int T, int H,
                      void *stream, areal_error *err);

/* dtable[tok[t], :] += dy[t, :] (fp32 atomics; the order of the adds is not fixed). */
int areal_k_embed_bwd(float *dtable, const uint16_t *dy, const int32_t *tok, int T, int H,
                      void *stream, areal_error *err);

/* x[i] = a uniform value in [-a, a) from a hash of (seed, i): reproducible, for i < n. */
int areal_k_fill_uniform(float *x, size_t n, uint64_t seed, float a, void *stream,
                         areal_error *err);

#ifdef __cplusplus
}
#endif

#endif
