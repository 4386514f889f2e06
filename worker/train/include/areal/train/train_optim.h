/*
 * train_optim.h - the trainer's optimizer: AdamW state, gradient clipping
 * and AReaL's learning-rate schedule (constant / linear / cosine with a
 * warm-up of warmup_steps_proportion of the total steps), over the model
 * core's areal/model/optim.h, set from rl-core's optimizer config.
 */
#ifndef AREAL_TRAIN_TRAIN_OPTIM_H
#define AREAL_TRAIN_TRAIN_OPTIM_H

#include <stddef.h>

#include "areal/error.h"
#include "areal/model/pool.h"
#include "areal/rl/config.h"

typedef struct areal_train_optim areal_train_optim;

typedef struct areal_train_optim_cfg {
    double lr, beta1, beta2, eps, weight_decay;
    areal_lr_sched_kind schedule; /* AReaL's lr_scheduler_type */
    double warmup_proportion;
    double min_lr_ratio;
    long total_steps; /* >= 1 */
} areal_train_optim_cfg;

/* State for n parameters. Returns 0, AREAL_EINVAL (bad field, named) or AREAL_ENOMEM. */
int areal_train_optim_create(const areal_train_optim_cfg *cfg, size_t n, areal_train_optim **out,
                             areal_error *err);
void areal_train_optim_free(areal_train_optim *o);

/* The learning rate of optimizer step `step` (0-based). */
double areal_train_optim_lr(const areal_train_optim *o, long step);

/* Clips grads to max_norm (<= 0: no clipping) and returns the norm before. */
double areal_train_optim_clip(float *grads, size_t n, double max_norm);

/* One AdamW update at the schedule's rate for the state's step count; returns that rate. */
double areal_train_optim_step(areal_train_optim *o, float *params, const float *grads,
                              areal_pool *pool);

/* The state for checkpoints: moments m, v (n floats each) and the steps taken. */
void areal_train_optim_state(areal_train_optim *o, float **m, float **v, long **step, size_t *n);

#endif
