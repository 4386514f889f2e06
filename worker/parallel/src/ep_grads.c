/*
 * ep_grads.c - the gradient sums and the norm of a model under token
 * dispatch (see ep.h): expert tensors over edp, the others over dp; each
 * distinct element counted once in the norm.
 */
#include <math.h>
#include <string.h>

#include "areal/parallel/ep.h"
#include "areal/parallel/groups.h"

static const char EMBED[] = "model.embed_tokens.weight";

static int is_expert(const areal_model *m, size_t i) {
    return strstr(m->specs[i].name, "mlp.experts.") != NULL;
}

static size_t numel(const areal_tensor_spec *t) {
    return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}

int areal_par_ep_reduce_grads(areal_model *m, const areal_par_ep_groups *g, areal_error *err) {
    /* the parameter list is in buffer order: a run of one kind is contiguous */
    size_t i = 0;
    while (i < m->n_specs) {
        int ex = is_expert(m, i);
        size_t j = i, lo = m->offset[i], n = 0;
        for (; j < m->n_specs && is_expert(m, j) == ex; j++)
            n += numel(&m->specs[j]);
        areal_coll *c = ex ? g->edp : g->dp;
        if (areal_par_size(c) > 1) {
            int rc = areal_coll_all_reduce(c, m->grads + lo, n, AREAL_DT_F32, AREAL_SUM, err);
            if (rc != AREAL_OK)
                return rc;
        }
        i = j;
    }
    return AREAL_OK;
}

int areal_par_ep_counts(const areal_model *m, const areal_par_ep_groups *g, size_t i) {
    const areal_model_shard *s = &m->shard;
    if (is_expert(m, i)) /* distinct over (etp, ep, pp), replicated over edp */
        return areal_par_rank(g->edp) == 0;
    if (areal_par_rank(g->dp) != 0)
        return 0; /* dense tensors: replicated over dp-cp (which holds the ep ranks) */
    if (s->pp > 1 && s->pp_stage != 0 && strcmp(m->specs[i].name, EMBED) == 0)
        return 0; /* the last stage's tied copy */
    if (m->slices != NULL && m->slices[i].dim >= 0)
        return 1; /* a tensor-parallel slice */
    return s->tp_rank == 0;
}

static int sum_over(areal_coll *c, float *v, areal_error *err) {
    if (areal_par_size(c) < 2)
        return AREAL_OK;
    return areal_coll_all_reduce(c, v, 1, AREAL_DT_F32, AREAL_SUM, err);
}

int areal_par_ep_grad_norm(const areal_model *m, const areal_par_ep_groups *g, double *norm,
                           areal_error *err) {
    double acc = 0;
    for (size_t i = 0; i < m->n_specs; i++) {
        if (!areal_par_ep_counts(m, g, i))
            continue;
        const float *gr = m->grads + m->offset[i];
        for (size_t x = 0, n = numel(&m->specs[i]); x < n; x++)
            acc += (double)gr[x] * gr[x];
    }
    float v = (float)acc;
    int rc = sum_over(g->tp_dp_cp, &v, err);
    if (rc == AREAL_OK)
        rc = sum_over(g->pp, &v, err);
    *norm = sqrt((double)v);
    return rc;
}
