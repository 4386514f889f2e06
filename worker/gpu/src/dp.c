/*
 * dp.c - the GPU step's data-parallel gradient reduction on the DP group's
 * own stream (areal_gpu_model_set_dp, areal/gpumodel/model.h).
 *
 * The backward is enqueued on the compute stream and the host runs ahead, so
 * the group's stream must not start before the gradients exist, and the
 * optimizer must not read them before the reduction ends: one event recorded
 * after the backward (the group's stream waits on it), one after the
 * reduction (the compute stream waits on it). Neither wait blocks the host.
 * The hook keeps the model free of the comm runtime (worker/comm is not in
 * gpumodel's closure): the caller passes areal_ncclpg_all_reduce and
 * areal_ncclpg_stream through it. Rejected for now: per-layer buckets
 * reduced while the backward of earlier layers runs (the overlap NCCL allows;
 * it needs a hook per bucket and a host that does not wait inside the
 * all-reduce, which areal_ncclpg_all_reduce does), and a second copy of the
 * gradients for the reduction (NCCL reduces in place).
 */
#include <cuda_runtime_api.h>

#include "ginternal.h"

void gpu_dp_free(areal_gpu_model *g) {
    if (g->ev_grads != NULL)
        cudaEventDestroy((cudaEvent_t)g->ev_grads);
    if (g->ev_reduced != NULL)
        cudaEventDestroy((cudaEvent_t)g->ev_reduced);
    g->ev_grads = g->ev_reduced = NULL;
    g->has_dp = false;
}

int areal_gpu_model_set_dp(areal_gpu_model *g, const areal_gpu_dp *dp, areal_error *err) {
    if (dp != NULL && (dp->all_reduce_mean == NULL || dp->stream == NULL))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU model DP: all_reduce_mean and stream (the group's CUDA "
                               "stream, areal_ncclpg_stream) are needed");
    TRY(gpu_cuda(cudaStreamSynchronize((cudaStream_t)g->stream), "synchronise", err));
    gpu_dp_free(g);
    if (dp == NULL)
        return AREAL_OK;
    cudaEvent_t a = NULL, b = NULL;
    int rc = gpu_cuda(cudaEventCreateWithFlags(&a, cudaEventDisableTiming), "a DP event", err);
    if (rc == AREAL_OK)
        rc = gpu_cuda(cudaEventCreateWithFlags(&b, cudaEventDisableTiming), "a DP event", err);
    if (rc != AREAL_OK) {
        if (a != NULL)
            cudaEventDestroy(a);
        return rc;
    }
    g->ev_grads = a;
    g->ev_reduced = b;
    g->dp = *dp;
    g->has_dp = true;
    return AREAL_OK;
}

int gpu_dp_reduce(areal_gpu_model *g, areal_error *err) {
    if (!g->has_dp)
        return AREAL_OK;
    cudaStream_t st = (cudaStream_t)g->stream, cs = (cudaStream_t)g->dp.stream;
    cudaEvent_t done = (cudaEvent_t)g->ev_grads, reduced = (cudaEvent_t)g->ev_reduced;
    TRY(gpu_cuda(cudaEventRecord(done, st), "record the backward's end", err));
    TRY(gpu_cuda(cudaStreamWaitEvent(cs, done, 0), "order the DP stream after the backward", err));
    TRY(g->dp.all_reduce_mean(g->dp.ctx, g->grads, g->wl.n_elems, err));
    TRY(gpu_cuda(cudaEventRecord(reduced, cs), "record the reduction's end", err));
    return gpu_cuda(cudaStreamWaitEvent(st, reduced, 0), "order the optimizer after the reduction",
                    err);
}
