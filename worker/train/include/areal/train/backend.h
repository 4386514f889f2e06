/*
 * backend.h - the trainer's model backend: the GPU model (worker/gpu) or the
 * CPU model, by areal/model/device.h's rule and what this build of the
 * trainer can run. Kept to this one seam (backend.c) so the training loop's
 * files stay as they are until the GPU step is wired into them.
 */
#ifndef AREAL_TRAIN_BACKEND_H
#define AREAL_TRAIN_BACKEND_H

#include <stdbool.h>

#include "areal/model/device.h"

/* True when the trainer's GPU path is compiled in and wired (today: false; see backend.c). */
bool areal_train_gpu_built(void);

/* The trainer's choice for env (areal_backend_select with the trainer's capability). */
areal_backend_choice areal_train_backend(const areal_device_env *env);

#endif
