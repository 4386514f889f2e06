/*
 * sample.h - next-token sampling on the device for the rollout engine:
 * temperature, top-k, top-p, and the log-probability of the chosen token,
 * one row of bf16 logits per sequence of the decode batch.
 *
 * Per row r (logits [rows, V], row stride ld >= V):
 *   temp <= 0: greedy (the lowest index among the maxima); logprob under temp 1.
 *   else z = logits / temp; kept = tokens with logit >= tau_k (top_k > 0; tau_k
 *   the k-th largest logit, so ties at the cut are all kept), then of those the
 *   smallest prefix by logit whose mass is >= top_p of theirs (top_p < 1; ties
 *   at the cut kept); the token is drawn from the kept tokens renormalised,
 *   using u[r] in [0, 1) supplied by the caller (so runs are reproducible and
 *   the CPU can check them): the first kept token, in index order, whose
 *   cumulative mass exceeds u * kept mass.
 *   logprob[r] = log softmax(z)[token] over the *whole* vocabulary (the policy's
 *   log-probability that the trainer recomputes), kept[r] (NULL: not wanted) =
 *   the number of kept tokens.
 * Checked in kernels/gpu/gpu_test_sample.c against a CPU reference of this
 * rule. Device pointers; stream as in layers.h; returns AREAL_OK, AREAL_EINVAL
 * or AREAL_EIO. Built only where nvcc is found.
 */
#ifndef AREAL_KERNELS_SAMPLE_H
#define AREAL_KERNELS_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "areal/error.h"

typedef struct areal_k_sample_cfg {
    float temp;  /* <= 0: greedy */
    int top_k;   /* <= 0 or >= V: off */
    float top_p; /* >= 1: off; (0, 1) keeps the nucleus */
} areal_k_sample_cfg;

int areal_k_sample(int32_t *token, float *logprob, int32_t *kept, const uint16_t *logits, size_t ld,
                   const float *u, size_t rows, int V, areal_k_sample_cfg cfg, void *stream,
                   areal_error *err);

#ifdef __cplusplus
}
#endif

#endif
