/*
 * pipe.c - the 1F1B pipeline schedule over a pp group (see pipe.h): the
 * order is Megatron's forward_backward_pipelining_without_interleaving, with
 * its paired transfers (send_forward_recv_backward, send_backward_recv_
 * forward) made of two blocking calls ordered by stage, lower sends first.
 */
#include "areal/parallel/pipe.h"

#include <stdlib.h>
#include <string.h>

typedef struct pipe_run {
    areal_model *m;
    areal_coll *pp;
    const areal_batch *mbs;
    int n_mb, p, s, H, V;
    areal_par_loss_fn loss_fn;
    void *loss_ctx;
    double loss;
    areal_acts *acts; /* [n_mb]; live from a micro-batch's forward to its backward */
    float *x;         /* [max T, H] the input received for the next forward */
    float *dy;        /* [max T, max(H, V)] d(output) of the next backward */
    float *dx;        /* [max T, H] the backward's input gradient to send */
} pipe_run;

static size_t rows(const pipe_run *r, int mb) {
    return (size_t)r->mbs[mb].n_tokens;
}

static int recv_prev(pipe_run *r, float *buf, size_t n, areal_error *err) {
    return areal_coll_recv(r->pp, buf, n, AREAL_DT_F32, r->s - 1, err);
}
static int send_prev(pipe_run *r, const float *buf, size_t n, areal_error *err) {
    return areal_coll_send(r->pp, buf, n, AREAL_DT_F32, r->s - 1, err);
}
static int recv_next(pipe_run *r, float *buf, size_t n, areal_error *err) {
    return areal_coll_recv(r->pp, buf, n, AREAL_DT_F32, r->s + 1, err);
}
static int send_next(pipe_run *r, const float *buf, size_t n, areal_error *err) {
    return areal_coll_send(r->pp, buf, n, AREAL_DT_F32, r->s + 1, err);
}

/* Forward of micro-batch mb, its input already in r->x on later stages. */
static int fwd(pipe_run *r, int mb, areal_error *err) {
    int rc =
        areal_model_forward_stage(r->m, &r->mbs[mb], r->s > 0 ? r->x : NULL, &r->acts[mb], err);
    if (rc == AREAL_OK && r->s == r->p - 1)
        rc = r->loss_fn(r->loss_ctx, mb, r->acts[mb].logits, (int)rows(r, mb), r->V, r->dy,
                        &r->loss, err);
    return rc;
}

/* Backward of micro-batch mb from r->dy (dlogits on the last stage); its input gradient in r->dx.
 */
static int bwd(pipe_run *r, int mb, areal_error *err) {
    /* backwards run in micro-batch order: only the last one's gradients are final */
    areal_model_arm_grad_ready(r->m, mb == r->n_mb - 1);
    int rc = areal_model_backward_stage(r->m, &r->acts[mb], r->dy, r->s > 0 ? r->dx : NULL, err);
    areal_model_arm_grad_ready(r->m, false);
    areal_acts_free(&r->acts[mb]);
    return rc;
}

/* After forward f: send its output to the next stage and receive backward b's gradient. */
static int send_fwd_recv_bwd(pipe_run *r, int f, int b, areal_error *err) {
    if (r->s == r->p - 1)
        return AREAL_OK;                                              /* the loss wrote r->dy */
    int rc = send_next(r, r->acts[f].hidden, rows(r, f) * r->H, err); /* lower stage: send first */
    return rc != AREAL_OK ? rc : recv_next(r, r->dy, rows(r, b) * r->H, err);
}

/* After backward b: send its input gradient back and receive forward f's input. */
static int send_bwd_recv_fwd(pipe_run *r, int b, int f, areal_error *err) {
    if (r->s == 0)
        return AREAL_OK;
    int rc = recv_prev(r, r->x, rows(r, f) * r->H, err); /* higher stage: receive first */
    return rc != AREAL_OK ? rc : send_prev(r, r->dx, rows(r, b) * r->H, err);
}

static int schedule(pipe_run *r, areal_error *err) {
    int first = r->s == 0, last = r->s == r->p - 1;
    int warm = r->p - r->s - 1 < r->n_mb ? r->p - r->s - 1 : r->n_mb, rem = r->n_mb - warm;
    int rc = AREAL_OK;
    for (int i = 0; i < warm && rc == AREAL_OK; i++) {
        if (!first)
            rc = recv_prev(r, r->x, rows(r, i) * r->H, err);
        if (rc == AREAL_OK)
            rc = fwd(r, i, err);
        if (rc == AREAL_OK) /* warm-up stages are never the last */
            rc = send_next(r, r->acts[i].hidden, rows(r, i) * r->H, err);
    }
    if (rc == AREAL_OK && rem > 0 && !first)
        rc = recv_prev(r, r->x, rows(r, warm) * r->H, err);
    for (int k = 0; k < rem && rc == AREAL_OK; k++) {
        int f = warm + k, b = k;
        rc = fwd(r, f, err);
        if (rc == AREAL_OK)
            rc = send_fwd_recv_bwd(r, f, b, err);
        if (rc == AREAL_OK)
            rc = bwd(r, b, err);
        if (rc != AREAL_OK)
            break;
        if (k == rem - 1)
            rc = first ? AREAL_OK : send_prev(r, r->dx, rows(r, b) * r->H, err);
        else
            rc = send_bwd_recv_fwd(r, b, f + 1, err);
    }
    for (int b = rem; b < r->n_mb && rc == AREAL_OK; b++) {
        if (!last)
            rc = recv_next(r, r->dy, rows(r, b) * r->H, err);
        if (rc == AREAL_OK)
            rc = bwd(r, b, err);
        if (rc == AREAL_OK && !first)
            rc = send_prev(r, r->dx, rows(r, b) * r->H, err);
    }
    return rc;
}

