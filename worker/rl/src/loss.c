/*
 * loss.c - AReaL's ppo_actor_loss_fn (functional.py) on one packed
 * micro-batch with its gradient written out by hand, and the engine's
 * micro-batch / DP scale. The gradient is autograd's of the same graph:
 *   ratio r_t   = exp(logp_t - prox_t)            (GSPO: exp(seq mean), d/dlogp_j = r/n)
 *   l1 = -A r, l2 = -A clamp(r, 1-eps, 1+eps_hi), pg = max(l1, l2)
 *   dual clip:  pg = min(pg, sign(A) c A)
 *   pg *= w (behaviour weight, detached) when rejection sampling is set
 *   L = sum_{kept} pg / max(1, n_valid)
 * torch splits the gradient of max/min evenly at ties and clamp passes it at
 * its bounds; both are kept, so ties (A = 0, r inside the band) agree too.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "areal/rl/loss.h"
#include "loss_internal.h"

areal_ppo_loss_opts areal_ppo_loss_opts_from(const areal_actor_config *cfg) {
    areal_ppo_loss_opts o;
    memset(&o, 0, sizeof o);
    o.eps_clip = cfg->eps_clip;
    o.has_eps_clip_higher = cfg->has_eps_clip_higher;
    o.eps_clip_higher = cfg->eps_clip_higher;
    o.has_c_clip = cfg->has_c_clip;
    o.c_clip = cfg->c_clip;
    /* AReaL applies the behaviour weight only with the decoupled loss. */
    o.rejection = cfg->use_decoupled_loss && cfg->rejection_sampling.enabled
                      ? &cfg->rejection_sampling
                      : NULL;
    o.sequence_level = cfg->sequence_level_is;
    o.scale = 1.0;
    return o;
}

double areal_ppo_mb_scale(long n_valid_mb, long n_valid_global, int dp_size) {
    if (n_valid_global <= 0)
        return 0.0;
    /* float32 as AReaL's total weight tensor; the product in double */
    return (double)((float)n_valid_mb / (float)n_valid_global) * (double)dp_size;
}

long areal_ppo_count_valid(const float *mask, int T) {
    long n = 0;
    for (int t = 0; t < T; t++)
        n += mask[t] != 0.0f;
    return n;
}

void areal_ppo_loss_stats_add(areal_ppo_loss_stats *a, const areal_ppo_loss_stats *b) {
    a->loss += b->loss;
    a->n_valid += b->n_valid;
    a->n_kept += b->n_kept;
    a->n_clipped += b->n_clipped;
    a->n_dual_clipped += b->n_dual_clipped;
    a->ratio_sum += b->ratio_sum;
    a->ratio_min = fmin(a->ratio_min, b->ratio_min);
    a->ratio_max = fmax(a->ratio_max, b->ratio_max);
    a->approx_kl_sum += b->approx_kl_sum;
    a->token_loss_sum += b->token_loss_sum;
    a->n_behave += b->n_behave;
    a->behave_w_sum += b->behave_w_sum;
    a->behave_w_min = fmin(a->behave_w_min, b->behave_w_min);
    a->behave_w_max = fmax(a->behave_w_max, b->behave_w_max);
    a->behave_kl_sum += b->behave_kl_sum;
    a->n_filtered += b->n_filtered;
}

static void stats_init(areal_ppo_loss_stats *s) {
    memset(s, 0, sizeof *s);
    s->ratio_min = s->behave_w_min = INFINITY;
    s->ratio_max = s->behave_w_max = -INFINITY;
}

