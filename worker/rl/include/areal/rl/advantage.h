/*
 * advantage.h - AReaL's advantage computation (PPOActor._compute_advantages,
 * areal/trainer/ppo/actor.py) on a packed batch of one DP rank: reward
 * bias/scaling/clip, the optional DAPO overlong penalty, reward_norm on the
 * scalar rewards, the loss mask and behaviour logprobs rolled left by one,
 * KL reward shaping against reference logprobs (k1/k2/k3, clamped to
 * +-10), the scalar reward at the last response token, GAE (no critic:
 * values 0) with discount and lambda, and adv_norm with the loss mask. The
 * normalisations follow AReaL's Normalization (areal/utils/data.py) exactly:
 * mean and std levels batch|group|none, leave-one-out mean, unbiased std,
 * eps; statistics in float64; batch levels summed over the DP group through
 * a caller-supplied reducer.
 *
 * Layout. A batch is n_seqs sequences packed back to back: sequence i holds
 * tokens [cu_seqlens[i], cu_seqlens[i+1]). Inputs use AReaL's rollout
 * convention: loss_mask[t] = 1 when token t was generated, logprobs[t] = the
 * behaviour logprob of token t. Outputs use the training convention (after
 * the roll): position t predicts token t+1, so loss_mask_out[t] = 1 when
 * token t+1 was generated; prox/ref/train logprobs are in that convention
 * too (areal/model/heads.h with targets[t] = token t+1). Sequences of one
 * GRPO group are contiguous (G consecutive sequences).
 */
#ifndef AREAL_RL_ADVANTAGE_H
#define AREAL_RL_ADVANTAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/rl/config.h"

/*
 * Sums `n` doubles in place over the data-parallel group (an all-reduce
 * SUM); returns AREAL_OK or a negative AREAL_E* code. A NULL reducer means
 * one rank (the sums are already global).
 */
typedef struct areal_rl_reducer {
    int (*sum)(void *ctx, double *vals, int n, areal_error *err);
    void *ctx;
} areal_rl_reducer;

/* AReaL's KLEstimator._compute_approx_kl on one token (float math as torch). */
float areal_rl_kl(areal_kl_estimator est, float logp, float logp_base, bool clamp);

/*
 * AReaL's Normalization on per-sequence scalars x[n] (no mask; reward_norm).
 * Group levels use consecutive blocks of cfg->group_size; n must be a
 * multiple of it (AReaL silently leaves a tail unnormalised; here it is an
 * error). Batch levels reduce over `red`. Returns AREAL_OK, AREAL_EINVAL.
 */
int areal_rl_normalize_scalars(const areal_norm_config *cfg, float *x, int n,
                               const areal_rl_reducer *red, areal_error *err);

/*
 * AReaL's Normalization on per-token values x[T] of a packed batch with a
 * 0/1 mask[T] (adv_norm): token-weighted statistics; group level = blocks of
 * cfg->group_size consecutive sequences (n_seqs a multiple of it). The
 * result is (x - mean) * mask / (std + eps) (eps 0 when std_level is none).
 * When the global mask is empty x is left as is.
 */
int areal_rl_normalize_tokens(const areal_norm_config *cfg, float *x, const float *mask,
                              const int64_t *cu_seqlens, int n_seqs, const areal_rl_reducer *red,
                              areal_error *err);

/* One rank's batch for areal_rl_compute_advantages. */
typedef struct areal_rl_adv_input {
    int n_seqs;
    const int64_t *cu_seqlens;  /* [n_seqs + 1], cu_seqlens[0] = 0, increasing */
    const uint8_t *loss_mask;   /* [T] rollout convention */
    const float *logprobs;      /* [T] behaviour logprobs, rollout convention */
    const float *prox_logprobs; /* [T] training convention; nullable. Used as the old
                                   logprobs when !use_decoupled_loss && recompute_logprob */
    const float *ref_logprobs;  /* [T] training convention; nullable = 0 (kl_ctl then
                                   shapes against logp 0, as AReaL does) */
    const float *rewards;       /* [n_seqs] raw task rewards */
    const uint8_t *no_eos;      /* [n_seqs] nullable: 1 = ended without EOS (truncated) */
} areal_rl_adv_input;

/* Outputs, all [T] in the training convention, caller-allocated. */
typedef struct areal_rl_adv_output {
    float *advantages;   /* after adv_norm */
    float *loss_mask;    /* rolled mask, 0/1 */
    float *old_logprobs; /* rolled behaviour logprobs x mask (or prox when recomputed) */
    float *returns;      /* nullable: advantages before adv_norm (+ values 0) */
    float *kl_rewards;   /* nullable: -kl_ctl * k(old, ref) */
    float *rewards_out;  /* nullable [n_seqs]: scalar rewards after scale/clip/norm */
} areal_rl_adv_output;

/*
 * Runs the whole of AReaL's _compute_advantages for `in` with `cfg` (reward_*,
 * overlong_*, reward_norm, kl_ctl, kl_estimator, discount, gae_lambda,
 * mask_no_eos_with_zero, adv_norm, use_decoupled_loss, recompute_logprob).
 * Returns AREAL_OK, AREAL_EINVAL (bad layout, group size not dividing the
 * batch, prox missing when needed), AREAL_ENOMEM, or the reducer's code.
 */
int areal_rl_compute_advantages(const areal_actor_config *cfg, const areal_rl_adv_input *in,
                                const areal_rl_adv_output *out, const areal_rl_reducer *red,
                                areal_error *err);

/*
 * Dynamic sampling (DAPO): keep[g] = 0 for groups of group_size consecutive
 * rewards that are all equal, 1 otherwise. Returns the number kept, or -1
 * when n is not a multiple of group_size (or group_size < 1).
 */
int areal_rl_dynamic_filter(const float *rewards, int n, int group_size, uint8_t *keep);

#endif
