/*
 * config_keys.c - every top-level config.json key the reader understands,
 * for the five supported families in the spellings transformers 4.x and 5.x
 * write. A key is here because config.c or config_rope.c reads it, or
 * because it cannot change the forward pass (bookkeeping of PretrainedConfig,
 * token ids, generation defaults that old configs carry, training-only
 * switches whose values are checked where they would matter). Any other key
 * is refused by name: rejected, a denylist of known-dangerous keys, since the
 * key nobody listed is exactly the one that would load a model silently wrong.
 */
#include <string.h>

#include "config_internal.h"

static const char *const read_keys[] = {
    /* read by config.c / config_rope.c */
    "architectures",
    "model_type",
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "hidden_act",
    "max_position_embeddings",
    "rms_norm_eps",
    "rope_theta",
    "rope_scaling",
    "rope_parameters",
    "tie_word_embeddings",
    "attention_bias",
    "qkv_bias",
    "mlp_bias",
    "attention_dropout",
    "use_sliding_window",
    "sliding_window",
    "max_window_layers",
    "layer_types",
    "num_experts",
    "num_local_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "norm_topk_prob",
    "decoder_sparse_step",
    "mlp_only_layers",
    "pretraining_tp",
    "torch_dtype",
    "dtype",
};

static const char *const inert_keys[] = {
    /* PretrainedConfig bookkeeping (4.x and 5.x) */
    "_name_or_path",
    "transformers_version",
    "use_cache",
    "return_dict",
    "output_hidden_states",
    "output_attentions",
    "torchscript",
    "use_bfloat16",
    "tf_legacy_loss",
    "pruned_heads",
    "tie_encoder_decoder",
    "is_decoder",
    "is_encoder_decoder",
    "add_cross_attention",
    "cross_attention_hidden_size",
    "chunk_size_feed_forward",
    "finetuning_task",
    "id2label",
    "label2id",
    "num_labels",
    "problem_type",
    "tokenizer_class",
    "prefix",
    "task_specific_params",
    "_attn_implementation_autoset",
    "_commit_hash",
    "initializer_range",
    /* token ids */
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "sep_token_id",
    "decoder_start_token_id",
    /* MoE training loss switches (no effect on the forward pass) */
    "output_router_logits",
    "router_aux_loss_coef",
    /* generation defaults that 4.x configs carried (generation_config.json governs) */
    "max_length",
    "min_length",
    "do_sample",
    "early_stopping",
    "num_beams",
    "num_beam_groups",
    "diversity_penalty",
    "temperature",
    "top_k",
    "top_p",
    "typical_p",
    "repetition_penalty",
    "length_penalty",
    "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size",
    "bad_words_ids",
    "num_return_sequences",
    "output_scores",
    "return_dict_in_generate",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "remove_invalid_values",
    "exponential_decay_length_penalty",
    "suppress_tokens",
    "begin_suppress_tokens",
};

static bool listed(const char *key, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(key, list[i]) == 0)
            return true;
    return false;
}

int cfg_check_keys(const cfg_reader *r) {
    const char *key;
    json_t *v;
    json_object_foreach(r->doc, key, v) {
        (void)v;
        if (listed(key, read_keys, sizeof read_keys / sizeof *read_keys) ||
            listed(key, inert_keys, sizeof inert_keys / sizeof *inert_keys))
            continue;
        return areal_error_set(r->err, AREAL_EINVAL, -1,
                               "%s: key \"%.60s\" is not understood by this runtime; it may change "
                               "the model's math, so the model is refused rather than run with a "
                               "guessed default (remove the key if it does not change the forward "
                               "pass)",
                               r->file, key);
    }
    return AREAL_OK;
}
