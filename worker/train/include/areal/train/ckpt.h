/*
 * ckpt.h - the trainer's recover checkpoints (AReaL's RecoverHandler,
 * areal.md §8): everything a restart needs to continue exactly where it
 * stopped.
 *
 * Layout under the checkpoint root (the job's <fileroot>/.../recover):
 *   step_00000012/model/        the policy as a HF directory (hf_save.h)
 *   step_00000012/optim.safetensors   AdamW moments "exp_avg", "exp_avg_sq"
 *   step_00000012/state.json    step, version, adam step, data position,
 *                               RNG, staleness counters
 *   step_00000012/MANIFEST.json every other file with its size and FNV-1a
 *                               64 hash, written last
 * A checkpoint is built as step_N.tmp and renamed when complete, and the
 * two newest are kept. Loading takes the newest whose manifest verifies;
 * a checkpoint that does not (a file missing, short, or changed) is refused
 * with the file named and the previous one is used, so a crash mid-save or
 * a corrupted disk costs one interval, never the run.
 */
#ifndef AREAL_TRAIN_CKPT_H
#define AREAL_TRAIN_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/model/model.h"
#include "areal/rl/staleness.h"

typedef struct areal_ckpt_state {
    long step;      /* training steps done */
    long version;   /* policy version */
    long adam_step; /* optimizer updates done */
    long data_epoch;
    long data_index; /* next batch of the loader */
    uint64_t rng;    /* the trainer's seed stream position */
    areal_staleness counters;
} areal_ckpt_state;

/* What the checkpoint holds besides the state: the model and the moments (n floats each). */
typedef struct areal_ckpt_tensors {
    areal_model *model;
    const char *model_src; /* model directory whose small files (config, tokenizer) are copied */
    float *exp_avg, *exp_avg_sq;
    size_t n;
} areal_ckpt_tensors;

/*
 * Writes checkpoint step st->step under root (created if missing) and drops
 * all but the two newest. Returns 0, AREAL_EIO (naming the file) or
 * AREAL_ENOMEM.
 */
int areal_ckpt_save(const char *root, const areal_ckpt_tensors *t, const areal_ckpt_state *st,
                    areal_error *err);

/* Reports one refused checkpoint (why, naming the file). */
typedef void (*areal_ckpt_log)(void *ctx, const char *line);

/*
 * Loads the newest valid checkpoint under root into t (model parameters and
 * moments; shapes must match) and *st. *used receives its directory (cap
 * bytes). Returns 0, AREAL_ERANGE when root holds no valid checkpoint (a
 * fresh start), or AREAL_ENOMEM. Refused ones are reported through log.
 */
int areal_ckpt_load(const char *root, const areal_ckpt_tensors *t, areal_ckpt_state *st, char *used,
                    size_t cap, areal_ckpt_log log, void *log_ctx, areal_error *err);

#endif
