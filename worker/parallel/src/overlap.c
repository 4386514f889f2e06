/*
 * overlap.c - the bucket plan, the gradient-ready hook that queues each
 * completed bucket's collective, and finish (see overlap.h).
 */
#include "areal/parallel/overlap.h"

#include <stdlib.h>
#include <string.h>

static const char EMBED[] = "model.embed_tokens.weight";

static size_t numel(const areal_tensor_spec *t) {
    return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}

/* Whether tensor i's dp sum must wait for a sum the caller runs after the backward. */
static int is_late(const areal_model *m, size_t i) {
    const char *name = m->specs[i].name;
    if (areal_model_shard_grad_partial(&m->shard, name))
        return 1;
    return m->cfg.tie_word_embeddings && m->shard.pp > 1 && strcmp(name, EMBED) == 0;
}

static int is_expert(const areal_par_overlap *o, size_t i) {
    return o->edp != NULL && strstr(o->m->specs[i].name, "mlp.experts.") != NULL;
}

/* Buckets from the buffer's end: a run of one kind (late, expert, other) up to the cap. */
static int plan(areal_par_overlap *o, areal_error *err) {
    const areal_model *m = o->m;
    o->b = calloc(m->n_specs ? m->n_specs : 1, sizeof *o->b);
    if (o->b == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "dp overlap: out of memory for buckets");
    for (size_t k = m->n_specs; k-- > 0;) {
        size_t n = numel(&m->specs[k]);
        int late = is_late(m, k), ex = is_expert(o, k);
        areal_par_bucket *cur = o->nb ? &o->b[o->nb - 1] : NULL;
        if (n == 0)
            continue;
        if (cur != NULL && cur->late == late && cur->expert == ex && cur->n + n <= o->bucket &&
            m->offset[k] + n == cur->lo) {
            cur->lo = m->offset[k];
            cur->n += n;
            continue;
        }
        o->b[o->nb++] = (areal_par_bucket){.lo = m->offset[k], .n = n, .late = late, .expert = ex};
    }
    return AREAL_OK;
}

static areal_coll *group_of(const areal_par_overlap *o, const areal_par_bucket *b) {
    return b->expert ? o->edp : o->dp;
}

/* ZeRO-1's per-rank counts and offsets, and its buffers. */
static int plan_zero1(areal_par_overlap *o, areal_error *err) {
    size_t d = (size_t)areal_par_size(o->dp), soff = 0;
    for (size_t k = 0; k < o->nb; k++) {
        areal_par_bucket *b = &o->b[k];
        b->c = (b->n + d - 1) / d;
        b->goff = o->S;
        b->soff = soff;
        o->S += b->c;
        soff += b->c * d;
    }
    o->stage = calloc(soff ? soff : 1, sizeof(float));
    o->gshard = calloc(o->S ? o->S : 1, sizeof(float));
    o->pshard = calloc(o->S ? o->S : 1, sizeof(float));
    if (o->stage == NULL || o->gshard == NULL || o->pshard == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1,
                               "dp overlap: out of memory for ZeRO-1's %zu floats", soff);
    return areal_adamw_init(&o->adam, o->S ? o->S : 1, err);
}

int areal_par_overlap_init(areal_par_overlap *o, areal_model *m, areal_coll *dp, areal_coll *edp,
                           size_t bucket, int zero1, areal_error *err) {
    memset(o, 0, sizeof *o);
    o->m = m;
    o->dp = dp;
    o->edp = areal_par_size(edp) > 1 ? edp : NULL;
    o->zero1 = zero1 != 0;
    o->bucket = bucket ? bucket : (size_t)1 << 20;
    if (o->zero1 && o->edp != NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "dp overlap: ZeRO-1 with experts over an edp group of %d is not "
                               "built (give edp NULL, or use the plain all-reduce)",
                               areal_par_size(edp));
    int rc = plan(o, err);
    if (rc == AREAL_OK && o->zero1)
        rc = plan_zero1(o, err);
    if (rc != AREAL_OK) {
        areal_par_overlap_free(o);
        return rc;
    }
    areal_model_set_grad_ready(m, areal_par_overlap_ready, o);
    return AREAL_OK;
}

