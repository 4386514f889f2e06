/*
 * zero1.c - the ZeRO-1 optimizer step: reduce-scatter of the flat gradient
 * over dp, the norm and AdamW on this rank's range, all-gather of the
 * parameters (see dp.h).
 */
#include <stdlib.h>
#include <string.h>

#include "areal/parallel/dp.h"
#include "areal/parallel/reduce.h"

void areal_par_zero1_free(areal_par_zero1 *z) {
    free(z->gshard);
    free(z->pad);
    areal_adamw_free(&z->adam);
    memset(z, 0, sizeof *z);
}

int areal_par_zero1_init(areal_par_zero1 *z, const areal_model *m, areal_coll *dp,
                         areal_error *err) {
    memset(z, 0, sizeof *z);
    size_t d = (size_t)areal_par_size(dp), r = (size_t)areal_par_rank(dp);
    z->dp = dp;
    z->n = m->n_params;
    z->shard = (z->n + d - 1) / d;
    z->n_pad = z->shard * d;
    z->lo = r * z->shard < z->n ? r * z->shard : z->n;
    z->hi = z->lo + z->shard < z->n ? z->lo + z->shard : z->n;
    z->gshard = calloc(z->shard ? z->shard : 1, sizeof(float));
    z->pad = calloc(z->n_pad ? z->n_pad : 1, sizeof(float));
    if (z->gshard == NULL || z->pad == NULL) {
        areal_par_zero1_free(z);
        return areal_error_set(err, AREAL_ENOMEM, -1, "zero1: out of memory for %zu parameters",
                               z->n);
    }
    /* An empty range (more dp ranks than parameters' blocks) keeps a one-float state. */
    int rc = areal_adamw_init(&z->adam, z->hi > z->lo ? z->hi - z->lo : 1, err);
    if (rc != AREAL_OK) {
        areal_par_zero1_free(z);
        return rc;
    }
    z->adam.n = z->hi - z->lo;
    return AREAL_OK;
}

int areal_par_zero1_load(areal_par_zero1 *z, const areal_adamw *full, areal_error *err) {
    if (full->n != z->n)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "zero1: optimizer state of %zu parameters for a model of %zu",
                               full->n, z->n);
    memcpy(z->adam.m, full->m + z->lo, sizeof(float) * (z->hi - z->lo));
    memcpy(z->adam.v, full->v + z->lo, sizeof(float) * (z->hi - z->lo));
    z->adam.step = full->step;
    return AREAL_OK;
}

int areal_par_zero1_step(areal_par_zero1 *z, areal_model *m, const areal_par_groups *g,
                         const areal_adamw_cfg *cfg, double lr, double max_norm, double *norm,
                         areal_pool *pool, areal_error *err) {
    size_t d = (size_t)areal_par_size(z->dp);
    int rc;
    if (m->n_params != z->n)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "zero1: state made for %zu parameters, model has %zu (init it for "
                               "this model)",
                               z->n, m->n_params);
    memcpy(z->pad, m->grads, sizeof(float) * z->n);
    memset(z->pad + z->n, 0, sizeof(float) * (z->n_pad - z->n));
    if (d > 1)
        rc = areal_coll_reduce_scatter(z->dp, z->pad, z->gshard, z->shard, AREAL_DT_F32, AREAL_SUM,
                                       err);
    else
        memcpy(z->gshard, z->pad, sizeof(float) * z->shard), rc = AREAL_OK;
    if (rc != AREAL_OK)
        return rc;
    rc = areal_par_grad_norm(m, z->gshard, z->lo, z->hi, g, z->dp, norm, err);
    if (rc != AREAL_OK)
        return rc;
    size_t n = z->hi - z->lo;
    areal_par_clip(z->gshard, n, *norm, max_norm);
    if (n > 0)
        areal_adamw_step(&z->adam, cfg, lr, m->params + z->lo, z->gshard, pool);
    else
        z->adam.step++; /* keep the bias correction in step with the other ranks */
    /* The updated range, padded, gathered into every rank's copy. */
    memcpy(z->gshard, m->params + z->lo, sizeof(float) * n);
    memset(z->gshard + n, 0, sizeof(float) * (z->shard - n));
    if (d > 1) {
        rc = areal_coll_all_gather(z->dp, z->gshard, z->pad, z->shard, AREAL_DT_F32, err);
        if (rc != AREAL_OK)
            return rc;
        memcpy(m->params, z->pad, sizeof(float) * z->n);
    }
    return AREAL_OK;
}
