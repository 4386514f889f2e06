/*
 * train_ckpt.h - the trainer's recover checkpoint as the job loop writes and
 * resumes it (ckpt.h's directory), one process or a layout alike: the form
 * follows the trainer - the gathered form for the one-process and replicated
 * data-parallel trainers (their rank 0 holds the whole state), the sharded
 * form for a layout (every rank writes its own part, trainer_par_ckpt.h;
 * nothing is gathered, no rank holds a whole copy for it). Either form
 * resumes either trainer, in any layout. The job loop (train_loop.c) and
 * the tests call these, so the tests run the loop's own path.
 */
#ifndef AREAL_TRAIN_TRAIN_CKPT_H
#define AREAL_TRAIN_TRAIN_CKPT_H

#include <stddef.h>

#include "areal/comm/comm.h"
#include "areal/error.h"
#include "areal/train/ckpt.h"
#include "areal/train/trainer.h"

/*
 * Rank 0: writes checkpoint st (step, version, data position, RNG, counters;
 * the AdamW step is taken from t) under root. A layout tells its followers
 * over dp to write their shards (areal_train_dp_save_shards), then commits
 * the directory; otherwise rank 0 writes the gathered form of t->model
 * (model_dir's small files copied). Errors as areal_ckpt_save's and the
 * shards' (a failed save leaves no step directory).
 */
int areal_train_ckpt_save(areal_pg *dp, areal_trainer *t, const char *model_dir, const char *root,
                          const areal_ckpt_state *st, areal_error *err);

/*
 * Rank 0: the newest valid checkpoint under root (refused ones reported
 * through log) into *st and t's version, step and AdamW step; *used (cap
 * bytes) its directory. One process: its tensors are loaded here. A layout:
 * only verified here, t->resume_dir pointing at used (keep it alive) and
 * t->resume_fmt its form, so that areal_train_dp_sync_state, which every
 * rank calls next, loads each rank's part. Returns as areal_ckpt_load
 * (AREAL_ERANGE: nothing to resume).
 */
int areal_train_ckpt_resume(areal_trainer *t, const char *root, areal_ckpt_state *st, char *used,
                            size_t cap, areal_ckpt_log log, void *log_ctx, areal_error *err);

#endif
