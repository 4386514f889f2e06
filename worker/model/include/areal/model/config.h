/*
 * config.h - the architecture of a HuggingFace decoder-only model, read from
 * its config.json, and the list of tensors a checkpoint of it must hold.
 *
 * One struct covers Qwen2, Qwen3 (q/k RMSNorm, explicit head_dim), Qwen3-MoE
 * and Qwen2-MoE (routed experts, optional shared expert) and Llama (GQA, tied
 * embeddings, rope scaling): they differ only in which of these fields are set.
 * The architecture comes from "model_type" and must agree with
 * "architectures"[0] when that is present. Both spellings transformers writes
 * are read: 5.x's rope_parameters / num_local_experts / dtype / layer_types
 * and 4.x's rope_theta + rope_scaling ("type" or "rope_type") / num_experts /
 * torch_dtype; where a file holds both they must agree. A key the reader does
 * not understand is refused by name (it could change the math), and so are
 * settings it cannot honour (sliding windows, attention dropout, partial
 * rotary embeddings). Every error names the file and the field and says what
 * was expected.
 */
#ifndef AREAL_MODEL_CONFIG_H
#define AREAL_MODEL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"

#define AREAL_MODEL_MAX_LAYERS 1024
#define AREAL_TENSOR_NAME_MAX  96

typedef enum areal_arch {
    AREAL_ARCH_QWEN2,
    AREAL_ARCH_QWEN3,
    AREAL_ARCH_QWEN3_MOE,
    AREAL_ARCH_QWEN2_MOE,
    AREAL_ARCH_LLAMA,
} areal_arch;

typedef enum areal_rope_type {
    AREAL_ROPE_DEFAULT, /* no rope_scaling */
    AREAL_ROPE_LINEAR,
    AREAL_ROPE_DYNAMIC,
    AREAL_ROPE_YARN,
    AREAL_ROPE_LLAMA3,
} areal_rope_type;

typedef struct areal_rope_scaling {
    areal_rope_type type;
    double factor;                            /* all but DEFAULT */
    double low_freq_factor, high_freq_factor; /* LLAMA3 */
    double beta_fast, beta_slow;              /* YARN (defaults 32 and 1) */
    int64_t original_max_position_embeddings; /* LLAMA3, YARN; 0 if absent */
} areal_rope_scaling;

typedef struct areal_model_config {
    areal_arch arch;
    char model_type[32];
    int vocab_size, hidden_size, intermediate_size;
    int num_layers, num_heads, num_kv_heads, head_dim;
    int64_t max_position_embeddings;
    double rms_norm_eps, rope_theta;
    areal_rope_scaling rope_scaling;
    bool tie_word_embeddings;
    bool qkv_bias; /* q/k/v projections have biases (Qwen2 always; others: attention_bias) */
    bool o_bias;   /* o_proj has a bias (attention_bias outside Qwen2) */
    bool mlp_bias; /* Llama's mlp_bias */
    bool qk_norm;  /* Qwen3: RMSNorm over each head of q and k */
    /* mixture of experts (num_experts 0 for dense models) */
    int num_experts, num_experts_per_tok, moe_intermediate_size;
    int shared_expert_intermediate_size; /* 0: no shared expert */
    bool norm_topk_prob;
    int decoder_sparse_step;
    bool moe_layer[AREAL_MODEL_MAX_LAYERS]; /* which layers route to experts */
} areal_model_config;

/*
 * Parses config.json text; `file` names it in messages. Returns 0 or
 * AREAL_EINVAL (malformed JSON, unknown architecture, a missing or bad field,
 * inconsistent sizes) and then *cfg is unspecified.
 */
int areal_model_config_parse(const char *json, size_t len, const char *file,
                             areal_model_config *cfg, areal_error *err);

/* Reads and parses the file at `path`; adds AREAL_EIO to the parse errors. */
int areal_model_config_load(const char *path, areal_model_config *cfg, areal_error *err);

/* The model_type spelling of an architecture ("qwen2", "qwen3_moe", ...). */
const char *areal_arch_name(areal_arch arch);

/* One tensor of a checkpoint: HF name and shape (ndim 1 or 2). */
typedef struct areal_tensor_spec {
    char name[AREAL_TENSOR_NAME_MAX];
    int ndim;
    int64_t shape[2];
} areal_tensor_spec;

/*
 * Lists the tensors a HF checkpoint of cfg holds, in a fixed order (embedding,
 * then per layer, then final norm and lm_head unless tied). *out is a new
 * array of *n entries (caller frees). Returns 0 or AREAL_ENOMEM.
 */
int areal_model_expected_tensors(const areal_model_config *cfg, areal_tensor_spec **out, size_t *n,
                                 areal_error *err);

#endif
