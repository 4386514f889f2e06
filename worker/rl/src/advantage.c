/*
 * advantage.c - PPOActor._compute_advantages of AReaL (areal/trainer/ppo/
 * actor.py) on a packed batch, step for step: overlong penalty, reward
 * bias/scale/clip, reward_norm, the roll of the loss mask and behaviour
 * logprobs, KL reward shaping, the scalar reward at the last response
 * token, GAE without a critic, adv_norm.
 *
 * AReaL works on a padded [B, L] batch and rolls each row; per sequence the
 * roll is the same on every position that matters (the last position gets
 * the row's first element, a prompt token, mask 0 and logprob 0: a sequence
 * needs a prompt of at least one token). GAE runs over positions L-2 .. 0 of
 * each sequence; the last position keeps advantage 0 as in AReaL.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "areal/rl/advantage.h"
#include "loss_internal.h"

static int check_input(const areal_actor_config *cfg, const areal_rl_adv_input *in,
                       areal_error *err) {
    if (in->n_seqs < 1 || in->cu_seqlens == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "an advantage batch needs at least one sequence and cu_seqlens");
    int64_t T = in->cu_seqlens[in->n_seqs];
    int rc = areal_rl_check_layout((int)T, in->cu_seqlens, in->n_seqs, true, err);
    if (rc != AREAL_OK)
        return rc;
    for (int i = 0; i < in->n_seqs; i++) {
        int64_t a = in->cu_seqlens[i], b = in->cu_seqlens[i + 1];
        if (b - a < 1)
            return areal_error_set(err, AREAL_EINVAL, -1, "sequence %d is empty", i);
        if (in->loss_mask[a] != 0)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "sequence %d starts with a generated token; every sequence "
                                   "needs a prompt of at least one token",
                                   i);
        if (!isfinite(in->rewards[i]))
            return areal_error_set(err, AREAL_EINVAL, -1, "reward of sequence %d is not finite", i);
    }
    if (!cfg->use_decoupled_loss && cfg->recompute_logprob && in->prox_logprobs == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "recompute_logprob without the decoupled loss needs the "
                               "recomputed logprobs (prox_logprobs); compute them first");
    if (cfg->overlong_reward_penalty && cfg->overlong_tokens <= 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "overlong_reward_penalty needs overlong_tokens > 0");
    return AREAL_OK;
}

int areal_rl_compute_advantages(const areal_actor_config *cfg, const areal_rl_adv_input *in,
                                const areal_rl_adv_output *out, const areal_rl_reducer *red,
                                areal_error *err) {
    int rc = check_input(cfg, in, err);
    if (rc != AREAL_OK)
        return rc;
    int n = in->n_seqs;
    const int64_t *cu = in->cu_seqlens;
    int T = (int)cu[n];
    float *r = malloc(sizeof(float) * (size_t)n);
    float *rew = malloc(sizeof(float) * (size_t)(T > 0 ? T : 1));
    if (r == NULL || rew == NULL) {
        free(r);
        free(rew);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for advantages");
    }
    /* 1. DAPO overlong penalty: min(-(len - (Lmax - k)) / k * f, 0) */
    for (int i = 0; i < n; i++) {
        r[i] = in->rewards[i];
        if (cfg->overlong_reward_penalty) {
            long len = 0;
            for (int64_t t = cu[i]; t < cu[i + 1]; t++)
                len += in->loss_mask[t] != 0;
            long exceed = len - (cfg->max_new_tokens - cfg->overlong_tokens);
            double pen =
                -(double)exceed / (double)cfg->overlong_tokens * cfg->overlong_penalty_factor;
            r[i] = (float)((double)r[i] + (pen < 0.0 ? pen : 0.0));
        }
        /* 2. bias, scaling, clip (float32 as torch) */
        float v = (r[i] + (float)cfg->reward_bias) * (float)cfg->reward_scaling;
        float c = (float)cfg->reward_clip;
        r[i] = v < -c ? -c : (v > c ? c : v);
    }
    /* 3. reward_norm on the scalars */
    if (cfg->reward_norm.enabled) {
        rc = areal_rl_normalize_scalars(&cfg->reward_norm, r, n, red, err);
        if (rc != AREAL_OK)
            goto out;
    }
    bool use_prox = !cfg->use_decoupled_loss && cfg->recompute_logprob;
    for (int i = 0; i < n; i++) {
        int64_t a = cu[i], b = cu[i + 1];
        int64_t L = b - a;
        /* 4. roll left by one within the sequence */
        for (int64_t j = 0; j < L; j++) {
            int64_t src = a + (j + 1 < L ? j + 1 : 0);
            float m = in->loss_mask[src] != 0 ? 1.0f : 0.0f;
            out->loss_mask[a + j] = m;
            float old = use_prox ? in->prox_logprobs[a + j] : in->logprobs[src];
            float ref = in->ref_logprobs ? in->ref_logprobs[a + j] : 0.0f;
            old *= m;
            ref *= m;
            out->old_logprobs[a + j] = old;
            /* 5. KL reward shaping */
            float kl = -(float)cfg->kl_ctl * areal_rl_kl(cfg->kl_estimator, old, ref, true);
            rew[a + j] = kl;
            if (out->kl_rewards != NULL)
                out->kl_rewards[a + j] = kl;
        }
        /* KL reward after EOS is zero; the scalar reward at seqlen - 2 */
        rew[b - 1] = 0.0f;
        int64_t at = a + (L - 2 > 0 ? L - 2 : 0);
        bool zero = cfg->mask_no_eos_with_zero && in->no_eos != NULL && in->no_eos[i];
        rew[at] += zero ? 0.0f : r[i];
        /* 6. GAE, values 0: delta_t = rew_t; masked positions carry the next value */
        float gamma = (float)cfg->discount, lam = (float)cfg->gae_lambda;
        float last = 0.0f;
        out->advantages[b - 1] = 0.0f;
        for (int64_t t = b - 2; t >= a; t--) {
            float delta = rew[t];
            float next = delta + gamma * lam * last;
            float m = out->loss_mask[t];
            last = last * (1.0f - m) + next * m;
            out->advantages[t] = last;
        }
        if (out->returns != NULL)
            for (int64_t t = a; t < b; t++)
                out->returns[t] = out->advantages[t];
    }
    if (out->rewards_out != NULL)
        memcpy(out->rewards_out, r, sizeof(float) * (size_t)n);
    /* 7. adv_norm with the rolled loss mask */
    if (cfg->adv_norm.enabled) {
        rc = areal_rl_normalize_tokens(&cfg->adv_norm, out->advantages, out->loss_mask, cu, n, red,
                                       err);
        if (rc != AREAL_OK)
            goto out;
    }
    rc = AREAL_OK;
out:
    free(r);
    free(rew);
    return rc;
}

int areal_rl_dynamic_filter(const float *rewards, int n, int group_size, uint8_t *keep) {
    if (group_size < 1 || n < 0 || n % group_size != 0)
        return -1;
    int kept = 0;
    for (int g = 0; g < n / group_size; g++) {
        const float *x = rewards + (size_t)g * group_size;
        bool same = true;
        for (int i = 1; i < group_size; i++)
            same = same && x[i] == x[0];
        keep[g] = !same;
        kept += !same;
    }
    return kept;
}