int areal_rl_check_loss_opts(const areal_ppo_loss_opts *o, areal_error *err) {
    if (!(o->eps_clip >= 0.0 && o->eps_clip < 1.0))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "eps_clip %g is outside [0, 1); AReaL uses 0.2 (0.4 for gsm8k)",
                               o->eps_clip);
    if (o->has_eps_clip_higher && !(o->eps_clip_higher >= 0.0))
        return areal_error_set(err, AREAL_EINVAL, -1, "eps_clip_higher %g must be >= 0",
                               o->eps_clip_higher);
    if (o->has_c_clip && !(o->c_clip > 1.0))
        return areal_error_set(err, AREAL_EINVAL, -1, "c_clip %g must be > 1 (dual clip), or unset",
                               o->c_clip);
    if (!isfinite(o->scale))
        return areal_error_set(err, AREAL_EINVAL, -1, "loss scale %g is not finite", o->scale);
    return AREAL_OK;
}

/* d pg / d r for one token, and the clip flags; pg returned. */
static double surrogate(double A, double r, double lo, double hi, const areal_ppo_loss_opts *o,
                        double *g, bool *clipped, bool *dual) {
    double cr = r < lo ? lo : (r > hi ? hi : r);
    double l1 = -A * r, l2 = -A * cr;
    double dclamp = (r >= lo && r <= hi) ? 1.0 : 0.0;
    double pg, gr;
    if (l1 > l2) {
        pg = l1;
        gr = -A;
    } else if (l1 < l2) {
        pg = l2;
        gr = -A * dclamp;
    } else {
        pg = l1;
        gr = 0.5 * (-A) + 0.5 * (-A * dclamp);
    }
    *clipped = l1 < l2;
    *dual = false;
    if (o->has_c_clip) {
        double sgn = A > 0 ? 1.0 : (A < 0 ? -1.0 : 0.0);
        double l3 = sgn * o->c_clip * A;
        *dual = l3 < pg;
        if (l3 < pg) {
            pg = l3;
            gr = 0.0;
        } else if (l3 == pg) {
            gr *= 0.5;
        }
    }
    *g = gr;
    return pg;
}

