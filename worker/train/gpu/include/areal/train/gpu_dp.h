/*
 * gpu_dp.h - the NCCL adapter of the GPU trainer's data parallelism: the GPU
 * model's DP hook (areal_gpu_dp, areal/gpumodel/model.h) on a comm-runtime
 * NCCL group (areal/comm/ncclpg.h), so the gradient mean runs on the group's
 * own stream over device buffers, ordered by the model's events. Built only
 * with the GPU model (worker/train/module.mk), hence its own include folder.
 */
#ifndef AREAL_TRAIN_GPU_DP_H
#define AREAL_TRAIN_GPU_DP_H

#include "areal/comm/ncclpg.h"
#include "areal/error.h"
#include "areal/gpumodel/model.h"
#include "areal/train/trainer.h"

/* The hook for g: all_reduce_mean = areal_ncclpg_all_reduce(fp32, AREAL_AVG) in place, stream =
 * areal_ncclpg_stream(g). g outlives every model the hook is given to. */
areal_gpu_dp areal_train_gpu_dp_hook(areal_ncclpg *g);

/*
 * The GPU trainer's gradients are averaged over g (the trainer's data group as an NCCL group:
 * same members, same order as t->dp) at every optimizer step; call before areal_trainer_use_gpu
 * (which then accepts t->dp of more than one rank). AREAL_EINVAL when g's size differs from
 * t->dp's (1 without t->dp).
 */
int areal_train_gpu_dp(areal_trainer *t, areal_ncclpg *g, areal_error *err);

#endif
