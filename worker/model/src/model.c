/*
 * model.c - allocation, named views and loading of the CPU reference model.
 *
 * The parameter list is areal_model_expected_tensors (the HF checkpoint's
 * tensor list), laid out back to back in that order in one float buffer;
 * gradients use the same offsets. Views are resolved by name once, so no
 * layer code does offset arithmetic. Experts of a layer are consecutive in
 * the list (gate, up, down of expert 0, then 1, ...), so one base pointer and
 * a stride address them all. Rotary frequencies are computed here in fp32 as
 * transformers does (inv_freq = 1 / theta^(2i / hd)), then rescaled for
 * "linear" and "llama3" rope scaling.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/checkpoint.h"
#include "areal/model/cp_attn.h"
#include "areal/model/model.h"
#include "model_internal.h"

int areal_model_find(const areal_model *m, const char *name) {
    for (size_t i = 0; i < m->n_specs; i++)
        if (strcmp(m->specs[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* The view of "model.layers.<layer>.<suffix>", or of `suffix` itself when layer < 0. */
static float *view(const areal_model *m, float *base, const char *suffix, int layer) {
    char name[AREAL_TENSOR_NAME_MAX];
    if (layer < 0)
        snprintf(name, sizeof name, "%s", suffix);
    else
        snprintf(name, sizeof name, "model.layers.%d.%s", layer, suffix);
    int i = areal_model_find(m, name);
    return i < 0 ? NULL : base + m->offset[i];
}

static void build_views(const areal_model *m, float *base, areal_weights *w) {
#define V(field, suffix) (L->field = view(m, base, suffix, l))
    w->embed = view(m, base, "model.embed_tokens.weight", -1);
    w->norm = view(m, base, "model.norm.weight", -1);
    w->lm_head = m->cfg.tie_word_embeddings ? w->embed : view(m, base, "lm_head.weight", -1);
    for (int l = 0; l < m->cfg.num_layers; l++) {
        areal_layer_w *L = &w->layers[l];
        V(ln1, "input_layernorm.weight");
        V(wq, "self_attn.q_proj.weight");
        V(wk, "self_attn.k_proj.weight");
        V(wv, "self_attn.v_proj.weight");
        V(bq, "self_attn.q_proj.bias");
        V(bk, "self_attn.k_proj.bias");
        V(bv, "self_attn.v_proj.bias");
        V(wo, "self_attn.o_proj.weight");
        V(bo, "self_attn.o_proj.bias");
        V(q_norm, "self_attn.q_norm.weight");
        V(k_norm, "self_attn.k_norm.weight");
        V(ln2, "post_attention_layernorm.weight");
        V(gate, "mlp.gate_proj.weight");
        V(up, "mlp.up_proj.weight");
        V(down, "mlp.down_proj.weight");
        V(gate_b, "mlp.gate_proj.bias");
        V(up_b, "mlp.up_proj.bias");
        V(down_b, "mlp.down_proj.bias");
        V(router, "mlp.gate.weight");
        char first_expert[64]; /* this shard's first expert (expert parallelism) */
        snprintf(first_expert, sizeof first_expert, "mlp.experts.%d.gate_proj.weight",
                 m->cfg.num_experts > 0 ? m->shard.ep_rank * (m->cfg.num_experts / m->shard.ep)
                                        : 0);
        V(experts, first_expert);
        /* expert tensor parallelism keeps 1/etp of each expert's intermediate size */
        L->expert_stride = (size_t)3 *
                           (m->cfg.moe_intermediate_size / areal_model_shard_etp(&m->shard)) *
                           m->cfg.hidden_size;
        V(sh_gate, "mlp.shared_expert.gate_proj.weight");
        V(sh_up, "mlp.shared_expert.up_proj.weight");
        V(sh_down, "mlp.shared_expert.down_proj.weight");
        V(sh_gate_w, "mlp.shared_expert_gate.weight");
    }
#undef V
}

