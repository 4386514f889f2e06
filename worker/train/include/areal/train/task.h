/*
 * task.h - what the job loop trains on: a prompt dataset and a reward.
 *
 * One code path serves GSM8K and the demo. The prompts come from a
 * GSM8K-style JSONL file read by rl-core's dataset (areal/rl/dataset.h:
 * question / answer with "#### N", the prompt template, bad lines counted
 * and reported with their line numbers): train_dataset.path, and for
 * evaluation valid_dataset.path, else a held-out split of the training file
 * (every 10th prompt of a seeded order). Without train_dataset.path the
 * task is the project's synthetic arithmetic (synth.h), written as the same
 * JSONL (JOB_DIR/synth_train.jsonl, synth_test.jsonl) and read back by the
 * same loader. Each prompt is the template applied to the question, then the
 * model's chat template (the user turn, generation prompt, thinking off, as
 * AReaL's GSM8K dataset) when its directory ships one, then tokenized;
 * prompts longer than train_dataset.max_length tokens are dropped (AReaL's
 * filter) and counted.
 *
 * Rewards (areal_task_reward_kind): "math" is rl-core's answer equivalence
 * (\boxed{}, "the answer is", the last number, ...) of the decoded response
 * against the gold answer, AReaL's GSM8K reward; "exact" is 1 for exactly
 * the gold answer's tokens then the end token (the synthetic task's reward,
 * which also teaches the model to stop). Default: exact for the synthetic
 * task, math for a dataset.
 *
 * Training order: rl-core's loader (a seeded Fisher-Yates per epoch,
 * drop_last batches of B), handed out one prompt at a time; position p
 * (prompts consumed) maps to (epoch, batch) = (p / B / steps_per_epoch,
 * p / B % steps_per_epoch), so a checkpoint's step x B restores it exactly.
 */
#ifndef AREAL_TRAIN_TASK_H
#define AREAL_TRAIN_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/model/tokenizer.h"
#include "areal/rl/config.h"
#include "areal/rl/dataset.h"
#include "areal/train/synth.h"

typedef enum areal_task_reward_kind {
    AREAL_TASK_REWARD_DEFAULT = 0, /* exact for the synthetic task, math for a dataset */
    AREAL_TASK_REWARD_MATH = 1,
    AREAL_TASK_REWARD_EXACT = 2,
} areal_task_reward_kind;

typedef struct areal_task_item {
    int32_t *prompt; /* owned */
    int n_prompt;
    char *gold;      /* owned: the bare gold answer */
    int32_t *answer; /* owned: gold's tokens then the end token (exact reward) */
    int n_answer;
    long line; /* in its file */
} areal_task_item;

typedef struct areal_task {
    areal_task_item *train, *test; /* owned */
    size_t n_train, n_test;
    areal_task_reward_kind reward;
    bool synthetic;
    const areal_tokenizer *tok; /* borrowed */
    int32_t eos;
    areal_rl_loader loader; /* the training order */
    size_t *batch;          /* [B] the loader's current batch */
    size_t batch_pos;       /* next slot of batch (B: take a new one) */
    long consumed;          /* prompts handed out */
} areal_task;

typedef struct areal_task_cfg {
    const areal_rl_config *cfg; /* train_dataset, valid_dataset, seed, consumer_batch_size */
    const char *job_dir;        /* where the synthetic task's JSONL goes */
    const char *model_dir;      /* the chat template, if any */
    areal_synth_cfg synth;      /* the synthetic task (no train_dataset.path) */
    areal_task_reward_kind reward;
    const areal_tokenizer *tok;
    int32_t eos;
    void (*log)(void *ctx, const char *line); /* bad lines, filtered prompts (nullable) */
    void *ctx;
} areal_task_cfg;

/*
 * Loads the task (see above). On failure *t is freed and zeroed. Returns 0,
 * AREAL_EIO (a file), AREAL_EINVAL (no good line, a template the model's chat
 * template cannot render, every prompt filtered, B larger than the training
 * prompts; named), AREAL_ENOMEM.
 */
int areal_task_load(areal_task *t, const areal_task_cfg *c, areal_error *err);
void areal_task_free(areal_task *t);

/* The next training prompt (advances the position). Never fails. */
const areal_task_item *areal_task_next(areal_task *t, long *train_index);

/* Moves to position `consumed` (prompts), a multiple of B. AREAL_ERANGE if not. */
int areal_task_seek(areal_task *t, long consumed, areal_error *err);

/*
 * The reward of response tokens resp[0..n) (after the prompt, the end token
 * included when generated) for item. Safe from several threads at once.
 */
float areal_task_reward(const areal_task *t, const areal_task_item *item, const int32_t *resp,
                        int n);

/* "math" / "exact" -> the kind; AREAL_TASK_REWARD_DEFAULT on anything else. */
areal_task_reward_kind areal_task_reward_parse(const char *name);

#endif
