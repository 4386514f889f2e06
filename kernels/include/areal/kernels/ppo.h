/*
 * ppo.h - the decoupled PPO (GRPO) actor loss fused with the vocabulary's
 * log-softmax: per row of bf16 logits, the log-probability of its target,
 * the token's clipped surrogate loss and its gradient dlogits, in one kernel
 * that reads the row twice (softmax, then backward) and writes it once. The
 * full [tokens, V] logits never exist at once (the caller feeds the LM head's
 * chunks) and never in fp32.
 *
 * Semantics per token (AReaL's ppo_actor_loss_fn, the CPU twin is
 * areal_ppo_actor_loss in worker/rl; the per-token terms come from
 * areal_ppo_token_terms, areal/rl/ppo_terms.h):
 *   lp = z[target] - logsumexp(z), z = logits / temp
 *   r = exp(lp - prox);  pg = max(-A r, -A clamp(r, lo, hi))
 *   dual clip (c_clip > 1): pg = min(pg, sign(A) c_clip A)
 *   tok_loss = coef * w * pg,  d tok_loss / d lp = coef * w * dpg/dr * r
 * where w is the token's behaviour importance weight (already capped or
 * masked by the caller's rejection sampling) and 0 for a token outside the
 * loss, and coef = scale / max(1, n_valid) (token-level aggregation). Ties of
 * max/min split the gradient evenly and clamp passes it at its bounds, as
 * torch's autograd and the CPU loss do. Sequence-level ratios (GSPO) need a
 * whole sequence's log-probabilities before any gradient: not fused here (the
 * GPU model refuses them).
 *
 * Device pointers; stream as in layers.h; returns AREAL_OK, AREAL_EINVAL or
 * AREAL_EIO. Built only where nvcc is found.
 */
#ifndef AREAL_KERNELS_PPO_H
#define AREAL_KERNELS_PPO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "areal/error.h"

typedef struct areal_k_ppo_cfg {
    float clip_lo, clip_hi; /* 1 - eps_clip, 1 + eps_clip_higher: 0 <= lo <= 1 <= hi */
    float c_clip;           /* dual clip bound (> 1), or 0: none */
    float coef;             /* multiplies every token's loss and gradient */
    float temp;             /* > 0 */
} areal_k_ppo_cfg;

/*
 * For each row r < rows of logits [rows, V] (bf16, row stride ld >= V):
 * logprob[r], tok_loss[r] (NULL: not written) and dlogits[r, :] (bf16, stride
 * ld; may alias logits: each row is read before it is written) as above, from
 * prox[r], adv[r], w[r] (fp32). Every target in [0, V).
 */
int areal_k_ppo_logprob(uint16_t *dlogits, float *logprob, float *tok_loss, const uint16_t *logits,
                        size_t ld, const int32_t *target, const float *prox, const float *adv,
                        const float *w, size_t rows, int V, areal_k_ppo_cfg cfg, void *stream,
                        areal_error *err);

#ifdef __cplusplus
}
#endif

#endif
