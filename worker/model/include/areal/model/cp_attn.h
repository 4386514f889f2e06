/*
 * cp_attn.h - the seam through which context parallelism runs a layer's
 * attention core: the model holds a shard of each sequence's tokens (any
 * subset, as the batch's areal_cp_tokens says: each token's position in its
 * sequence and its index in the whole packed batch), computes its q/k/v and
 * RoPE at those positions, and hands q, k, v to an attention of the
 * caller's (worker/parallel's areal_par_cp_*), which gathers the other
 * shards' keys and values over the cp group, attends causally by position
 * within each sequence, and in the backward returns every key's and value's
 * gradient to the rank that holds it.
 *
 * The model component stays below the comm runtime (the hook is the
 * trainer's). The hook says which batches are shards (tokens_of, asked as
 * each forward starts); any other batch, or a model without the hook, runs
 * the ordinary packed attention over cu_seqlens (which a shard's batch may
 * give as one sequence: the model uses it for nothing else). Rejected: the model gathering keys
 * itself (a model->comm dependency), and cu_seqlens per shard (a sequence shorter than 2 * cp
 * leaves some ranks without any of its tokens, which cu_seqlens cannot say: every sequence there is
 * non-empty), and a cp field in areal_batch (every positional initializer of the struct in the tree
 * would change).
 */
#ifndef AREAL_MODEL_CP_ATTN_H
#define AREAL_MODEL_CP_ATTN_H

#include <stdint.h>

#include "areal/error.h"

typedef struct areal_model areal_model;

/* A batch's context-parallel shard: per local token (areal_batch.n_tokens of them). */
typedef struct areal_cp_tokens {
    const int32_t *pos;  /* position in its sequence (RoPE, the causal order) */
    const int32_t *gidx; /* index in the whole packed batch: sequence start = gidx - pos */
} areal_cp_tokens;

typedef struct areal_batch areal_batch;

typedef struct areal_cp_attn {
    /* The shard's tokens of batch b (borrowed, alive through the forward), NULL: not a shard. */
    const areal_cp_tokens *(*tokens_of)(void *ctx, const areal_batch *b);
    /*
     * Layer `layer`'s attention of the T local queries q [T, nh*hd] over the
     * whole sequences' keys and values (k, v [T, nkv*hd] the local ones,
     * after RoPE): out [T, nh*hd] written. *saved is the hook's (freed by
     * saved_free with the activations). 0 or an error.
     */
    int (*fwd)(void *ctx, const areal_model *m, int layer, int T, const int32_t *pos,
               const int32_t *gidx, const float *q, const float *k, const float *v, float *out,
               void **saved, areal_error *err);
    /* From dout [T, nh*hd]: dq, dk, dv (local, [T, ...]) added to. */
    int (*bwd)(void *ctx, const areal_model *m, int layer, void *saved, const float *dout,
               float *dq, float *dk, float *dv, areal_error *err);
    void (*saved_free)(void *saved); /* NULL-safe */
} areal_cp_attn;

/* Binds the hook (static or outliving the model, ctx borrowed); NULL unbinds. */
void areal_model_set_cp_attn(areal_model *m, const areal_cp_attn *a, void *ctx);

#endif
