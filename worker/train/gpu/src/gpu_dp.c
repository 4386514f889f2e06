/*
 * gpu_dp.c - the GPU model's DP hook on a comm-runtime NCCL group
 * (areal/train/gpu_dp.h). The model enqueues the reduction on the group's
 * stream after an event of the backward and makes its optimizer wait on an
 * event of the reduction (worker/gpu/src/dp.c), so this adapter only maps
 * the hook onto areal_ncclpg_all_reduce: fp32, in place, AREAL_AVG (the
 * loss scale carries dp_size, areal_ppo_mb_scale, so the mean is the global
 * gradient). Rejected here: a reduce-scatter into optimizer shards (ZeRO on
 * the device needs a sharded AdamW the GPU model does not have yet; the
 * parallel layers' ZeRO-1 runs on the CPU model, worker/parallel).
 */
#include "areal/train/gpu_dp.h"

static int nccl_mean(void *ctx, float *buf, size_t n, areal_error *err) {
    return areal_ncclpg_all_reduce(ctx, buf, n, AREAL_DT_F32, AREAL_AVG, err);
}

areal_gpu_dp areal_train_gpu_dp_hook(areal_ncclpg *g) {
    return (areal_gpu_dp){nccl_mean, g, areal_ncclpg_stream(g)};
}

int areal_train_gpu_dp(areal_trainer *t, areal_ncclpg *g, areal_error *err) {
    int want = t->dp != NULL ? areal_pg_size(t->dp) : 1;
    if (g == NULL || areal_ncclpg_size(g) != want)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU trainer DP: the NCCL group has %d ranks, the trainer's data "
                               "group %d (use the same members)",
                               g != NULL ? areal_ncclpg_size(g) : 0, want);
    t->gpu_dp = g;
    return AREAL_OK;
}
