/*
 * backend_gpu.c - the trainer's GPU backend (areal/train/backend.h): the
 * GRPO step's four operations on the GPU model (areal/gpumodel/model.h).
 *
 * The device model is made at the first operation, not at
 * areal_trainer_use_gpu: by then a resumed checkpoint has been loaded into
 * the host model and the optimizer state, which are what it uploads, and
 * the first micro-batch sizes the plan (areal_train_gpu_plan_tokens).
 * Per micro-batch the host computes the loss's policy-free terms
 * (areal_ppo_token_terms: the behaviour weights, rejection, the coefficient),
 * the device runs the forward, the fused PPO head (k_ppo) and the backward
 * into its gradients; the loss statistics come from areal_ppo_actor_loss on
 * the device's log-probabilities (O(T) on the host, the same definitions as
 * the CPU step's). After each optimizer step the master weights and AdamW
 * moments come back into the host model and train_optim's state (the
 * export: weight sync, HF saves and checkpoints read those, unchanged).
 * Rejected: downloading only when a consumer needs them (a dirty flag each
 * reader would have to check; the copy is 12 bytes per parameter per step,
 * ~20 ms for 0.5B over PCIe 5) - the place to optimise when it shows.
 */
#include <stdlib.h>
#include <string.h>

#include "areal/gpumodel/model.h"
#include "areal/rl/ppo_terms.h"
#include "areal/train/backend.h"
#include "areal/train/gpu_dp.h"
#include "areal/train/train_optim.h"
#include "areal/train/trainer.h"

typedef struct gpu_be {
    areal_gpu_model *g;
    int plan_T;
    float *w; /* [plan_T] the PPO weights of a micro-batch */
} gpu_be;

static gpu_be *be(areal_trainer *t) {
    return t->be_state;
}

/* the device model, made on first use for micro-batches of up to max(T, the setting) tokens */
static int ensure(areal_trainer *t, int T, areal_error *err) {
    gpu_be *b = be(t);
    if (b->g != NULL) {
        if (T <= b->plan_T)
            return AREAL_OK;
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU trainer: a micro-batch of %d tokens; the GPU model was planned "
                               "for %d at the first step (set actor.mb_spec.max_tokens_per_mb to "
                               "at least %d)",
                               T, b->plan_T, T);
    }
    int P = areal_train_gpu_plan_tokens(t->actor.max_tokens_per_mb, T);
    b->w = malloc(sizeof(float) * (size_t)P);
    if (b->w == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for %d PPO weights", P);
    int rc = areal_gpu_model_create(&t->model, P, P, 0, &b->g, err);
    if (rc == AREAL_OK)
        rc = areal_gpu_model_upload(b->g, &t->model, err);
    float *m, *v;
    long *step;
    size_t n;
    areal_train_optim_state(t->opt, &m, &v, &step, &n);
    if (rc == AREAL_OK && n == t->model.n_params)
        rc = areal_gpu_model_moments(b->g, true, m, v, step, err);
    if (rc == AREAL_OK && t->gpu_dp != NULL) {
        areal_gpu_dp hook = areal_train_gpu_dp_hook(t->gpu_dp);
        rc = areal_gpu_model_set_dp(b->g, &hook, err);
    }
    if (rc != AREAL_OK) {
        areal_gpu_model_free(b->g);
        b->g = NULL;
        free(b->w);
        b->w = NULL;
        return rc;
    }
    b->plan_T = P;
    return AREAL_OK;
}

static int gpu_logprobs(areal_trainer *t, const areal_batch *b, const int32_t *targets, float *logp,
                        areal_error *err) {
    int rc = ensure(t, b->n_tokens, err);
    if (rc == AREAL_OK)
        rc = areal_gpu_logprobs(be(t)->g, b, targets, (float)t->actor.temperature, logp, err);
    return rc;
}

static int gpu_zero_grad(areal_trainer *t, areal_error *err) {
    /* before the first micro-batch there is no device model yet: it starts with zero gradients */
    return be(t)->g == NULL ? AREAL_OK : areal_gpu_zero_grad(be(t)->g, err);
}

