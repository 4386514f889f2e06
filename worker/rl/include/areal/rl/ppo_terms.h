/*
 * ppo_terms.h - the decoupled PPO loss split into what does not depend on
 * the policy's log-probabilities (computed here, on the host, once per
 * micro-batch) and what does (the per-token surrogate, computed where the
 * logits are: areal/kernels/ppo.h fuses it with the vocabulary softmax).
 *
 * The behaviour weight and the rejection mask read only pi_prox and
 * pi_behave, and the token-level denominator only the loss mask, so for
 * token-level ratios the loss of areal_ppo_actor_loss (areal/rl/loss.h) is
 * exactly   loss = sum_t coef * w_t * pg(logp_t - prox_t, adv_t)
 * with the w_t and coef below. Sequence-level ratios (GSPO) couple a whole
 * sequence's log-probabilities and are refused here.
 */
#ifndef AREAL_RL_PPO_TERMS_H
#define AREAL_RL_PPO_TERMS_H

#include <stdint.h>

#include "areal/error.h"
#include "areal/rl/loss.h"

typedef struct areal_ppo_terms {
    float clip_lo, clip_hi; /* 1 - eps_clip, 1 + eps_clip_higher (or eps_clip) */
    float c_clip;           /* the dual clip bound, or 0 without one */
    double coef;            /* opts->scale / max(1, n_valid) */
    long n_valid;           /* loss-mask tokens (before rejection) */
} areal_ppo_terms;

/*
 * The per-token weight w[T] (the behaviour weight exp(prox - behav) as
 * rejection sampling leaves it on a kept token, 1 without rejection
 * sampling, 0 on a token outside the loss: mask 0 or rejected) and the
 * scalars, for the same arguments areal_ppo_actor_loss takes (behav may be
 * NULL without rejection sampling). Returns AREAL_OK, or AREAL_EINVAL for bad
 * options, a bad layout, sequence-level ratios, or a non-finite prox / adv
 * under the mask (named); AREAL_ENOMEM.
 */
int areal_ppo_token_terms(const float *prox, const float *behav, const float *adv,
                          const float *mask, int T, const int64_t *cu_seqlens, int n_seqs,
                          const areal_ppo_loss_opts *opts, float *w, areal_ppo_terms *out,
                          areal_error *err);

#endif
