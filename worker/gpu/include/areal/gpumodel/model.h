/*
 * model.h - the GPU model: one training step and one decode step of the CPU
 * model's architectures (Qwen2, Qwen3, Qwen3-MoE, Llama; areal/model/model.h)
 * on the device, activations in bf16, fp32 master weights, gradients and
 * AdamW moments, every kernel from kernels/ (the areal/kernels headers).
 *
 * The weights come from a CPU model (areal_model_load reads the HF
 * safetensors; the GPU model copies its parameter list, laid out as
 * areal/gpumodel/plan.h says), or are drawn on the device for benchmarks.
 * The training step is the CPU model's forward, a mean token cross-entropy
 * over the targets given, its backward, the global gradient norm with
 * clipping, and AdamW (torch's semantics, as areal/model/optim.h) - all
 * enqueued on the model's own stream; the host waits only for the MoE
 * layers' expert counts (one E+1 copy per MoE layer: the grouped GEMMs are
 * launched per expert) and for the loss at the end.
 *
 * Not covered (refused by areal_gpu_check_model, or by the caller's choice):
 * shards (tensor/pipeline/expert parallelism), Qwen2-MoE's shared expert.
 * Streams: the model's compute stream, and for data parallelism the DP
 * group's own stream (areal_gpu_model_set_dp), ordered by events. Device memory is planned once at
 * create for the largest batch (areal_gpu_plan_make); a bigger batch is refused.
 *
 * Errors are values: AREAL_EINVAL (bad argument, named), AREAL_ENOMEM (host
 * or device allocation, with the size), AREAL_EIO (a CUDA or cuBLASLt
 * failure, with its reason). Built only where nvcc and cuBLASLt are found.
 */
#ifndef AREAL_GPUMODEL_MODEL_H
#define AREAL_GPUMODEL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/gpumodel/plan.h"
#include "areal/kernels/optim.h"
#include "areal/kernels/ppo.h"
#include "areal/kernels/sample.h"
#include "areal/model/model.h"

typedef struct areal_gpu_model areal_gpu_model;

/*
 * A GPU model of m's architecture and parameter list for training batches of
 * up to max_tokens tokens in max_seqs sequences, the LM head run `chunk` rows
 * at a time (0: 4096). Allocates the device weights (zero: upload or
 * randomize next) and the training arena; m is read here only (its config,
 * list and views are copied). *out NULL on failure.
 */
int areal_gpu_model_create(const areal_model *m, int max_tokens, int max_seqs, int chunk,
                           areal_gpu_model **out, areal_error *err);
/* Frees the model and its device memory (synchronises its stream first); NULL: no-op. */
void areal_gpu_model_free(areal_gpu_model *g);

/* Copies m->params (fp32) into the master weights and their bf16 copy; zeroes the gradients,
 * the AdamW moments and the step count. m must be the model g was created from. */
int areal_gpu_model_upload(areal_gpu_model *g, const areal_model *m, areal_error *err);

/* Master weights uniform in [-a, a) from seed (drawn on the device), norms' weights 1; as
 * upload otherwise. For benchmarks of checkpoint-sized models. */
int areal_gpu_model_randomize(areal_gpu_model *g, uint64_t seed, float a, areal_error *err);

/* Copies the master weights (params) and the gradients of the last step (grads), each NULL or
 * m->n_params floats in m's layout, back to the host. Synchronises. */
int areal_gpu_model_download(areal_gpu_model *g, float *params, float *grads, areal_error *err);

/* The AdamW moments and step count, in m's layout (m->n_params floats each): to_device copies
 * m, v and *step into the model (a resumed run), else the model's into them. Synchronises. */
int areal_gpu_model_moments(areal_gpu_model *g, bool to_device, float *m, float *v, long *step,
                            areal_error *err);

/* The training step's settings: AdamW (its step field is ignored: the model counts), and the
 * clipping norm (<= 0: none). */
