/*
 * vpp.c - the interleaved pipeline schedule: Megatron's per-rank op order,
 * a replayed simulation that orders the blocking transfers so they cannot
 * deadlock, and the run itself (see vpp.h).
 */
#include "areal/parallel/vpp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "areal/parallel/reduce.h"

enum { DUR_F = 1, DUR_B = 2 };

typedef struct vop {
    int bwd, mb, c; /* backward?, micro-batch, chunk */
    long start;     /* simulated start time */
} vop;

/* A rank's events: ops (kind 1) and transfers (kind 0), in execution order after sorting. */
typedef struct vev {
    long t;
    int kind;
    long key; /* transfers: the message id (same on both ends); ops: the op index */
} vev;

typedef struct sched {
    int p, vpp, m, total; /* total = m * vpp ops of each direction per rank */
    vop *ops;             /* [p][2 * total] */
    long *f_end, *b_end;  /* [m][p * vpp] end times of F / B of (mb, virtual stage) */
} sched;

static vop *op_of(const sched *s, int r, int i) {
    return &s->ops[(size_t)r * 2 * s->total + i];
}

static void sched_free(sched *s) {
    free(s->ops);
    free(s->f_end);
    free(s->b_end);
    memset(s, 0, sizeof *s);
}

/* Megatron's order of rank r's ops. */
static void order(sched *s, int r) {
    int p = s->p, v = s->vpp, total = s->total, pv = p * v;
    /* vpp 1: plain 1F1B (pipe.c's order), for the bubble's comparison */
    int warm = v == 1 ? p - r - 1 : s->m == p ? total : (p - r - 1) * 2 + (v - 1) * p;
    if (warm > total)
        warm = total;
    int i = 0;
#define MB(k)  (((k) / pv) * p + (k) % p)
#define FWD(k) (*op_of(s, r, i++) = (vop){0, MB(k), ((k) % pv) / p, -1})
#define BWD(k) (*op_of(s, r, i++) = (vop){1, MB(k), v - 1 - ((k) % pv) / p, -1})
    for (int k = 0; k < warm; k++)
        FWD(k);
    for (int k = 0; k < total - warm; k++) {
        FWD(warm + k);
        BWD(k);
    }
    for (int k = total - warm; k < total; k++)
        BWD(k);
#undef MB
#undef FWD
#undef BWD
}

static int check(int p, int vpp, int n_mb, areal_error *err) {
    if (vpp < 2 || p < 2)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "interleaved pipeline: vpp %d over pp %d; it needs "
                               "virtual_pipeline_parallel_size >= 2 and pp >= 2 (use "
                               "areal_par_pipe_1f1b otherwise)",
                               vpp, p);
    if (n_mb < 1 || n_mb % p != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "interleaved pipeline: %d micro-batches over pp %d; the interleaved "
                               "schedule needs a multiple of pp (Megatron's rule)",
                               n_mb, p);
    return AREAL_OK;
}

/* Builds every rank's order and simulates it; AREAL_ENOMEM. */
static int simulate(sched *s, int p, int vpp, int m, areal_error *err) {
    memset(s, 0, sizeof *s);
    s->p = p, s->vpp = vpp, s->m = m, s->total = m * vpp;
    size_t nv = (size_t)m * p * vpp;
    s->ops = malloc(sizeof(vop) * (size_t)p * 2 * s->total);
    s->f_end = malloc(sizeof(long) * nv);
    s->b_end = malloc(sizeof(long) * nv);
    int *pos = calloc((size_t)p, sizeof(int));
    long *free_at = calloc((size_t)p, sizeof(long));
    if (s->ops == NULL || s->f_end == NULL || s->b_end == NULL || pos == NULL || free_at == NULL) {
        free(pos), free(free_at), sched_free(s);
        return areal_error_set(err, AREAL_ENOMEM, -1, "interleaved pipeline: out of memory");
    }
    for (size_t i = 0; i < nv; i++)
        s->f_end[i] = s->b_end[i] = -1;
    for (int r = 0; r < p; r++)
        order(s, r);
    int last = p * vpp - 1, done = 0, n = 2 * s->total;
    for (int progress = 1; progress && done < p * n;) {
        progress = 0;
        for (int r = 0; r < p; r++) {
            while (pos[r] < n) {
                vop *o = op_of(s, r, pos[r]);
                int vs = o->c * p + r;
                size_t at = (size_t)o->mb * p * vpp + vs;
                long in; /* when the op's input is there; -1: not yet known */
                if (!o->bwd)
                    in = vs == 0 ? 0 : s->f_end[at - 1];
                else
                    in = vs == last ? s->f_end[at] : s->b_end[at + 1];
                if (in < 0)
                    break;
                o->start = in > free_at[r] ? in : free_at[r];
                free_at[r] = o->start + (o->bwd ? DUR_B : DUR_F);
                (o->bwd ? s->b_end : s->f_end)[at] = free_at[r];
                pos[r]++, done++, progress = 1;
            }
        }
    }
    free(pos), free(free_at);
    if (done < p * n) { /* Megatron's order never stalls; this guards the code above */
        sched_free(s);
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "interleaved pipeline: the schedule for pp %d vpp %d and %d "
                               "micro-batches stalls",
                               p, vpp, m);
    }
    return AREAL_OK;
}

