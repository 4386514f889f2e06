/*
 * shard.h - which part of a model one process holds: its tensor-parallel
 * rank, pipeline stage (a layer range) and expert-parallel rank, and how each
 * of its parameters is cut out of the HF checkpoint's whole tensor.
 *
 * Tensor parallelism is Megatron's column/row split: q/k/v, gate and up
 * (weights and biases) are split by output rows (whole heads; every rank
 * holds num_heads/tp query and num_kv_heads/tp key/value heads), o_proj and
 * down_proj by input columns; the row-parallel biases (o_proj.bias,
 * down_proj.bias) stay whole and are added once, after the reduction.
 * Norms, qk-norms and the router are replicated. Mixture-of-experts layers
 * are split by experts (expert-parallel rank e holds experts
 * [e*E/ep, (e+1)*E/ep), each whole) and replicated over tensor parallelism
 * (etp = 1); the shared expert is whole. The embedding, final norm and
 * lm_head are whole (no vocabulary split yet): the first stage holds the
 * embedding, the last the norm and lm_head (and, when tied, the embedding as
 * well: Megatron's copy on the last stage, whose gradient the caller adds to
 * the first stage's).
 *
 * A shard's parameter list keeps the HF names (global layer numbers), so
 * views, checkpoints and logs read the same as for the whole model.
 *
 * The reduction points: after the o_proj and the down_proj products (forward)
 * and after the q/k/v and gate/up input gradients (backward), a tensor-
 * parallel layer holds a partial sum that the group must all-reduce; an
 * expert-parallel MoE layer likewise after its routed experts' sum and
 * before its input gradient's norm backward (over the ep group). The
 * model calls a hook there (areal_model_reduce_fn); the whole model needs
 * none, and a NULL hook is a no-op. Rejected: the model calling areal_coll
 * itself (the model component stays below the comm runtime; the trainer
 * binds a hook to its tp group).
 */
#ifndef AREAL_MODEL_SHARD_H
#define AREAL_MODEL_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/model/config.h"

typedef struct areal_model_shard {
    int tp_rank, tp;           /* tensor-parallel rank and size */
    int pp_stage, pp;          /* pipeline stage and number of stages */
    int first_layer, n_layers; /* the stage's layers [first_layer, first_layer + n_layers) */
    int ep_rank, ep;           /* expert-parallel rank and size */
    /*
     * Expert tensor parallelism (0 or 1: none): each local expert's gate and
     * up split by rows, its down by columns, over etp ranks (Megatron's
     * ETP). Only with token dispatch (ep_a2a), whose caller reduces the
     * experts' partial outputs over the etp group.
     */
    int etp_rank, etp;
    /*
     * Tokens reach the experts by all-to-all (areal/model/moe_dispatch.h):
     * the ep ranks hold different tokens, each routes its own, so the router
     * and the routed sum are complete on every rank (no partial router
     * gradient, no MoE reduction points).
     */
    bool ep_a2a;
} areal_model_shard;

/* etp of s, 1 when unset (0). */
static inline int areal_model_shard_etp(const areal_model_shard *s) {
    return s->etp > 1 ? s->etp : 1;
}

/* How a local tensor is cut from the HF tensor: whole (dim -1), or rows/cols [start, start+len). */
typedef struct areal_tensor_slice {
    int dim; /* -1 whole, 0 rows, 1 columns (of a 2-D tensor; a 1-D tensor splits on 0) */
    int64_t start, len;
} areal_tensor_slice;

/* The shard of one process holding the whole model (every parameter, whole). */
areal_model_shard areal_model_shard_whole(const areal_model_config *cfg);

/*
 * Stage `stage` of `pp` with the layers split as evenly as possible (the
 * first num_layers % pp stages one layer more), tp and ep 1. AREAL_EINVAL
 * when pp is not in 1..num_layers or stage not in 0..pp-1.
 */
int areal_model_shard_stage(const areal_model_config *cfg, int stage, int pp,
                            areal_model_shard *out, areal_error *err);

/* True for the whole-model shard (no split of any kind). */
bool areal_model_shard_is_whole(const areal_model_config *cfg, const areal_model_shard *s);

/*
 * Checks s against cfg: sizes >= 1, ranks in range, the layer range inside
 * the model (starting at 0 on stage 0, ending at num_layers on the last),
 * num_heads, num_kv_heads and (dense layers) intermediate_size divisible by
 * tp, num_experts by ep. AREAL_EINVAL naming the field and the fix.
 */
int areal_model_shard_check(const areal_model_config *cfg, const areal_model_shard *s,
                            areal_error *err);

/*
 * The shard's parameters: a subset of areal_model_expected_tensors(cfg) in
 * its order, with local shapes, and (when slices is not NULL) how each is cut
 * from the HF tensor. *specs and *slices are new arrays of *n entries (caller
 * frees). AREAL_EINVAL (areal_model_shard_check) or AREAL_ENOMEM.
 */
int areal_model_shard_tensors(const areal_model_config *cfg, const areal_model_shard *s,
                              areal_tensor_spec **specs, areal_tensor_slice **slices, size_t *n,
                              areal_error *err);

/*
 * Copies slice sl of a row-major HF tensor `full` of shape hf (ndim 1 or 2)
 * into dst (the local tensor, row-major). Never fails: sl comes from
 * areal_model_shard_tensors for that shape.
 */
void areal_tensor_slice_copy(float *dst, const float *full, const areal_tensor_spec *hf,
                             const areal_tensor_slice *sl);

/*
 * True when parameter `name`'s gradient on a shard is a partial sum over
 * tensor parallelism, which the trainer must all-reduce over the tp group
 * after the backward: the qk-norm weights (replicated, but each rank's
 * gradient covers only its own heads), and over expert parallelism: the
 * router (each rank's gradient covers only its own experts). Every other
 * replicated parameter's gradient is complete and equal on every rank.
 */
bool areal_model_shard_grad_partial(const areal_model_shard *s, const char *name);

/* Where a layer calls its reduction hook (see above). */
typedef enum areal_reduce_point {
    AREAL_REDUCE_ATTN_OUT,  /* forward: o_proj product [T, H], partial over tp */
    AREAL_REDUCE_MLP_OUT,   /* forward: down_proj product [T, H], partial over tp (dense) */
    AREAL_REDUCE_MOE_OUT,   /* forward: routed experts' sum [T, H], partial over ep */
    AREAL_REDUCE_ATTN_GRAD, /* backward: d(attention input norm) [T, H], partial over tp */
    AREAL_REDUCE_MLP_GRAD,  /* backward: d(MLP input norm) [T, H], partial over tp (dense) */
    AREAL_REDUCE_MOE_GRAD,  /* backward: the routed experts' part of d(MLP input norm), over ep */
} areal_reduce_point;

/*
 * The hook: all-reduce (sum) buf[0..count) in place over the group the point
 * names (tp or ep), for layer `layer`. The model calls it only where that
 * group is larger than one, so a trainer may bind one hook for both. Returns AREAL_OK or an error
 * code with err set (the forward or backward then fails with it).
 */
typedef int (*areal_model_reduce_fn)(void *ctx, areal_reduce_point point, int layer, float *buf,
                                     size_t count, areal_error *err);

#endif
