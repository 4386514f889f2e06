/*
 * step_cp.c - context parallelism inside the parallel step (see step.h and
 * step_cp.h): the shards of one call, the GRPO data and targets gathered to
 * their tokens, the recomputed logprobs put back in micro-batch order.
 * Rejected: making the caller (the trainer, the tests) cut the shards and
 * remap its data: every caller would carry the same index bookkeeping, and
 * a caller that forgot one array would train on misaligned tokens.
 */
#include "step_cp.h"

#include <stdlib.h>
#include <string.h>

int areal_par_step_cp_on(const areal_par_step *s) {
    return areal_par_size(s->cp.cp) > 1;
}

int areal_par_step_cp_begin(areal_par_step *s, const areal_batch *mbs, int n_mb, areal_batch **run,
                            areal_error *err) {
    *run = NULL;
    size_t n = n_mb > 0 ? (size_t)n_mb : 1;
    areal_par_cp_shard *sh = calloc(n, sizeof *sh);
    areal_batch *b = calloc(n, sizeof *b);
    if (sh == NULL || b == NULL) {
        free(sh), free(b);
        return areal_error_set(err, AREAL_ENOMEM, -1, "parallel step: no memory for cp shards");
    }
    int C = areal_par_size(s->cp.cp), r = areal_par_rank(s->cp.cp), rc = AREAL_OK;
    for (int i = 0; rc == AREAL_OK && i < n_mb; i++) {
        rc = areal_par_cp_shard_make(&mbs[i], C, r, &sh[i], err);
        b[i] = sh[i].b;
    }
    s->cp.shards = sh;
    s->cp.n_shards = n_mb;
    if (rc != AREAL_OK) {
        areal_par_step_cp_end(s, b);
        return rc;
    }
    *run = b;
    return AREAL_OK;
}

void areal_par_step_cp_end(areal_par_step *s, areal_batch *run) {
    areal_par_cp_shard *sh = (areal_par_cp_shard *)s->cp.shards;
    for (int i = 0; sh != NULL && i < s->cp.n_shards; i++)
        areal_par_cp_shard_free(&sh[i]);
    free(sh);
    free(run);
    s->cp.shards = NULL;
    s->cp.n_shards = 0;
}

/* The shards' total tokens. */
static size_t shard_tokens(const areal_par_step *s, int n_mb) {
    size_t n = 0;
    for (int i = 0; i < n_mb; i++)
        n += (size_t)s->cp.shards[i].b.n_tokens;
    return n;
}

int areal_par_step_cp_ppo_make(const areal_par_step *s, const areal_par_ppo_mb *pm, int n_mb,
                               areal_par_step_cp_ppo *out, areal_error *err) {
    memset(out, 0, sizeof *out);
    size_t T = shard_tokens(s, n_mb), nm = (size_t)n_mb;
    /* one block: the descriptors, the cu pairs, the targets and four float rows per token */
    size_t bytes = nm * sizeof(areal_par_ppo_mb) + nm * 2 * sizeof(int64_t) +
                   T * (sizeof(int32_t) + 4 * sizeof(float)) + 16;
    char *buf = calloc(1, bytes);
    if (buf == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1,
                               "parallel step: no memory for the cp shards' GRPO data");
    areal_par_ppo_mb *mbs = (areal_par_ppo_mb *)buf;
    int64_t *cu = (int64_t *)(mbs + nm);
    float *f = (float *)(cu + 2 * nm);
    int32_t *tg = (int32_t *)(f + 4 * T);
    for (int i = 0; i < n_mb; i++) {
        const areal_par_cp_shard *sh = &s->cp.shards[i];
        int n = sh->b.n_tokens;
        float *prox = f, *behav = f + n, *adv = f + 2 * n, *mask = f + 3 * n;
        for (int t = 0; t < n; t++) {
            int32_t x = sh->t.gidx[t];
            tg[t] = pm[i].targets[x];
            prox[t] = pm[i].prox[x];
            behav[t] = pm[i].behav[x];
            adv[t] = pm[i].adv[x];
            mask[t] = pm[i].mask[x];
        }
        cu[2 * i] = 0;
        cu[2 * i + 1] = n;
        /* one sequence: the token-level loss reads no boundary (sequence-level is refused) */
        mbs[i] = (areal_par_ppo_mb){tg, prox, behav, adv, mask, cu + 2 * i, 1};
        f += 4 * n;
        tg += n;
    }
    out->mbs = mbs;
    out->buf = buf;
    return AREAL_OK;
}

void areal_par_step_cp_ppo_free(areal_par_step_cp_ppo *p) {
    free(p->buf);
    memset(p, 0, sizeof *p);
}

int areal_par_step_cp_lp_make(const areal_par_step *s, const int32_t *const *targets, int n_mb,
                              areal_par_step_cp_lp *out, areal_error *err) {
    memset(out, 0, sizeof *out);
    size_t T = shard_tokens(s, n_mb), nm = (size_t)n_mb;
    size_t bytes = nm * (sizeof(int32_t *) + sizeof(float *)) + T * (sizeof(int32_t) + 4) + 16;
    char *buf = calloc(1, bytes);
    if (buf == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1,
                               "parallel step: no memory for the cp shards' targets");
    const int32_t **tgp = (const int32_t **)buf;
    float **lpp = (float **)(tgp + nm);
    float *lp = (float *)(lpp + nm);
    int32_t *tg = (int32_t *)(lp + T);
    for (int i = 0; i < n_mb; i++) {
        const areal_par_cp_shard *sh = &s->cp.shards[i];
        for (int t = 0; t < sh->b.n_tokens; t++)
            tg[t] = targets[i][sh->t.gidx[t]];
        tgp[i] = tg, lpp[i] = lp;
        tg += sh->b.n_tokens, lp += sh->b.n_tokens;
    }
    out->targets = tgp;
    out->logp = lpp;
    out->buf = buf;
    return AREAL_OK;
}

int areal_par_step_cp_lp_finish(const areal_par_step *s, const areal_batch *mbs, int n_mb,
                                areal_par_step_cp_lp *lp, float *const *logp, areal_error *err) {
    int rc = AREAL_OK;
    for (int i = 0; rc == AREAL_OK && i < n_mb; i++) {
        const areal_par_cp_shard *sh = &s->cp.shards[i];
        memset(logp[i], 0, sizeof(float) * (size_t)mbs[i].n_tokens);
        for (int t = 0; t < sh->b.n_tokens; t++)
            logp[i][sh->t.gidx[t]] = lp->logp[i][t];
        rc = areal_coll_all_reduce(s->cp.cp, logp[i], (size_t)mbs[i].n_tokens, AREAL_DT_F32,
                                   AREAL_SUM, err);
    }
    free(lp->buf);
    memset(lp, 0, sizeof *lp);
    return rc;
}
