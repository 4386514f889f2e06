/*
 * reduce.c - the model's reduction hook over real groups, the partial and
 * tied gradients' sums, and the gradient norm of a sharded model (see
 * reduce.h).
 */
#include "areal/parallel/reduce.h"

#include "areal/parallel/sp.h"

#include <math.h>
#include <string.h>

static areal_coll *point_group(const areal_par_groups *g, areal_reduce_point pt) {
    return pt == AREAL_REDUCE_MOE_OUT || pt == AREAL_REDUCE_MOE_GRAD ? g->ep : g->tp;
}

int areal_par_reduce(void *ctx, areal_reduce_point point, int layer, float *buf, size_t count,
                     areal_error *err) {
    areal_coll *c = point_group(ctx, point);
    if (c == NULL) {
        const char *k =
            point == AREAL_REDUCE_MOE_OUT || point == AREAL_REDUCE_MOE_GRAD ? "ep" : "tp";
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "layer %d: the model asked for a reduction over %s but no %s group "
                               "was given (set areal_par_groups.%s)",
                               layer, k, k, k);
    }
    return areal_coll_all_reduce(c, buf, count, AREAL_DT_F32, AREAL_SUM, err);
}

void areal_par_bind(areal_model *m, const areal_par_groups *g) {
    areal_model_set_reduce(m, areal_par_reduce, (void *)g);
    areal_model_set_sp(m, areal_par_sp, (void *)g);
}

static size_t numel(const areal_tensor_spec *t) {
    return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}

int areal_par_reduce_partial_grads(areal_model *m, const areal_par_groups *g, areal_error *err) {
    /* Ask the model per group: the shard with only that dimension split. */
    areal_model_shard only_tp = m->shard, only_ep = m->shard;
    only_tp.ep = 1, only_tp.ep_rank = 0;
    only_ep.tp = 1, only_ep.tp_rank = 0;
    for (size_t i = 0; i < m->n_specs; i++) {
        const char *name = m->specs[i].name;
        float *gr = m->grads + m->offset[i];
        size_t n = numel(&m->specs[i]);
        int rc = AREAL_OK;
        if (g->tp != NULL && areal_model_shard_grad_partial(&only_tp, name))
            rc = areal_coll_all_reduce(g->tp, gr, n, AREAL_DT_F32, AREAL_SUM, err);
        if (rc == AREAL_OK && g->ep != NULL && areal_model_shard_grad_partial(&only_ep, name))
            rc = areal_coll_all_reduce(g->ep, gr, n, AREAL_DT_F32, AREAL_SUM, err);
        if (rc != AREAL_OK)
            return rc;
    }
    return AREAL_OK;
}

static const char EMBED[] = "model.embed_tokens.weight";

int areal_par_reduce_tied_embed(areal_model *m, const areal_par_groups *g, areal_error *err) {
    const areal_model_shard *s = &m->shard;
    if (!m->cfg.tie_word_embeddings || s->pp < 2 || (s->pp_stage != 0 && s->pp_stage != s->pp - 1))
        return AREAL_OK;
    int i = areal_model_find(m, EMBED);
    if (i < 0 || g->embed == NULL || areal_coll_size(g->embed) != 2)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "stage %d of %d holds the tied embedding but the embedding group "
                               "is missing or not of 2 members (set areal_par_groups.embed)",
                               s->pp_stage, s->pp);
    return areal_coll_all_reduce(g->embed, m->grads + m->offset[i], numel(&m->specs[i]),
                                 AREAL_DT_F32, AREAL_SUM, err);
}

int areal_par_counts(const areal_model *m, size_t i) {
    const areal_model_shard *s = &m->shard;
    const char *name = m->specs[i].name;
    if (s->pp > 1 && s->pp_stage != 0 && strcmp(name, EMBED) == 0)
        return 0; /* the last stage's tied copy: the first stage counts it */
    if (strstr(name, "mlp.experts.") != NULL)
        return s->tp_rank == 0; /* split over ep, replicated over tp (etp 1) */
    if (m->slices != NULL && m->slices[i].dim >= 0)
        return s->ep_rank == 0; /* split over tp, replicated over ep */
    return s->tp_rank == 0 && s->ep_rank == 0;
}

static int sum_over(areal_coll *c, float *v, areal_error *err) {
    if (c == NULL || areal_coll_size(c) < 2)
        return AREAL_OK;
    return areal_coll_all_reduce(c, v, 1, AREAL_DT_F32, AREAL_SUM, err);
}

int areal_par_grad_norm(const areal_model *m, const float *grads, size_t lo, size_t hi,
                        const areal_par_groups *g, areal_coll *dp_shard, double *norm,
                        areal_error *err) {
    double acc = 0;
    for (size_t i = 0; i < m->n_specs; i++) {
        size_t a = m->offset[i], b = a + numel(&m->specs[i]);
        a = a < lo ? lo : a;
        b = b > hi ? hi : b;
        if (a >= b || !areal_par_counts(m, i))
            continue;
        for (size_t x = a; x < b; x++)
            acc += (double)grads[x - lo] * grads[x - lo];
    }
    float v = (float)acc;
    int rc = sum_over(dp_shard, &v, err);
    if (rc == AREAL_OK)
        rc = sum_over(g->tp, &v, err);
    if (rc == AREAL_OK)
        rc = sum_over(g->pp, &v, err);
    if (rc == AREAL_OK)
        rc = sum_over(g->ep, &v, err);
    *norm = sqrt((double)v);
    return rc;
}

void areal_par_clip(float *grads, size_t n, double norm, double max_norm) {
    if (!(max_norm > 0) || !(norm > max_norm))
        return;
    float k = (float)(max_norm / (norm + 1e-6));
    for (size_t i = 0; i < n; i++)
        grads[i] *= k;
}