/* The summed loss from the last stage to every stage (two floats: value and remainder). */
static int share_loss(pipe_run *r, double *loss, areal_error *err) {
    float v[2] = {(float)r->loss, 0};
    v[1] = (float)(r->loss - (double)v[0]);
    int rc = r->p > 1 ? areal_coll_broadcast(r->pp, v, 2, AREAL_DT_F32, r->p - 1, err) : AREAL_OK;
    *loss = (double)v[0] + (double)v[1];
    return rc;
}

int areal_par_pipe_1f1b(areal_model *m, areal_coll *pp, const areal_batch *mbs, int n_mb,
                        areal_par_loss_fn loss_fn, void *loss_ctx, double *loss, areal_error *err) {
    if (n_mb < 1 || mbs == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "pipeline: n_mb is %d; give at least one micro-batch", n_mb);
    pipe_run r = {
        .m = m,
        .pp = pp,
        .mbs = mbs,
        .n_mb = n_mb,
        .p = pp == NULL ? 1 : areal_coll_size(pp),
        .s = pp == NULL ? 0 : areal_coll_rank(pp),
        .H = m->cfg.hidden_size,
        .V = areal_model_shard_vocab(&m->cfg, &m->shard, NULL), /* vocab-parallel: local */
        .loss_fn = loss_fn,
        .loss_ctx = loss_ctx,
    };
    if (r.p != m->shard.pp || r.s != m->shard.pp_stage)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "pipeline: the model is stage %d of %d but the pp group makes this "
                               "rank stage %d of %d (make the shard with areal_par_shard_of)",
                               m->shard.pp_stage, m->shard.pp, r.s, r.p);
    size_t maxT = 1;
    for (int i = 0; i < n_mb; i++)
        if ((size_t)mbs[i].n_tokens > maxT)
            maxT = (size_t)mbs[i].n_tokens;
    size_t wide = (size_t)(r.V > r.H ? r.V : r.H);
    r.acts = calloc((size_t)n_mb, sizeof *r.acts);
    r.x = malloc(sizeof(float) * maxT * (size_t)r.H);
    r.dx = malloc(sizeof(float) * maxT * (size_t)r.H);
    r.dy = malloc(sizeof(float) * maxT * wide);
    int rc = r.acts == NULL || r.x == NULL || r.dx == NULL || r.dy == NULL
                 ? areal_error_set(err, AREAL_ENOMEM, -1, "pipeline: out of memory")
                 : schedule(&r, err);
    if (rc == AREAL_OK && loss != NULL)
        rc = share_loss(&r, loss, err);
    for (int i = 0; r.acts != NULL && i < n_mb; i++)
        areal_acts_free(&r.acts[i]); /* after a failure, what was still alive */
    free(r.acts);
    free(r.x);
    free(r.dx);
    free(r.dy);
    return rc;
}

int areal_par_pipe_forward(areal_model *m, areal_coll *pp, const areal_batch *mbs, int n_mb,
                           areal_par_loss_fn fn, void *ctx, areal_error *err) {
    if (n_mb < 1 || mbs == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "pipeline: n_mb is %d; give at least one micro-batch", n_mb);
    int p = pp == NULL ? 1 : areal_coll_size(pp), s = pp == NULL ? 0 : areal_coll_rank(pp);
    if (p != m->shard.pp || s != m->shard.pp_stage)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "pipeline: the model is stage %d of %d but the pp group makes this "
                               "rank stage %d of %d (make the shard with areal_par_shard_of)",
                               m->shard.pp_stage, m->shard.pp, s, p);
    size_t H = (size_t)m->cfg.hidden_size, maxT = 1;
    for (int i = 0; i < n_mb; i++)
        if ((size_t)mbs[i].n_tokens > maxT)
            maxT = (size_t)mbs[i].n_tokens;
    int V = areal_model_shard_vocab(&m->cfg, &m->shard, NULL);
    float *x = s > 0 ? malloc(sizeof(float) * maxT * H) : NULL;
    int rc = s > 0 && x == NULL ? areal_error_set(err, AREAL_ENOMEM, -1, "pipeline: out of memory")
                                : AREAL_OK;
    for (int i = 0; rc == AREAL_OK && i < n_mb; i++) {
        size_t n = (size_t)mbs[i].n_tokens * H;
        if (s > 0)
            rc = areal_coll_recv(pp, x, n, AREAL_DT_F32, s - 1, err);
        areal_acts a;
        if (rc == AREAL_OK)
            rc = areal_model_forward_stage(m, &mbs[i], s > 0 ? x : NULL, &a, err);
        if (rc != AREAL_OK)
            break;
        double scratch = 0;
        if (s == p - 1)
            rc = fn(ctx, i, a.logits, mbs[i].n_tokens, V, NULL, &scratch, err);
        else
            rc = areal_coll_send(pp, a.hidden, n, AREAL_DT_F32, s + 1, err);
        areal_acts_free(&a);
    }
    free(x);
    return rc;
}
