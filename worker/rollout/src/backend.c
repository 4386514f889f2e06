/*
 * backend.c - the rollout engine's backend choice (areal/rollout/backend.h).
 *
 * The GPU model's paged decode step exists (areal_gpu_decode_step, component
 * gpumodel, built where nvcc and cuBLASLt are found: AREAL_HAVE_GPUMODEL),
 * but the engine's scheduler (engine_sched.c) still steps the CPU model, so a
 * GPU build serves on the CPU today and says why once. When the scheduler
 * calls the GPU step, areal_rollout_gpu_built returns AREAL_HAVE_GPUMODEL and
 * rollout's closure gains gpumodel where it is built.
 */
#include "areal/rollout/backend.h"

bool areal_rollout_gpu_built(void) {
    return false;
}

areal_backend_choice areal_rollout_backend(const areal_device_env *env) {
#ifdef AREAL_HAVE_GPUMODEL
    const char *missing = "the GPU model is built, but the engine's scheduler does not call its "
                          "decode step yet (areal_gpu_decode_step)";
#else
    const char *missing = "this build has no GPU model (nvcc or cuBLASLt was not found)";
#endif
    return areal_backend_select("rollout", env, areal_rollout_gpu_built(), missing);
}
