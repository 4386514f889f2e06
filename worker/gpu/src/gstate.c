/*
 * gstate.c - the AdamW state of the GPU model to and from the host, and its vocabulary
 * (areal_gpu_model_moments, areal/gpumodel/model.h): the trainer keeps a host
 * copy of the moments for its checkpoints and resumes a run whose moments
 * were saved by the CPU trainer, so both directions use the model's layout
 * (plan.h's pack / unpack), never the device's padded one.
 */
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "ginternal.h"

int areal_gpu_model_moments(areal_gpu_model *g, bool to_device, float *m, float *v, long *step,
                            areal_error *err) {
    if (m == NULL || v == NULL || step == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "GPU moments: NULL m, v or step");
    if (to_device && (*step < 0 || *step > 2147483647L))
        return areal_error_set(err, AREAL_EINVAL, -1, "GPU moments: step %ld out of range", *step);
    TRY(gpu_cuda(cudaStreamSynchronize((cudaStream_t)g->stream), "synchronise", err));
    float *host = malloc(sizeof(float) * g->wl.n_elems);
    if (host == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory to stage %zu moments",
                               g->wl.n_elems);
    size_t bytes = sizeof(float) * g->wl.n_elems;
    int rc = AREAL_OK;
    for (int i = 0; i < 2 && rc == AREAL_OK; i++) {
        float *h = i == 0 ? m : v, *d = i == 0 ? g->m1 : g->m2;
        if (to_device) {
            areal_gpu_wlayout_pack(&g->wl, h, host);
            rc =
                gpu_cuda(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice), "upload moments", err);
        } else {
            rc = gpu_cuda(cudaMemcpy(host, d, bytes, cudaMemcpyDeviceToHost), "download moments",
                          err);
            if (rc == AREAL_OK)
                areal_gpu_wlayout_unpack(&g->wl, host, h);
        }
    }
    free(host);
    if (rc == AREAL_OK && to_device)
        g->step = (int)*step;
    else if (rc == AREAL_OK)
        *step = g->step;
    return rc;
}

int areal_gpu_model_vocab(const areal_gpu_model *g) {
    return g->V;
}
