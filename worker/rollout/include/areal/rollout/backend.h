/*
 * backend.h - the rollout engine's model backend: the GPU model's paged
 * decode step (worker/gpu) or the CPU engine, by areal/model/device.h's rule
 * and what this build of the engine can run. One seam (backend.c), so the
 * engine's files stay as they are until the GPU decode is wired into them.
 */
#ifndef AREAL_ROLLOUT_BACKEND_H
#define AREAL_ROLLOUT_BACKEND_H

#include <stdbool.h>

#include "areal/model/device.h"

/* True when the engine's GPU decode is compiled in and wired (today: false; see backend.c). */
bool areal_rollout_gpu_built(void);

/* The rollout engine's choice for env (areal_backend_select with the engine's capability). */
areal_backend_choice areal_rollout_backend(const areal_device_env *env);

#endif
