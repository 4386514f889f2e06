/*
 * zero1_overlap.c - ZeRO-1's optimizer step on the overlapped reducer's
 * pieces (one per bucket, see overlap.h): the norm over the pieces, AdamW on
 * them, the parameters all-gathered bucket by bucket.
 *
 * Rank r's piece of bucket b is floats [b.lo + r*b.c, b.lo + (r+1)*b.c) of
 * the flat buffer, clipped to the bucket; the slots past the bucket are
 * padding whose gradient is the sum of zeros, so their "parameter" (zero)
 * stays zero and never reaches the model.
 */
#include <math.h>
#include <string.h>

#include "areal/parallel/overlap.h"
#include "areal/parallel/reduce.h"

static size_t numel(const areal_tensor_spec *t) {
    return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}

/* This rank's flat range [*a, *z) of bucket b (empty past the bucket). */
static void piece(const areal_par_bucket *b, size_t r, size_t *a, size_t *z) {
    size_t lo = r * b->c < b->n ? r * b->c : b->n,
           hi = (r + 1) * b->c < b->n ? (r + 1) * b->c : b->n;
    *a = b->lo + lo, *z = b->lo + hi;
}

static int sum_over(areal_coll *c, float *v, areal_error *err) {
    if (areal_par_size(c) < 2)
        return AREAL_OK;
    return areal_coll_all_reduce(c, v, 1, AREAL_DT_F32, AREAL_SUM, err);
}

/* The global norm: each counted element of every piece, summed over dp, tp, pp, ep. */
static int pieces_norm(const areal_par_overlap *o, const areal_par_groups *g, double *norm,
                       areal_error *err) {
    const areal_model *m = o->m;
    size_t r = (size_t)areal_par_rank(o->dp);
    double acc = 0;
    for (size_t k = 0; k < o->nb; k++) {
        const areal_par_bucket *b = &o->b[k];
        size_t lo, hi;
        piece(b, r, &lo, &hi);
        const float *gs = o->gshard + b->goff;
        size_t p0 = b->lo + r * b->c; /* the flat position of gs[0] */
        for (size_t i = 0; i < m->n_specs && lo < hi; i++) {
            size_t a = m->offset[i], z = a + numel(&m->specs[i]);
            a = a < lo ? lo : a;
            z = z > hi ? hi : z;
            if (a >= z || !areal_par_counts(m, i))
                continue;
            for (size_t x = a; x < z; x++)
                acc += (double)gs[x - p0] * gs[x - p0];
        }
    }
    float v = (float)acc;
    int rc = sum_over(o->dp, &v, err);
    if (rc == AREAL_OK)
        rc = sum_over(g->tp, &v, err);
    if (rc == AREAL_OK)
        rc = sum_over(g->pp, &v, err);
    if (rc == AREAL_OK)
        rc = sum_over(g->ep, &v, err);
    *norm = sqrt((double)v);
    return rc;
}

/* Every bucket's updated pieces gathered into the model's parameters (queued at once). */
static int gather_params(areal_par_overlap *o, areal_error *err) {
    size_t d = (size_t)areal_par_size(o->dp);
    float *p = o->m->params;
    if (d < 2) {
        for (size_t k = 0; k < o->nb; k++)
            memcpy(p + o->b[k].lo, o->pshard + o->b[k].goff, sizeof(float) * o->b[k].n);
        return AREAL_OK;
    }
    int rc = AREAL_OK;
    size_t issued = 0;
    for (; issued < o->nb; issued++) {
        areal_par_bucket *b = &o->b[issued];
        rc = areal_coll_all_gather_async(o->dp, o->pshard + b->goff, o->stage + b->soff, b->c,
                                         AREAL_DT_F32, &b->work, err);
        if (rc != AREAL_OK)
            break;
    }
    for (size_t k = 0; k < issued; k++) {
        areal_par_bucket *b = &o->b[k];
        areal_error e2;
        int r = areal_coll_work_wait(b->work, rc == AREAL_OK ? err : &e2);
        b->work = NULL;
        if (rc == AREAL_OK && (rc = r) == AREAL_OK)
            memcpy(p + b->lo, o->stage + b->soff, sizeof(float) * b->n);
    }
    return rc;
}

int areal_par_overlap_zero1_step(areal_par_overlap *o, const areal_par_groups *g,
                                 const areal_adamw_cfg *cfg, double lr, double max_norm,
                                 double *norm, areal_pool *pool, areal_error *err) {
    if (!o->zero1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "dp overlap: a ZeRO-1 step on a plain-DP reducer (init it with "
                               "zero1 = 1)");
    int rc = areal_par_overlap_finish(o, err);
    if (rc == AREAL_OK)
        rc = pieces_norm(o, g, norm, err);
    if (rc != AREAL_OK)
        return rc;
    areal_par_clip(o->gshard, o->S, *norm, max_norm);
    size_t r = (size_t)areal_par_rank(o->dp);
    memset(o->pshard, 0, sizeof(float) * o->S);
    for (size_t k = 0; k < o->nb; k++) {
        const areal_par_bucket *b = &o->b[k];
        size_t lo, hi;
        piece(b, r, &lo, &hi);
        memcpy(o->pshard + b->goff, o->m->params + lo, sizeof(float) * (hi - lo));
    }
    if (o->S > 0)
        areal_adamw_step(&o->adam, cfg, lr, o->pshard, o->gshard, pool);
    return gather_params(o, err);
}

void areal_par_overlap_piece(const areal_par_overlap *o, size_t k, size_t *lo, size_t *hi) {
    piece(&o->b[k], (size_t)areal_par_rank(o->dp), lo, hi);
}

int areal_par_overlap_load(areal_par_overlap *o, const areal_adamw *full, areal_error *err) {
    if (!o->zero1 || full->n != o->m->n_params)
        return areal_error_set(
            err, AREAL_EINVAL, -1, "dp overlap: optimizer state of %zu parameters for a %s of %zu",
            full->n, o->zero1 ? "model" : "plain-DP reducer (not ZeRO-1)", o->m->n_params);
    memset(o->adam.m, 0, sizeof(float) * o->adam.n);
    memset(o->adam.v, 0, sizeof(float) * o->adam.n);
    for (size_t k = 0; k < o->nb; k++) {
        size_t lo, hi;
        areal_par_overlap_piece(o, k, &lo, &hi);
        memcpy(o->adam.m + o->b[k].goff, full->m + lo, sizeof(float) * (hi - lo));
        memcpy(o->adam.v + o->b[k].goff, full->v + lo, sizeof(float) * (hi - lo));
    }
    o->adam.step = full->step;
    return AREAL_OK;
}
