/*
 * cp.h - context parallelism: attention over sequence shards of packed
 * variable-length sequences.
 *
 * The split is Megatron's load-balanced causal one: every sequence of a
 * micro-batch is cut into 2c chunks (chunk i is tokens [L*i/(2c),
 * L*(i+1)/(2c)), so a sequence shorter than 2c has empty chunks) and cp rank
 * r holds chunks r and 2c-1-r of each, so each rank's causal work is about
 * equal. A rank's shard is one local batch (its tokens in sequence order,
 * given to the model as one cu_seqlens sequence) plus, per token, its
 * position in its sequence (RoPE) and its index in the micro-batch.
 *
 * Attention (areal/model/cp_attn.h): the layer's local keys and values
 * (after RoPE) are all-gathered over the cp group, padded to the largest
 * shard; each local query attends to the keys of its own sequence at
 * positions <= its own; the backward's key and value gradients are computed
 * into the gathered layout and reduce-scattered back, each rank receiving
 * the sum for the tokens it holds. Rejected: ring attention (c - 1 send/recv
 * rounds overlapping compute): equal in result, the all-gather is one
 * collective and the memory of c shards of keys is small at these lengths;
 * the ring is the GPU path's job. The attention loops are plain C on the
 * host (no ops table): the reference path, not a kernel.
 *
 * Every parameter is replicated over cp: the gradients are summed over the
 * dp-cp group (and the loss divided by the dp-cp token count).
 */
#ifndef AREAL_PARALLEL_CP_H
#define AREAL_PARALLEL_CP_H

#include <stdint.h>

#include "areal/comm/coll.h"
#include "areal/error.h"
#include "areal/model/cp_attn.h"
#include "areal/model/model.h"

/* One rank's shard of one micro-batch. */
typedef struct areal_par_cp_shard {
    areal_batch b;     /* the local batch: n_tokens tokens, one cu_seqlens sequence */
    areal_cp_tokens t; /* positions and micro-batch indices of b's tokens */
    int32_t *buf;      /* owns b.tokens, t.pos, t.gidx and the cu */
} areal_par_cp_shard;

/*
 * Shard `cp_rank` of `cp` of micro-batch `whole`. AREAL_EINVAL when cp < 1,
 * the rank is out of range, or the shard would hold no token (name the
 * micro-batch size: use larger micro-batches or a smaller cp); AREAL_ENOMEM.
 */
int areal_par_cp_shard_make(const areal_batch *whole, int cp, int cp_rank, areal_par_cp_shard *out,
                            areal_error *err);
void areal_par_cp_shard_free(areal_par_cp_shard *s);

/* The attention hook's state: the cp group and the shards it recognises. */
typedef struct areal_par_cp {
    areal_coll *cp; /* borrowed; NULL or size one: nothing to gather */
    const areal_par_cp_shard
        *shards; /* borrowed [n_shards]: batches whose tokens match are shards */
    int n_shards;
} areal_par_cp;

/*
 * Binds the context-parallel attention over c (borrowed, outliving m's
 * forwards and backwards) to m. c->shards must list every shard batch a
 * forward is given (matched by its tokens pointer).
 */
void areal_par_cp_bind(areal_model *m, areal_par_cp *c);

#endif