static int rope_init(areal_model *m, areal_error *err) {
    const areal_model_config *c = &m->cfg;
    const areal_rope_scaling *rs = &c->rope_scaling;
    if (rs->type == AREAL_ROPE_DYNAMIC || rs->type == AREAL_ROPE_YARN)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "config: rope_scaling.rope_type \"%s\" is not supported by the CPU "
                               "model; use \"linear\", \"llama3\" or no rope_scaling",
                               rs->type == AREAL_ROPE_YARN ? "yarn" : "dynamic");
    if (c->head_dim % 2 != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "config: head_dim %d must be even for rotary embeddings",
                               c->head_dim);
    int half = c->head_dim / 2;
    m->inv_freq = malloc(sizeof(float) * (size_t)half);
    if (m->inv_freq == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for rotary frequencies");
    for (int i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)c->head_dim;
        float f = 1.0f / powf((float)c->rope_theta, e);
        if (rs->type == AREAL_ROPE_LINEAR) {
            f = f / (float)rs->factor;
        } else if (rs->type == AREAL_ROPE_LLAMA3) { /* in fp32, as transformers computes it */
            float old = (float)rs->original_max_position_embeddings;
            float lo = (float)rs->low_freq_factor, hi = (float)rs->high_freq_factor;
            float factor = (float)rs->factor, wl = 2.0f * (float)M_PI / f;
            if (wl > old / lo) {
                f = f / factor;
            } else if (wl >= old / hi) {
                float sm = (old / wl - lo) / (hi - lo);
                f = (1.0f - sm) * f / factor + sm * f;
            }
        }
        m->inv_freq[i] = f;
    }
    m->attn_scale = 1.0f / sqrtf((float)c->head_dim);
    return AREAL_OK;
}

int areal_model_init(areal_model *m, const areal_model_config *cfg, areal_pool *pool,
                     areal_error *err) {
    areal_model_shard whole = areal_model_shard_whole(cfg);
    return areal_model_init_shard(m, cfg, &whole, pool, err);
}

void areal_model_set_sp(areal_model *m, areal_model_sp_fn fn, void *ctx) {
    m->sp = fn;
    m->sp_ctx = ctx;
}

void areal_model_set_cp_attn(areal_model *m, const areal_cp_attn *a, void *ctx) {
    m->cp_attn = a;
    m->cp_attn_ctx = a != NULL ? ctx : NULL;
}

void areal_model_set_grad_ready(areal_model *m, areal_model_grad_ready_fn fn, void *ctx) {
    m->grad_ready = fn;
    m->grad_ready_ctx = fn != NULL ? ctx : NULL;
    m->grad_ready_armed = false;
}

void areal_model_arm_grad_ready(areal_model *m, bool armed) {
    m->grad_ready_armed = armed;
}

void areal_model_set_reduce(areal_model *m, areal_model_reduce_fn fn, void *ctx) {
    m->reduce = fn;
    m->reduce_ctx = ctx;
}

int areal_model_init_shard(areal_model *m, const areal_model_config *cfg,
                           const areal_model_shard *s, areal_pool *pool, areal_error *err) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->pool = pool;
    m->shard = *s;
    m->ops = areal_ops_cpu();
    m->ops_ctx = pool;
    if (cfg->num_kv_heads <= 0 || cfg->num_heads % cfg->num_kv_heads != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "config: num_attention_heads %d is not a multiple of "
                               "num_key_value_heads %d",
                               cfg->num_heads, cfg->num_kv_heads);
    int rc = areal_model_shard_tensors(cfg, s, &m->specs, &m->slices, &m->n_specs, err);
    if (rc != AREAL_OK)
        return rc;
    m->nh = cfg->num_heads / s->tp;
    m->nkv = cfg->num_kv_heads / s->tp;
    m->inter = cfg->intermediate_size / s->tp;
    m->offset = calloc(m->n_specs, sizeof *m->offset);
    m->w.layers = calloc((size_t)cfg->num_layers, sizeof(areal_layer_w));
    m->g.layers = calloc((size_t)cfg->num_layers, sizeof(areal_layer_w));
    if (m->offset == NULL || m->w.layers == NULL || m->g.layers == NULL) {
        areal_model_free(m);
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the parameter list");
    }
    size_t off = 0;
    for (size_t i = 0; i < m->n_specs; i++) {
        m->offset[i] = off;
        size_t n = (size_t)m->specs[i].shape[0];
        if (m->specs[i].ndim == 2)
            n *= (size_t)m->specs[i].shape[1];
        off += n;
    }
    m->n_params = off;
    m->params = calloc(off, sizeof(float));
    m->grads = calloc(off, sizeof(float));
    if (m->params == NULL || m->grads == NULL) {
        areal_model_free(m);
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for %zu parameters (%zu MiB x2)",
                               off, off * sizeof(float) >> 20);
    }
    build_views(m, m->params, &m->w);
    build_views(m, m->grads, &m->g);
    if ((rc = rope_init(m, err)) != AREAL_OK) {
        areal_model_free(m);
        return rc;
    }
    return AREAL_OK;
}

