/*
 * ppo.c - the decoupled PPO loss of worker/rl as the pipeline's loss, with
 * the token-level aggregation over micro-batches and dp ranks (see ppo.h).
 */
#include "areal/parallel/ppo.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/heads.h"
#include "areal/parallel/dp.h"

int areal_par_ppo_init(areal_par_ppo *c, const areal_par_ppo_mb *mbs, int n_mb,
                       const areal_ppo_loss_opts *opts, float temperature, areal_coll *dp,
                       areal_error *err) {
    memset(c, 0, sizeof *c);
    if (n_mb < 1 || mbs == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "ppo loss: n_mb is %d; give at least one micro-batch", n_mb);
    if (!(temperature > 0))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "ppo loss: temperature is %g; actor.temperature must be > 0",
                               (double)temperature);
    c->mbs = mbs, c->n_mb = n_mb, c->opts = *opts, c->temperature = temperature;
    c->stats.ratio_min = c->stats.behave_w_min = INFINITY;
    c->stats.ratio_max = c->stats.behave_w_max = -INFINITY;
    long local = 0;
    for (int i = 0; i < n_mb; i++) {
        const int64_t *cu = mbs[i].cu_seqlens;
        local += areal_ppo_count_valid(mbs[i].mask, (int)cu[mbs[i].n_seqs]);
    }
    return areal_par_global_count(dp, local, &c->n_valid_global, err);
}

int areal_par_ppo_loss(void *ctx, int mb, const float *logits, int T, int V, float *dlogits,
                       double *loss, areal_error *err) {
    areal_par_ppo *c = ctx;
    if (mb < 0 || mb >= c->n_mb)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "ppo loss: micro-batch %d of %d (give the context every micro-batch "
                               "of the step)",
                               mb, c->n_mb);
    const areal_par_ppo_mb *b = &c->mbs[mb];
    if (b->cu_seqlens[b->n_seqs] != T)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "ppo loss: micro-batch %d has %d tokens but its cu_seqlens end at "
                               "%lld",
                               mb, T, (long long)b->cu_seqlens[b->n_seqs]);
    float *logp = malloc(sizeof(float) * (size_t)T), *dlogp = malloc(sizeof(float) * (size_t)T);
    if (logp == NULL || dlogp == NULL) {
        free(logp), free(dlogp);
        return areal_error_set(err, AREAL_ENOMEM, -1, "ppo loss: out of memory for %d tokens", T);
    }
    areal_par_vocab v = c->vocab;
    v.Vl = V;
    bool split = v.tp != NULL && areal_coll_size(v.tp) > 1;
    int rc = AREAL_OK;
    if (split)
        rc = areal_par_vocab_logprobs(&v, logits, T, b->targets, c->temperature, logp, NULL, err);
    else
        areal_token_logprobs(c->pool, logits, T, V, b->targets, c->temperature, logp, NULL);
    areal_ppo_loss_opts o = c->opts;
    /* dp_size 1: the gradients are summed over dp, not averaged (ppo.h) */
    o.scale = areal_ppo_mb_scale(areal_ppo_count_valid(b->mask, T), c->n_valid_global, 1);
    double l = 0;
    areal_ppo_loss_stats s;
    if (rc == AREAL_OK)
        rc = areal_ppo_actor_loss(logp, b->prox, b->behav, b->adv, b->mask, T, b->cu_seqlens,
                                  b->n_seqs, &o, &l, dlogp, &s, err);
    if (rc == AREAL_OK) {
        *loss += l;
        areal_ppo_loss_stats_add(&c->stats, &s);
        if (split)
            rc = areal_par_vocab_logprobs_backward(&v, logits, T, b->targets, c->temperature, dlogp,
                                                   NULL, dlogits, err);
        else
            areal_token_logprobs_backward(c->pool, logits, T, V, b->targets, c->temperature, dlogp,
                                          NULL, dlogits);
    }
    free(logp), free(dlogp);
    return rc;
}