static int gpu_accum(areal_trainer *t, const areal_train_mb *m, const areal_ppo_loss_opts *opts,
                     float *logp, float *dlogp, double *loss, areal_ppo_loss_stats *stats,
                     areal_error *err) {
    int T = m->b.n_tokens;
    int rc = ensure(t, T, err);
    if (rc != AREAL_OK)
        return rc;
    gpu_be *b = be(t);
    areal_ppo_terms terms;
    rc = areal_ppo_token_terms(m->prox, m->old, m->adv, m->mask, T, m->cu64, m->b.n_seqs, opts,
                               b->w, &terms, err);
    if (rc != AREAL_OK)
        return rc;
    areal_gpu_ppo ppo = {m->prox,
                         m->adv,
                         b->w,
                         {terms.clip_lo, terms.clip_hi, terms.c_clip, (float)terms.coef,
                          (float)t->actor.temperature}};
    double dev_loss = 0;
    rc = areal_gpu_accum_ppo(b->g, &m->b, m->targets, &ppo, &dev_loss, logp, err);
    /* the statistics (and the host's loss, unused) by the CPU loss on the device's logprobs */
    double host_loss = 0;
    if (rc == AREAL_OK)
        rc = areal_ppo_actor_loss(logp, m->prox, m->old, m->adv, m->mask, T, m->cu64, m->b.n_seqs,
                                  opts, &host_loss, dlogp, stats, err);
    if (rc == AREAL_OK)
        *loss = dev_loss;
    return rc;
}

static int gpu_apply(areal_trainer *t, double *grad_norm, double *lr, areal_error *err) {
    gpu_be *b = be(t);
    if (b->g == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU trainer: an optimizer step before any "
                               "micro-batch");
    float *m, *v;
    long *step;
    size_t n;
    areal_train_optim_state(t->opt, &m, &v, &step, &n);
    const areal_optimizer_config *o = &t->actor.optimizer;
    double rate = areal_train_optim_lr(t->opt, *step);
    areal_gpu_step_cfg cfg = {
        {(float)rate, (float)o->beta1, (float)o->beta2, (float)o->eps, (float)o->weight_decay, 0},
        (float)t->grad_clip};
    int rc = areal_gpu_apply(b->g, &cfg, grad_norm, err);
    if (rc == AREAL_OK)
        rc = areal_gpu_model_download(b->g, t->model.params, NULL, err);
    if (rc == AREAL_OK && n == t->model.n_params)
        rc = areal_gpu_model_moments(b->g, false, m, v, step, err);
    else if (rc == AREAL_OK)
        (*step)++;
    if (rc == AREAL_OK)
        *lr = rate;
    return rc;
}

static void gpu_release(areal_trainer *t) {
    gpu_be *b = be(t);
    if (b == NULL)
        return;
    areal_gpu_model_free(b->g);
    free(b->w);
    free(b);
    t->be_state = NULL;
}

static const areal_train_backend_ops gpu_ops = {"gpu",     gpu_logprobs, gpu_zero_grad,
                                                gpu_accum, gpu_apply,    gpu_release};

int areal_trainer_use_gpu(areal_trainer *t, areal_error *err) {
    if (t->par != NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "the trainer's layout (tensor/pipeline/expert/context parallel or "
                               "FSDP) has no GPU step yet");
    if (t->dp != NULL && areal_pg_size(t->dp) > 1 && t->gpu_dp == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "data parallelism over %d ranks on the GPU needs the trainer's NCCL "
                               "group (areal_train_gpu_dp)",
                               areal_pg_size(t->dp));
    if (t->actor.sequence_level_is)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "actor.importance_sampling_level sequence (GSPO) has no fused GPU "
                               "loss (token-level only)");
    int rc = areal_gpu_check_model(&t->model, err);
    if (rc != AREAL_OK)
        return rc;
    if (t->ops == &gpu_ops)
        return AREAL_OK;
    gpu_be *b = calloc(1, sizeof *b);
    if (b == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the GPU backend");
    t->be_state = b;
    t->ops = &gpu_ops;
    return AREAL_OK;
}