int areal_par_vpp_bubble(int p, int vpp, int n_mb, double *bubble, areal_error *err) {
    int rc = p >= 1 && vpp == 1 && n_mb >= 1 ? AREAL_OK : check(p, vpp, n_mb, err);
    sched s;
    if (rc == AREAL_OK)
        rc = simulate(&s, p, vpp, n_mb, err);
    if (rc != AREAL_OK)
        return rc;
    long span = 0;
    for (size_t i = 0; i < (size_t)n_mb * p * vpp; i++)
        if (s.b_end[i] > span)
            span = s.b_end[i];
    long busy = (long)s.total * (DUR_F + DUR_B);
    *bubble = (double)(span - busy) / (double)span;
    sched_free(&s);
    return AREAL_OK;
}

static int ev_cmp(const void *a, const void *b) {
    const vev *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return x->key < y->key ? -1 : x->key > y->key;
}

/* Message ids: forward output of (mb, vs), backward output of (mb, vs). */
static long msg_key(const sched *s, int bwd, int mb, int vs) {
    return ((long)bwd * s->m + mb) * s->p * s->vpp + vs;
}

/* Rank r's events in execution order; *n of them. */
static int events(const sched *s, int r, vev **out, int *n, areal_error *err) {
    int p = s->p, pv = p * s->vpp, last = pv - 1, cap = 2 * s->total * 3, k = 0;
    vev *e = malloc(sizeof(vev) * (size_t)cap);
    if (e == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "interleaved pipeline: out of memory");
    for (int i = 0; i < 2 * s->total; i++) {
        const vop *o = op_of(s, r, i);
        int vs = o->c * p + r;
        size_t at = (size_t)o->mb * pv + vs;
        e[k++] = (vev){o->start, 1, i};
        /* this op's output transfer (as sender) */
        if (!o->bwd && vs < last)
            e[k++] = (vev){s->f_end[at], 0, msg_key(s, 0, o->mb, vs)};
        if (o->bwd && vs > 0)
            e[k++] = (vev){s->b_end[at], 0, msg_key(s, 1, o->mb, vs)};
        /* its input transfer (as receiver) */
        if (!o->bwd && vs > 0)
            e[k++] = (vev){s->f_end[at - 1], 0, msg_key(s, 0, o->mb, vs - 1)};
        if (o->bwd && vs < last)
            e[k++] = (vev){s->b_end[at + 1], 0, msg_key(s, 1, o->mb, vs + 1)};
    }
    qsort(e, (size_t)k, sizeof *e, ev_cmp);
    *out = e, *n = k;
    return AREAL_OK;
}

/* The run's buffers, per (micro-batch, chunk). */
typedef struct vrun {
    areal_model *const *chunks;
    areal_coll *pp;
    const areal_batch *mbs;
    const sched *s;
    int r, H, V;
    areal_par_loss_fn loss_fn;
    void *loss_ctx;
    double loss;
    areal_acts *acts; /* [m * vpp] */
    float **x, **dy, **dx;
} vrun;

static size_t slot(const vrun *v, int mb, int c) {
    return (size_t)mb * v->s->vpp + c;
}

static int run_op(vrun *v, const vop *o, areal_error *err) {
    int p = v->s->p, vs = o->c * p + v->r, last = p * v->s->vpp - 1;
    size_t k = slot(v, o->mb, o->c), T = (size_t)v->mbs[o->mb].n_tokens;
    areal_model *m = v->chunks[o->c];
    int rc;
    if (!o->bwd) {
        rc = areal_model_forward_stage(m, &v->mbs[o->mb], vs == 0 ? NULL : v->x[k], &v->acts[k],
                                       err);
        free(v->x[k]), v->x[k] = NULL;
        if (rc == AREAL_OK && vs == last) {
            v->dy[k] = malloc(sizeof(float) * T * (size_t)v->V);
            rc = v->dy[k] == NULL ? areal_error_set(err, AREAL_ENOMEM, -1, "pipeline: no memory")
                                  : v->loss_fn(v->loss_ctx, o->mb, v->acts[k].logits, (int)T, v->V,
                                               v->dy[k], &v->loss, err);
        }
        return rc;
    }
    if (vs > 0 && (v->dx[k] = malloc(sizeof(float) * T * (size_t)v->H)) == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "pipeline: no memory");
    /* a chunk's backwards run in micro-batch order: the last one's gradients are final */
    areal_model_arm_grad_ready(m, o->mb == v->s->m - 1);
    rc = areal_model_backward_stage(m, &v->acts[k], v->dy[k], vs > 0 ? v->dx[k] : NULL, err);
    areal_model_arm_grad_ready(m, false);
    areal_acts_free(&v->acts[k]);
    free(v->dy[k]), v->dy[k] = NULL;
    return rc;
}

