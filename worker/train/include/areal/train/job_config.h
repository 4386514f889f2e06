/*
 * job_config.h - the trainer's job configuration: the job's config file
 * (spec.config of the AReaLJob, mounted at env AREAL_CONFIG in a pod, or
 * `--config FILE`) read through rl-core's parser (areal/rl/config.h:
 * AReaL's experiment YAML with AReaL's defaults, the CRD's short keys as
 * aliases, unknown keys refused with their path), and what the job loop
 * takes from it (steps, evaluation and checkpoint frequencies, recovery).
 *
 * Keys of the project's own runtime that are not AReaL's and that the trainer
 * does not use (model.warmupSteps: how `arealctl run` warms up the tiny
 * model) are taken out before the parse and listed with the ignored keys, so
 * the same spec.config serves every process of the job.
 *
 * Without a config file the trainer runs the demo's configuration
 * (areal_train_config_demo), the values measured in worker/train/README.md.
 */
#ifndef AREAL_TRAIN_JOB_CONFIG_H
#define AREAL_TRAIN_JOB_CONFIG_H

#include <stdbool.h>

#include "areal/error.h"
#include "areal/rl/config.h"

/*
 * Reads the YAML or JSON file at path into *cfg (initialised by the call;
 * free with areal_rl_config_free even on error). Returns 0, AREAL_EIO (the
 * file cannot be read), AREAL_EINVAL (a key or value, named by its path) or
 * AREAL_ENOMEM.
 */
int areal_train_config_load(const char *path, areal_rl_config *cfg, areal_error *err);

/*
 * The demo's configuration (no config file): AReaL's defaults changed where
 * the demo's measurements chose otherwise (G 8, 32 prompts a step, eta 1,
 * lr 3e-4, no weight decay, group reward normalisation, decoupled loss with
 * the recomputed proximal policy, one minibatch, no KL, 6 new tokens).
 * Owns nothing (free with areal_rl_config_free all the same).
 */
void areal_train_config_demo(areal_rl_config *cfg);

/*
 * Makes the group sizes agree after flags or aliases set G: actor.group_size
 * and the group-level norms' group_size follow gconfig.n_samples when they are
 * AReaL's default 1 (AReaL's examples write ${gconfig.n_samples}), and
 * rollout.max_concurrent_rollouts 0 becomes consumer_batch_size. Returns 0,
 * or AREAL_EINVAL naming the key when a group size set to something else
 * disagrees with gconfig.n_samples.
 */
int areal_train_config_settle(areal_rl_config *cfg, areal_error *err);

/*
 * One line per thing the configuration asks that this trainer does not do
 * as asked, through log (each said once): the ignored keys (one line
 * listing them), and kl_ctl > 0: what it costs (the trainer keeps a frozen
 * copy of the initial model as the reference policy; trainer.h). (weight_update_mode
 * runs as asked: disk or xccl.)
 */
void areal_train_config_report(const areal_rl_config *cfg, void (*log)(void *ctx, const char *line),
                               void *ctx);

#endif
