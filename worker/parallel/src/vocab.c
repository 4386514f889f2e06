/*
 * vocab.c - log-probabilities, entropy and cross-entropy over logits split
 * by vocabulary across a tp group: row maximum and sums all-reduced, the
 * target's logit from its owner, each rank's gradient columns written
 * locally (see vocab.h). The arithmetic per element is heads.c's.
 */
#include "areal/parallel/vocab.h"

#include <math.h>
#include <stdlib.h>

/* Per row: the global max, lse, the target's z and the entropy (double), from rows logits. */
typedef struct row_stats {
    double *lse, *zy, *ent;
} row_stats;

static int all_reduce(const areal_par_vocab *v, float *buf, size_t n, areal_redop op,
                      areal_error *err) {
    if (v->tp == NULL || areal_coll_size(v->tp) < 2)
        return AREAL_OK;
    return areal_coll_all_reduce(v->tp, buf, n, AREAL_DT_F32, op, err);
}

/* Fills st (3 arrays of T doubles in one block at st->lse) for rows z = logits * inv_t. */
static int stats(const areal_par_vocab *v, const float *logits, int T, const int32_t *targets,
                 float inv_t, row_stats *st, areal_error *err) {
    size_t n = (size_t)T, Vl = (size_t)v->Vl;
    float *mx = malloc(sizeof(float) * n * 4);
    if (mx == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "vocab-parallel heads: no memory for %d rows",
                               T);
    float *s3 = mx + n;
    for (size_t t = 0; t < n; t++) {
        const float *z = logits + t * Vl;
        float m = Vl > 0 ? z[0] * inv_t : -INFINITY;
        for (size_t j = 1; j < Vl; j++)
            if (z[j] * inv_t > m)
                m = z[j] * inv_t;
        mx[t] = m;
    }
    int rc = all_reduce(v, mx, n, AREAL_MAX, err);
    for (size_t t = 0; rc == AREAL_OK && t < n; t++) {
        const float *z = logits + t * Vl;
        double s = 0, spz = 0;
        for (size_t j = 0; j < Vl; j++) {
            double zj = (double)(z[j] * inv_t), e = exp((double)(z[j] * inv_t - mx[t]));
            s += e;
            spz += e * zj;
        }
        int y = targets[t] - v->v0; /* the owner adds the target's logit, the others 0 */
        s3[3 * t] = (float)s;
        s3[3 * t + 1] = y >= 0 && (size_t)y < Vl ? z[y] * inv_t : 0.0f;
        s3[3 * t + 2] = (float)spz;
    }
    if (rc == AREAL_OK)
        rc = all_reduce(v, s3, 3 * n, AREAL_SUM, err);
    for (size_t t = 0; rc == AREAL_OK && t < n; t++) {
        double S = s3[3 * t];
        st->lse[t] = (double)mx[t] + log(S);
        st->zy[t] = s3[3 * t + 1];
        st->ent[t] = st->lse[t] - (double)s3[3 * t + 2] / S;
    }
    free(mx);
    return rc;
}

static int stats_alloc(row_stats *st, int T, areal_error *err) {
    st->lse = malloc(sizeof(double) * (size_t)(T > 0 ? T : 1) * 3);
    if (st->lse == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "vocab-parallel heads: no memory for %d rows",
                               T);
    st->zy = st->lse + T;
    st->ent = st->zy + T;
    return AREAL_OK;
}

int areal_par_vocab_logprobs(const areal_par_vocab *v, const float *logits, int T,
                             const int32_t *targets, float temperature, float *logp, float *entropy,
                             areal_error *err) {
    row_stats st;
    int rc = stats_alloc(&st, T, err);
    if (rc == AREAL_OK)
        rc = stats(v, logits, T, targets, 1.0f / temperature, &st, err);
    for (int t = 0; rc == AREAL_OK && t < T; t++) {
        logp[t] = targets[t] >= 0 ? (float)(st.zy[t] - st.lse[t]) : 0.0f;
        if (entropy != NULL)
            entropy[t] = (float)st.ent[t];
    }
    free(st.lse);
    return rc;
}

int areal_par_vocab_logprobs_backward(const areal_par_vocab *v, const float *logits, int T,
                                      const int32_t *targets, float temperature, const float *dlogp,
                                      const float *dentropy, float *dlogits, areal_error *err) {
    row_stats st;
    float inv_t = 1.0f / temperature;
    int rc = stats_alloc(&st, T, err);
    if (rc == AREAL_OK)
        rc = stats(v, logits, T, targets, inv_t, &st, err);
    size_t Vl = (size_t)v->Vl;
    for (int t = 0; rc == AREAL_OK && t < T; t++) {
        const float *z = logits + (size_t)t * Vl;
        float *dz = dlogits + (size_t)t * Vl;
        int y = targets[t];
        double dl = (dlogp != NULL && y >= 0) ? dlogp[t] : 0.0;
        double de = dentropy != NULL ? dentropy[t] : 0.0, h = st.ent[t];
        for (size_t j = 0; j < Vl; j++) {
            double lp = (double)(z[j] * inv_t) - st.lse[t], pj = exp(lp);
            double g = -dl * pj - de * pj * (lp + h);
            if ((long)j + v->v0 == y)
                g += dl;
            dz[j] = (float)(g * inv_t);
        }
    }
    free(st.lse);
    return rc;
}

int areal_par_vocab_cross_entropy(const areal_par_vocab *v, const float *logits, int T,
                                  const int32_t *targets, double *loss, float *dlogits,
                                  areal_error *err) {
    int n = 0;
    for (int t = 0; t < T; t++)
        n += targets[t] >= 0;
    *loss = 0;
    float *lp = malloc(sizeof(float) * (size_t)(T > 0 ? T : 1) * 2);
    if (lp == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "cross-entropy: no memory for %d rows", T);
    /* every rank runs the collectives, also with no target here */
    int rc = areal_par_vocab_logprobs(v, logits, T, targets, 1.0f, lp, NULL, err);
    double l = 0;
    for (int t = 0; rc == AREAL_OK && t < T; t++)
        l -= lp[t];
    if (rc == AREAL_OK && dlogits != NULL) {
        for (int t = 0; t < T; t++)
            lp[T + t] = n > 0 ? -1.0f / (float)n : 0.0f;
        rc = areal_par_vocab_logprobs_backward(v, logits, T, targets, 1.0f, lp + T, NULL, dlogits,
                                               err);
    }
    if (rc == AREAL_OK)
        *loss = n > 0 ? l / n : 0;
    free(lp);
    return rc;
}
