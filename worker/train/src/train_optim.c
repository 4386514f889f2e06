/*
 * train_optim.c - AdamW and the schedule for the trainer (see
 * train_optim.h). AReaL's warm-up is warmup_steps_proportion x total
 * steps, rounded down (cli_args.py); 0 gives no warm-up.
 */
#include <stdlib.h>

#include "areal/model/optim.h"
#include "areal/train/train_optim.h"

struct areal_train_optim {
    areal_adamw s;
    areal_adamw_cfg cfg;
    areal_lr_schedule sched;
};

int areal_train_optim_create(const areal_train_optim_cfg *c, size_t n, areal_train_optim **out,
                             areal_error *err) {
    *out = NULL;
    if (!(c->lr > 0))
        return areal_error_set(err, AREAL_EINVAL, -1, "actor.optimizer.lr must be > 0");
    if (c->total_steps < 1)
        return areal_error_set(err, AREAL_EINVAL, -1, "total_train_steps must be >= 1");
    areal_train_optim *o = calloc(1, sizeof *o);
    if (o == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the optimizer");
    o->cfg = (areal_adamw_cfg){c->lr, c->beta1, c->beta2, c->eps, c->weight_decay};
    /* rl-core's scheduler type (config.h) -> the model core's schedule (optim.h): both
     * headers meet here */
    o->sched.kind = c->schedule == AREAL_SCHED_LINEAR   ? AREAL_LR_LINEAR
                    : c->schedule == AREAL_SCHED_COSINE ? AREAL_LR_COSINE
                                                        : AREAL_LR_CONSTANT;
    o->sched.lr = c->lr;
    o->sched.warmup_steps = (long)(c->warmup_proportion * (double)c->total_steps);
    o->sched.total_steps =
        c->total_steps > o->sched.warmup_steps ? c->total_steps : o->sched.warmup_steps + 1;
    o->sched.min_lr_ratio = c->min_lr_ratio;
    int rc = areal_lr_schedule_check(&o->sched, err);
    if (rc == AREAL_OK)
        rc = areal_adamw_init(&o->s, n, err);
    if (rc != AREAL_OK) {
        free(o);
        return rc;
    }
    *out = o;
    return AREAL_OK;
}

void areal_train_optim_free(areal_train_optim *o) {
    if (o == NULL)
        return;
    areal_adamw_free(&o->s);
    free(o);
}

double areal_train_optim_lr(const areal_train_optim *o, long step) {
    return areal_lr_at(&o->sched, step);
}

double areal_train_optim_clip(float *grads, size_t n, double max_norm) {
    return areal_clip_grad_norm(grads, n, max_norm);
}

double areal_train_optim_step(areal_train_optim *o, float *params, const float *grads,
                              areal_pool *pool) {
    double lr = areal_lr_at(&o->sched, o->s.step);
    areal_adamw_step(&o->s, &o->cfg, lr, params, grads, pool);
    return lr;
}

void areal_train_optim_state(areal_train_optim *o, float **m, float **v, long **step, size_t *n) {
    *m = o->s.m;
    *v = o->s.v;
    *step = &o->s.step;
    *n = o->s.n;
}
