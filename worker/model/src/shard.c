/*
 * shard.c - a shard's parameter list and slices; see areal/model/shard.h.
 *
 * The list is areal_model_expected_tensors filtered and reshaped by name, so
 * the file that knows the HF module trees (config_tensors.c) stays the one
 * place that lists tensors; this file only knows which suffixes are column-
 * or row-parallel. Rejected: a second, shard-aware lister (two lists to keep
 * in step with every new architecture).
 */
#include "areal/model/shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

areal_model_shard areal_model_shard_whole(const areal_model_config *cfg) {
    return (areal_model_shard){.tp_rank = 0,
                               .tp = 1,
                               .pp_stage = 0,
                               .pp = 1,
                               .first_layer = 0,
                               .n_layers = cfg->num_layers,
                               .ep_rank = 0,
                               .ep = 1,
                               .etp_rank = 0,
                               .etp = 1,
                               .ep_a2a = false};
}

bool areal_model_shard_is_whole(const areal_model_config *cfg, const areal_model_shard *s) {
    return s->tp == 1 && s->pp == 1 && s->ep == 1 && areal_model_shard_etp(s) == 1 &&
           s->first_layer == 0 && s->n_layers == cfg->num_layers;
}

int areal_model_shard_stage(const areal_model_config *cfg, int stage, int pp,
                            areal_model_shard *out, areal_error *err) {
    int L = cfg->num_layers;
    if (pp < 1 || pp > L || stage < 0 || stage >= pp)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "shard: pipeline stage %d of %d does not exist for %d layers (pp "
                               "must be in 1..%d, the stage in 0..pp-1)",
                               stage, pp, L, L);
    *out = areal_model_shard_whole(cfg);
    int base = L / pp, extra = L % pp;
    out->pp = pp;
    out->pp_stage = stage;
    out->first_layer = stage * base + (stage < extra ? stage : extra);
    out->n_layers = base + (stage < extra);
    return AREAL_OK;
}

static bool has_dense_layer(const areal_model_config *c) {
    for (int l = 0; l < c->num_layers; l++)
        if (c->num_experts == 0 || !c->moe_layer[l])
            return true;
    return false;
}

int areal_model_shard_check(const areal_model_config *c, const areal_model_shard *s,
                            areal_error *err) {
    if (s->tp < 1 || s->tp_rank < 0 || s->tp_rank >= s->tp)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "shard: tp_rank %d of tp %d: tp must be >= 1 and tp_rank in 0..tp-1",
                               s->tp_rank, s->tp);
    if (s->ep < 1 || s->ep_rank < 0 || s->ep_rank >= s->ep)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "shard: ep_rank %d of ep %d: ep must be >= 1 and ep_rank in 0..ep-1",
                               s->ep_rank, s->ep);
    if (s->pp < 1 || s->pp_stage < 0 || s->pp_stage >= s->pp)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "shard: pp_stage %d of pp %d: pp must be >= 1 and pp_stage in "
                               "0..pp-1",
                               s->pp_stage, s->pp);
    int L = c->num_layers, end = s->first_layer + s->n_layers;
    if (s->first_layer < 0 || (s->n_layers < 1 && L > 0) || end > L ||
        (s->pp_stage == 0) != (s->first_layer == 0) || (s->pp_stage == s->pp - 1) != (end == L))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "shard: layers [%d, %d) of stage %d/%d: a stage holds at least one "
                               "layer of 0..%d, the first stage starts at layer 0 and the last "
                               "ends at num_hidden_layers (areal_model_shard_stage splits evenly)",
                               s->first_layer, end, s->pp_stage, s->pp, L);
    if (s->tp > 1 && (c->num_heads % s->tp != 0 || c->num_kv_heads % s->tp != 0))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "shard: tp %d must divide num_attention_heads %d and "
                               "num_key_value_heads %d (every rank holds whole heads)",
                               s->tp, c->num_heads, c->num_kv_heads);
    if (s->tp > 1 && has_dense_layer(c) && c->intermediate_size % s->tp != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "shard: tp %d must divide intermediate_size %d", s->tp,
                               c->intermediate_size);
    if (s->ep > 1 && (c->num_experts == 0 || c->num_experts % s->ep != 0))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "shard: ep %d must divide num_experts %d (a dense model has no "
                               "experts to split: use ep 1)",
                               s->ep, c->num_experts);
    int etp = areal_model_shard_etp(s);
    if (s->etp > 1 && (s->etp_rank < 0 || s->etp_rank >= s->etp))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "shard: etp_rank %d of etp %d: etp_rank must be in 0..etp-1",
                               s->etp_rank, s->etp);
    if (etp > 1 && (!s->ep_a2a || c->num_experts == 0 || c->moe_intermediate_size % etp != 0))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "shard: etp %d needs a MoE model whose moe_intermediate_size (%d) "
                               "it divides, and token dispatch (ep_a2a); use etp 1 otherwise",
                               etp, c->moe_intermediate_size);
    return AREAL_OK;
}

