/*
 * step.c - one optimizer step of a parallel layout (see step.h): the
 * composition the equivalence tests proved piece by piece, in one place.
 */
#include "areal/parallel/step.h"

#include <stdlib.h>
#include <string.h>

#include "areal/model/heads.h"
#include "areal/parallel/reduce.h"
#include "areal/parallel/vpp.h"
#include "step_cp.h"
#include "step_vpp.h"

int areal_par_step_init(areal_par_step *s, areal_par_optim kind, const areal_par_groups *g,
                        areal_coll *data, areal_model *m, areal_par_fsdp *f, areal_pool *pool,
                        areal_error *err) {
    memset(s, 0, sizeof *s);
    if (kind == AREAL_PAR_FSDP ? f == NULL : m == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "parallel step: the %s is missing (give the %s)",
                               kind == AREAL_PAR_FSDP ? "FSDP state" : "shard model",
                               kind == AREAL_PAR_FSDP ? "areal_par_fsdp_create state"
                                                      : "areal_model_init_shard model");
    s->kind = kind;
    s->g = *g;
    s->data = data;
    s->m = kind == AREAL_PAR_FSDP ? NULL : m;
    s->fsdp = kind == AREAL_PAR_FSDP ? f : NULL;
    s->pool = pool;
    int rc = AREAL_OK;
    if (kind == AREAL_PAR_ADAMW)
        rc = areal_adamw_init(&s->adam, m->n_params, err);
    else if (kind == AREAL_PAR_ZERO1)
        rc = areal_par_zero1_init(&s->z, m, data, err);
    if (rc != AREAL_OK) {
        memset(s, 0, sizeof *s);
        return rc;
    }
    if (s->m != NULL)
        areal_par_bind(s->m, &s->g);
    return AREAL_OK;
}

int areal_par_step_overlap(areal_par_step *s, areal_error *err) {
    if (s->kind == AREAL_PAR_FSDP)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "parallel step: the overlapped gradient sum is built for megatron "
                               "data parallelism (plain or ZeRO-1), not FSDP (its reduce-scatter "
                               "is per layer already)");
    if (s->ep != NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "parallel step: the overlapped gradient sum is over one data "
                               "group; expert parallelism sums experts over edp (no overlap)");
    if (s->overlap != NULL || areal_par_size(s->data) < 2)
        return AREAL_OK;
    int zero1 = s->kind == AREAL_PAR_ZERO1;
    if (zero1 && s->z.adam.step != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "parallel step: turn the ZeRO-1 overlap on before loading or "
                               "stepping the optimizer (its moments move to per-bucket pieces)");
    areal_par_overlap *o = calloc(1, sizeof *o);
    if (o == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "parallel step: no memory");
    int rc = areal_par_overlap_init(o, s->m, s->data, NULL, s->bucket, zero1, err);
    if (rc != AREAL_OK) {
        free(o);
        return rc;
    }
    if (zero1) /* the pieces replace the one range (and its whole-buffer scratch) */
        areal_par_zero1_free(&s->z);
    s->overlap = o;
    return AREAL_OK;
}

int areal_par_step_cp(areal_par_step *s, areal_coll *cp, areal_error *err) {
    if (areal_par_size(cp) < 2)
        return AREAL_OK;
    if (s->kind == AREAL_PAR_FSDP || s->ep != NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "parallel step: context parallelism is composed with megatron's "
                               "tp / pp / dp shards, not with %s yet",
                               s->kind == AREAL_PAR_FSDP ? "FSDP" : "expert parallelism");
    s->cp.cp = cp;
    areal_par_cp_bind(s->m, &s->cp);
    return AREAL_OK;
}

int areal_par_step_ep(areal_par_step *s, const areal_par_ep_groups *g, areal_error *err) {
    const char *why = s->kind == AREAL_PAR_ZERO1  ? "ZeRO-1 (its reduce-scatter over dp would sum "
                                                    "different experts' gradients)"
                      : s->kind == AREAL_PAR_FSDP ? "FSDP (it holds no expert shard)"
                      : s->overlap != NULL        ? "the overlapped dp gradient sum"
                      : areal_par_step_cp_on(s)   ? "context parallelism (not composed yet)"
                                                  : NULL;
    if (why != NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "parallel step: expert dispatch is built for plain AdamW, not %s",
                               why);
    areal_par_ep *d = calloc(1, sizeof *d);
    if (d == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "parallel step: no memory");
    int rc = areal_par_ep_init(d, g, err);
    if (rc != AREAL_OK) {
        free(d);
        return rc;
    }
    free(s->ep);
    s->ep = d;
    areal_par_ep_bind(s->m, d);
    return AREAL_OK;
}