/* Transfer `key`: this rank sends or receives it. */
static int run_xfer(vrun *v, long key, areal_error *err) {
    const sched *s = v->s;
    int p = s->p, pv = p * s->vpp;
    int vs = (int)(key % pv), mb = (int)(key / pv % s->m), bwd = (int)(key / pv / s->m);
    int to = bwd ? vs - 1 : vs + 1, from_rank = vs % p, to_rank = to % p;
    size_t T = (size_t)v->mbs[mb].n_tokens, n = T * (size_t)v->H;
    if (from_rank == v->r) { /* sender */
        size_t k = slot(v, mb, vs / p);
        int rc = areal_coll_send(v->pp, bwd ? v->dx[k] : v->acts[k].hidden, n, AREAL_DT_F32,
                                 to_rank, err);
        if (bwd)
            free(v->dx[k]), v->dx[k] = NULL;
        return rc;
    }
    size_t k = slot(v, mb, to / p);
    float **dst = bwd ? &v->dy[k] : &v->x[k];
    if ((*dst = malloc(sizeof(float) * n)) == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "pipeline: no memory");
    return areal_coll_recv(v->pp, *dst, n, AREAL_DT_F32, from_rank, err);
}

int areal_par_pipe_interleaved(areal_model *const *chunks, int vpp, areal_coll *pp,
                               const areal_batch *mbs, int n_mb, areal_par_loss_fn loss_fn,
                               void *loss_ctx, double *loss, areal_error *err) {
    int p = areal_par_size(pp), r = areal_par_rank(pp);
    int rc = check(p, vpp, n_mb, err);
    for (int c = 0; rc == AREAL_OK && c < vpp; c++)
        if (chunks[c]->shard.pp != p * vpp || chunks[c]->shard.pp_stage != c * p + r)
            rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "interleaved pipeline: chunk %d of pp rank %d must be virtual "
                                 "stage %d of %d but is stage %d of %d (make it with "
                                 "areal_model_shard_stage(cfg, c*p + r, p*vpp))",
                                 c, r, c * p + r, p * vpp, chunks[c]->shard.pp_stage,
                                 chunks[c]->shard.pp);
    sched s;
    if (rc == AREAL_OK)
        rc = simulate(&s, p, vpp, n_mb, err);
    if (rc != AREAL_OK)
        return rc;
    size_t ns = (size_t)n_mb * vpp;
    vrun v = {.chunks = chunks,
              .pp = pp,
              .mbs = mbs,
              .s = &s,
              .r = r,
              .H = chunks[0]->cfg.hidden_size,
              .V = areal_model_shard_vocab(&chunks[vpp - 1]->cfg, &chunks[vpp - 1]->shard, NULL),
              .loss_fn = loss_fn,
              .loss_ctx = loss_ctx};
    v.acts = calloc(ns, sizeof *v.acts);
    v.x = calloc(ns * 3, sizeof(float *));
    vev *ev = NULL;
    int n_ev = 0;
    rc = v.acts == NULL || v.x == NULL
             ? areal_error_set(err, AREAL_ENOMEM, -1, "interleaved pipeline: out of memory")
             : events(&s, r, &ev, &n_ev, err);
    if (v.x != NULL)
        v.dy = v.x + ns, v.dx = v.x + 2 * ns;
    for (int i = 0; rc == AREAL_OK && i < n_ev; i++)
        rc = ev[i].kind == 1 ? run_op(&v, op_of(&s, r, (int)ev[i].key), err)
                             : run_xfer(&v, ev[i].key, err);
    if (rc == AREAL_OK && loss != NULL) { /* the last rank's sum, to every rank */
        float lv[2] = {(float)v.loss, 0};
        lv[1] = (float)(v.loss - (double)lv[0]);
        rc = areal_coll_broadcast(pp, lv, 2, AREAL_DT_F32, p - 1, err);
        *loss = (double)lv[0] + (double)lv[1];
    }
    for (size_t i = 0; v.acts != NULL && v.x != NULL && i < ns; i++) {
        areal_acts_free(&v.acts[i]); /* after a failure, what was still alive */
        free(v.x[i]), free(v.dy[i]), free(v.dx[i]);
    }
    free(v.acts);
    free(v.x);
    free(ev);
    sched_free(&s);
    return rc;
}

int areal_par_vpp_grad_norm(areal_model *const *chunks, int vpp, const areal_par_groups *g,
                            double *norm, areal_error *err) {
    areal_par_groups none = {0};
    double acc = 0;
    for (int c = 0; c < vpp; c++) {
        double nc = 0;
        int rc = areal_par_grad_norm(chunks[c], chunks[c]->grads, 0, chunks[c]->n_params, &none,
                                     NULL, &nc, err);
        if (rc != AREAL_OK)
            return rc;
        acc += nc * nc;
    }
    float v = (float)acc;
    areal_coll *gs[3] = {g->tp, g->pp, g->ep};
    for (int i = 0; i < 3; i++)
        if (gs[i] != NULL && areal_coll_size(gs[i]) > 1) {
            int rc = areal_coll_all_reduce(gs[i], &v, 1, AREAL_DT_F32, AREAL_SUM, err);
            if (rc != AREAL_OK)
                return rc;
        }
    *norm = sqrt((double)v);
    return AREAL_OK;
}
