/*
 * wlayout.c - the GPU model's parameter layout (areal/gpumodel/plan.h): the
 * CPU model's flat list with each tensor aligned, experts kept packed, and
 * the per-layer views translated from the CPU model's pointers, so the two
 * models can never disagree on which tensor is which.
 */
#include <stdlib.h>
#include <string.h>

#include "areal/gpumodel/plan.h"

#define ALIGN_ELEMS 128 /* 128 fp32 = 512 B, 128 bf16 = 256 B */

void areal_gpu_wlayout_free(areal_gpu_wlayout *l) {
    free(l->dev_off);
    free(l->numel);
    free(l->host_off);
    free(l->matrix);
    free(l->layers);
    memset(l, 0, sizeof *l);
}

/* an expert tensor other than the first of its layer: stays packed after the previous one */
static int packed_expert(const char *name) {
    const char *e = strstr(name, ".mlp.experts.");
    return e != NULL && strncmp(e, ".mlp.experts.0.gate_proj.", 25) != 0;
}

/* the device element offset of host view p (AREAL_GPU_NONE for NULL); *bad set when outside */
static size_t at(const areal_gpu_wlayout *l, const areal_model *m, const float *p, int *bad) {
    if (p == NULL)
        return AREAL_GPU_NONE;
    if (p < m->params || p >= m->params + m->n_params) {
        *bad = 1;
        return AREAL_GPU_NONE;
    }
    size_t e = (size_t)(p - m->params);
    for (size_t i = 0; i < l->n_specs; i++)
        if (e >= m->offset[i] && e < m->offset[i] + l->numel[i])
            return l->dev_off[i] + (e - m->offset[i]);
    *bad = 1;
    return AREAL_GPU_NONE;
}

int areal_gpu_wlayout_make(const areal_model *m, areal_gpu_wlayout *l, areal_error *err) {
    memset(l, 0, sizeof *l);
    int L = m->cfg.num_layers;
    l->n_specs = m->n_specs;
    l->dev_off = malloc(sizeof(size_t) * (m->n_specs ? m->n_specs : 1));
    l->numel = malloc(sizeof(size_t) * (m->n_specs ? m->n_specs : 1));
    l->host_off = malloc(sizeof(size_t) * (m->n_specs ? m->n_specs : 1));
    l->matrix = malloc(m->n_specs ? m->n_specs : 1);
    l->layers = calloc(L > 0 ? (size_t)L : 1, sizeof *l->layers);
    if (l->dev_off == NULL || l->numel == NULL || l->host_off == NULL || l->matrix == NULL ||
        l->layers == NULL) {
        areal_gpu_wlayout_free(l);
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the GPU weight layout");
    }
    size_t cur = 0;
    for (size_t i = 0; i < m->n_specs; i++) {
        const areal_tensor_spec *s = &m->specs[i];
        l->numel[i] = (size_t)s->shape[0] * (size_t)(s->ndim == 2 ? s->shape[1] : 1);
        l->host_off[i] = m->offset[i];
        l->matrix[i] = s->ndim == 2;
        if (!packed_expert(s->name))
            cur = (cur + ALIGN_ELEMS - 1) / ALIGN_ELEMS * ALIGN_ELEMS;
        l->dev_off[i] = cur;
        cur += l->numel[i];
    }
    l->n_elems = (cur + ALIGN_ELEMS - 1) / ALIGN_ELEMS * ALIGN_ELEMS;
    int bad = 0;
    l->embed = at(l, m, m->w.embed, &bad);
    l->norm = at(l, m, m->w.norm, &bad);
    l->lm_head = at(l, m, m->w.lm_head, &bad);
    for (int i = 0; i < L; i++) {
        const areal_layer_w *w = &m->w.layers[i];
        areal_gpu_layer_off *o = &l->layers[i];
#define T(f) o->f = at(l, m, w->f, &bad)
        T(ln1), T(wq), T(wk), T(wv), T(bq), T(bk), T(bv), T(wo), T(bo), T(q_norm), T(k_norm);
        T(ln2), T(gate), T(up), T(down), T(gate_b), T(up_b), T(down_b), T(router), T(experts);
#undef T
        o->expert_stride = w->experts != NULL ? w->expert_stride : 0;
    }
    if (bad) {
        areal_gpu_wlayout_free(l);
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU weight layout: a layer view of the model lies outside its "
                               "parameter list (a model layout this code does not know)");
    }
    return AREAL_OK;
}

void areal_gpu_wlayout_pack(const areal_gpu_wlayout *l, const float *src, float *dst) {
    memset(dst, 0, sizeof(float) * l->n_elems);
    for (size_t i = 0; i < l->n_specs; i++)
        memcpy(dst + l->dev_off[i], src + l->host_off[i], sizeof(float) * l->numel[i]);
}

void areal_gpu_wlayout_unpack(const areal_gpu_wlayout *l, const float *src, float *dst) {
    for (size_t i = 0; i < l->n_specs; i++)
        memcpy(dst + l->host_off[i], src + l->dev_off[i], sizeof(float) * l->numel[i]);
}
