/*
 * backend.c - the trainer's backend choice (areal/train/backend.h).
 *
 * The GPU model's PPO step exists (areal_gpu_train_step_ppo, component
 * gpumodel, built where nvcc and cuBLASLt are found: AREAL_HAVE_GPUMODEL),
 * but the training loop (trainer.c) still runs the CPU model's forward and
 * backward, so even a GPU build trains on the CPU today and says why once.
 * When the loop calls the GPU step, areal_train_gpu_built returns
 * AREAL_HAVE_GPUMODEL and the trainer's closure gains gpumodel (declared in
 * worker/train/module.mk only where it is built, so the CPU build and its
 * layering are unchanged).
 */
#include "areal/train/backend.h"

bool areal_train_gpu_built(void) {
    return false;
}

areal_backend_choice areal_train_backend(const areal_device_env *env) {
#ifdef AREAL_HAVE_GPUMODEL
    const char *missing = "the GPU model is built, but the training loop does not call its step "
                          "yet (areal_gpu_train_step_ppo)";
#else
    const char *missing = "this build has no GPU model (nvcc or cuBLASLt was not found)";
#endif
    return areal_backend_select("trainer", env, areal_train_gpu_built(), missing);
}
