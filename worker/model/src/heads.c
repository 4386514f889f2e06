/*
 * heads.c - log probabilities, entropy and cross-entropy over logits rows.
 *
 * Per row: z = logits / temperature, m = max z, lse = m + log sum exp(z - m)
 * (accumulated in double), log p_j = z_j - lse. The backward of a loss in
 * (logp, entropy) is, with p = softmax(z):
 *   d/dz_j logp_y   = [j == y] - p_j
 *   d/dz_j entropy  = -p_j (log p_j + entropy)
 * and one more 1/temperature for d/dlogits. Rows are independent and run on
 * the pool; cross-entropy is the mean of -logp.
 *
 * exp is k_softmax.c's (the sampler's): a float polynomial eight lanes at a
 * time (~1 ulp), summed in double in a fixed lane order, with each row's
 * terms e_j = exp(z_j - m) kept (in dlogits, or a row of scratch) so the
 * entropy and the backward reuse them instead of taking exp again. Why: the
 * old path took libm's scalar double exp over the whole [T, V] row block
 * three times per cross-entropy step (forward, and again for the backward's
 * lse and its p_j); on the bench model's training step that was 10% of the
 * step (perf), more than all of attention. A term's relative error is ~1e-7
 * (float exp against double), far inside the 1e-4 the heads are held to
 * against torch (test_model_ref) and the 1e-5 of the layouts. Cross-entropy
 * is one fused pass per row (max, exp into the dlogits row, scale), and a
 * row with no target gets zeros without any exp.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h" /* k_max, k_exp_sum */
#include "areal/model/heads.h"

typedef struct head_ctx {
    const float *logits, *dlogp, *dent;
    const int32_t *targets;
    int V, n; /* n: cross-entropy's count of rows with a target */
    float temp;
    float *logp, *ent, *dlogits;
} head_ctx;

/* lse of z / temp; e (nullable) receives exp(z_j / temp - max), *sum their sum. */
static double row_lse(float *e, const float *z, int V, float inv_t, double *sum) {
    /* x -> x * inv_t is monotone for inv_t > 0, so max(z) * inv_t is max(z * inv_t) exactly */
    float mx = k_max(z, V) * inv_t;
    double s = k_exp_sum(e, z, inv_t, mx, V);
    if (sum != NULL)
        *sum = s;
    return (double)mx + log(s);
}

/* -sum p_j log p_j from the kept terms e (p_j = e_j / s); every term has one sign. */
static double row_entropy_e(const float *e, const float *z, int V, float inv_t, double lse,
                            double s) {
    double acc = 0;
    for (int j = 0; j < V; j++)
        acc += (double)e[j] * ((double)(z[j] * inv_t) - lse);
    return -acc / s;
}

/* The same without kept terms (no scratch row could be had): exp per element. */
static double row_entropy(const float *z, int V, float inv_t, double lse) {
    double h = 0;
    for (int j = 0; j < V; j++) {
        double lp = (double)(z[j] * inv_t) - lse;
        h -= exp(lp) * lp;
    }
    return h;
}

static void fwd_rows(void *c, size_t b, size_t e) {
    head_ctx *k = c;
    float inv_t = 1.0f / k->temp;
    /* one scratch row per task for the entropy's terms (the logits stay read-only) */
    float *row = k->ent != NULL ? malloc(sizeof(float) * (size_t)k->V) : NULL;
    for (size_t t = b; t < e; t++) {
        const float *z = k->logits + t * (size_t)k->V;
        double s;
        double lse = row_lse(row, z, k->V, inv_t, &s);
        int y = k->targets[t];
        k->logp[t] = y >= 0 ? (float)((double)(z[y] * inv_t) - lse) : 0.0f;
        if (k->ent != NULL)
            k->ent[t] = (float)(row != NULL ? row_entropy_e(row, z, k->V, inv_t, lse, s)
                                            : row_entropy(z, k->V, inv_t, lse));
    }
    free(row);
}

void areal_token_logprobs(areal_pool *p, const float *logits, int T, int V, const int32_t *targets,
                          float temperature, float *logp, float *entropy) {
    head_ctx k = {.logits = logits,
                  .targets = targets,
                  .V = V,
                  .temp = temperature,
                  .logp = logp,
                  .ent = entropy};
    areal_pool_for(p, (size_t)T, 4, fwd_rows, &k);
}

