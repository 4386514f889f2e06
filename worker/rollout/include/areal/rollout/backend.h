/*
 * backend.h - the rollout engine's model backend: the GPU model's paged
 * decode step (worker/gpu, areal_gpu_step_paged) or the CPU engine, by
 * areal/model/device.h's rule and what this build of the engine can run.
 *
 * The engine calls its model through one small vtable (engine_internal.h's
 * eng_backend: a step, a release), whose CPU implementation is today's
 * areal_model_step_paged over the host cache (src/backend.c) and whose GPU
 * one (gpu/src/engine_gpu.c, built with the GPU model) runs the same
 * planned step - continuous batching, chunked prefill, the prefix cache's
 * shared blocks, the engine's own sampler - over the GPU model's paged
 * cache, with CUDA graphs per batch bucket. The server asks for it with
 * areal_engine_config.gpu when this choice says GPU.
 */
#ifndef AREAL_ROLLOUT_BACKEND_H
#define AREAL_ROLLOUT_BACKEND_H

#include <stdbool.h>

#include "areal/model/device.h"

/* True when the engine's GPU step is compiled in (AREAL_HAVE_GPUMODEL). */
bool areal_rollout_gpu_built(void);

/* The rollout engine's choice for env (areal_backend_select with the engine's capability). */
areal_backend_choice areal_rollout_backend(const areal_device_env *env);

/*
 * The GPU paged cache's table width for an engine: the blocks a sequence can
 * need (ceil(max_context / block_tokens)), at most the n_blocks there are.
 * Pure: tested on the CPU.
 */
int areal_rollout_gpu_max_blocks(long max_context, int block_tokens, int n_blocks);

#endif
