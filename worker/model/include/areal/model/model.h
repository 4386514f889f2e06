/*
 * model.h - the CPU fp32 reference model: parameters and gradients in flat
 * buffers with named views, forward over packed variable-length sequences
 * with saved activations, and backward from a gradient of the logits.
 *
 * Parameters follow areal_model_expected_tensors: tensor i of that list lives
 * at params + offset[i] (the same offsets index grads and the optimizer's
 * state), so the optimizer, gradient clipping, collectives and checkpoints
 * are loops over one buffer while the layers see typed views (areal_weights).
 * Covers Qwen2 (qkv bias), Qwen3 (q/k RMSNorm), Qwen3-MoE and Qwen2-MoE
 * (softmax router, top-k, norm_topk_prob, optional gated shared expert) and
 * Llama (tied embeddings, rope scaling "linear" and "llama3"); rope scaling
 * "dynamic" and "yarn" are refused by areal_model_init with the field named.
 *
 * A batch is T tokens of n_seqs sequences packed back to back: sequence s is
 * tokens[cu_seqlens[s] .. cu_seqlens[s+1]), positions restart at 0 in each,
 * and attention never crosses a sequence boundary.
 */
#ifndef AREAL_MODEL_MODEL_H
#define AREAL_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/model/config.h"
#include "areal/model/pool.h"

/* Views of one decoder layer (NULL where the architecture has no such tensor). */
typedef struct areal_layer_w {
    float *ln1, *wq, *wk, *wv, *bq, *bk, *bv, *wo, *bo, *q_norm, *k_norm, *ln2;
    float *gate, *up, *down, *gate_b, *up_b, *down_b; /* dense MLP */
    float *router;                                    /* [E, H] */
    float *experts;       /* expert e: gate, up, down at experts + e * expert_stride */
    size_t expert_stride; /* floats per expert */
    float *sh_gate, *sh_up, *sh_down, *sh_gate_w; /* shared expert and its [1, H] gate */
} areal_layer_w;

typedef struct areal_weights {
    float *embed;          /* [V, H] */
    float *norm;           /* [H] */
    float *lm_head;        /* [V, H]; == embed when tied */
    areal_layer_w *layers; /* [num_layers], owned by the model */
} areal_weights;

typedef struct areal_model {
    areal_model_config cfg;
    areal_tensor_spec *specs; /* parameter list, in buffer order */
    size_t *offset;           /* offset[i]: first float of specs[i] */
    size_t n_specs, n_params;
    float *params, *grads; /* n_params floats each; grads starts zeroed */
    areal_weights w, g;    /* views into params and grads */
    float *inv_freq;       /* [head_dim / 2] rotary frequencies */
    float attn_scale;      /* 1 / sqrt(head_dim) */
    areal_pool *pool;      /* borrowed; NULL runs serially */
} areal_model;

/*
 * Allocates a model of cfg with all parameters and gradients zero. pool is
 * borrowed and must outlive the model. Returns 0, AREAL_EINVAL (an
 * unsupported setting, naming the config field) or AREAL_ENOMEM; on failure
 * *m is empty and needs no free.
 */
int areal_model_init(areal_model *m, const areal_model_config *cfg, areal_pool *pool,
                     areal_error *err);

/*
 * Opens the HF directory `dir` (areal_checkpoint_open validates config and
 * tensors against each other) and loads every parameter as fp32. Returns as
 * areal_model_init, plus AREAL_EIO; errors name the file and tensor.
 */
int areal_model_load(areal_model *m, const char *dir, areal_pool *pool, areal_error *err);

void areal_model_free(areal_model *m);

/* Index of parameter `name` in specs, or -1. */
int areal_model_find(const areal_model *m, const char *name);

/* Sets every gradient to zero. */
void areal_model_zero_grad(areal_model *m);

typedef struct areal_batch {
    const int32_t *tokens;     /* [n_tokens], each in [0, vocab_size) */
    const int32_t *cu_seqlens; /* [n_seqs + 1], 0 = cu[0] < cu[1] < ... = n_tokens */
    int n_tokens, n_seqs;
} areal_batch;

/* Checks a batch against the model (ids in range, cu_seqlens increasing). */
int areal_batch_check(const areal_model *m, const areal_batch *b, areal_error *err);

typedef struct areal_acts_priv areal_acts_priv;

/* What a forward saved for its backward; logits [T, V]. */
typedef struct areal_acts {
    int T, V;
    float *logits;
    areal_acts_priv *priv;
} areal_acts;

/*
 * Runs the model on batch b and fills *a (logits and everything the backward
 * needs; *a owns it, free with areal_acts_free). The batch arrays are copied.
 * Returns 0, AREAL_EINVAL (bad batch) or AREAL_ENOMEM; on failure *a is empty.
 */
int areal_model_forward(areal_model *m, const areal_batch *b, areal_acts *a, areal_error *err);

/*
 * Backpropagates dlogits [T, V] through the forward that filled a and adds
 * the parameter gradients to m->grads (so micro-batches accumulate). Returns
 * 0, AREAL_EINVAL (a holds no forward) or AREAL_ENOMEM (then m->grads is
 * partially updated: zero and redo).
 */
int areal_model_backward(areal_model *m, const areal_acts *a, const float *dlogits,
                         areal_error *err);

void areal_acts_free(areal_acts *a);

#endif