const areal_par_cp_shard *areal_par_step_cp_shard(const areal_par_step *s, int mb) {
    if (s->cp.shards == NULL || mb < 0 || mb >= s->cp.n_shards)
        return NULL;
    return &s->cp.shards[mb];
}

void areal_par_step_free(areal_par_step *s) {
    if (s->overlap != NULL) {
        areal_par_overlap_free(s->overlap);
        free(s->overlap);
    }
    free(s->ep);
    areal_par_step_vpp_free(s);
    areal_adamw_free(&s->adam);
    areal_par_zero1_free(&s->z);
    memset(s, 0, sizeof *s);
}

areal_par_vocab areal_par_step_vocab(const areal_par_step *s) {
    areal_par_vocab v = {0};
    if (s->m == NULL) { /* FSDP: whole rows */
        v.Vl = -1;
        return v;
    }
    v.Vl = areal_model_shard_vocab(&s->m->cfg, &s->m->shard, &v.v0);
    v.tp = v.Vl != s->m->cfg.vocab_size ? s->g.tp : NULL;
    return v;
}

areal_adamw *areal_par_step_adam(areal_par_step *s) {
    if (s->kind == AREAL_PAR_FSDP)
        return areal_par_fsdp_state(s->fsdp).adam;
    if (s->kind == AREAL_PAR_ZERO1)
        return s->overlap != NULL ? &s->overlap->adam : &s->z.adam;
    return &s->adam;
}

/* ---- the no-grad forward */

typedef struct lp_ctx {
    areal_par_vocab vocab;
    const int32_t *const *targets;
    float temperature;
    float *const *logp;
    areal_pool *pool;
} lp_ctx;

static int lp_fn(void *ctx, int mb, const float *logits, int T, int V, float *dlogits, double *loss,
                 areal_error *err) {
    (void)dlogits, (void)loss;
    lp_ctx *c = ctx;
    areal_par_vocab v = c->vocab;
    v.Vl = V;
    if (v.tp != NULL && areal_coll_size(v.tp) > 1)
        return areal_par_vocab_logprobs(&v, logits, T, c->targets[mb], c->temperature, c->logp[mb],
                                        NULL, err);
    /* whole rows: the one-process trainer's own function, so d1 is that trainer bit for bit */
    areal_token_logprobs(c->pool, logits, T, V, c->targets[mb], c->temperature, c->logp[mb], NULL);
    return AREAL_OK;
}

/* The interleaved schedule's loss function: the logprobs, a zero loss gradient. */
static int lp_vpp_fn(void *ctx, int mb, const float *logits, int T, int V, float *dlogits,
                     double *loss, areal_error *err) {
    memset(dlogits, 0, sizeof(float) * (size_t)T * (size_t)V);
    return lp_fn(ctx, mb, logits, T, V, dlogits, loss, err);
}

int areal_par_step_logprobs(areal_par_step *s, const areal_batch *mbs,
                            const int32_t *const *targets, int n_mb, float temperature,
                            float *const *logp, areal_error *err) {
    lp_ctx c = {areal_par_step_vocab(s), targets, temperature, logp, s->pool};
    int rc;
    if (s->kind == AREAL_PAR_FSDP) {
        rc = areal_par_fsdp_forward(s->fsdp, mbs, n_mb, lp_fn, &c, err);
    } else if (areal_par_step_cp_on(s)) {
        /* the shards' logprobs, put back in micro-batch order (every cp rank's) */
        areal_batch *run = NULL;
        areal_par_step_cp_lp lp = {0};
        rc = areal_par_step_cp_begin(s, mbs, n_mb, &run, err);
        if (rc == AREAL_OK)
            rc = areal_par_step_cp_lp_make(s, targets, n_mb, &lp, err);
        if (rc == AREAL_OK) {
            c.targets = lp.targets, c.logp = lp.logp;
            rc = areal_par_pipe_forward(s->m, s->g.pp, run, n_mb, lp_fn, &c, err);
            int r2 = areal_par_step_cp_lp_finish(s, mbs, n_mb, &lp, logp, err);
            rc = rc == AREAL_OK ? r2 : rc;
        }
        free(lp.buf);
        areal_par_step_cp_end(s, run);
    } else if (s->chunks != NULL) {
        rc = areal_par_pipe_interleaved(s->chunks, s->vpp, s->g.pp, mbs, n_mb, lp_vpp_fn, &c, NULL,
                                        err);
    } else {
        rc = areal_par_pipe_forward(s->m, s->g.pp, mbs, n_mb, lp_fn, &c, err);
    }
    int p = areal_par_size(s->g.pp);
    for (int i = 0; rc == AREAL_OK && p > 1 && i < n_mb; i++)
        rc = areal_coll_broadcast(s->g.pp, logp[i], (size_t)mbs[i].n_tokens, AREAL_DT_F32, p - 1,
                                  err);
    return rc;
}

