/*
 * trainer_par_internal.h - the parts of a trainer layout's state that its
 * checkpoint code (trainer_par_ckpt.c) reads and writes, borrowed from
 * trainer_par.c's private struct. A view rather than the struct itself, so
 * the struct stays one file's business.
 */
#ifndef AREAL_TRAIN_TRAINER_PAR_INTERNAL_H
#define AREAL_TRAIN_TRAINER_PAR_INTERNAL_H

#include <stddef.h>

#include "areal/train/trainer_par.h"

typedef struct areal_train_par_parts {
    const areal_train_layout *l;
    areal_par_step *step;
    areal_par_fsdp *fsdp;        /* fsdp: the ranges (else NULL) */
    areal_model *shard;          /* megatron: the rank's shard */
    areal_coll *world, *dp;      /* the layout's world and data group */
    areal_coll *edp;             /* expert data parallel (NULL: none) */
    const areal_tensor_spec *hf; /* the whole model's tensors, in its buffer order */
    size_t n_hf;
    const char *model_dir; /* the initial model */
} areal_train_par_parts;

/* p's parts, borrowed for p's life. */
areal_train_par_parts areal_train_par_parts_of(areal_train_par *p);

#endif
