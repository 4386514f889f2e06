/*
 * checkpoint.h - a HuggingFace model directory: config.json plus one
 * model.safetensors or shards listed by model.safetensors.index.json.
 *
 * Opening validates everything before a weight is read: the config, every
 * safetensors header, the index against the shards (each mapped name present
 * in its shard, no name in two shards), and the tensor set against
 * areal_model_expected_tensors (nothing missing, nothing unexpected, shapes
 * equal, dtypes F32/F16/BF16). A tied checkpoint may also carry lm_head.weight
 * (some exporters write it); it is then accepted and ignored by the list.
 * Errors name the file, the tensor and the config field the shape came from.
 */
#ifndef AREAL_MODEL_CHECKPOINT_H
#define AREAL_MODEL_CHECKPOINT_H

#include <stddef.h>

#include "areal/error.h"
#include "areal/model/config.h"
#include "areal/model/safetensors.h"

typedef struct areal_ckpt_entry {
    const areal_st_file *file;
    const areal_st_tensor *tensor;
} areal_ckpt_entry;

typedef struct areal_checkpoint {
    areal_model_config cfg;
    areal_st_file *files; /* one per shard */
    size_t n_files;
    areal_tensor_spec *expected; /* areal_model_expected_tensors(cfg) */
    areal_ckpt_entry *entries;   /* parallel to expected */
    size_t n_expected;
    const areal_tensor_spec **by_name; /* expected, sorted by name (lookup) */
} areal_checkpoint;

/*
 * Opens the model directory `dir`. Returns 0, AREAL_EIO (a file missing or
 * unreadable), AREAL_EINVAL (any validation failure) or AREAL_ENOMEM; on
 * failure *ck is empty and needs no close.
 */
int areal_checkpoint_open(const char *dir, areal_checkpoint *ck, areal_error *err);
void areal_checkpoint_close(areal_checkpoint *ck);

/* The entry of an expected tensor by name, or NULL. */
const areal_ckpt_entry *areal_checkpoint_find(const areal_checkpoint *ck, const char *name);

/*
 * Loads tensor `name` as fp32 into dst (cap floats). Returns 0, AREAL_EINVAL
 * (unknown name) or AREAL_ERANGE (cap too small).
 */
int areal_checkpoint_load_f32(const areal_checkpoint *ck, const char *name, float *dst, size_t cap,
                              areal_error *err);

/*
 * Writes tensors t[0..n) as a sharded checkpoint into the existing directory
 * `dir`: tensor i goes to shard shard_of[i] (0-based, < n_shards), the shards
 * are named model-%05d-of-%05d.safetensors (1-based) and each is written with
 * areal_st_write and metadata {"format": "pt"}; then
 * model.safetensors.index.json holds {"metadata": {"total_size": data bytes},
 * "weight_map": {name: shard}} with sorted keys and two-space indentation, as
 * transformers writes it. With n_shards == 1 it writes model.safetensors and no
 * index instead. Returns 0, AREAL_EINVAL (a shard index out of range or an
 * empty shard, naming it), AREAL_EIO or AREAL_ENOMEM.
 */
int areal_checkpoint_write(const char *dir, const areal_st_out *t, size_t n, const int *shard_of,
                           int n_shards, areal_error *err);

#endif
