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
 * A model may hold a shard (areal/model/shard.h): a tensor-parallel slice of
 * each layer, a pipeline stage's layer range, an expert range. Its parameter
 * list is then the shard's (local shapes, HF names), its layers run only the
 * local heads and columns and call the reduction hook where tensor
 * parallelism needs an all-reduce, and areal_model_forward_stage /
 * backward_stage run its layer range with activations in and out. The
 * layers call their kernels through an ops table (areal/model/ops.h; the CPU
 * one by default). With the whole-model shard (areal_model_init/load) all of
 * this is the identity: same list, same order, same arithmetic.
 *
 * A batch is T tokens of n_seqs sequences packed back to back: sequence s is
 * tokens[cu_seqlens[s] .. cu_seqlens[s+1]), positions restart at 0 in each,
 * and attention never crosses a sequence boundary.
 */
#ifndef AREAL_MODEL_MODEL_H
#define AREAL_MODEL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/model/config.h"
#include "areal/model/ops.h"
#include "areal/model/pool.h"
#include "areal/model/shard.h"

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
    float *embed;          /* [V, H]; NULL on a middle pipeline stage */
    float *norm;           /* [H]; NULL except on the last stage */
    float *lm_head;        /* [V, H]; == embed when tied; NULL except on the last stage */
    areal_layer_w *layers; /* [num_layers] by global layer, owned by the model; all-NULL views
                              outside the shard's layer range */
} areal_weights;

/*
 * The gradient-ready hook: floats [lo, hi) of m->grads became final in the
 * backward that calls it (see areal_model_set_grad_ready). An error fails
 * that backward with it.
 */
typedef int (*areal_model_grad_ready_fn)(void *ctx, size_t lo, size_t hi, areal_error *err);

typedef struct areal_model {
    areal_model_config cfg;
    areal_tensor_spec *specs; /* parameter list, in buffer order */
    size_t *offset;           /* offset[i]: first float of specs[i] */
    size_t n_specs, n_params;
    float *params, *grads;        /* n_params floats each; grads starts zeroed */
    areal_weights w, g;           /* views into params and grads */
    float *inv_freq;              /* [head_dim / 2] rotary frequencies */
    float attn_scale;             /* 1 / sqrt(head_dim) */
    areal_pool *pool;             /* borrowed; NULL runs serially */
    areal_model_shard shard;      /* the part held (whole for areal_model_init / load) */
    areal_tensor_slice *slices;   /* [n_specs]: how each parameter is cut from the HF tensor */
    int nh, nkv, inter;           /* local query heads, key/value heads, dense intermediate size */
    const areal_ops *ops;         /* kernels the layers call (areal_ops_cpu()) */
    void *ops_ctx;                /* their context (the pool for the CPU ops) */
    areal_model_reduce_fn reduce; /* reduction hook (NULL: none; the whole model needs none) */
    void *reduce_ctx;
    areal_model_sp_fn sp; /* sequence-parallel hook (a sequence-parallel shard needs one) */
    void *sp_ctx;
    /* MoE token dispatcher (areal/model/moe_dispatch.h; NULL: experts run on local tokens) */
    const struct areal_moe_dispatch *moe_dispatch;
    void *moe_dispatch_ctx;
    /* context-parallel attention (areal/model/cp_attn.h; NULL: packed attention) */
    const struct areal_cp_attn *cp_attn;
    void *cp_attn_ctx;
    /* gradient-ready hook (NULL: none) and whether the backward reports to it */
    areal_model_grad_ready_fn grad_ready;
    void *grad_ready_ctx;
    bool grad_ready_armed;
    /* owned: packed inference twins of the linear weights (areal_model_infer_pack; NULL: none) */
    struct areal_infer_pack *infer_pack;
} areal_model;

typedef struct areal_infer_pack areal_infer_pack;

/*
 * Copies the dense linear weights (attention, MLP, LM head) once into the
 * layout the inference kernels read (k_linear_infer), so the KV-cache and
 * paged steps (generate.h, paged.h) multiply them without repacking per
 * call: ~1.7x the one-row decode product, with bit-identical results. Costs
 * one more copy of those weights. A later write to m->params makes the twin
 * stale: call this again (or areal_model_infer_unpack) after changing the
 * parameters; the training paths never read the twin. Replaces an earlier
 * pack. AREAL_ENOMEM (the model then has no pack and still runs).
 */
int areal_model_infer_pack(areal_model *m, areal_error *err);