int areal_ppo_actor_loss(const float *logp, const float *prox, const float *behav, const float *adv,
                         const float *mask, int T, const int64_t *cu_seqlens, int n_seqs,
                         const areal_ppo_loss_opts *opts, double *loss, float *dlogp,
                         areal_ppo_loss_stats *stats, areal_error *err) {
    int rc = areal_rl_check_loss_opts(opts, err);
    if (rc != AREAL_OK)
        return rc;
    const areal_rejection_config *rs =
        opts->rejection != NULL && opts->rejection->enabled ? opts->rejection : NULL;
    bool need_cu = opts->sequence_level || (rs != NULL && rs->level == AREAL_RS_SEQUENCE);
    rc = areal_rl_check_layout(T, cu_seqlens, n_seqs, need_cu, err);
    if (rc != AREAL_OK)
        return rc;
    for (int t = 0; t < T; t++)
        if (mask[t] != 0.0f && !(isfinite(logp[t]) && isfinite(prox[t]) && isfinite(adv[t])))
            return areal_error_set(err, AREAL_EINVAL, t,
                                   "token %d has a non-finite logprob, proximal logprob or "
                                   "advantage under the loss mask",
                                   t);
    size_t n = (size_t)(T > 0 ? T : 1);
    float *kept = malloc(sizeof(float) * n);
    float *w = malloc(sizeof(float) * n);
    double *ratio = malloc(sizeof(double) * n);
    double *a = malloc(sizeof(double) * n);
    double *gpg = malloc(sizeof(double) * n); /* dL/dratio per token */
    if (kept == NULL || w == NULL || ratio == NULL || a == NULL || gpg == NULL) {
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for the PPO loss");
        goto out;
    }
    long n_valid = areal_ppo_count_valid(mask, T);
    long n_filtered = 0;
    if (rs != NULL) {
        rc = areal_rl_rejection_sampling(rs, prox, behav, mask, T, cu_seqlens, n_seqs, kept, w,
                                         &n_filtered, err);
        if (rc != AREAL_OK)
            goto out;
    } else {
        for (int t = 0; t < T; t++) {
            kept[t] = mask[t] != 0.0f ? 1.0f : 0.0f;
            w[t] = 1.0f;
        }
    }
    /* ratio and advantages (GSPO: sequence geometric mean and mean advantage) */
    if (opts->sequence_level) {
        for (int s = 0; s < n_seqs; s++) {
            int64_t b0 = cu_seqlens[s], b1 = cu_seqlens[s + 1];
            long cnt = 0;
            double lsum = 0.0, asum = 0.0;
            for (int64_t t = b0; t < b1; t++)
                if (kept[t] != 0.0f) {
                    cnt++;
                    lsum += (double)logp[t] - (double)prox[t];
                    asum += adv[t];
                }
            double div = (double)(cnt > 0 ? cnt : 1);
            double r = exp(lsum / div);
            for (int64_t t = b0; t < b1; t++) {
                ratio[t] = kept[t] != 0.0f ? r : 0.0;
                a[t] = kept[t] != 0.0f ? asum / div : 0.0;
            }
        }
    } else {
        for (int t = 0; t < T; t++) {
            ratio[t] = kept[t] != 0.0f ? exp((double)logp[t] - (double)prox[t]) : 0.0;
            a[t] = adv[t];
        }
    }
    double lo = 1.0 - opts->eps_clip;
    double hi = 1.0 + (opts->has_eps_clip_higher ? opts->eps_clip_higher : opts->eps_clip);
    double denom = (double)(n_valid > 0 ? n_valid : 1);
    areal_ppo_loss_stats st;
    stats_init(&st);
    double sum = 0.0;
    for (int t = 0; t < T; t++) {
        double g;
        bool clipped, dual;
        double pg = surrogate(a[t], ratio[t], lo, hi, opts, &g, &clipped, &dual);
        double wt = rs != NULL ? (double)w[t] : 1.0;
        pg *= wt;
        bool k = kept[t] != 0.0f;
        gpg[t] = k ? g * wt / denom : 0.0;
        if (k)
            sum += pg;
        if (mask[t] == 0.0f)
            continue;
        st.token_loss_sum += pg;
        st.ratio_sum += ratio[t];
        st.approx_kl_sum += (double)logp[t] - (double)prox[t];
        if (!k)
            continue;
        st.n_kept++;
        st.n_clipped += clipped;
        st.n_dual_clipped += dual;
        st.ratio_min = fmin(st.ratio_min, ratio[t]);
        st.ratio_max = fmax(st.ratio_max, ratio[t]);
        if (rs != NULL && w[t] > 0.0f) {
            st.n_behave++;
            st.behave_w_sum += w[t];
            st.behave_w_min = fmin(st.behave_w_min, w[t]);
            st.behave_w_max = fmax(st.behave_w_max, w[t]);
            st.behave_kl_sum += (double)prox[t] - (double)behav[t];
        }
    }
    double L = opts->scale * sum / denom;
    if (dlogp != NULL) {
        if (opts->sequence_level) {
            for (int s = 0; s < n_seqs; s++) {
                int64_t b0 = cu_seqlens[s], b1 = cu_seqlens[s + 1];
                long cnt = 0;
                double acc = 0.0;
                for (int64_t t = b0; t < b1; t++)
                    if (kept[t] != 0.0f) {
                        cnt++;
                        acc += gpg[t] * ratio[t];
                    }
                double each = cnt > 0 ? opts->scale * acc / (double)cnt : 0.0;
                for (int64_t t = b0; t < b1; t++)
                    dlogp[t] = kept[t] != 0.0f ? (float)each : 0.0f;
            }
        } else {
            for (int t = 0; t < T; t++)
                dlogp[t] = (float)(opts->scale * gpg[t] * ratio[t]);
        }
    }
    st.loss = L;
    st.n_valid = n_valid;
    st.n_filtered = n_filtered;
    *loss = L;
    if (stats != NULL)
        *stats = st;
    rc = AREAL_OK;
out:
    free(kept);
    free(w);
    free(ratio);
    free(a);
    free(gpg);
    return rc;
}
