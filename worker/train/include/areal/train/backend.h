/*
 * backend.h - the trainer's model backend: the GPU model (worker/gpu) or the
 * CPU model, by areal/model/device.h's rule and what this build of the
 * trainer can run, and the one seam the training step calls through
 * (areal_train_backend_ops), so trainer.c's loop is the same for both.
 *
 * The seam is the four things a GRPO step does with the policy's weights:
 * no-grad log-probabilities (the proximal / recomputed logprobs), zeroing
 * the gradients, one micro-batch's forward + loss + backward (added into the
 * gradients), and the optimizer step (DP reduction, clipping, AdamW at the
 * schedule's learning rate). The CPU implementation (areal_train_cpu_ops,
 * trainer.c) is the loop's code as it was; the GPU one (backend_gpu.c, built
 * where the GPU model is: AREAL_HAVE_GPUMODEL) runs areal/gpumodel's pieces
 * and, after every optimizer step, copies the fp32 master weights and the
 * AdamW moments back into the trainer's host model and optimizer state, in
 * the CPU model's layout: that host copy is what weight sync (its HF names
 * and its fp32 -> bf16 conversion), HF saves and checkpoints already read,
 * so none of them changes. Rejected: exporting bf16 from the device (the
 * servers' wire dtype is the sender's choice, wsync_plan.c, and the
 * checkpoint wants fp32 masters) and a second vtable per loop (the rollout
 * engine's seam is areal/rollout/backend.h).
 *
 * Not on the GPU: layouts (trainer_par.h: their own step), the reference
 * policy (kl_ctl > 0: its forward stays on the CPU model), and data
 * parallelism over a CPU group (device gradients need the NCCL hook,
 * areal_train_gpu_dp_nccl).
 */
#ifndef AREAL_TRAIN_BACKEND_H
#define AREAL_TRAIN_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/model/device.h"
#include "areal/model/model.h"
#include "areal/rl/loss.h"

/* True when the trainer's GPU path is compiled in and wired (AREAL_HAVE_GPUMODEL). */
bool areal_train_gpu_built(void);

/* The trainer's choice for env (areal_backend_select with the trainer's capability). */
areal_backend_choice areal_train_backend(const areal_device_env *env);

struct areal_trainer;

/* One micro-batch in training convention (trainer.c): arrays of b.n_tokens, cu64 of n_seqs + 1. */
typedef struct areal_train_mb {
    areal_batch b;
    const int32_t *targets; /* tokens[t + 1], -1 at a sequence's last position */
    const float *prox, *old, *adv, *mask;
    const int64_t *cu64;
} areal_train_mb;

typedef struct areal_train_backend_ops {
    const char *name; /* "cpu", "gpu": for logs */
    /* logp[b->n_tokens] of targets under the policy's current weights at the actor's
     * temperature, no gradient (0 where targets[t] is -1) */
    int (*logprobs)(struct areal_trainer *t, const areal_batch *b, const int32_t *targets,
                    float *logp, areal_error *err);
    /* zero the gradients: a minibatch starts */
    int (*zero_grad)(struct areal_trainer *t, areal_error *err);
    /* forward, areal_ppo_actor_loss with opts (its scale set by the caller) and the backward
     * added into the gradients; logp and dlogp are mb->b.n_tokens scratch (logp: the policy's
     * logprobs on return); *loss and *stats the loss function's */
    int (*accum)(struct areal_trainer *t, const areal_train_mb *mb, const areal_ppo_loss_opts *opts,
                 float *logp, float *dlogp, double *loss, areal_ppo_loss_stats *stats,
                 areal_error *err);
    /* the DP mean of the gradients (t->dp), clipping at t->grad_clip, AdamW at the schedule's
     * rate; the host model holds the new weights on return. *grad_norm before clipping, *lr */
    int (*apply)(struct areal_trainer *t, double *grad_norm, double *lr, areal_error *err);
    /* frees the backend's state (t->be_state); NULL: none */
    void (*release)(struct areal_trainer *t);
} areal_train_backend_ops;

/* Today's CPU step (trainer.c); every trainer starts with it. */
extern const areal_train_backend_ops areal_train_cpu_ops;

/*
 * Moves t's training step onto the GPU model: t->ops becomes the GPU's and
 * the device model is made at the first step from the host model's weights
 * and the optimizer's moments (so a resumed checkpoint is what it trains).
 * Refused with AREAL_EINVAL and a reason (the caller logs it once and keeps
 * the CPU): a build without the GPU model, a layout (t->par), a DP group of
 * more than one rank without areal_train_gpu_dp_nccl, a model the GPU model
 * cannot run (areal_gpu_check_model), or sequence-level importance ratios
 * (the fused loss is token-level).
 */
int areal_trainer_use_gpu(struct areal_trainer *t, areal_error *err);

/*
 * The micro-batch token budget the GPU model is planned for, from the
 * actor's max_tokens_per_mb (0: unbounded) and the first micro-batch seen
 * (first_T): the larger of the two, at least 256, rounded up to a multiple
 * of 256 (the plan's activations are sized once; a later, bigger micro-batch
 * is refused with the setting to raise). Pure: tested on the CPU.
 */
int areal_train_gpu_plan_tokens(long max_tokens_per_mb, int first_T);

#endif
