/*
 * normalize.c - AReaL's Normalization (areal/utils/data.py) and
 * KLEstimator: mean level batch|group|none (optionally leave-one-out), std
 * level batch|group|none (unbiased or not) around that mean, eps, float64
 * statistics. Batch statistics are summed over the DP group through the
 * reducer in the same two rounds as AReaL (count + sum, then count + sum of
 * squares). One deliberate difference: a rank whose mask is empty still
 * takes part in the reductions (AReaL returns before them, which would hang
 * the other ranks) and then returns its values unchanged, as AReaL does.
 */
#include <math.h>
#include <stdlib.h>

#include "areal/rl/advantage.h"

float areal_rl_kl(areal_kl_estimator est, float logp, float logp_base, bool clamp) {
    float d = logp - logp_base;
    float k;
    switch (est) {
    case AREAL_KL_K2:
        k = d * d / 2.0f;
        break;
    case AREAL_KL_K3:
        k = expf(-d) - 1.0f + d;
        break;
    case AREAL_KL_K1:
    default:
        k = d;
        break;
    }
    if (clamp)
        k = k < -10.0f ? -10.0f : (k > 10.0f ? 10.0f : k);
    return k;
}

static int reduce(const areal_rl_reducer *red, double *v, int n, areal_error *err) {
    if (red == NULL || red->sum == NULL)
        return AREAL_OK;
    return red->sum(red->ctx, v, n, err);
}

/*
 * Normalization._compute_mean over elements [i0, i1) (mask NULL = all ones),
 * summed over the DP group when `global`: writes mean[i] per element
 * (leave-one-out makes it per element).
 */
static int mean_of(const areal_norm_config *c, const float *x, const float *mask, int i0, int i1,
                   bool global, const areal_rl_reducer *red, double *mean, areal_error *err) {
    double acc[2] = {0.0, 0.0}; /* factor, sum */
    for (int i = i0; i < i1; i++) {
        double m = mask ? (double)mask[i] : 1.0;
        acc[0] += m;
        acc[1] += (double)x[i] * m;
    }
    if (global) {
        int rc = reduce(red, acc, 2, err);
        if (rc != AREAL_OK)
            return rc;
    }
    double factor = acc[0], xsum = acc[1];
    for (int i = i0; i < i1; i++) {
        double m = mask ? (double)mask[i] : 1.0;
        if (c->mean_leave1out) {
            if (factor <= 1.0)
                mean[i] = 0.0;
            else if (mask == NULL)
                mean[i] = (xsum - (double)x[i]) / (factor - 1.0);
            else if (m > 0.0)
                mean[i] = (xsum - (double)x[i] * m) / fmax(factor - m, 1.0);
            else
                mean[i] = xsum / factor;
        } else {
            mean[i] = factor == 0.0 ? 0.0 : xsum / factor;
        }
    }
    return AREAL_OK;
}

/* Normalization._compute_std over [i0, i1) around the given per-element mean. */
static int std_about(const areal_norm_config *c, const float *x, const float *mask, int i0, int i1,
                     bool global, const areal_rl_reducer *red, const double *mean, double *std,
                     areal_error *err) {
    double acc[2] = {0.0, 0.0}; /* factor, sum of squares */
    for (int i = i0; i < i1; i++) {
        double m = mask ? (double)mask[i] : 1.0;
        double d = mask ? (double)x[i] * m - mean[i] * m : (double)x[i] - mean[i];
        acc[0] += m;
        acc[1] += d * d;
    }
    if (global) {
        int rc = reduce(red, acc, 2, err);
        if (rc != AREAL_OK)
            return rc;
    }
    double factor = acc[0];
    if (c->std_unbiased)
        *std = factor <= 1.0 ? 1.0 : sqrt(acc[1] / (factor - 1.0));
    else
        *std = factor == 0.0 ? 1.0 : sqrt(acc[1] / factor);
    return AREAL_OK;
}

/*
 * Normalises x over `n_el` elements split into `n_blocks` blocks (block b =
 * elements [bounds[b], bounds[b+1])) for the group levels; the batch level
 * takes all of them. mask may be NULL.
 */
