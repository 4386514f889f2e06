/*
 * loss.h - AReaL's decoupled PPO actor loss (ppo_actor_loss_fn and
 * apply_rejection_sampling, areal/utils/functional/functional.py) on one
 * packed micro-batch, with its exact gradient dloss/dlogprob per token, and
 * the token-level aggregation of AReaL's train engine across micro-batches
 * and DP ranks (areal/engine/fsdp_engine.py, §4.3 of the reference):
 *
 *   micro-batch loss  L_mb = sum_t mask_t * l_t / max(1, n_valid_mb)
 *   engine scale      s_mb = n_valid_mb / n_valid_global * dp_size
 *
 * where n_valid_* count the loss mask before rejection sampling and
 * n_valid_global sums every micro-batch of the PPO minibatch on every DP
 * rank (an all-reduce). Backpropagating s_mb * L_mb on each micro-batch and
 * averaging gradients over the DP group gives sum(all token losses) /
 * n_valid_global. dlogp is then chained into the model's backward through
 * areal_token_logprobs_backward (areal/model/heads.h).
 *
 * Per token, r = exp(logp - prox) (GSPO: exp of the sequence mean), the
 * surrogate max(-A r, -A clip(r, 1-eps, 1+eps_high)), optionally min'ed with
 * c_clip*|A| (dual clip), times the behaviour weight w = exp(prox - behav)
 * when rejection sampling is configured (masked or clamped per its config).
 * Gradients follow torch's autograd, ties of max/min split evenly, clamp
 * passing the gradient at its bounds.
 */
#ifndef AREAL_RL_LOSS_H
#define AREAL_RL_LOSS_H

#include <stdbool.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/rl/config.h"

typedef struct areal_ppo_loss_opts {
    double eps_clip;
    bool has_eps_clip_higher; /* false: upper clip 1 + eps_clip */
    double eps_clip_higher;
    bool has_c_clip; /* dual clip; c_clip > 1 */
    double c_clip;
    const areal_rejection_config *rejection; /* NULL or !enabled: no behaviour weight */
    bool sequence_level;                     /* importance_sampling_level "sequence" (GSPO) */
    double scale; /* multiplies loss and dlogp: areal_ppo_mb_scale(); 1 = raw */
} areal_ppo_loss_opts;

/* Options from the actor config (scale 1). */
areal_ppo_loss_opts areal_ppo_loss_opts_from(const areal_actor_config *cfg);

/*
 * Sums over one micro-batch, so that micro-batches and ranks add up:
 * divide a sum by its count for AReaL's logged mean.
 */
typedef struct areal_ppo_loss_stats {
    double loss;    /* the micro-batch loss (scaled) */
    long n_valid;   /* loss-mask tokens before rejection (AReaL n_valid_tokens) */
    long n_kept;    /* after rejection (mask action) */
    long n_clipped; /* clip_mask: -A r < -A clip(r), kept tokens */
    long n_dual_clipped;
    double ratio_sum;            /* importance_weight r over valid tokens (0 on rejected ones) */
    double ratio_min, ratio_max; /* over kept tokens; +-inf when none */
    double approx_kl_sum;        /* logp - prox over valid tokens */
    double token_loss_sum;       /* unscaled per-token losses over valid tokens (actor_loss) */
    long n_behave;               /* tokens with w > 0 and kept (unclipped_behave_tokens) */
    double behave_w_sum;         /* w over n_behave tokens */
    double behave_w_min, behave_w_max;
    double behave_kl_sum; /* prox - behav over n_behave tokens */
    long n_filtered;      /* tokens rejected (mask) or clamped (clamp) */
} areal_ppo_loss_stats;

/* Adds b into a (sums and counts added, minima and maxima combined). */
void areal_ppo_loss_stats_add(areal_ppo_loss_stats *a, const areal_ppo_loss_stats *b);

/* AReaL's engine scale n_valid_mb / n_valid_global * dp_size (0 when n_valid_global is 0). */
double areal_ppo_mb_scale(long n_valid_mb, long n_valid_global, int dp_size);

/* Number of nonzero mask entries (AReaL's loss_weight_fn). */
long areal_ppo_count_valid(const float *mask, int T);

/*
 * The loss of one micro-batch of T tokens in n_seqs packed sequences
 * (cu_seqlens [n_seqs+1]; may be NULL for token-level losses without
 * sequence-level rejection): logp (pi_theta), prox (pi_prox), behav (pi_behave,
 * AReaL's "old" logprobs), adv, mask all [T] in the training convention.
 * Writes *loss = scale * L_mb, dlogp[T] = its gradient (nullable), *stats
 * (nullable). Returns AREAL_OK or AREAL_EINVAL (bad options or layout, a
 * non-finite input where the mask is set).
 */
int areal_ppo_actor_loss(const float *logp, const float *prox, const float *behav, const float *adv,
                         const float *mask, int T, const int64_t *cu_seqlens, int n_seqs,
                         const areal_ppo_loss_opts *opts, double *loss, float *dlogp,
                         areal_ppo_loss_stats *stats, areal_error *err);

/*
 * AReaL's apply_rejection_sampling alone: writes the updated mask (mask
 * action) or the mask unchanged (clamp), and the behaviour weight w (0 where
 * the updated mask is 0); *n_filtered (nullable) counts the tokens rejected
 * or clamped. mask_out and w are [T].
 */
int areal_rl_rejection_sampling(const areal_rejection_config *cfg, const float *prox,
                                const float *behav, const float *mask, int T,
                                const int64_t *cu_seqlens, int n_seqs, float *mask_out, float *w,
                                long *n_filtered, areal_error *err);

#endif
