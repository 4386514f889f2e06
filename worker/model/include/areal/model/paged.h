/*
 * paged.h - a paged KV cache and the incremental forward over it, for the
 * rollout engine's continuous batching (areal/rollout/engine.h).
 *
 * The cache is n_blocks fixed blocks of block_tokens positions; a sequence
 * owns a block table (position p lives in block table[p / block_tokens] at
 * row p % block_tokens), so memory grows a block at a time and blocks can be
 * shared between sequences that start with the same tokens (the engine's
 * prefix cache). Which block holds what is the caller's business: this file
 * only reads and writes the blocks it is told to.
 *
 * areal_model_step_paged is areal_model_step (generate.h) with block tables
 * instead of slots: the same kernels in the same order (RMSNorm, projections,
 * q/k norm, RoPE, per-row attention, MLP or MoE), so its logits equal the
 * slot cache's and a training forward's to fp32 rounding. Two differences:
 * the caller picks which rows get logits (the last row of a sequence to
 * sample, or every prompt row for prompt scoring), and attention scratch is
 * bounded (rows are processed in groups) so a long prefill does not allocate
 * rows x heads x keys floats at once.
 *
 * Tensor parallelism (the rollout server's t > 1): the model may be a tp-only
 * shard (areal/model/shard.h: Megatron's column-parallel q/k/v, gate/up and
 * row-parallel o_proj/down_proj, whole heads per rank). Each rank's cache then
 * holds only its local key/value heads (areal_paged_kv_init_local: the KV
 * budget of a rank covers 1/tp of the heads), the layers run the local heads
 * and columns, and after the o_proj and down_proj products the model's
 * reduction hook sums the partial products over tp (AREAL_REDUCE_ATTN_OUT,
 * AREAL_REDUCE_MLP_OUT: the training forward's points), row-parallel biases
 * added once after it. Every rank of the group must run the same step (same
 * tokens, tables and positions) in lock-step, since each reduction is a
 * collective. The embedding and the LM head stay whole (replicated): a rank
 * that asks for no logits (n_out 0) skips the head.
 */
#ifndef AREAL_MODEL_PAGED_H
#define AREAL_MODEL_PAGED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/model/model.h"

typedef struct areal_paged_kv {
    int n_layers, n_blocks, block_tokens, kv_dim; /* kv_dim = num_kv_heads * head_dim */
    float *k, *v;                                 /* [layer][block][block_tokens][kv_dim] each */
} areal_paged_kv;

/* Bytes of one block (keys and values of every layer) for cfg. */
size_t areal_paged_kv_block_bytes(const areal_model_config *cfg, int block_tokens);

/* Bytes of one block of m's cache: its local key/value heads (m->nkv) only. */
size_t areal_paged_kv_block_bytes_local(const areal_model *m, int block_tokens);

/* Whether the paged step can run shard s of cfg (whole, or tp only); else false with err set
 * (AREAL_EINVAL naming the split it cannot run). */
bool areal_paged_shard_ok(const areal_model_config *cfg, const areal_model_shard *s,
                          areal_error *err);

/* As areal_paged_kv_init for the local key/value heads of m (a tp shard's cache). */
int areal_paged_kv_init_local(areal_paged_kv *c, const areal_model *m, int n_blocks,
                              int block_tokens, areal_error *err);

/* Allocates n_blocks blocks (contents undefined). Returns 0, AREAL_EINVAL
 * (n_blocks or block_tokens < 1) or AREAL_ENOMEM; on failure *c is empty. */
int areal_paged_kv_init(areal_paged_kv *c, const areal_model_config *cfg, int n_blocks,
                        int block_tokens, areal_error *err);
void areal_paged_kv_free(areal_paged_kv *c);

/* Copies the keys and values of every layer from block src to block dst. */
void areal_paged_kv_copy_block(areal_paged_kv *c, int dst, int src);

/* One sequence of a paged step. */
typedef struct areal_paged_seq {
    const int32_t *table; /* block ids; must cover positions [0, start + new tokens) */
    int n_table;          /* entries of table */
    int start;            /* positions already cached; new tokens go to start, start + 1, ... */
} areal_paged_seq;

/*
 * Feeds new tokens to n_seqs sequences: sequence s's tokens are tokens[cu[s]
 * .. cu[s+1]) (at least one) at positions seqs[s].start + i; their keys and
 * values are written to the blocks of seqs[s].table and every row attends
 * positions [0, its own] of its sequence. Then the rows listed in
 * out_rows[0 .. n_out) (indices into [0, cu[n_seqs]), any order, repeats
 * allowed) go through the final norm and LM head into logits [n_out, V].
 * A tp shard needs its reduction hook (areal_model_set_reduce); a hook error
 * (a peer gone) is returned as is, and the step's blocks are then undefined.
 * Block ids written by two sequences of one call must differ (the caller
 * shares only full, already-computed blocks). Returns 0, AREAL_EINVAL (bad
 * ids, cu, rows or tables, a cache not sized for the model's local heads)
 * or AREAL_ENOMEM or the hook's error; the cache is unchanged on EINVAL.
 */
int areal_model_step_paged(areal_model *m, areal_paged_kv *c, const int32_t *tokens,
                           const int32_t *cu, const areal_paged_seq *seqs, int n_seqs,
                           const int32_t *out_rows, int n_out, float *logits, areal_error *err);

#endif
