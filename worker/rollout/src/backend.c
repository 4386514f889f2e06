/*
 * backend.c - the rollout engine's backend choice (areal/rollout/backend.h),
 * its CPU step (eng_cpu_backend: areal_model_step_paged on the host cache,
 * the engine's step as it always was) and, in a build without the GPU model,
 * the GPU attach's refusal.
 *
 * The GPU step is worker/rollout/gpu/src/engine_gpu.c, compiled with
 * gpumodel in the engine's closure only where nvcc and cuBLASLt are found
 * (AREAL_HAVE_GPUMODEL; worker/rollout/module.mk).
 */
#include "areal/rollout/backend.h"
#include "engine_internal.h"

bool areal_rollout_gpu_built(void) {
#ifdef AREAL_HAVE_GPUMODEL
    return true;
#else
    return false;
#endif
}

areal_backend_choice areal_rollout_backend(const areal_device_env *env) {
    return areal_backend_select("rollout", env, areal_rollout_gpu_built(),
                                "this build has no GPU model (nvcc or cuBLASLt was not found)");
}

int areal_rollout_gpu_max_blocks(long max_context, int block_tokens, int n_blocks) {
    if (block_tokens < 1 || n_blocks < 1)
        return 0;
    long need = max_context > 0 ? (max_context + block_tokens - 1) / block_tokens : n_blocks;
    return need < n_blocks ? (int)need : n_blocks;
}

static int cpu_step(areal_engine *e, int nb, int n_out, areal_error *err) {
    return areal_model_step_paged(e->model, &e->kv, e->step_tok, e->cu, e->pseq, nb, e->out_rows,
                                  n_out, e->logits, err);
}

const eng_backend eng_cpu_backend = {"cpu", cpu_step, NULL};

#ifndef AREAL_HAVE_GPUMODEL
int eng_gpu_attach(areal_engine *e, areal_error *err) {
    (void)e;
    return areal_error_set(err, AREAL_EINVAL, -1,
                           "this build has no GPU model (nvcc or cuBLASLt was not found)");
}
#endif
