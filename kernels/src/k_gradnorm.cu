/*
 * k_gradnorm.cu - the sum of squares of fp32 gradients and the clip factor
 * (areal/kernels/optim.h).
 *
 * Each block reduces its grid-stride share in fp32, then adds it into one
 * double with atomicAdd (sm_60+), so the total over ~1e9 parameters keeps its
 * digits regardless of the number of tensors. Rejected: an fp32 total (loses
 * ~3 digits at 1e9 terms) and a two-stage reduction into a partials buffer
 * (one more launch per tensor for nothing the double atomic does not give).
 */
#include "areal/kernels/optim.h"

#include "k_util.cuh"

namespace {

__global__ void sumsq(const float *g, size_t n, double *acc) {
    float s = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        s += g[i] * g[i];
    s = kutil::block_sum(s);
    if (threadIdx.x == 0)
        atomicAdd(acc, (double)s);
}

__global__ void clip_scale(const double *acc, float max_norm, float *scale, float *norm) {
    double nrm = sqrt(*acc);
    if (norm != NULL)
        *norm = (float)nrm;
    double c = max_norm > 0.0f ? (double)max_norm / (nrm + 1e-6) : 1.0;
    *scale = (float)(c < 1.0 ? c : 1.0);
}

} // namespace

extern "C" int areal_k_sumsq(const float *g, size_t n, double *acc, void *stream,
                             areal_error *err) {
    if (n == 0)
        return AREAL_OK;
    if (g == NULL || acc == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "areal_k_sumsq: NULL buffer (n %zu)", n);
    size_t b = kutil::blocks_for(n);
    sumsq<<<(unsigned)(b < 1024 ? b : 1024), kutil::kThreads, 0, (cudaStream_t)stream>>>(g, n, acc);
    return kutil::launched("areal_k_sumsq", err);
}

extern "C" int areal_k_clip_scale(const double *acc, float max_norm, float *scale, float *norm,
                                  void *stream, areal_error *err) {
    if (acc == NULL || scale == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "areal_k_clip_scale: NULL acc or scale");
    clip_scale<<<1, 1, 0, (cudaStream_t)stream>>>(acc, max_norm, scale, norm);
    return kutil::launched("areal_k_clip_scale", err);
}
