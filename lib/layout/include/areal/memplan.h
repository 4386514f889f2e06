/*
 * memplan.h - the memory of one trainer rank, from plain numbers: the bytes
 * of its parameters, gradients, optimizer state and peak activations for a
 * model's dimensions and a layout, by the same arithmetic the worker's
 * model core allocates with (worker/model: the shard's tensor list of
 * config_tensors.c and shard.c, the activation record of model_fwd.c; the
 * parallel tests check the counts against a real shard). All fp32, as the
 * CPU worker trains: 4 bytes a parameter, 4 a gradient, 8 of AdamW moments
 * (sharded over dp with the distributed optimizer), activations 4 bytes a
 * float of one micro-batch's record times the micro-batches alive on the
 * stage under 1F1B (min(pp - stage, n_mb)). With sequence_parallel (tp > 1)
 * each layer's residuals and their rstd keep ceil(T / tp) rows (tp rank 0's
 * block), plus one [T, H] scratch a stage for the row-parallel products.
 *
 * With fsdp (fully sharded, worker/parallel's fsdp.h) parameters, gradients
 * and moments are all sharded: each unit (one per decoder layer, and the
 * root: embedding, final norm, lm_head) padded to a multiple of dp * cp and
 * split evenly, so params / grads / optim are the rank's ranges; `gathered`
 * is what a step materialises on top at its peak: the root unit whole
 * (params and its gradient sum) for the whole step, and during the backward
 * of the largest layer its unit whole twice (gathered params, gradient to
 * reduce-scatter) and its one-layer stage model (params and grads); the
 * activations are the per-layer stage records of one micro-batch (each
 * layer's output a buffer of its own), every micro-batch run forward then
 * backward.
 *
 * Pure arithmetic on numbers, so the planner (arealctl, lib/layout) and the
 * worker share it without the planner reading model code; the caller turns
 * a config.json into areal_mem_model.
 */
#ifndef AREAL_MEMPLAN_H
#define AREAL_MEMPLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/strategy.h"

/* A decoder's dimensions (config.json's). */
typedef struct areal_mem_model {
    long vocab, hidden, inter, layers, heads, kv_heads, head_dim;
    bool tied, qkv_bias, o_bias, mlp_bias, qk_norm;
    long experts, experts_per_tok, moe_inter, shared_inter; /* experts 0: dense */
    long moe_step; /* decoder_sparse_step: layer l routes to experts when (l+1) % moe_step == 0 */
    unsigned long long dense_mask; /* mlp_only_layers among the first 64 layers (bit l: dense) */
} areal_mem_model;

/* How the rank trains. */
typedef struct areal_mem_opts {
    long mb_tokens;         /* tokens of one micro-batch */
    long seq_len;           /* tokens of one sequence (attention probabilities: seq_len^2 a head) */
    long n_mb;              /* micro-batches of a step on this rank */
    bool zero1;             /* distributed optimizer: moments sharded over dp * cp */
    bool vocab_parallel;    /* embedding and lm_head split over tp */
    bool fsdp;              /* fully sharded: params, grads and moments over dp * cp (pp 1) */
    bool sequence_parallel; /* tp > 1: the residual stream's records hold tp rank 0's rows */
} areal_mem_opts;

/* One rank's bytes. */
typedef struct areal_mem_rank {
    int stage;             /* the pipeline stage it is on */
    long layers;           /* its layers */
    int64_t n_params;      /* parameters it holds */
    int64_t params, grads; /* bytes */
    int64_t optim;         /* AdamW m and v */
    int64_t acts;          /* peak activations */
    int64_t gathered;      /* fsdp: whole units and stage models live at the peak (else 0) */
    int64_t total;
} areal_mem_rank;

/*
 * Rank memory of stage `stage` (tp rank 0, ep rank 0: ranks of one stage
 * differ by at most a remainder) under strategy s. AREAL_EINVAL naming the
 * field when s cannot split the model (heads, kv heads, intermediate,
 * experts or vocabulary not divisible, pp above the layers).
 */
int areal_mem_stage(const areal_mem_model *m, const areal_strategy *s, const areal_mem_opts *o,
                    int stage, areal_mem_rank *out, areal_error *err);

/* The stage with the largest total (the rank a plan must fit). */
int areal_mem_worst(const areal_mem_model *m, const areal_strategy *s, const areal_mem_opts *o,
                    areal_mem_rank *out, areal_error *err);

/*
 * AREAL_OK when r fits in gpu_bytes, else AREAL_EINVAL with a message
 * naming the largest part and the dimension to grow (pp or tp for
 * parameters and gradients, dp with the distributed optimizer for the
 * optimizer state, tp or pp or smaller micro-batches for activations).
 */
int areal_mem_fit(const areal_mem_rank *r, const areal_strategy *s, const areal_mem_opts *o,
                  int64_t gpu_bytes, areal_error *err);

#endif
