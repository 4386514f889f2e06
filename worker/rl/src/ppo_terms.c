/*
 * ppo_terms.c - the log-probability-free half of the decoupled PPO loss
 * (areal/rl/ppo_terms.h): the behaviour weights after rejection sampling and
 * the token-level scale, for a device kernel that evaluates the surrogate
 * next to the logits. The option checks are areal_ppo_actor_loss's, so the
 * two halves refuse the same configurations.
 */
#include <math.h>
#include <stdlib.h>

#include "areal/rl/ppo_terms.h"
#include "loss_internal.h"

int areal_ppo_token_terms(const float *prox, const float *behav, const float *adv,
                          const float *mask, int T, const int64_t *cu_seqlens, int n_seqs,
                          const areal_ppo_loss_opts *opts, float *w, areal_ppo_terms *out,
                          areal_error *err) {
    if (opts->sequence_level)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "importance_sampling_level \"sequence\" (GSPO) couples a whole "
                               "sequence's log-probabilities; the fused per-token loss takes "
                               "\"token\" only (use the CPU loss for GSPO)");
    int rc = areal_rl_check_loss_opts(opts, err);
    if (rc != AREAL_OK)
        return rc;
    const areal_rejection_config *rs =
        opts->rejection != NULL && opts->rejection->enabled ? opts->rejection : NULL;
    rc = areal_rl_check_layout(T, cu_seqlens, n_seqs, rs != NULL && rs->level == AREAL_RS_SEQUENCE,
                               err);
    if (rc != AREAL_OK)
        return rc;
    if (rs != NULL && behav == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "rejection sampling needs the behaviour logprobs (behav is NULL)");
    for (int t = 0; t < T; t++)
        if (mask[t] != 0.0f && !(isfinite(prox[t]) && isfinite(adv[t])))
            return areal_error_set(err, AREAL_EINVAL, t,
                                   "token %d has a non-finite proximal logprob or advantage under "
                                   "the loss mask",
                                   t);
    long n_valid = areal_ppo_count_valid(mask, T);
    if (rs != NULL) {
        float *kept = malloc(sizeof(float) * (size_t)(T > 0 ? T : 1));
        if (kept == NULL)
            return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for the PPO terms");
        rc = areal_rl_rejection_sampling(rs, prox, behav, mask, T, cu_seqlens, n_seqs, kept, w,
                                         NULL, err);
        for (int t = 0; rc == AREAL_OK && t < T; t++)
            if (kept[t] == 0.0f)
                w[t] = 0.0f;
        free(kept);
        if (rc != AREAL_OK)
            return rc;
    } else {
        for (int t = 0; t < T; t++)
            w[t] = mask[t] != 0.0f ? 1.0f : 0.0f;
    }
    out->clip_lo = (float)(1.0 - opts->eps_clip);
    out->clip_hi =
        (float)(1.0 + (opts->has_eps_clip_higher ? opts->eps_clip_higher : opts->eps_clip));
    out->c_clip = opts->has_c_clip ? (float)opts->c_clip : 0.0f;
    out->n_valid = n_valid;
    out->coef = opts->scale / (double)(n_valid > 0 ? n_valid : 1);
    return AREAL_OK;
}