/* Frees m's packed twin, if any (areal_model_free does too). */
void areal_model_infer_unpack(areal_model *m);

/*
 * Allocates a model of cfg with all parameters and gradients zero. pool is
 * borrowed and must outlive the model. Returns 0, AREAL_EINVAL (an
 * unsupported setting, naming the config field) or AREAL_ENOMEM; on failure
 * *m is empty and needs no free.
 */
int areal_model_init(areal_model *m, const areal_model_config *cfg, areal_pool *pool,
                     areal_error *err);

/*
 * As areal_model_init, for the part of cfg that shard s names (local shapes;
 * areal_model_shard_check's errors, AREAL_EINVAL naming the field). The
 * model keeps a copy of s.
 */
int areal_model_init_shard(areal_model *m, const areal_model_config *cfg,
                           const areal_model_shard *s, areal_pool *pool, areal_error *err);

/*
 * As areal_model_load, for shard s: each parameter is read whole from the
 * checkpoint and its slice copied in (areal_tensor_slice_copy).
 */
int areal_model_load_shard(areal_model *m, const char *dir, const areal_model_shard *s,
                           areal_pool *pool, areal_error *err);

/*
 * Sets the reduction hook (fn NULL: none) that a sharded model's layers call
 * at each areal_reduce_point. ctx is borrowed.
 */
void areal_model_set_reduce(areal_model *m, areal_model_reduce_fn fn, void *ctx);

/*
 * Sets the gradient-ready hook (fn NULL: none; ctx borrowed) and disarms it.
 * While armed (areal_model_arm_grad_ready), a backward calls fn with each
 * range of m->grads as soon as the range's gradient is complete for this
 * backward: the final norm and the untied lm_head after the head, each layer
 * after its own backward, the embedding at the end; in that order, the
 * ranges disjoint, descending, tensor-aligned, and together the stage's
 * whole buffer except the tied embedding of a pipeline (pp > 1), whose two
 * copies are final only after their sum (the caller's). A caller accumulating
 * micro-batches arms only the last one's backward (earlier ones would report
 * ranges still to be added to), as Megatron's no_sync does. What the model
 * cannot know, the caller must: gradients partial over a group
 * (areal_model_shard_grad_partial) are reported too, not yet summed. Unset
 * or disarmed it costs one branch per layer.
 */
void areal_model_set_grad_ready(areal_model *m, areal_model_grad_ready_fn fn, void *ctx);

/* Arms (or disarms) the gradient-ready hook for the backwards that follow. */
void areal_model_arm_grad_ready(areal_model *m, bool armed);

/* Sets the sequence-parallel hook (fn NULL: none); ctx is borrowed. */
void areal_model_set_sp(areal_model *m, areal_model_sp_fn fn, void *ctx);

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

/* What a forward saved for its backward; logits [T, V] (last stage), hidden [T, H] (others). */
typedef struct areal_acts {
    int T, V;
    float *logits; /* NULL except on the last pipeline stage */
    areal_acts_priv *priv;
    float *hidden; /* the stage's output hidden states; NULL on the last stage */
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

/*
 * The forward of the model's stage (its shard's layer range) on batch b.
 * x_in [T, H]: the previous stage's hidden states (a->hidden of its
 * forward), NULL on the first stage, which embeds b's tokens. The last stage
 * fills a->logits, every other stage a->hidden; both owned by *a. The batch
 * (token ids, for the embedding, and cu_seqlens, for attention) is that of
 * every stage. Returns as areal_model_forward, plus AREAL_EINVAL when x_in
 * is NULL on a later stage or given on the first; a hook's error.
 */
int areal_model_forward_stage(areal_model *m, const areal_batch *b, const float *x_in,
                              areal_acts *a, areal_error *err);

/*
 * The backward of the stage that filled a: d_out is dlogits [T, V] on the
 * last stage, else the gradient of a->hidden [T, H] (the next stage's dx_in).
 * Parameter gradients are added to m->grads; dx_in [T, H] (may be NULL on
 * the first stage, which adds into the embedding's gradient instead) is
 * written with the gradient of x_in. Returns as areal_model_backward.
 */
int areal_model_backward_stage(areal_model *m, const areal_acts *a, const float *d_out,
                               float *dx_in, areal_error *err);

void areal_acts_free(areal_acts *a);

/*
 * Floats of the activation record a forward saved (the one allocation a
 * backward reads; lib/layout's areal/memplan.h computes the same number).
 */
size_t areal_acts_floats(const areal_acts *a);

#endif