/* Layer number and suffix of "model.layers.<l>.<suffix>"; -1 for a non-layer tensor. */
static int layer_of(const char *name, const char **suffix) {
    const char *p = "model.layers.";
    size_t n = strlen(p);
    if (strncmp(name, p, n) != 0)
        return -1;
    char *end = NULL;
    long l = strtol(name + n, &end, 10);
    *suffix = *end == '.' ? end + 1 : end;
    return (int)l;
}

/*
 * Decides tensor t of the whole list: kept or not, and its slice (along the
 * HF shape). Column-parallel: rows split; row-parallel weights: columns.
 */
static bool place(const areal_model_config *c, const areal_model_shard *s,
                  const areal_tensor_spec *t, areal_tensor_slice *sl) {
    sl->dim = -1;
    sl->start = 0;
    sl->len = t->shape[0];
    const char *suf = NULL;
    int l = layer_of(t->name, &suf);
    bool first = s->pp_stage == 0, last = s->pp_stage == s->pp - 1;
    if (l < 0) {
        if (strcmp(t->name, "model.embed_tokens.weight") == 0)
            return first || (last && c->tie_word_embeddings);
        return last; /* model.norm.weight, lm_head.weight */
    }
    if (l < s->first_layer || l >= s->first_layer + s->n_layers)
        return false;
    if (strncmp(suf, "mlp.experts.", 12) == 0) {
        int e = atoi(suf + 12), per = c->num_experts / s->ep, etp = areal_model_shard_etp(s);
        if (e / per != s->ep_rank)
            return false;
        const char *part = strchr(suf + 12, '.');
        if (etp > 1 && part != NULL) { /* expert tensor parallel: gate/up rows, down columns */
            int down = strncmp(part, ".down_proj.", 11) == 0;
            sl->dim = down ? 1 : 0;
            sl->len = t->shape[sl->dim] / etp;
            sl->start = sl->len * s->etp_rank;
        }
        return true;
    }
    if (s->tp == 1)
        return true;
    bool col = strncmp(suf, "self_attn.q_proj.", 17) == 0 ||
               strncmp(suf, "self_attn.k_proj.", 17) == 0 ||
               strncmp(suf, "self_attn.v_proj.", 17) == 0 ||
               strncmp(suf, "mlp.gate_proj.", 14) == 0 || strncmp(suf, "mlp.up_proj.", 12) == 0;
    bool row =
        strcmp(suf, "self_attn.o_proj.weight") == 0 || strcmp(suf, "mlp.down_proj.weight") == 0;
    if (col) {
        sl->dim = 0;
        sl->len = t->shape[0] / s->tp;
        sl->start = sl->len * s->tp_rank;
    } else if (row) {
        sl->dim = 1;
        sl->len = t->shape[1] / s->tp;
        sl->start = sl->len * s->tp_rank;
    }
    return true;
}

int areal_model_shard_tensors(const areal_model_config *cfg, const areal_model_shard *s,
                              areal_tensor_spec **specs, areal_tensor_slice **slices, size_t *n,
                              areal_error *err) {
    *specs = NULL;
    if (slices != NULL)
        *slices = NULL;
    *n = 0;
    int rc = areal_model_shard_check(cfg, s, err);
    areal_tensor_spec *all = NULL;
    size_t na = 0;
    if (rc == AREAL_OK)
        rc = areal_model_expected_tensors(cfg, &all, &na, err);
    if (rc != AREAL_OK)
        return rc;
    areal_tensor_slice *sl = calloc(na > 0 ? na : 1, sizeof *sl);
    if (sl == NULL) {
        free(all);
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a list of %zu slices", na);
    }
    size_t k = 0;
    for (size_t i = 0; i < na; i++) {
        areal_tensor_slice one;
        if (!place(cfg, s, &all[i], &one))
            continue;
        all[k] = all[i];
        if (one.dim >= 0)
            all[k].shape[one.dim] = one.len;
        sl[k++] = one;
    }
    *specs = all; /* compacted in place: the first k entries */
    *n = k;
    if (slices != NULL)
        *slices = sl;
    else
        free(sl);
    return AREAL_OK;
}

void areal_tensor_slice_copy(float *dst, const float *full, const areal_tensor_spec *hf,
                             const areal_tensor_slice *sl) {
    size_t rows = (size_t)hf->shape[0], cols = hf->ndim == 2 ? (size_t)hf->shape[1] : 1;
    if (sl->dim < 0) {
        memcpy(dst, full, sizeof(float) * rows * cols);
    } else if (sl->dim == 0) {
        memcpy(dst, full + (size_t)sl->start * cols, sizeof(float) * (size_t)sl->len * cols);
    } else {
        for (size_t r = 0; r < rows; r++)
            memcpy(dst + r * (size_t)sl->len, full + r * cols + (size_t)sl->start,
                   sizeof(float) * (size_t)sl->len);
    }
}

bool areal_model_shard_grad_partial(const areal_model_shard *s, const char *name) {
    const char *suf = NULL;
    if (layer_of(name, &suf) < 0)
        return false;
    if (s->ep > 1 && !s->ep_a2a && strcmp(suf, "mlp.gate.weight") == 0)
        return true;
    return s->tp > 1 && (strcmp(suf, "self_attn.q_norm.weight") == 0 ||
                         strcmp(suf, "self_attn.k_norm.weight") == 0);
}
