/*
 * train_loop.h - the trainer role's job loop: AReaL's rl_trainer.py step
 * (areal.md §5.2) around the pieces of this component:
 *
 *   wait for B groups (rollout_ctl.h) -> training step (trainer.h) ->
 *   pause rollouts -> weight update (disk: HF directory under the job dir,
 *   POST /update_weights_from_disk to every server; xccl: buckets over a
 *   comm-runtime group, xccl.h) -> version v+1 ->
 *   resume -> recover checkpoint every N steps (ckpt.h) -> evaluation on
 *   the held-out split every N steps -> one progress line (JSONL).
 *
 * The task (task.h) is cfg->train_dataset's JSONL (GSM8K's fields) with the
 * math reward, or without a path the project's synthetic arithmetic
 * (synth.h) with the exact-answer reward; evaluation is greedy accuracy on
 * valid_dataset or the held-out split. A stop request
 * (SIGTERM / Ctrl-C through *stop) ends the loop after the step in hand
 * with a checkpoint, so --resume continues where it stopped.
 */
#ifndef AREAL_TRAIN_TRAIN_LOOP_H
#define AREAL_TRAIN_TRAIN_LOOP_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "areal/error.h"
#include "areal/rl/config.h"
#include "areal/train/synth.h"
#include "areal/train/task.h"
#include "areal/train/xccl.h"

typedef struct areal_train_job {
    const char *model_dir; /* the initial policy (HF directory with tokenizer.json) */
    const char *job_dir;   /* weight updates, recover/, progress.jsonl (created) */
    const char *const *servers;
    int n_servers;
    const areal_rl_config *cfg;    /* actor, gconfig, rollout, seed (rl-core's struct) */
    long total_steps;              /* <= 0: cfg->total_train_epochs over the training prompts */
    areal_synth_cfg task;          /* the synthetic task (no train_dataset.path) */
    areal_task_reward_kind reward; /* DEFAULT: exact (synthetic) / math (dataset) */
    int eval_every;                /* steps; 0: only before and after */
    int eval_n;                    /* held-out prompts per evaluation (0: all) */
    int ckpt_every;                /* steps; 0: only on stop and at the end */
    bool resume;                   /* continue from job_dir/recover when it holds a checkpoint */
    int rollout_workers;
    int threads;                     /* model pool threads (1: serial) */
    struct areal_trainer_http *http; /* nullable: where /status and /metrics are published */
    /* nullable: when the run ends (done, failed, stopped), its final /status object is
     * written here (the kubelet's termination message, env AREAL_TERMINATION_LOG);
     * a write failure is logged, never fatal */
    const char *termination_log;
    struct areal_pg *dp; /* nullable: data-parallel trainer ranks, this one rank 0 (dp.h) */
    /* nullable: the trainer split by a layout over dp's ranks (trainer_par.h); NULL:
     * replicated data parallelism (or one process) */
    const struct areal_train_layout *layout;
    /* the trainer's step on the GPU model (areal_train_backend chose it; areal_trainer_use_gpu):
     * where that is refused, the loop logs the reason once and trains on the CPU */
    bool gpu;
    /* nullable: the registered rollout servers replace `servers` once one registers, and
     * those behind the policy are caught up between steps (discover.h) */
    struct areal_discover *discover;
    /* Weight sync: cfg->rollout.weight_update_mode "xccl" (AReaL's default) uses these
     * (zero fields: xccl.h's defaults; log is the job's); "disk" or "" the job dir. */
    areal_xccl_cfg xccl;
    volatile sig_atomic_t *stop;
    void (*log)(void *ctx, const char *line);
    void (*progress)(void *ctx, const char *json_line); /* each step's line (nullable) */
    void *ctx;
} areal_train_job;

typedef struct areal_train_result {
    long steps_done;  /* total, including those before a resume */
    double acc_start; /* accuracy at the first evaluation of this run */
    double acc_end;   /* at the last */
    double wall_s;
    bool stopped; /* ended by *stop */
} areal_train_result;

/*
 * Runs the job. Returns 0 (done or stopped with a checkpoint), or the first
 * error (named) of the model, servers, rollouts or files.
 */
int areal_train_run(const areal_train_job *job, areal_train_result *res, areal_error *err);

#endif