/* ---- forward, backward and the gradient reductions */

/* A double summed over the group as a float and its remainder (the runtime sums no doubles). */
static int sum_double(areal_coll *g, double *x, areal_error *err) {
    if (areal_par_size(g) < 2)
        return AREAL_OK;
    float v[2] = {(float)*x, 0};
    v[1] = (float)(*x - (double)v[0]);
    int rc = areal_coll_all_reduce(g, v, 2, AREAL_DT_F32, AREAL_SUM, err);
    *x = (double)v[0] + (double)v[1];
    return rc;
}

/* grads on the batches the model runs (the shards under cp, made by the caller). */
static int grads_run(areal_par_step *s, const areal_batch *mbs, int n_mb, areal_par_loss_fn loss_fn,
                     void *loss_ctx, double *loss, areal_error *err) {
    double l = 0;
    int rc;
    for (int i = 0; i < n_mb; i++)
        s->tokens_run += mbs[i].n_tokens;
    if (s->kind == AREAL_PAR_FSDP) {
        /* zeroes, reduce-scatters and sums over dp itself (fsdp.h) */
        rc = areal_par_fsdp_forward_backward(s->fsdp, mbs, n_mb, loss_fn, loss_ctx, &l, err);
    } else if (s->chunks != NULL) {
        /* each chunk's sums in chunk order: every rank of a group has the same chunks */
        for (int c = 0; c < s->vpp; c++)
            areal_model_zero_grad(s->chunks[c]);
        rc = areal_par_pipe_interleaved(s->chunks, s->vpp, s->g.pp, mbs, n_mb, loss_fn, loss_ctx,
                                        &l, err);
        for (int c = 0; rc == AREAL_OK && c < s->vpp; c++) {
            rc = areal_par_reduce_partial_grads(s->chunks[c], &s->g, err);
            if (rc == AREAL_OK)
                rc = areal_par_reduce_tied_embed(s->chunks[c], &s->g, err);
            if (rc == AREAL_OK)
                rc = areal_par_dp_reduce_grads(s->chunks[c], s->data, s->bucket, err);
        }
    } else {
        areal_model_zero_grad(s->m);
        rc = areal_par_pipe_1f1b(s->m, s->g.pp, mbs, n_mb, loss_fn, loss_ctx, &l, err);
        if (rc == AREAL_OK)
            rc = areal_par_reduce_partial_grads(s->m, &s->g, err);
        if (rc == AREAL_OK)
            rc = areal_par_reduce_tied_embed(s->m, &s->g, err);
        if (rc == AREAL_OK && s->ep != NULL) /* experts over edp, the rest over dp-cp */
            rc = areal_par_ep_reduce_grads(s->m, &s->ep->g, err);
        else if (rc == AREAL_OK && s->kind == AREAL_PAR_ADAMW)
            rc = s->overlap != NULL ? areal_par_overlap_finish(s->overlap, err)
                                    : areal_par_dp_reduce_grads(s->m, s->data, s->bucket, err);
    }
    if (rc == AREAL_OK)
        rc = sum_double(s->data, &l, err);
    if (rc == AREAL_OK && loss != NULL)
        *loss = l;
    return rc;
}

int areal_par_step_grads(areal_par_step *s, const areal_batch *mbs, int n_mb,
                         areal_par_loss_fn loss_fn, void *loss_ctx, double *loss,
                         areal_error *err) {
    if (!areal_par_step_cp_on(s))
        return grads_run(s, mbs, n_mb, loss_fn, loss_ctx, loss, err);
    areal_batch *run = NULL;
    int rc = areal_par_step_cp_begin(s, mbs, n_mb, &run, err);
    if (rc == AREAL_OK)
        rc = grads_run(s, run, n_mb, loss_fn, loss_ctx, loss, err);
    areal_par_step_cp_end(s, run);
    return rc;
}

