/*
 * cp_test_util.h - the loss of the context-parallel tests: par_test_util.h's
 * mean token NLL on a shard (areal/parallel/cp.h), each token's target and
 * reference logits row looked up by its index in the micro-batch (the
 * step's shard, areal_par_step_cp_shard: the step cuts them, step.h).
 */
#ifndef CP_TEST_UTIL_H
#define CP_TEST_UTIL_H

#include "areal/parallel/cp.h"
#include "par_test_util.h"

/* The loss over a shard: targets and reference rows looked up by each token's batch index. */
typedef struct cp_loss {
    const pt_batch *b;
    const pt_mb *mbs;
    const areal_par_step *ps;     /* the step whose shards the logits are of, or NULL: */
    const areal_par_cp_shard *sh; /* the caller's own shards (test_par_seed's cp x ep) */
    long n_total;
    const float *ref_logits;
    double logits_err;
} cp_loss;

static inline int cp_loss_fn(void *ctx, int mb, const float *logits, int T, int V, float *dlogits,
                             double *loss, areal_error *err) {
    cp_loss *L = ctx;
    const areal_par_cp_shard *sh = L->ps != NULL ? areal_par_step_cp_shard(L->ps, mb) : &L->sh[mb];
    if (sh == NULL || sh->b.n_tokens != T)
        return areal_error_set(err, AREAL_EINVAL, -1, "cp test loss: no shard for micro-batch %d",
                               mb);
    const int32_t *gidx = sh->t.gidx;
    int tok0 = L->mbs[mb].tok0;
    int32_t *tg = calloc((size_t)T + 1, sizeof(int32_t));
    float *logp = malloc(sizeof(float) * (size_t)T), *dlogp = malloc(sizeof(float) * (size_t)T);
    float *want = malloc(sizeof(float) * (size_t)T * V);
    if (tg == NULL || logp == NULL || dlogp == NULL || want == NULL) {
        free(tg), free(logp), free(dlogp), free(want);
        return areal_error_set(err, AREAL_ENOMEM, -1, "cp test loss: out of memory");
    }
    for (int t = 0; t < T; t++) {
        tg[t] = L->b->targets[tok0 + gidx[t]];
        memcpy(want + (size_t)t * V, L->ref_logits + (size_t)(tok0 + gidx[t]) * V,
               sizeof(float) * (size_t)V);
    }
    areal_token_logprobs(NULL, logits, T, V, tg, 1.0f, logp, NULL);
    double sum = 0;
    for (int t = 0; t < T; t++) {
        sum += tg[t] >= 0 ? logp[t] : 0;
        dlogp[t] = tg[t] >= 0 ? (float)(-1.0 / (double)L->n_total) : 0.0f;
    }
    *loss += -sum / (double)L->n_total;
    areal_token_logprobs_backward(NULL, logits, T, V, tg, 1.0f, dlogp, NULL, dlogits);
    double e = pt_rel_err(logits, want, (size_t)T * V);
    L->logits_err = e > L->logits_err ? e : L->logits_err;
    free(tg), free(logp), free(dlogp), free(want);
    return AREAL_OK;
}

#endif
