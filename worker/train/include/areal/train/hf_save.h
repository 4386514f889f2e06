/*
 * hf_save.h - writing the trainer's policy as a HuggingFace model directory:
 * the weights as one fp32 model.safetensors under HF tensor names, and the
 * small files of the source model directory (config.json, tokenizer files,
 * generation_config.json) copied beside them, so the result loads in the
 * rollout servers, in the trainer and in transformers alike.
 *
 * The directory is written as DIR.tmp and renamed into place, so a reader
 * (a rollout server handed the path by /update_weights_from_disk, or a
 * resume after a crash) never sees a half-written model.
 */
#ifndef AREAL_TRAIN_HF_SAVE_H
#define AREAL_TRAIN_HF_SAVE_H

#include "areal/error.h"
#include "areal/model/model.h"
#include "areal/model/safetensors.h"

/*
 * Saves m into dst (replacing an existing dst) with the small files of
 * src_dir. Returns 0, AREAL_EIO (naming the file) or AREAL_ENOMEM.
 */
int areal_hf_save(const areal_model *m, const char *src_dir, const char *dst, areal_error *err);

/*
 * As areal_hf_save, the same files, for a policy whose whole tensors exist
 * one at a time (a layout's gather, trainer_par_ckpt.h): ts[0..n) the HF
 * tensors (F32 on disk), each asked for through fill just before it is
 * written (safetensors.h's streamed write: the file's layout order, by
 * name), so the writer holds one tensor. Returns as above, or fill's error.
 */
int areal_hf_save_stream(const areal_tensor_spec *ts, size_t n, areal_st_fill_fn fill, void *ctx,
                         const char *src_dir, const char *dst, areal_error *err);

/* Writes only dst/model.safetensors (dst exists). Returns as above. */
int areal_hf_save_weights(const areal_model *m, const char *dst, areal_error *err);

#endif
