/*
 * tiny.h - a tiny model and tokenizer the project makes itself, for the demo
 * (`make run`) and the learning tests: a byte-level BPE tokenizer.json over
 * digits, arithmetic signs, lower-case letters and the Qwen special tokens,
 * a Qwen2 config.json sized by areal_tiny_cfg, and random-init weights
 * (HF's initializer: normal(0, 0.02) matrices, zero biases, unit norms) from
 * a seed, so the same seed gives the same bytes on every machine.
 *
 * Why a real HF directory rather than an in-memory toy: the same files go to
 * the rollout servers (`areal-worker serve --model DIR`), the trainer and
 * transformers, so the demo runs the full path the operator runs.
 */
#ifndef AREAL_TRAIN_TINY_H
#define AREAL_TRAIN_TINY_H

#include <stdint.h>

#include "areal/error.h"
#include "areal/model/model.h"

typedef struct areal_tiny_cfg {
    int hidden_size;       /* e.g. 64 */
    int intermediate_size; /* e.g. 256 */
    int num_layers;        /* e.g. 2 */
    int num_heads;         /* hidden_size % num_heads == 0 */
    int num_kv_heads;      /* num_heads % num_kv_heads == 0 */
    uint64_t seed;         /* weight init */
} areal_tiny_cfg;

/* The demo's default shape (hidden 64, 2 layers, 4 heads, 2 KV heads). */
areal_tiny_cfg areal_tiny_default(void);

/* The token that ends an answer ("<|endoftext|>"), as written into config.json. */
#define AREAL_TINY_EOS "<|endoftext|>"

/*
 * The tokenizer.json text (new NUL-terminated string, caller frees) and its
 * vocabulary size through *vocab (nullable). Returns 0 or AREAL_ENOMEM.
 */
int areal_tiny_tokenizer_json(char **out, int *vocab, areal_error *err);

/*
 * Fills *cfg (the model core's struct) for a tiny model of shape t.
 * Returns 0 or AREAL_EINVAL naming the bad field of t.
 */
int areal_tiny_model_config(const areal_tiny_cfg *t, areal_model_config *cfg, areal_error *err);

/* Writes random-init weights of the seed into an initialised model m. */
void areal_tiny_init_weights(areal_model *m, uint64_t seed);

/*
 * Writes config.json, tokenizer.json and model.safetensors (random init) of
 * shape t into the existing directory dir. Returns 0, AREAL_EINVAL, AREAL_EIO
 * (naming the file) or AREAL_ENOMEM.
 */
int areal_tiny_create(const char *dir, const areal_tiny_cfg *t, areal_error *err);

#endif