/* A step's first launch (or its finish, when nothing launched early) starts its stats. */
static void begin(areal_par_overlap *o) {
    if (o->fresh)
        memset(&o->stats, 0, sizeof o->stats), o->fresh = 0;
}

/* Queues bucket b's collective. */
static int launch(areal_par_overlap *o, areal_par_bucket *b, int early, areal_error *err) {
    areal_coll *c = group_of(o, b);
    float *g = o->m->grads + b->lo;
    int rc = AREAL_OK;
    begin(o);
    b->launched = 1;
    if (early) {
        o->stats.early++;
        o->stats.early_bytes += b->n * sizeof(float);
    } else {
        o->stats.late++;
    }
    if (!o->zero1) {
        if (areal_par_size(c) > 1)
            rc = areal_coll_all_reduce_async(c, g, b->n, AREAL_DT_F32, AREAL_SUM, &b->work, err);
        return rc;
    }
    size_t d = (size_t)areal_par_size(c);
    float *in = o->stage + b->soff;
    memcpy(in, g, sizeof(float) * b->n);
    memset(in + b->n, 0, sizeof(float) * (b->c * d - b->n));
    if (d > 1)
        rc = areal_coll_reduce_scatter_async(c, in, o->gshard + b->goff, b->c, AREAL_DT_F32,
                                             AREAL_SUM, &b->work, err);
    else
        memcpy(o->gshard + b->goff, in, sizeof(float) * b->c);
    return rc;
}

int areal_par_overlap_ready(void *ctx, size_t lo, size_t hi, areal_error *err) {
    areal_par_overlap *o = ctx;
    for (size_t k = 0; k < o->nb; k++) {
        areal_par_bucket *b = &o->b[k];
        size_t a = lo > b->lo ? lo : b->lo, z = hi < b->lo + b->n ? hi : b->lo + b->n;
        if (a >= z)
            continue;
        b->ready += z - a;
        if (b->ready >= b->n && !b->late && !b->launched) {
            int rc = launch(o, b, 1, err);
            if (rc != AREAL_OK)
                return rc;
        }
    }
    return AREAL_OK;
}

int areal_par_overlap_finish(areal_par_overlap *o, areal_error *err) {
    int rc = AREAL_OK;
    begin(o);
    for (size_t k = 0; k < o->nb; k++) {
        int done = 0;
        if (o->b[k].launched && o->b[k].work != NULL)
            areal_coll_work_test(o->b[k].work, &done);
        o->stats.done_before_finish += done || (o->b[k].launched && o->b[k].work == NULL);
    }
    /* the same order on every rank: plan order */
    for (size_t k = 0; k < o->nb && rc == AREAL_OK; k++)
        if (!o->b[k].launched)
            rc = launch(o, &o->b[k], 0, err);
    for (size_t k = 0; k < o->nb; k++) {
        areal_par_bucket *b = &o->b[k];
        if (b->work != NULL) {
            areal_error e2;
            int r = areal_coll_work_wait(b->work, rc == AREAL_OK ? err : &e2);
            b->work = NULL;
            if (rc == AREAL_OK)
                rc = r;
        }
        b->ready = 0;
        b->launched = 0;
    }
    o->total.early += o->stats.early;
    o->total.late += o->stats.late;
    o->total.early_bytes += o->stats.early_bytes;
    o->total.done_before_finish += o->stats.done_before_finish;
    o->fresh = 1;
    return rc;
}

void areal_par_overlap_free(areal_par_overlap *o) {
    for (size_t k = 0; o->b != NULL && k < o->nb; k++)
        if (o->b[k].work != NULL) {
            areal_error e;
            (void)areal_coll_work_wait(o->b[k].work, &e);
        }
    if (o->m != NULL && o->m->grad_ready_ctx == o)
        areal_model_set_grad_ready(o->m, NULL, NULL);
    free(o->b);
    free(o->stage);
    free(o->gshard);
    free(o->pshard);
    areal_adamw_free(&o->adam);
    memset(o, 0, sizeof *o);
}