void areal_model_free(areal_model *m) {
    areal_model_infer_unpack(m);
    free(m->specs);
    free(m->slices);
    free(m->offset);
    free(m->params);
    free(m->grads);
    free(m->w.layers);
    free(m->g.layers);
    free(m->inv_freq);
    memset(m, 0, sizeof *m);
    areal_arena_trim(); /* the steps' kept buffers (arena.c) go with the model */
}

void areal_model_zero_grad(areal_model *m) {
    memset(m->grads, 0, m->n_params * sizeof(float));
}

int areal_model_load(areal_model *m, const char *dir, areal_pool *pool, areal_error *err) {
    return areal_model_load_shard(m, dir, NULL, pool, err);
}

/*
 * The slicing step of loading: a parameter cut from its HF tensor is read
 * whole into scratch and its slice copied out. Whole parameters are read
 * straight into place, as before shards existed.
 */
static int load_param(const areal_checkpoint *ck, areal_model *m, size_t i, float **scratch,
                      size_t *scap, areal_error *err) {
    size_t cap = (i + 1 < m->n_specs ? m->offset[i + 1] : m->n_params) - m->offset[i];
    float *dst = m->params + m->offset[i];
    const areal_tensor_slice *sl = &m->slices[i];
    if (sl->dim < 0)
        return areal_checkpoint_load_f32(ck, m->specs[i].name, dst, cap, err);
    const areal_ckpt_entry *e = areal_checkpoint_find(ck, m->specs[i].name);
    if (e == NULL)
        return areal_checkpoint_load_f32(ck, m->specs[i].name, dst, cap, err); /* names it */
    size_t n = (size_t)e->tensor->numel;
    if (n > *scap) {
        float *p = realloc(*scratch, sizeof(float) * n);
        if (p == NULL)
            return areal_error_set(err, AREAL_ENOMEM, -1, "no memory to slice tensor %s",
                                   m->specs[i].name);
        *scratch = p;
        *scap = n;
    }
    int rc = areal_checkpoint_load_f32(ck, m->specs[i].name, *scratch, *scap, err);
    if (rc != AREAL_OK)
        return rc;
    areal_tensor_spec hf = m->specs[i];
    hf.shape[sl->dim] = e->tensor->shape[sl->dim];
    areal_tensor_slice_copy(dst, *scratch, &hf, sl);
    return AREAL_OK;
}

int areal_model_load_shard(areal_model *m, const char *dir, const areal_model_shard *s,
                           areal_pool *pool, areal_error *err) {
    areal_checkpoint ck;
    memset(m, 0, sizeof *m);
    int rc = areal_checkpoint_open(dir, &ck, err);
    if (rc != AREAL_OK)
        return rc;
    areal_model_shard whole = areal_model_shard_whole(&ck.cfg);
    rc = areal_model_init_shard(m, &ck.cfg, s != NULL ? s : &whole, pool, err);
    float *scratch = NULL;
    size_t scap = 0;
    for (size_t i = 0; rc == AREAL_OK && i < m->n_specs; i++)
        rc = load_param(&ck, m, i, &scratch, &scap, err);
    free(scratch);
    if (rc != AREAL_OK && m->params != NULL)
        areal_model_free(m);
    areal_checkpoint_close(&ck);
    return rc;
}

int areal_batch_check(const areal_model *m, const areal_batch *b, areal_error *err) {
    if (b->n_seqs < 1 || b->n_tokens < 1 || b->cu_seqlens[0] != 0 ||
        b->cu_seqlens[b->n_seqs] != b->n_tokens)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "batch: cu_seqlens must start at 0 and end at n_tokens (%d) with "
                               "n_seqs >= 1",
                               b->n_tokens);
    for (int s = 0; s < b->n_seqs; s++)
        if (b->cu_seqlens[s + 1] <= b->cu_seqlens[s])
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "batch: cu_seqlens[%d] = %d is not above cu_seqlens[%d] = %d "
                                   "(empty or unordered sequence)",
                                   s + 1, b->cu_seqlens[s + 1], s, b->cu_seqlens[s]);
    for (int t = 0; t < b->n_tokens; t++)
        if (b->tokens[t] < 0 || b->tokens[t] >= m->cfg.vocab_size)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "batch: token %d is id %d, outside the vocabulary [0, %d)", t,
                                   b->tokens[t], m->cfg.vocab_size);
    return AREAL_OK;
}