typedef struct areal_gpu_step_cfg {
    areal_k_adamw_cfg adamw;
    float max_norm;
} areal_gpu_step_cfg;

typedef struct areal_gpu_step_out {
    double loss;      /* mean of -log p(target) over the rows with a target (PPO: its loss) */
    double grad_norm; /* the global L2 norm before clipping */
    int n_targets;
} areal_gpu_step_out;

/*
 * One step on batch b (areal_batch_check's rules; at most the planned tokens
 * and sequences): targets[t] in [0, V) is the token whose log-probability
 * row t predicts, or -1 for none; at least one row needs a target. Gradients
 * are recomputed from zero (no accumulation across calls), then clipped and
 * applied. `out` filled on success.
 */
int areal_gpu_train_step(areal_gpu_model *g, const areal_batch *b, const int32_t *targets,
                         const areal_gpu_step_cfg *cfg, areal_gpu_step_out *out, areal_error *err);

/*
 * The decoupled PPO (GRPO) loss's per-token terms for areal_gpu_train_step_ppo,
 * host arrays of the batch's n_tokens: what areal_ppo_token_terms
 * (areal/rl/ppo_terms.h) computes from the proximal and behaviour logprobs,
 * the advantages and the loss mask. w[t] = 0: row t is outside the loss.
 */
typedef struct areal_gpu_ppo {
    const float *prox, *adv, *w;
    areal_k_ppo_cfg k; /* clip bounds, dual clip, coef (scale / max(1, n_valid)), temperature */
} areal_gpu_ppo;

/*
 * One step as areal_gpu_train_step, with the decoupled PPO loss instead of
 * the cross-entropy: row t's log-probability of targets[t] (under
 * temperature ppo->k.temp) feeds the token's clipped surrogate, fused with
 * the vocabulary softmax per LM-head chunk (areal/kernels/ppo.h); its
 * gradient flows through the same backward, clipping and AdamW. Every row
 * with w[t] != 0 needs a target (targets[t] >= 0) and finite prox / adv.
 * out->loss = sum_t coef w_t pg_t (areal_ppo_actor_loss's loss for the same
 * inputs); out->n_targets counts the rows with w != 0. logprob (NULL: not
 * copied) receives the n_tokens log-probabilities (0 where there is no
 * target), for the caller's statistics.
 */
int areal_gpu_train_step_ppo(areal_gpu_model *g, const areal_batch *b, const int32_t *targets,
                             const areal_gpu_ppo *ppo, const areal_gpu_step_cfg *cfg,
                             areal_gpu_step_out *out, float *logprob, areal_error *err);

/*
 * The PPO step in pieces, for a trainer that accumulates the gradients of
 * several micro-batches before one optimizer step (areal/train/backend.h):
 * areal_gpu_zero_grad, then areal_gpu_accum_ppo per micro-batch (forward,
 * the fused PPO head and backward, *adding* into the gradients: every weight
 * gradient kernel accumulates), then areal_gpu_apply (the DP reduction when
 * set, the global norm, clipping and AdamW, as areal_gpu_train_step_ppo's
 * end). areal_gpu_train_step_ppo is zero + accum + apply on one batch.
 * accum: *loss (NULL: not wanted) = sum_t coef w_t pg_t of this micro-batch,
 * logprob as areal_gpu_train_step_ppo's; synchronises. apply: *grad_norm the
 * global norm before clipping (NULL: not wanted); synchronises.
 */
int areal_gpu_zero_grad(areal_gpu_model *g, areal_error *err);
int areal_gpu_accum_ppo(areal_gpu_model *g, const areal_batch *b, const int32_t *targets,
                        const areal_gpu_ppo *ppo, double *loss, float *logprob, areal_error *err);
int areal_gpu_apply(areal_gpu_model *g, const areal_gpu_step_cfg *cfg, double *grad_norm,
                    areal_error *err);

