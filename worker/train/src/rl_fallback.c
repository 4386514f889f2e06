/*
 * rl_fallback.c - TEMPORARY: minimal stand-ins for the rl-core functions the
 * training step calls (areal/rl/advantage.h, loss.h, pack.h) until that
 * component's implementations land on this branch. Every definition is
 * weak, so rl-core's own (strong) definitions replace them as soon as they
 * are linked, and nothing here can collide with them. Covers only what the learning and resume
 * tests configure: reward bias/scaling, GRPO group mean/std normalisation (unbiased, eps 1e-5), no
 * KL, no adv_norm, token-level PPO clip loss with AReaL's aggregation, the
 * behaviour weight when rejection sampling is set (mask above upper), one
 * micro-batch per max_tokens_per_mb by first fit. Delete it when rl-core's
 * advantage.c / loss.c / pack.c are merged (they then define these symbols).
 */
#include <math.h>
#include <string.h>

#include "areal/rl/advantage.h"
#include "areal/rl/loss.h"
#include "areal/rl/pack.h"

#define WEAK __attribute__((weak))

WEAK int areal_rl_compute_advantages(const areal_actor_config *cfg, const areal_rl_adv_input *in,
                                     const areal_rl_adv_output *out, const areal_rl_reducer *red,
                                     areal_error *err) {
    (void)red;
    int n = in->n_seqs, G = cfg->reward_norm.enabled ? cfg->reward_norm.group_size : 1;
    if (G < 1 || n % G != 0 || n > 4096)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "group size does not divide the batch (or over 4096 sequences)");
    float r[4096];
    for (int i = 0; i < n; i++) {
        double x = ((double)in->rewards[i] + cfg->reward_bias) * cfg->reward_scaling;
        r[i] = (float)(x > cfg->reward_clip    ? cfg->reward_clip
                       : x < -cfg->reward_clip ? -cfg->reward_clip
                                               : x);
    }
    if (cfg->reward_norm.enabled)
        for (int g = 0; g < n / G; g++) {
            double mu = 0, var = 0;
            for (int k = 0; k < G; k++)
                mu += r[g * G + k];
            mu /= G;
            for (int k = 0; k < G; k++)
                var += (r[g * G + k] - mu) * (r[g * G + k] - mu);
            double sd = G > 1 ? sqrt(var / (G - 1)) : 0;
            for (int k = 0; k < G; k++)
                r[g * G + k] = (float)((r[g * G + k] - mu) / (sd + cfg->reward_norm.eps));
        }
    for (int s = 0; s < n; s++)
        for (int64_t t = in->cu_seqlens[s]; t < in->cu_seqlens[s + 1]; t++) {
            int has_next = t + 1 < in->cu_seqlens[s + 1];
            float m = has_next ? (float)in->loss_mask[t + 1] : 0.0f;
            out->loss_mask[t] = m;
            out->old_logprobs[t] = has_next ? in->logprobs[t + 1] * m : 0.0f;
            if (!cfg->use_decoupled_loss && cfg->recompute_logprob && in->prox_logprobs)
                out->old_logprobs[t] = in->prox_logprobs[t] * m;
            out->advantages[t] = r[s] * m;
        }
    return AREAL_OK;
}

WEAK areal_ppo_loss_opts areal_ppo_loss_opts_from(const areal_actor_config *cfg) {
    areal_ppo_loss_opts o;
    memset(&o, 0, sizeof o);
    o.eps_clip = cfg->eps_clip;
    o.has_eps_clip_higher = cfg->has_eps_clip_higher;
    o.eps_clip_higher = cfg->eps_clip_higher;
    o.rejection = cfg->rejection_sampling.enabled ? &cfg->rejection_sampling : NULL;
    o.scale = 1;
    return o;
}

WEAK void areal_ppo_loss_stats_add(areal_ppo_loss_stats *a, const areal_ppo_loss_stats *b) {
    a->loss += b->loss;
    a->n_valid += b->n_valid;
    a->n_clipped += b->n_clipped;
    a->ratio_sum += b->ratio_sum;
    a->n_behave += b->n_behave;
    a->behave_w_sum += b->behave_w_sum;
    if (b->behave_w_max > a->behave_w_max)
        a->behave_w_max = b->behave_w_max;
}

WEAK double areal_ppo_mb_scale(long n_valid_mb, long n_valid_global, int dp_size) {
    return n_valid_global ? (double)n_valid_mb / (double)n_valid_global * dp_size : 0;
}

WEAK long areal_ppo_count_valid(const float *mask, int T) {
    long n = 0;
    for (int t = 0; t < T; t++)
        n += mask[t] != 0;
    return n;
}

WEAK int areal_ppo_actor_loss(const float *logp, const float *prox, const float *behav,
                              const float *adv, const float *mask, int T, const int64_t *cu_seqlens,
                              int n_seqs, const areal_ppo_loss_opts *o, double *loss, float *dlogp,
                              areal_ppo_loss_stats *stats, areal_error *err) {
    (void)cu_seqlens;
    (void)n_seqs;
    (void)err;
    long nv = areal_ppo_count_valid(mask, T);
    double denom = nv > 0 ? (double)nv : 1, sum = 0;
    double hi = 1 + (o->has_eps_clip_higher ? o->eps_clip_higher : o->eps_clip);
    double lo = 1 - o->eps_clip;
    areal_ppo_loss_stats s;
    memset(&s, 0, sizeof s);
    for (int t = 0; t < T; t++) {
        dlogp[t] = 0;
        if (mask[t] == 0)
            continue;
        double r = exp((double)logp[t] - prox[t]), A = adv[t];
        double rc = r < lo ? lo : r > hi ? hi : r;
        double l1 = -A * r, l2 = -A * rc, l = l1 > l2 ? l1 : l2;
        double dl = l1 >= l2 ? -A * r : 0; /* d/dlogp of the chosen branch */
        double w = 1;
        if (o->rejection) {
            w = exp((double)prox[t] - behav[t]);
            if (w > o->rejection->upper)
                w = 0;
            s.n_behave += w > 0;
            s.behave_w_sum += w;
            if (w > s.behave_w_max)
                s.behave_w_max = w;
        }
        s.n_clipped += l2 > l1;
        s.ratio_sum += r;
        sum += l * w;
        dlogp[t] = (float)(dl * w / denom * o->scale);
    }
    s.n_valid = nv;
    *loss = sum / denom * o->scale;
    s.loss = *loss;
    if (stats)
        *stats = s;
    return AREAL_OK;
}

WEAK int areal_pack_ffd(const int64_t *lens, int n, int64_t max_tokens, int min_mbs, int *mb_of,
                        int *n_mbs, areal_error *err) {
    (void)min_mbs;
    int64_t used = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (max_tokens > 0 && lens[i] > max_tokens)
            return areal_error_set(err, AREAL_EINVAL, -1, "sequence %d is longer than the bound",
                                   i);
        if (max_tokens > 0 && used + lens[i] > max_tokens) {
            k++;
            used = 0;
        }
        mb_of[i] = k;
        used += lens[i];
    }
    *n_mbs = n ? k + 1 : 0;
    return AREAL_OK;
}
