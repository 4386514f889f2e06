/*
 * config_tensors.c - the tensors a HuggingFace checkpoint of a config holds.
 *
 * Names and shapes follow transformers' module trees (Qwen2/Qwen3/Qwen3-MoE/
 * Qwen2-MoE/Llama ForCausalLM): nn.Linear weights are [out, in]. The list is
 * built in two passes (count, then fill) so it is one allocation.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "areal/model/config.h"

typedef struct lister {
    areal_tensor_spec *v; /* NULL in the counting pass */
    size_t n;
} lister;

static void add(lister *l, int64_t d0, int64_t d1, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(lister *l, int64_t d0, int64_t d1, const char *fmt, ...) {
    if (l->v != NULL) {
        areal_tensor_spec *s = &l->v[l->n];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->name, sizeof s->name, fmt, ap);
        va_end(ap);
        s->ndim = d1 > 0 ? 2 : 1;
        s->shape[0] = d0;
        s->shape[1] = d1 > 0 ? d1 : 0;
    }
    l->n++;
}

static void mlp(lister *l, const char *p, int i, const char *part, int64_t h, int64_t inner,
                bool bias) {
    add(l, inner, h, "%s%d.mlp.%sgate_proj.weight", p, i, part);
    add(l, inner, h, "%s%d.mlp.%sup_proj.weight", p, i, part);
    add(l, h, inner, "%s%d.mlp.%sdown_proj.weight", p, i, part);
    if (bias) {
        add(l, inner, 0, "%s%d.mlp.%sgate_proj.bias", p, i, part);
        add(l, inner, 0, "%s%d.mlp.%sup_proj.bias", p, i, part);
        add(l, h, 0, "%s%d.mlp.%sdown_proj.bias", p, i, part);
    }
}

static void list_all(const areal_model_config *c, lister *l) {
    const char *p = "model.layers.";
    int64_t h = c->hidden_size, hd = c->head_dim;
    int64_t q = (int64_t)c->num_heads * hd, kv = (int64_t)c->num_kv_heads * hd;
    add(l, c->vocab_size, h, "model.embed_tokens.weight");
    for (int i = 0; i < c->num_layers; i++) {
        add(l, h, 0, "%s%d.input_layernorm.weight", p, i);
        add(l, q, h, "%s%d.self_attn.q_proj.weight", p, i);
        add(l, kv, h, "%s%d.self_attn.k_proj.weight", p, i);
        add(l, kv, h, "%s%d.self_attn.v_proj.weight", p, i);
        if (c->qkv_bias) {
            add(l, q, 0, "%s%d.self_attn.q_proj.bias", p, i);
            add(l, kv, 0, "%s%d.self_attn.k_proj.bias", p, i);
            add(l, kv, 0, "%s%d.self_attn.v_proj.bias", p, i);
        }
        add(l, h, q, "%s%d.self_attn.o_proj.weight", p, i);
        if (c->o_bias)
            add(l, h, 0, "%s%d.self_attn.o_proj.bias", p, i);
        if (c->qk_norm) {
            add(l, hd, 0, "%s%d.self_attn.q_norm.weight", p, i);
            add(l, hd, 0, "%s%d.self_attn.k_norm.weight", p, i);
        }
        add(l, h, 0, "%s%d.post_attention_layernorm.weight", p, i);
        if (c->num_experts > 0 && c->moe_layer[i]) {
            add(l, c->num_experts, h, "%s%d.mlp.gate.weight", p, i);
            for (int e = 0; e < c->num_experts; e++) {
                char part[32];
                snprintf(part, sizeof part, "experts.%d.", e);
                mlp(l, p, i, part, h, c->moe_intermediate_size, false);
            }
            if (c->shared_expert_intermediate_size > 0) {
                mlp(l, p, i, "shared_expert.", h, c->shared_expert_intermediate_size, false);
                add(l, 1, h, "%s%d.mlp.shared_expert_gate.weight", p, i);
            }
        } else {
            mlp(l, p, i, "", h, c->intermediate_size, c->mlp_bias);
        }
    }
    add(l, h, 0, "model.norm.weight");
    if (!c->tie_word_embeddings)
        add(l, c->vocab_size, h, "lm_head.weight");
}

int areal_model_expected_tensors(const areal_model_config *cfg, areal_tensor_spec **out, size_t *n,
                                 areal_error *err) {
    lister l = {NULL, 0};
    list_all(cfg, &l);
    l.v = calloc(l.n, sizeof *l.v);
    *out = NULL;
    *n = 0;
    if (l.v == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a list of %zu tensors", l.n);
    l.n = 0;
    list_all(cfg, &l);
    *out = l.v;
    *n = l.n;
    return AREAL_OK;
}
