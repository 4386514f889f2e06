/*
 * paged.h - the rollout engine's paged step (areal_model_step_paged's
 * contract, areal/model/paged.h) on the GPU model's decode step over its
 * paged KV cache (areal_gpu_decode_step, areal/gpumodel/model.h).
 *
 * An engine step feeds each running sequence a chunk of new tokens (one
 * when it decodes, up to max_step_tokens when it prefills) and wants the
 * logits of some rows (each sequence's last, the prompt-scoring rows). The
 * GPU model has a one-token-per-sequence paged step (with CUDA graphs per
 * batch bucket), so a step of chunks runs as `longest chunk` decode steps:
 * sub-step j feeds the j-th token of every sequence whose chunk is longer
 * than j, at position start + j, through the sequence's own block table;
 * its keys and values land in the cache before sub-step j + 1 attends to
 * them, so the result is the chunked step's. Only the sub-steps that hold a
 * wanted row copy logits back. Rejected for now: a paged prefill kernel
 * (the training forward is not paged; prefill-heavy steps pay one decode
 * launch per prompt token - the place to optimise, with the flash kernel of
 * kernels/ once it reads paged blocks) and sampling on the device (the
 * engine's sampler, its stop rules and logprob lists stay the CPU's, so both
 * backends draw from the same code).
 *
 * The plan (which row goes to which sub-step, slot and logits slot) is plain
 * C, tested on the CPU (worker/gpu/tests/test_gpu_paged.c).
 */
#ifndef AREAL_GPUMODEL_PAGED_H
#define AREAL_GPUMODEL_PAGED_H

#include <stdint.h>

#include "areal/error.h"
#include "areal/gpumodel/plan.h"
#include "areal/model/paged.h"

typedef struct areal_gpu_paged_plan {
    int n_sub;      /* decode steps: the longest chunk */
    int rows;       /* tokens of the step (cu[n_seqs]) */
    int *sub_off;   /* [n_sub + 1]: sub-step j is rows sub_off[j] .. sub_off[j + 1] of below */
    int32_t *tok;   /* [rows] the token fed */
    int32_t *pos;   /* [rows] its position */
    int32_t *seq;   /* [rows] its sequence */
    int32_t *slot;  /* [rows] index into out_rows whose logits it gives, or -1 */
    int32_t *table; /* [rows * max_blocks] the sequence's table, padded with its block 0 */
} areal_gpu_paged_plan;

/*
 * The plan of one step: tokens[cu[s] .. cu[s + 1]) for sequence s of n_seqs
 * (1..kv->max_batch; each chunk >= 1) at positions seqs[s].start + i, logits
 * wanted for the n_out distinct rows out_rows (indices into tokens). Sub-step
 * rows keep the sequences' order. AREAL_EINVAL names the bad argument: too
 * many sequences, an empty chunk, a table longer than kv->max_blocks or not
 * covering its last position, a bad or repeated out row; AREAL_ENOMEM. *p
 * empty on failure.
 */
int areal_gpu_paged_plan_make(const int32_t *tokens, const int32_t *cu, const areal_paged_seq *seqs,
                              int n_seqs, const int32_t *out_rows, int n_out,
                              const areal_gpu_kv_cfg *kv, areal_gpu_paged_plan *p,
                              areal_error *err);
void areal_gpu_paged_plan_free(areal_gpu_paged_plan *p);

struct areal_gpu_model;

/*
 * areal_model_step_paged on the GPU model (after areal_gpu_decode_init with
 * kv): the plan's sub-steps through areal_gpu_decode_step (graphs when they
 * are on), logits [n_out * V] fp32 (from the bf16 head) in out_rows' order.
 * kv must be the configuration the cache was made with. Synchronises.
 */
int areal_gpu_step_paged(struct areal_gpu_model *g, const areal_gpu_kv_cfg *kv,
                         const int32_t *tokens, const int32_t *cu, const areal_paged_seq *seqs,
                         int n_seqs, const int32_t *out_rows, int n_out, float *logits,
                         areal_error *err);

#endif