static void bwd_rows(void *c, size_t b, size_t e) {
    head_ctx *k = c;
    float inv_t = 1.0f / k->temp;
    for (size_t t = b; t < e; t++) {
        const float *z = k->logits + t * (size_t)k->V;
        float *dz = k->dlogits + t * (size_t)k->V;
        int y = k->targets[t];
        double dl = (k->dlogp != NULL && y >= 0) ? k->dlogp[t] : 0.0;
        double de = k->dent != NULL ? k->dent[t] : 0.0;
        if (dl == 0.0 && de == 0.0) { /* a masked row: no gradient, no exp */
            memset(dz, 0, sizeof(float) * (size_t)k->V);
            continue;
        }
        double s;
        double lse = row_lse(dz, z, k->V, inv_t, &s), inv_s = 1.0 / s; /* dz holds e_j */
        double h = de != 0.0 ? row_entropy_e(dz, z, k->V, inv_t, lse, s) : 0.0;
        for (int j = 0; j < k->V; j++) {
            double pj = (double)dz[j] * inv_s, lp = (double)(z[j] * inv_t) - lse;
            double g = -dl * pj - de * pj * (lp + h);
            if (j == y)
                g += dl;
            dz[j] = (float)(g * inv_t);
        }
    }
}

void areal_token_logprobs_backward(areal_pool *p, const float *logits, int T, int V,
                                   const int32_t *targets, float temperature, const float *dlogp,
                                   const float *dentropy, float *dlogits) {
    head_ctx k = {.logits = logits,
                  .targets = targets,
                  .V = V,
                  .temp = temperature,
                  .dlogp = dlogp,
                  .dent = dentropy,
                  .dlogits = dlogits};
    areal_pool_for(p, (size_t)T, 4, bwd_rows, &k);
}

/* Cross-entropy rows: logp[t] of the target and, when dlogits, its gradient (p - onehot) / n. */
static void ce_rows(void *c, size_t b, size_t e) {
    head_ctx *k = c;
    size_t V = (size_t)k->V;
    for (size_t t = b; t < e; t++) {
        const float *z = k->logits + t * V;
        float *dz = k->dlogits != NULL ? k->dlogits + t * V : NULL;
        int y = k->targets[t];
        if (y < 0) {
            k->logp[t] = 0.0f;
            if (dz != NULL)
                memset(dz, 0, sizeof(float) * V);
            continue;
        }
        double s;
        double lse = row_lse(dz, z, k->V, 1.0f, &s);
        k->logp[t] = (float)((double)z[y] - lse);
        if (dz == NULL)
            continue;
        /* dz_j = p_j / n = e_j / (s n); the target's (p_y - 1) / n in double (p_y may be ~1) */
        double py = (double)dz[y] / s;
        float scale = (float)(1.0 / (s * (double)k->n));
        for (size_t j = 0; j < V; j++)
            dz[j] *= scale;
        dz[y] = (float)((py - 1.0) / (double)k->n);
    }
}

int areal_cross_entropy(areal_pool *p, const float *logits, int T, int V, const int32_t *targets,
                        double *loss_out, float *dlogits, areal_error *err) {
    int n = 0;
    for (int t = 0; t < T; t++)
        n += targets[t] >= 0;
    *loss_out = 0;
    if (n == 0) {
        if (dlogits != NULL)
            memset(dlogits, 0, sizeof(float) * (size_t)T * (size_t)V);
        return AREAL_OK;
    }
    float *lp = malloc(sizeof(float) * (size_t)T);
    if (lp == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "cross-entropy: no memory for %d rows", T);
    head_ctx k = {
        .logits = logits, .targets = targets, .V = V, .n = n, .logp = lp, .dlogits = dlogits};
    areal_pool_for(p, (size_t)T, 4, ce_rows, &k);
    double loss = 0;
    for (int t = 0; t < T; t++) /* in row order: the same sum whatever the pool */
        loss -= lp[t];
    *loss_out = loss / n;
    free(lp);
    return AREAL_OK;
}