int areal_par_step_apply(areal_par_step *s, const areal_adamw_cfg *cfg, double lr, double max_norm,
                         double *norm, areal_error *err) {
    double mn = max_norm > 0 ? max_norm : 0;
    if (s->kind == AREAL_PAR_FSDP)
        return areal_par_fsdp_optim_step(s->fsdp, cfg, lr, mn, norm, err);
    if (s->kind == AREAL_PAR_ZERO1 && s->overlap != NULL)
        return areal_par_overlap_zero1_step(s->overlap, &s->g, cfg, lr, mn, norm, s->pool, err);
    if (s->kind == AREAL_PAR_ZERO1)
        return areal_par_zero1_step(&s->z, s->m, &s->g, cfg, lr, mn, norm, s->pool, err);
    if (s->chunks != NULL) {
        int rc = areal_par_vpp_grad_norm(s->chunks, s->vpp, &s->g, norm, err);
        for (int c = 0; rc == AREAL_OK && c < s->vpp; c++) {
            areal_model *m = s->chunks[c];
            areal_par_clip(m->grads, m->n_params, *norm, mn);
            areal_adamw_step(areal_par_step_chunk_adam(s, c), cfg, lr, m->params, m->grads,
                             s->pool);
        }
        return rc;
    }
    areal_model *m = s->m;
    int rc = s->ep != NULL
                 ? areal_par_ep_grad_norm(m, &s->ep->g, norm, err)
                 : areal_par_grad_norm(m, m->grads, 0, m->n_params, &s->g, NULL, norm, err);
    if (rc != AREAL_OK)
        return rc;
    areal_par_clip(m->grads, m->n_params, *norm, mn);
    areal_adamw_step(&s->adam, cfg, lr, m->params, m->grads, s->pool);
    return AREAL_OK;
}

/* ---- the GRPO step */

_Static_assert(sizeof(areal_ppo_loss_stats) % 8 == 0, "the loss statistics travel as 8-byte words");

int areal_par_step_grpo(areal_par_step *s, const areal_batch *mbs, const areal_par_ppo_mb *pmbs,
                        int n_mb, const areal_ppo_loss_opts *opts, float temperature,
                        const areal_adamw_cfg *cfg, double lr, double max_norm,
                        areal_par_step_out *out, areal_error *err) {
    memset(out, 0, sizeof *out);
    int cp = areal_par_step_cp_on(s);
    if (cp && (opts->sequence_level || (opts->rejection != NULL && opts->rejection->enabled &&
                                        opts->rejection->level == AREAL_RS_SEQUENCE)))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "parallel step: context parallelism splits each sequence over "
                               "the cp ranks, so sequence-level %s cannot be computed on a "
                               "shard; use the token level or c1",
                               opts->sequence_level ? "importance sampling (GSPO)"
                                                    : "rejection sampling");
    areal_batch *run = NULL;
    areal_par_step_cp_ppo cpd = {0};
    int rc = cp ? areal_par_step_cp_begin(s, mbs, n_mb, &run, err) : AREAL_OK;
    if (rc == AREAL_OK && cp)
        rc = areal_par_step_cp_ppo_make(s, pmbs, n_mb, &cpd, err);
    areal_par_ppo c;
    if (rc == AREAL_OK)
        rc = areal_par_ppo_init(&c, cp ? cpd.mbs : pmbs, n_mb, opts, temperature, s->data, err);
    if (rc != AREAL_OK) {
        areal_par_step_cp_ppo_free(&cpd);
        if (cp)
            areal_par_step_cp_end(s, run);
        return rc;
    }
    c.pool = s->pool;
    c.vocab = areal_par_step_vocab(s);
    if (c.vocab.Vl < 0)
        c.vocab = (areal_par_vocab){0};
    rc = grads_run(s, cp ? run : mbs, n_mb, areal_par_ppo_loss, &c, &out->loss, err);
    areal_par_step_cp_ppo_free(&cpd);
    if (cp)
        areal_par_step_cp_end(s, run);
    if (rc == AREAL_OK)
        rc = areal_par_step_apply(s, cfg, lr, max_norm, &out->grad_norm, err);
    /* the statistics exist on the last stage: every field is 8 bytes, moved as their bits */
    int p = areal_par_size(s->g.pp);
    if (rc == AREAL_OK && p > 1)
        rc = areal_coll_broadcast(s->g.pp, &c.stats, sizeof c.stats / 8, AREAL_DT_I64, p - 1, err);
    out->stats = c.stats;
    return rc;
}