static int normalize(const areal_norm_config *c, float *x, const float *mask, int n_el,
                     const int64_t *bounds, int n_blocks, const areal_rl_reducer *red,
                     areal_error *err) {
    double *mean = calloc((size_t)(n_el > 0 ? n_el : 1), sizeof(double));
    double *stdv = calloc((size_t)(n_el > 0 ? n_el : 1), sizeof(double));
    int rc = AREAL_OK;
    if (mean == NULL || stdv == NULL) {
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for normalisation");
        goto out;
    }
    bool one_per_group = c->group_size == 1;
    double sd = 1.0;
    /* group levels walk the blocks; the elements after the last block (none:
     * the callers check divisibility) would keep mean 0 */
    /* step 1: the mean */
    if (c->mean_level == AREAL_NORM_BATCH) {
        rc = mean_of(c, x, mask, 0, n_el, true, red, mean, err);
    } else if (c->mean_level == AREAL_NORM_GROUP) {
        for (int b = 0; b < n_blocks && rc == AREAL_OK; b++) {
            int i0 = (int)bounds[b], i1 = (int)bounds[b + 1];
            if (one_per_group && c->mean_leave1out) {
                for (int i = i0; i < i1; i++)
                    mean[i] = 0.0;
                continue;
            }
            rc = mean_of(c, x, mask, i0, i1, false, red, mean, err);
        }
    } else {
        for (int i = 0; i < n_el; i++)
            mean[i] = 0.0;
    }
    if (rc != AREAL_OK)
        goto out;
    /* step 2: the std around that mean */
    double eps = c->eps;
    if (c->std_level == AREAL_NORM_BATCH) {
        rc = std_about(c, x, mask, 0, n_el, true, red, mean, &sd, err);
        for (int i = 0; i < n_el; i++)
            stdv[i] = sd;
    } else if (c->std_level == AREAL_NORM_GROUP) {
        for (int b = 0; b < n_blocks && rc == AREAL_OK; b++) {
            int i0 = (int)bounds[b], i1 = (int)bounds[b + 1];
            if (one_per_group && c->std_unbiased)
                sd = 1.0;
            else
                rc = std_about(c, x, mask, i0, i1, false, red, mean, &sd, err);
            for (int i = i0; i < i1; i++)
                stdv[i] = sd;
        }
    } else {
        for (int i = 0; i < n_el; i++)
            stdv[i] = 1.0;
        eps = 0.0;
    }
    if (rc != AREAL_OK)
        goto out;
    for (int i = 0; i < n_el; i++) {
        double xc = (double)x[i] - mean[i];
        if (mask != NULL)
            xc *= (double)mask[i];
        x[i] = (float)(xc / (stdv[i] + eps));
    }
out:
    free(mean);
    free(stdv);
    return rc;
}

static int check_norm(const areal_norm_config *c, int n_items, const char *what, areal_error *err) {
    bool group = c->mean_level == AREAL_NORM_GROUP || c->std_level == AREAL_NORM_GROUP;
    if (group && c->group_size < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "group normalisation needs group_size >= 1 (got %d)", c->group_size);
    if (group && n_items % c->group_size != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%d %s are not whole groups of %d; give complete GRPO groups "
                               "(AReaL would leave the tail unnormalised)",
                               n_items, what, c->group_size);
    if (!(c->eps >= 0.0))
        return areal_error_set(err, AREAL_EINVAL, -1, "normalisation eps %g must be >= 0", c->eps);
    return AREAL_OK;
}

int areal_rl_normalize_scalars(const areal_norm_config *cfg, float *x, int n,
                               const areal_rl_reducer *red, areal_error *err) {
    if (n < 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "negative count %d", n);
    int rc = check_norm(cfg, n, "rewards", err);
    if (rc != AREAL_OK)
        return rc;
    int gs = cfg->group_size >= 1 ? cfg->group_size : 1;
    int nb = n / gs;
    int64_t *bounds = malloc(sizeof(int64_t) * (size_t)(nb + 1));
    if (bounds == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for normalisation");
    for (int b = 0; b <= nb; b++)
        bounds[b] = (int64_t)b * gs;
    rc = normalize(cfg, x, NULL, n, bounds, nb, red, err);
    free(bounds);
    return rc;
}

int areal_rl_normalize_tokens(const areal_norm_config *cfg, float *x, const float *mask,
                              const int64_t *cu_seqlens, int n_seqs, const areal_rl_reducer *red,
                              areal_error *err) {
    if (n_seqs < 0 || cu_seqlens == NULL || cu_seqlens[0] != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "token normalisation needs cu_seqlens starting at 0");
    int rc = check_norm(cfg, n_seqs, "sequences", err);
    if (rc != AREAL_OK)
        return rc;
    int T = (int)cu_seqlens[n_seqs];
    bool batch = cfg->mean_level == AREAL_NORM_BATCH || cfg->std_level == AREAL_NORM_BATCH;
    double local = 0.0;
    for (int t = 0; t < T; t++)
        local += mask[t];
    if (local == 0.0 && !(batch && red != NULL && red->sum != NULL))
        return AREAL_OK;
    int gs = cfg->group_size >= 1 ? cfg->group_size : 1;
    int nb = n_seqs / gs;
    int64_t *bounds = malloc(sizeof(int64_t) * (size_t)(nb + 1));
    float *keep = local == 0.0 ? malloc(sizeof(float) * (size_t)(T > 0 ? T : 1)) : NULL;
    if (bounds == NULL || (local == 0.0 && keep == NULL)) {
        free(bounds);
        free(keep);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for normalisation");
    }
    for (int b = 0; b <= nb; b++)
        bounds[b] = cu_seqlens[(int64_t)b * gs];
    if (keep != NULL)
        for (int t = 0; t < T; t++)
            keep[t] = x[t];
    rc = normalize(cfg, x, mask, T, bounds, nb, red, err);
    if (keep != NULL) {
        for (int t = 0; t < T; t++)
            x[t] = keep[t];
        free(keep);
    }
    free(bounds);
    return rc;
}
