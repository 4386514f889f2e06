/*
 * rejection.c - AReaL's apply_rejection_sampling (functional.py) on a packed
 * micro-batch: the behaviour weight w = pi_prox / pi_behave per token (or the
 * sequence geometric mean for the ratio metric at sequence level), the
 * divergence metric (ratio or k1/k2/k3), and the mask or clamp action.
 * Statistics in double; torch works in float32, well inside the tests' 1e-5.
 */
#include <math.h>
#include <stdlib.h>

#include "areal/rl/advantage.h"
#include "areal/rl/loss.h"
#include "loss_internal.h"

static bool in_bounds(const areal_rejection_config *c, double m) {
    if (c->has_lower)
        return m >= c->lower && m <= c->upper;
    return m <= c->upper;
}

static double clamp_w(const areal_rejection_config *c, double w) {
    double lo = c->has_lower ? c->lower : 0.0;
    if (w < lo)
        w = lo;
    if (w > c->upper)
        w = c->upper;
    return w;
}

/* The metric of one token, as KLEstimator._compute_approx_kl(prox, behav) without clamp. */
static double token_metric(areal_rs_metric m, float prox, float behav, double log_ratio) {
    switch (m) {
    case AREAL_RS_KL_K1:
        return (double)areal_rl_kl(AREAL_KL_K1, prox, behav, false);
    case AREAL_RS_KL_K2:
        return (double)areal_rl_kl(AREAL_KL_K2, prox, behav, false);
    case AREAL_RS_KL_K3:
        return (double)areal_rl_kl(AREAL_KL_K3, prox, behav, false);
    case AREAL_RS_RATIO:
    default:
        return exp(log_ratio);
    }
}

int areal_rl_check_layout(int T, const int64_t *cu, int n_seqs, bool need, areal_error *err) {
    if (T < 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "token count %d is negative", T);
    if (cu == NULL) {
        if (need)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "sequence-level options need cu_seqlens (the packed sequence "
                                   "boundaries); pass them");
        return AREAL_OK;
    }
    if (n_seqs < 1 || cu[0] != 0 || cu[n_seqs] != T)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "cu_seqlens must run from 0 to the token count %d over %d sequences",
                               T, n_seqs);
    for (int i = 0; i < n_seqs; i++)
        if (cu[i + 1] < cu[i])
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "cu_seqlens decreases at sequence %d; offsets must not decrease",
                                   i);
    return AREAL_OK;
}

int areal_rl_rejection_sampling(const areal_rejection_config *cfg, const float *prox,
                                const float *behav, const float *mask, int T,
                                const int64_t *cu_seqlens, int n_seqs, float *mask_out, float *w,
                                long *n_filtered, areal_error *err) {
    bool seq = cfg->level == AREAL_RS_SEQUENCE;
    int rc = areal_rl_check_layout(T, cu_seqlens, n_seqs, seq, err);
    if (rc != AREAL_OK)
        return rc;
    bool ratio_metric = cfg->metric == AREAL_RS_RATIO;
    double *lr = malloc(sizeof(double) * (size_t)(T > 0 ? T : 1));
    double *metric = malloc(sizeof(double) * (size_t)(T > 0 ? T : 1));
    double *orig = malloc(sizeof(double) * (size_t)(T > 0 ? T : 1));
    uint8_t *ok = malloc((size_t)(T > 0 ? T : 1));
    if (lr == NULL || metric == NULL || orig == NULL || ok == NULL) {
        free(lr);
        free(metric);
        free(orig);
        free(ok);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for rejection sampling");
    }
    for (int t = 0; t < T; t++) {
        /* float32 difference as torch; -inf - -inf and the like become 0 */
        float d = prox[t] - behav[t];
        lr[t] = isfinite(d) ? (double)d : 0.0;
        metric[t] = token_metric(cfg->metric, prox[t], behav[t], lr[t]);
        w[t] = (float)exp(lr[t]);
        orig[t] = w[t];
        ok[t] = 1;
    }
    if (seq) {
        for (int s = 0; s < n_seqs; s++) {
            int64_t a = cu_seqlens[s], b = cu_seqlens[s + 1];
            long cnt = 0;
            double sum = 0.0, mx = -INFINITY;
            for (int64_t t = a; t < b; t++) {
                if (mask[t] == 0.0f)
                    continue;
                double v = ratio_metric ? lr[t] : metric[t];
                cnt++;
                sum += v;
                if (v > mx)
                    mx = v;
            }
            double div = (double)(cnt > 0 ? cnt : 1);
            if (ratio_metric) {
                double gw = exp(sum / div);
                for (int64_t t = a; t < b; t++)
                    w[t] = (float)gw, orig[t] = w[t];
            }
            double agg;
            switch (cfg->agg) {
            case AREAL_RS_AGG_SUM:
                agg = sum;
                break;
            case AREAL_RS_AGG_MAX:
                agg = cnt == 0 ? 0.0 : mx;
                break;
            case AREAL_RS_AGG_MEAN:
            default:
                agg = sum / div;
                break;
            }
            double sm = ratio_metric ? exp(agg) : agg;
            bool inb = in_bounds(cfg, sm);
            for (int64_t t = a; t < b; t++) {
                if (cfg->action == AREAL_RS_MASK)
                    ok[t] = inb;
                else if (!inb)
                    w[t] = (float)clamp_w(cfg, w[t]);
            }
        }
    } else {
        for (int t = 0; t < T; t++) {
            if (cfg->action == AREAL_RS_MASK)
                ok[t] = in_bounds(cfg, metric[t]);
            else
                w[t] = (float)clamp_w(cfg, w[t]);
        }
    }
    long filtered = 0;
    for (int t = 0; t < T; t++) {
        bool valid = mask[t] != 0.0f;
        if (cfg->action == AREAL_RS_MASK) {
            mask_out[t] = valid && ok[t] ? 1.0f : 0.0f;
            filtered += valid && !ok[t];
        } else {
            mask_out[t] = valid ? 1.0f : 0.0f;
            filtered += valid && (double)w[t] != orig[t];
        }
        if (mask_out[t] == 0.0f)
            w[t] = 0.0f;
    }
    if (n_filtered != NULL)
        *n_filtered = filtered;
    free(lr);
    free(metric);
    free(orig);
    free(ok);
    return AREAL_OK;
}
