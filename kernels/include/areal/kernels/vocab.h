/*
 * vocab.h - the fused softmax over the vocabulary: per row of bf16 logits,
 * the log-probability of a target token and the entropy of softmax(z / temp),
 * and their backward, in one pass over each row. The caller feeds rows a chunk
 * at a time (the LM-head GEMM of a few thousand rows, then this), so the full
 * [tokens, V] logits never exist at once and never in fp32: only logZ and the
 * entropy (two fp32 per row) are kept for the backward.
 *
 * Twin of the CPU model's log-softmax/entropy (checked in
 * kernels/gpu/gpu_test_vocab.c against a double-precision reference).
 * Device pointers; stream as in layers.h; returns AREAL_OK, AREAL_EINVAL or
 * AREAL_EIO. Built only where nvcc is found.
 */
#ifndef AREAL_KERNELS_VOCAB_H
#define AREAL_KERNELS_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "areal/error.h"

/*
 * For each row r < rows of logits [rows, V] (bf16; row stride ld >= V):
 * z = logits / temp; logz[r] = log sum exp z; logprob[r] = z[target[r]] - logz[r];
 * entropy[r] = -sum p log p (NULL: not computed). temp > 0; every target in [0, V).
 */
int areal_k_logprob_fwd(float *logprob, float *entropy, float *logz, const uint16_t *logits,
                        size_t ld, const int32_t *target, size_t rows, int V, float temp,
                        void *stream, areal_error *err);
/*
 * dlogits[r, :] (bf16, writes) = d(g_lp[r] * logprob[r] + g_ent[r] * entropy[r]) / dlogits,
 * from the forward's logz and entropy: (g_lp (onehot - p) - g_ent p (log p + H)) / temp.
 * g_ent NULL: the entropy term is left out (then entropy may be NULL too).
 */
int areal_k_logprob_bwd(uint16_t *dlogits, const uint16_t *logits, size_t ld, const int32_t *target,
                        const float *logz, const float *entropy, const float *g_lp,
                        const float *g_ent, size_t rows, int V, float temp, void *stream,
                        areal_error *err);

#ifdef __cplusplus
}
#endif

#endif