/*
 * The log-probabilities of targets under the current weights without a
 * backward (the trainer's proximal / recomputed logprobs): the training
 * forward on b, then the LM head chunk by chunk and the vocabulary
 * log-softmax at temperature temp (> 0). logprob[t] is 0 where targets[t]
 * is -1; at least one row needs a target. The gradients are untouched.
 * Synchronises.
 */
int areal_gpu_logprobs(areal_gpu_model *g, const areal_batch *b, const int32_t *targets, float temp,
                       float *logprob, areal_error *err);

/*
 * Data-parallel gradient reduction on a communication group's own stream.
 * all_reduce_mean(ctx, buf, n, err) must enqueue on `stream` (the group's
 * CUDA stream, e.g. areal_ncclpg_stream) the mean of buf's n fp32 device
 * values over the group (areal_ncclpg_all_reduce with AREAL_AVG), and may
 * wait for it. The step orders it with events: the group's stream waits for
 * the backward on the compute stream, the compute stream (norm, clipping,
 * AdamW) for the reduction; the host never synchronises in between. The
 * loss scale of each rank is the caller's (areal_ppo_mb_scale's dp factor).
 */
typedef struct areal_gpu_dp {
    int (*all_reduce_mean)(void *ctx, float *buf, size_t n, areal_error *err);
    void *ctx;
    void *stream; /* cudaStream_t of the group, not the model's */
} areal_gpu_dp;

/* Every later training step reduces its gradients over dp (copied; NULL: none, the default).
 * AREAL_EINVAL for a NULL hook or stream; AREAL_EIO when its events cannot be made. */
int areal_gpu_model_set_dp(areal_gpu_model *g, const areal_gpu_dp *dp, areal_error *err);

/* Allocates the paged KV cache and the decode buffers (replacing earlier ones); the caches
 * start zeroed. */
int areal_gpu_decode_init(areal_gpu_model *g, const areal_gpu_kv_cfg *kv, areal_error *err);

/*
 * One decode step of B <= max_batch sequences (host arrays): sequence i feeds
 * tokens[i] at position pos[i] (its key/value row is written there, then it
 * attends rows 0..pos[i] of its blocks), table[i * max_blocks + j] its j-th
 * block (entries < n_blocks; pos[i] < max_blocks * block_size). Samples
 * next[i] with logprob[i] (areal/kernels/sample.h; u[i] in [0, 1), NULL: 0
 * each) and, when logits is not NULL, copies the step's logits (B x V, fp32
 * from bf16) to the host. Synchronises.
 */
int areal_gpu_decode_step(areal_gpu_model *g, int B, const int32_t *tokens, const int32_t *pos,
                          const int32_t *table, areal_k_sample_cfg samp, const float *u,
                          int32_t *next, float *logprob, float *logits, areal_error *err);

/*
 * Decode steps through CUDA graphs (on) or plain launches (off, the default;
 * areal_gpu_decode_init also turns them off). On: each step's batch is
 * padded to its bucket (areal_gpu_decode_bucket: 1, 2, 4, ... max_batch), a
 * graph of that bucket's step is captured on first use (and again when the
 * sampler's settings change) and replayed; results equal the plain step's
 * at the padded size (padding rows never touch the caller's blocks). Needs
 * areal_gpu_decode_init first and a model without MoE layers (AREAL_EINVAL).
 * Synchronises; drops the graphs captured so far.
 */
int areal_gpu_decode_graphs(areal_gpu_model *g, bool on, areal_error *err);

/* The vocabulary size (the rows of the logits a decode step returns). */
int areal_gpu_model_vocab(const areal_gpu_model *g);

/* The parameter count of the model's matrices (the 6 N of an MFU estimate: every weight but the
 * embedding table, which is a gather; the LM head counts once, tied or not). */
double areal_gpu_model_matmul_params(const areal_gpu_model *g);
/* Device bytes of the weights' bf16 copy (what a decode step reads). */
size_t areal_gpu_model_weight_bytes(const areal_gpu_model *g);

#endif
