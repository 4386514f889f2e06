/*
 * optim.h - AdamW, global-norm gradient clipping and learning-rate schedules
 * over the flat parameter/gradient buffers of areal_model.
 *
 * AdamW is torch.optim.AdamW's (decoupled weight decay applied to the
 * parameter before the Adam update, bias-corrected moments, eps added to
 * sqrt(v_hat)); the schedules are transformers' get_{constant,linear,cosine}_
 * schedule_with_warmup multipliers, scaled between min_lr_ratio and 1.
 */
#ifndef AREAL_MODEL_OPTIM_H
#define AREAL_MODEL_OPTIM_H

#include <stddef.h>

#include "areal/error.h"
#include "areal/model/pool.h"

typedef struct areal_adamw_cfg {
    double lr, beta1, beta2, eps, weight_decay;
} areal_adamw_cfg;

typedef struct areal_adamw {
    float *m, *v; /* first and second moments, n floats each */
    size_t n;
    long step; /* updates done so far */
} areal_adamw;

/* Allocates zeroed state for n parameters. Returns 0 or AREAL_ENOMEM (*s empty). */
int areal_adamw_init(areal_adamw *s, size_t n, areal_error *err);
void areal_adamw_free(areal_adamw *s);

/*
 * One update of params[0..n) from grads at learning rate lr (the schedule's
 * value for this step; cfg->lr is not read here). Weight decay applies to
 * every element; callers that exempt norms and biases run two states.
 */
void areal_adamw_step(areal_adamw *s, const areal_adamw_cfg *cfg, double lr, float *params,
                      const float *grads, areal_pool *pool);

/*
 * Global L2 norm of grads[0..n) (accumulated in double). When max_norm > 0
 * and the norm exceeds it, scales grads by max_norm / (norm + 1e-6) as
 * torch.nn.utils.clip_grad_norm_ does. Returns the norm before clipping.
 */
double areal_clip_grad_norm(float *grads, size_t n, double max_norm);

typedef enum areal_lr_kind {
    AREAL_LR_CONSTANT, /* linear warmup, then 1 */
    AREAL_LR_LINEAR,   /* linear warmup, then linear decay to min_lr_ratio at total_steps */
    AREAL_LR_COSINE,   /* linear warmup, then half a cosine down to min_lr_ratio */
} areal_lr_kind;

typedef struct areal_lr_schedule {
    areal_lr_kind kind;
    double lr;           /* peak */
    long warmup_steps;   /* >= 0 */
    long total_steps;    /* > warmup_steps for LINEAR and COSINE */
    double min_lr_ratio; /* floor of the decay, 0..1 (transformers: 0) */
} areal_lr_schedule;

/* Checks the fields above; AREAL_EINVAL names the bad one. */
int areal_lr_schedule_check(const areal_lr_schedule *s, areal_error *err);

/* The learning rate of optimizer step `step` (0-based), as the schedulers give it. */
double areal_lr_at(const areal_lr_schedule *s, long step);

#endif
