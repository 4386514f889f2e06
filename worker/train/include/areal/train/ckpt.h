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
 * That is the gathered form (the one-process trainer's). A layout's
 * trainer (trainer_par_ckpt.h) writes the sharded form instead:
 *   step_00000012/shards/       ckpt_shard.h's directory: one
 *                               shard-RRRRR-of-WWWWW.safetensors per rank
 *                               (its weight slices and optimizer share),
 *                               config.json, index.json (layout recorded)
 *   step_00000012/state.json, MANIFEST.json  as above
 * The manifest lists every file the directory holds, so a shard missing,
 * short or changed is caught before any rank reads it; either form loads
 * into either trainer (a layout reads the gathered one tensor by tensor,
 * the one process the sharded one into its whole model).
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
    int format; /* loading: the checkpoint's form (an areal_ckpt_format); ignored by saves */
} areal_ckpt_state;

/* What the checkpoint holds besides the state: the model and the moments (n floats each). */
typedef struct areal_ckpt_tensors {
    areal_model *model;
    const char *model_src; /* model directory whose small files (config, tokenizer) are copied */
    float *exp_avg, *exp_avg_sq;
    size_t n;
} areal_ckpt_tensors;

/* The two forms (see above) and the sharded form's subdirectory. */
typedef enum areal_ckpt_format {
    AREAL_CKPT_GATHERED = 0,
    AREAL_CKPT_SHARDED = 1,
} areal_ckpt_format;
#define AREAL_CKPT_SHARDS "shards"

/*
 * A checkpoint written in parts: creates root (if missing) and the empty
 * directory *tmp (step_N.tmp under root, with its shards/ subdirectory, cap
 * bytes of path) that the writers fill; areal_ckpt_commit then makes it
 * step_N, or areal_ckpt_abort drops it. AREAL_EIO naming the directory.
 */
int areal_ckpt_begin(const char *root, long step, char *tmp, size_t cap, areal_error *err);

/*
 * Writes tmp's state.json (st) and its manifest (every file under tmp),
 * renames it to step st->step and drops all but the two newest. On failure
 * tmp is removed. AREAL_EIO naming the file, AREAL_ENOMEM.
 */
int areal_ckpt_commit(const char *root, const char *tmp, const areal_ckpt_state *st,
                      areal_error *err);
void areal_ckpt_abort(const char *tmp);

/*
 * Checks the checkpoint directory dir without loading its tensors: its
 * manifest present, every file it lists of its size and hash, the form's
 * files listed (*fmt, nullable, says which form), state.json into *st.
 * AREAL_EINVAL naming the file that fails.
 */
int areal_ckpt_verify(const char *dir, areal_ckpt_state *st, areal_ckpt_format *fmt,
                      areal_error *err);

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
 * moments; shapes must match) and *st, from either form. *used receives its directory (cap
 * bytes). Returns 0, AREAL_ERANGE when root holds no valid checkpoint (a
 * fresh start), or AREAL_ENOMEM. Refused ones are reported through log.
 */
int areal_ckpt_load(const char *root, const areal_ckpt_tensors *t, areal_ckpt_state *st, char *used,
                    size_t cap, areal_ckpt_log log, void *log_ctx, areal_error *err);

/*
 * As areal_ckpt_load, verifying only (areal_ckpt_verify): the newest valid
 * checkpoint's directory (*used), state and form, for a layout's ranks to
 * load each its part. Returns as areal_ckpt_load.
 */
int areal_ckpt_find(const char *root, areal_ckpt_state *st, areal_ckpt_format *fmt, char *used,
                    size_t cap, areal_ckpt_log log, void *log_ctx, areal_error *err);

#endif
