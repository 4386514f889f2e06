/*
 * trainer.h - one training step of the actor, in AReaL's order (areal.md
 * §5.2, rl_trainer.py): packed batch from finished groups -> proximal
 * logprob recompute with the current weights -> advantages (reward
 * bias/scale/clip, GRPO group normalisation, batch adv normalisation, KL
 * shaping; areal/rl/advantage.h) -> for each of ppo_n_minibatches: micro-
 * batches of at most max_tokens_per_mb tokens (first-fit decreasing,
 * areal/rl/pack.h), decoupled PPO loss and its dlogprob (areal/rl/loss.h)
 * scaled by AReaL's token-level aggregation, backward through the model,
 * gradient all-reduce over the data-parallel group, clipping, AdamW at the
 * schedule's learning rate -> version + 1.
 *
 * The trainer owns the policy model, its optimizer state and the version;
 * the caller (train_loop.c) owns rollouts, weight sync and checkpoints.
 *
 * KL. When actor.kl_ctl > 0 the trainer also holds a frozen reference
 * policy (AReaL's ref engine): a second model, loaded once at init from
 * ref.path (cfg->ref_path) or, when that is unset or equal to actor.path,
 * from the initial model's directory, and never updated, saved or given an
 * optimizer. Each step computes the reference logprobs of every token with a
 * no-grad forward per micro-batch (the packing of the proximal recompute)
 * and hands them to areal_rl_compute_advantages, which shapes the rewards
 * with AReaL's k1/k2/k3. A restart re-loads it from the same directory (the
 * initial model, or ref.path of the same config), so the reference is the
 * same after a resume with no checkpoint state of its own. With kl_ctl == 0
 * no reference is allocated.
 *
 * The optimizer sits behind an opaque pointer (train_optim.h), so the
 * trainer's users do not see the model core's AdamW state.
 */
#ifndef AREAL_TRAIN_TRAINER_H
#define AREAL_TRAIN_TRAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/comm/comm.h"
#include "areal/error.h"
#include "areal/model/model.h"
#include "areal/rl/config.h"
#include "areal/train/rollout_ctl.h"

#define AREAL_STALENESS_BUCKETS 8 /* histogram of (version - token version): 0..6, >= 7 */

typedef struct areal_step_stats {
    double reward_mean; /* raw task reward over samples */
    double loss;        /* the step's loss (sum over minibatches) */
    double grad_norm;   /* before clipping, last minibatch */
    double lr;
    double clip_frac; /* clipped tokens / valid tokens */
    double ratio_mean, behave_w_mean, behave_w_max;
    double resp_len_mean; /* response tokens per sample */
    long n_seqs, n_tokens, n_valid;
    long staleness[AREAL_STALENESS_BUCKETS];
    long max_staleness;   /* over every trained token */
    int n_mbs;            /* micro-batches of the step */
    double kl_reward_sum; /* sum of -kl_ctl * k(old, ref) over trained tokens (0: no KL) */
    double kl_mean;       /* mean of k(old, ref) over trained tokens (0 when kl_ctl == 0) */
} areal_step_stats;

typedef struct areal_trainer {
    areal_model model;
    struct areal_train_optim *opt; /* AdamW state and schedule (train_optim.h) */
    double grad_clip;
    areal_actor_config actor; /* borrowed strings: do not free through it */
    int group_size;
    long version;     /* completed updates */
    long step;        /* optimizer steps taken (== version with one minibatch) */
    areal_pg *dp;     /* data-parallel group, NULL for one rank */
    areal_model *ref; /* frozen reference policy (owned); NULL when kl_ctl == 0 */
    /* A layout's shard and step (trainer_par.h, owned), NULL for one process / replicated DP.
     * With it, `model` is the whole policy's parameters gathered after each step (unless
     * defer_gather) on world rank 0 in xccl mode (what the gathered update reads), only its
     * config elsewhere and in disk mode, and dp is the layout's data group. */
    struct areal_train_par *par;
    /* With par: skip the per-step gather (the weight update goes shard-direct, xccl_shard.h);
     * whole_stale then says rank 0's `model` lags the shards until areal_train_dp_whole. */
    bool defer_gather, whole_stale;
    /* The step's model backend (areal/train/backend.h): areal_train_cpu_ops unless
     * areal_trainer_use_gpu moved it; be_state is the backend's (owned, released at free). */
    const struct areal_train_backend_ops *ops;
    void *be_state;
    float *dlogits;   /* the CPU backend's [T, V] scratch of one micro-batch */
    size_t dlogits_n; /* its floats */
    void *gpu_dp;     /* nullable areal_ncclpg *: the GPU model's DP group (areal_train_gpu_dp) */
    /* With par, rank 0, before areal_train_dp_sync_state: the checkpoint to resume (borrowed,
     * NULL: a fresh start) and its form (an areal_ckpt_format). */
    const char *resume_dir;
    int resume_fmt;
} areal_trainer;

/*
 * Loads the model from dir and sets up AdamW and the schedule from
 * cfg->actor.optimizer (total_steps for the decaying schedules and the
 * warm-up proportion); when cfg->actor.kl_ctl > 0 also loads the frozen
 * reference policy (t->ref) from cfg->ref_path, or from dir when ref_path is
 * NULL or equal to actor.path; its vocabulary must be the policy's. dp is borrowed (NULL: one
 * rank). Returns 0, AREAL_EINVAL (naming the key), AREAL_EIO or AREAL_ENOMEM; on failure nothing is
 * left to free.
 */
int areal_trainer_init(areal_trainer *t, const char *model_dir, const areal_rl_config *cfg,
                       long total_steps, areal_pool *pool, areal_pg *dp, areal_error *err);
void areal_trainer_free(areal_trainer *t);

struct areal_train_layout;

/*
 * As areal_trainer_init, split by layout l (trainer_par.h; every rank of l's
 * world calls it alike: a collective): this rank loads its shard of dir, world
 * rank 0 also the whole policy's parameters when cfg's weight_update_mode is
 * xccl (t->model, the gathered update's source; no gradients, no moments:
 * disk updates stream, checkpoints are per rank, trainer_par_ckpt.h), else
 * its config only, as every other rank; t->defer_gather set where no whole
 * copy is read after each step; t->opt keeps only the schedule; the reference policy
 * (kl_ctl > 0) whole on every rank. Returns as areal_trainer_init, or
 * trainer_par.h's errors.
 */
int areal_trainer_init_par(areal_trainer *t, const char *model_dir, const areal_rl_config *cfg,
                           long total_steps, areal_pool *pool, const struct areal_train_layout *l,
                           areal_error *err);

/*
 * Reference logprobs out[T] (T = the sum of the trajectories' lengths, in
 * the packed order g[0].s[0], g[0].s[1], ...; training convention: out[t] =
 * log p_ref(token t+1), 0 at each sequence's last position) of groups
 * g[0..n) under t->ref, micro-batched as a step does. For tests and
 * diagnostics. Returns 0, AREAL_EINVAL (no reference: kl_ctl == 0, or a
 * malformed batch) or AREAL_ENOMEM.
 */
int areal_trainer_ref_logprobs(areal_trainer *t, const areal_group *g, int n, float *out,
                               areal_error *err);

/*
 * One step on groups g[0..n) (this rank's share; whole groups). Fills
 * *stats (nullable). Returns 0, AREAL_EINVAL (a malformed batch, named),
 * AREAL_ENOMEM, or a collective's code.
 */
int areal_trainer_step(areal_trainer *t, const areal_group *g, int n, areal_step_stats *stats,
                       areal_error *err);

#endif
