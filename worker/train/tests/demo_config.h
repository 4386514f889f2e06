/*
 * demo_config.h - test helper of the trainer's tests: the demo's GRPO
 * hyperparameters (worker/train/README.md) as an areal_rl_config, G samples
 * per prompt, B prompts a step, staleness bound eta. Tests that need another
 * learning rate, timeout or weight-update mode set that one field after the
 * call. Header-only: each test binary includes it once.
 */
#ifndef AREAL_TRAIN_TESTS_DEMO_CONFIG_H
#define AREAL_TRAIN_TESTS_DEMO_CONFIG_H

#include <stdio.h>
#include <string.h>

#include "areal/rl/config.h"

static void demo_config(areal_rl_config *c, int G, long B, long eta) {
    memset(c, 0, sizeof *c);
    c->seed = 1;
    areal_actor_config *a = &c->actor;
    snprintf(a->optimizer.type, sizeof a->optimizer.type, "adam");
    a->optimizer.lr = 3e-4;
    a->optimizer.beta1 = 0.9;
    a->optimizer.beta2 = 0.999;
    a->optimizer.eps = 1e-8;
    a->optimizer.gradient_clipping = 1.0;
    a->ppo_n_minibatches = 1;
    a->eps_clip = 0.2;
    a->reward_scaling = 1.0;
    a->reward_clip = 20.0;
    a->reward_norm.enabled = true;
    a->reward_norm.mean_level = AREAL_NORM_GROUP;
    a->reward_norm.std_level = AREAL_NORM_GROUP;
    a->reward_norm.std_unbiased = true;
    a->reward_norm.eps = 1e-5;
    a->reward_norm.group_size = G;
    a->discount = 1.0;
    a->gae_lambda = 1.0;
    a->recompute_logprob = true;
    a->use_decoupled_loss = true;
    a->temperature = 1.0;
    a->group_size = G;
    c->gconfig.n_samples = G;
    c->gconfig.max_new_tokens = 6;
    c->gconfig.temperature = 1.0;
    c->gconfig.top_p = 1.0;
    c->rollout.max_head_offpolicyness = eta;
    c->rollout.max_concurrent_rollouts = 2 * B;
    c->rollout.consumer_batch_size = B;
    c->rollout.request_timeout = 60;
}

/* demo_config with the weight-update mode ("disk" or "xccl") */
static inline void demo_config_mode(areal_rl_config *c, int G, long B, long eta, const char *mode) {
    demo_config(c, G, B, eta);
    snprintf(c->rollout.weight_update_mode, sizeof c->rollout.weight_update_mode, "%s", mode);
}

#endif
