/*
 * heads.c - log probabilities, entropy and cross-entropy over logits rows.
 *
 * Per row: z = logits / temperature, m = max z, lse = m + log sum exp(z - m)
 * (accumulated in double), log p_j = z_j - lse. The backward of a loss in
 * (logp, entropy) is, with p = softmax(z):
 *   d/dz_j logp_y   = [j == y] - p_j
 *   d/dz_j entropy  = -p_j (log p_j + entropy)
 * and one more 1/temperature for d/dlogits. Rows are independent and run on
 * the pool; cross-entropy is the mean of -logp, built on the same two calls.
 */
#include <math.h>
#include <stdlib.h>

#include "areal/model/heads.h"

typedef struct head_ctx {
    const float *logits, *dlogp, *dent;
    const int32_t *targets;
    int V;
    float temp;
    float *logp, *ent, *dlogits;
} head_ctx;

static double row_lse(const float *z, int V, float inv_t) {
    float mx = z[0] * inv_t;
    for (int j = 1; j < V; j++)
        if (z[j] * inv_t > mx)
            mx = z[j] * inv_t;
    double s = 0;
    for (int j = 0; j < V; j++)
        s += exp((double)(z[j] * inv_t - mx));
    return mx + log(s);
}

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
    for (size_t t = b; t < e; t++) {
        const float *z = k->logits + t * (size_t)k->V;
        double lse = row_lse(z, k->V, inv_t);
        int y = k->targets[t];
        k->logp[t] = y >= 0 ? (float)((double)(z[y] * inv_t) - lse) : 0.0f;
        if (k->ent != NULL)
            k->ent[t] = (float)row_entropy(z, k->V, inv_t, lse);
    }
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
        double lse = row_lse(z, k->V, inv_t);
        int y = k->targets[t];
        double dl = (k->dlogp != NULL && y >= 0) ? k->dlogp[t] : 0.0;
        double de = k->dent != NULL ? k->dent[t] : 0.0;
        double h = de != 0.0 ? row_entropy(z, k->V, inv_t, lse) : 0.0;
        for (int j = 0; j < k->V; j++) {
            double lp = (double)(z[j] * inv_t) - lse, pj = exp(lp);
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

int areal_cross_entropy(areal_pool *p, const float *logits, int T, int V, const int32_t *targets,
                        double *loss_out, float *dlogits, areal_error *err) {
    int n = 0;
    for (int t = 0; t < T; t++)
        n += targets[t] >= 0;
    *loss_out = 0;
    if (n == 0) {
        if (dlogits != NULL)
            for (size_t i = 0; i < (size_t)T * V; i++)
                dlogits[i] = 0;
        return AREAL_OK;
    }
    float *lp = malloc(sizeof(float) * (size_t)T * 2);
    if (lp == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "cross-entropy: no memory for %d rows", T);
    areal_token_logprobs(p, logits, T, V, targets, 1.0f, lp, NULL);
    double loss = 0;
    for (int t = 0; t < T; t++)
        loss -= lp[t];
    loss /= n;
    if (dlogits != NULL) {
        float *dl = lp + T;
        for (int t = 0; t < T; t++)
            dl[t] = -1.0f / (float)n;
        areal_token_logprobs_backward(p, logits, T, V, targets, 1.0f, dl, NULL, dlogits);
    }
    free(lp);
    *loss_out = loss;
    return AREAL_OK;
}
