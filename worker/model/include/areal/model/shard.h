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
 * lm_head are whole unless the shard is vocab-parallel: the first stage
 * holds the embedding, the last the norm and lm_head (and, when tied, the
 * embedding as well: Megatron's copy on the last stage, whose gradient the
 * caller adds to the first stage's).
 *
 * Vocab-parallel (Megatron's VocabParallelEmbedding and column-parallel
 * output layer, vocab_parallel with tp > 1): the embedding and lm_head are
 * split by rows, tp rank r holding tokens [r*V/tp, (r+1)*V/tp) (one buffer
 * when tied, both views cut alike). The embedding looks up the tokens it
 * owns, zeros for the others, and the hook sums the rows over tp
 * (AREAL_REDUCE_EMBED_OUT); the stage's logits are the rank's vocabulary
 * columns [T, V/tp] (areal_model_shard_vocab), never gathered, for a
 * vocab-parallel loss; the lm_head's input gradient is partial over tp
 * (AREAL_REDUCE_HEAD_GRAD). Each rank's embedding gradient takes only its
 * own rows, from the complete residual gradient, with no reduction.
 *
 * Sequence-parallel (Megatron's sequence_parallel, sequence_parallel with
 * tp > 1, dense layers): the residual stream, the norms and the residual
 * adds run on this rank's rows of the packed batch only
 * (areal_model_sp_rows: contiguous blocks of ceil(T/tp) rows, the last ones
 * shorter or empty); the normed input is all-gathered over tp before the
 * column-parallel q/k/v and gate/up (AREAL_SP_GATHER), the row-parallel
 * o_proj and down_proj products reduce-scattered back to the rows
 * (AREAL_SP_SCATTER) in place of the all-reduce; the final norm's output is
 * gathered before the lm_head. Backward, the conjugates: the rows' gradient
 * gathered before the row-parallel backward, the column-parallel input
 * gradient reduce-scattered, the embedding's gradient gathered first. The
 * norm weights' gradients then cover only the rank's rows
 * (areal_model_shard_grad_partial). The activation record keeps the
 * residuals (each layer's input and post-attention residual, their norms'
 * rstd) for the rank's rows only, the row-parallel products going through
 * one [T, H] scratch per stage; the gathered norm outputs (the
 * column-parallel inputs) stay [T, H], as do the projections, which tensor
 * parallelism already splits by heads and columns. Pipeline stages pass
 * whole [T, H] buffers of which the receiver reads its rows.
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
    bool vocab_parallel;       /* with tp > 1: embedding and lm_head split by vocabulary rows */
    bool sequence_parallel;    /* with tp > 1: norms and residuals on this rank's rows */
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

/*
 * The vocabulary columns of this shard's logits: returns their count (V/tp
 * when vocab-parallel with tp > 1, else V) and sets *start (nullable) to the
 * first token id.
 */
int areal_model_shard_vocab(const areal_model_config *cfg, const areal_model_shard *s, int *start);

/*
 * The rows [*lo, *hi) of a T-token batch this shard's norms and residuals
 * run on: [r*B, (r+1)*B) clipped to T with B = ceil(T/tp) when
 * sequence-parallel with tp > 1, else [0, T).
 */
void areal_model_sp_rows(const areal_model_shard *s, int T, int *lo, int *hi);

/* True for the whole-model shard (no split of any kind). */
bool areal_model_shard_is_whole(const areal_model_config *cfg, const areal_model_shard *s);

/*
 * Checks s against cfg: sizes >= 1, ranks in range, the layer range inside
 * the model (starting at 0 on stage 0, ending at num_layers on the last),
 * num_heads, num_kv_heads and (dense layers) intermediate_size divisible by
 * tp, num_experts by ep, vocab_size by tp when vocab-parallel; a
 * sequence-parallel shard has no MoE layer. AREAL_EINVAL naming the field and
 * the fix.
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
 * Sequence-parallel: the layer norms and the final norm too (each rank's
 * gradient covers its rows).
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
    AREAL_REDUCE_EMBED_OUT, /* forward: vocab-parallel embedding rows [T, H], partial over tp */
    AREAL_REDUCE_HEAD_GRAD, /* backward: d(final norm output) [T, H] of a vocab-parallel lm_head */
} areal_reduce_point;

/*
 * The hook: all-reduce (sum) buf[0..count) in place over the group the point
 * names (tp or ep), for layer `layer`. The model calls it only where that
 * group is larger than one, so a trainer may bind one hook for both. Returns AREAL_OK or an error
 * code with err set (the forward or backward then fails with it).
 */
typedef int (*areal_model_reduce_fn)(void *ctx, areal_reduce_point point, int layer, float *buf,
                                     size_t count, areal_error *err);

/* The sequence-parallel exchanges over tp of a [T, H] buffer, in place. */
typedef enum areal_sp_op {
    AREAL_SP_GATHER,  /* this rank's rows (areal_model_sp_rows) in, every row out */
    AREAL_SP_SCATTER, /* a partial sum of every row in, this rank's rows of the sum out */
} areal_sp_op;

/*
 * The sequence-parallel hook (layer -1: the embedding or the head). The
 * model calls it only for a sequence-parallel shard. Returns AREAL_OK or an
 * error code with err set.
 */
typedef int (*areal_model_sp_fn)(void *ctx, areal_sp_op op, int layer, float *buf, int T, int H,
                                 areal_error *err);

#endif
