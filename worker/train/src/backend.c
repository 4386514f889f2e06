/*
 * backend.c - the trainer's backend choice (areal/train/backend.h) and the
 * host-side rules of its GPU path that need no CUDA (so they are tested in
 * every build): the micro-batch budget the GPU model is planned for.
 *
 * The GPU step itself is worker/train/gpu/src/backend_gpu.c, compiled and
 * linked (with component gpumodel in the trainer's closure) only where nvcc
 * and cuBLASLt are found (AREAL_HAVE_GPUMODEL; worker/train/module.mk); a
 * CPU build answers areal_trainer_use_gpu with the reason below, so the
 * loop stays on the CPU and says why once.
 */
#include "areal/train/backend.h"

bool areal_train_gpu_built(void) {
#ifdef AREAL_HAVE_GPUMODEL
    return true;
#else
    return false;
#endif
}

areal_backend_choice areal_train_backend(const areal_device_env *env) {
    return areal_backend_select("trainer", env, areal_train_gpu_built(),
                                "this build has no GPU model (nvcc or cuBLASLt was not found)");
}

int areal_train_gpu_plan_tokens(long max_tokens_per_mb, int first_T) {
    long T = max_tokens_per_mb > first_T ? max_tokens_per_mb : first_T;
    if (T < 256)
        T = 256;
    if (T > (1L << 30)) /* int offsets in the plan; far above any device's memory */
        T = 1L << 30;
    return (int)((T + 255) / 256 * 256);
}

#ifndef AREAL_HAVE_GPUMODEL
int areal_trainer_use_gpu(struct areal_trainer *t, areal_error *err) {
    (void)t;
    return areal_error_set(err, AREAL_EINVAL, -1,
                           "this build has no GPU model (nvcc or cuBLASLt was not found)");
}
#endif
