/*
 * trainer_par_ckpt.h - a trainer layout's recover checkpoint, per rank:
 * every rank writes its own weight slices and its optimizer share through
 * worker/parallel's ckpt_shard.h (plain AdamW on the owners of each slice,
 * ZeRO-1's flat range or the overlapped reducer's per-bucket pieces, FSDP's
 * ranges; the layout recorded in index.json), and every rank reads any
 * layout's files back into its own state, one whole tensor of scratch at a
 * time. Nothing passes through rank 0 and no rank holds a whole-model
 * buffer (ckpt.h: the directory around it, state.json and the manifest).
 *
 * The older gathered form (ckpt.h's model/ + optim.safetensors: what the
 * one-process trainer writes, and what a layout wrote before this file)
 * still loads into any layout, tensor by tensor from the files, each rank
 * taking its part (areal_train_par_load_gathered).
 *
 * Rejected: keeping the gather through rank 0 (a whole copy of parameters
 * and both moments on rank 0: 3x the model in memory, and every byte
 * through one rank's links); a whole-model scatter on resume (the same).
 */
#ifndef AREAL_TRAIN_TRAINER_PAR_CKPT_H
#define AREAL_TRAIN_TRAINER_PAR_CKPT_H

#include <stdbool.h>
#include <stddef.h>

#include "areal/error.h"
#include "areal/train/trainer_par.h"

/*
 * Every rank of p's world: writes this rank's shard of the parameters and
 * of the optimizer state (its step included) into the existing directory
 * dir (one directory all ranks see: a shared filesystem across nodes);
 * world rank 0 writes config.json and index.json last, after every rank's
 * file exists. A collective. AREAL_EIO naming the file, AREAL_ENOMEM, the
 * collective's error (every rank fails alike when one could not write).
 */
int areal_train_par_save(areal_train_par *p, const char *dir, areal_error *err);

/*
 * This rank's state from the sharded checkpoint dir (any layout's: its
 * parameters, moments and AdamW step). No collective. AREAL_EIO (a file
 * named; no index.json: an unfinished or truncated checkpoint), AREAL_EINVAL
 * (a tensor the shards do not cover, or of another model, named),
 * AREAL_ENOMEM. On failure the state is partly written: do not train on.
 */
int areal_train_par_load(areal_train_par *p, const char *dir, areal_error *err);

/*
 * This rank's state from the gathered checkpoint dir (dir/model: the HF
 * weights; dir/optim.safetensors: "exp_avg" and "exp_avg_sq" over the whole
 * model's buffer order), AdamW step adam_step. No collective. AREAL_EIO,
 * AREAL_EINVAL (a tensor missing or the moments of another size, named),
 * AREAL_ENOMEM.
 */
int areal_train_par_load_gathered(areal_train_par *p, const char *dir, long adam_step,
                                  areal_error *err);

/*
 * Every rank of p's world: the policy as a HF model directory dst (hf_save.h's
 * files: what the rollout servers load with update_weights_from_disk, and
 * users), written by world rank 0 while the ranks gather one whole tensor
 * at a time (areal_par_step_get_tensor, in the file's order), streamed into
 * the file: no rank holds more than one tensor of it. A collective: every
 * rank makes every gather even when rank 0's write fails. Returns rank 0's
 * write error there, AREAL_ENOMEM, or the collective's error.
 */
int areal_train_par_hf_save(areal_train_par *p, const char *dst, areal_error *err);

/* Floats of the whole policy (the HF tensors of its config). */
size_t areal_train_par_numel(const areal_train_par *p);

/* Whether p's data-parallel gradient sum runs overlapped with the backward (overlap.h). */
bool areal_train_par_overlapped(const areal_train_par *p);

/* Bytes of this rank's shard file in the sharded checkpoint dir (0 when absent). */
long long areal_train_par_shard_bytes(const areal_train_par *p, const char *dir);

#endif
