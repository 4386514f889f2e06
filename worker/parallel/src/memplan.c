/*
 * memplan.c - a model config as memory-plan numbers (see memplan.h).
 */
#include "areal/parallel/memplan.h"

areal_mem_model areal_par_mem_model(const areal_model_config *c) {
    areal_mem_model m = {
        .vocab = c->vocab_size,
        .hidden = c->hidden_size,
        .inter = c->intermediate_size,
        .layers = c->num_layers,
        .heads = c->num_heads,
        .kv_heads = c->num_kv_heads,
        .head_dim = c->head_dim,
        .tied = c->tie_word_embeddings,
        .qkv_bias = c->qkv_bias,
        .o_bias = c->o_bias,
        .mlp_bias = c->mlp_bias,
        .qk_norm = c->qk_norm,
        .experts = c->num_experts,
        .experts_per_tok = c->num_experts_per_tok,
        .moe_inter = c->moe_intermediate_size,
        .shared_inter = c->shared_expert_intermediate_size,
        .moe_step = c->num_experts > 0 ? 1 : 0,
    };
    /* the config's own per-layer answer, as a step of 1 and a mask of dense layers */
    for (int l = 0; l < c->num_layers && l < 64; l++)
        if (c->num_experts > 0 && !c->moe_layer[l])
            m.dense_mask |= 1ull << l;
    return m;
}
