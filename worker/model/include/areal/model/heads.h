/*
 * heads.h - what RL and SFT losses read off the logits: per-token log
 * probabilities of given tokens, entropy, cross-entropy, and the gradient of
 * any loss written in terms of those back to the logits.
 *
 * All take logits [T, V] (row t predicts targets[t]) and a temperature:
 * the distribution is softmax(logits / temperature), as AReaL recomputes
 * behaviour logprobs. A target < 0 marks a position with no token (its
 * logprob is 0 and it gets no gradient from it). Row log-sum-exps are taken
 * with the maximum subtracted, so no logit overflows.
 */
#ifndef AREAL_MODEL_HEADS_H
#define AREAL_MODEL_HEADS_H

#include <stdint.h>

#include "areal/error.h"
#include "areal/model/pool.h"

/*
 * logp[t] = log softmax(logits[t] / temperature)[targets[t]] (0 when the
 * target is < 0), entropy[t] (nullable) = -sum p log p of that distribution.
 * temperature must be > 0.
 */
void areal_token_logprobs(areal_pool *p, const float *logits, int T, int V, const int32_t *targets,
                          float temperature, float *logp, float *entropy);

/*
 * Writes dlogits [T, V] for a loss with dL/dlogp[t] = dlogp[t] and
 * dL/dentropy[t] = dentropy[t] (either array nullable: zero).
 */
void areal_token_logprobs_backward(areal_pool *p, const float *logits, int T, int V,
                                   const int32_t *targets, float temperature, const float *dlogp,
                                   const float *dentropy, float *dlogits);

/*
 * *loss = mean cross-entropy over the positions with targets >= 0
 * (temperature 1; 0 when there are none); writes its gradient into dlogits
 * (nullable). Returns 0 or AREAL_ENOMEM.
 */
int areal_cross_entropy(areal_pool *p, const float *logits, int T, int V, const int32_t *targets,
                        double *loss, float *dlogits, areal_error *err);

#endif
