/*
 * k_swiglu.cu - SwiGLU forward/backward and the residual add on bf16
 * (areal/kernels/layers.h). Grid-stride loops, one element per thread per
 * step; fp32 arithmetic. Rejected for now: fusing the add into the next
 * RMSNorm (llm.c's fused residual forward) - a later change once the GPU
 * model exists to call it, measured by bench_gpu_kernels.
 */
#include "areal/kernels/layers.h"

#include "k_util.cuh"

namespace {

__device__ __forceinline__ float sigm(float g) {
    return 1.0f / (1.0f + __expf(-g));
}

__global__ void swiglu_fwd(uint16_t *h, const uint16_t *g, const uint16_t *u, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gv = kutil::ld(g, i);
        kutil::st(h, i, gv * sigm(gv) * kutil::ld(u, i));
    }
}

/* d silu(g)/dg = s (1 + g (1 - s)) */
__global__ void swiglu_bwd(uint16_t *dg, uint16_t *du, const uint16_t *dh, const uint16_t *g,
                           const uint16_t *u, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gv = kutil::ld(g, i), uv = kutil::ld(u, i), d = kutil::ld(dh, i);
        float s = sigm(gv);
        kutil::st(dg, i, d * uv * s * (1.0f + gv * (1.0f - s)));
        kutil::st(du, i, d * gv * s);
    }
}

__global__ void add(uint16_t *y, const uint16_t *a, const uint16_t *b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        kutil::st(y, i, kutil::ld(a, i) + kutil::ld(b, i));
}

} // namespace

extern "C" int areal_k_swiglu_fwd(uint16_t *h, const uint16_t *g, const uint16_t *u, size_t n,
                                  void *stream, areal_error *err) {
    if (n == 0)
        return AREAL_OK;
    if (h == NULL || g == NULL || u == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "areal_k_swiglu_fwd: NULL buffer (n %zu)", n);
    swiglu_fwd<<<kutil::blocks_for(n), kutil::kThreads, 0, (cudaStream_t)stream>>>(h, g, u, n);
    return kutil::launched("areal_k_swiglu_fwd", err);
}

extern "C" int areal_k_swiglu_bwd(uint16_t *dg, uint16_t *du, const uint16_t *dh, const uint16_t *g,
                                  const uint16_t *u, size_t n, void *stream, areal_error *err) {
    if (n == 0)
        return AREAL_OK;
    if (dg == NULL || du == NULL || dh == NULL || g == NULL || u == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "areal_k_swiglu_bwd: NULL buffer (n %zu)", n);
    swiglu_bwd<<<kutil::blocks_for(n), kutil::kThreads, 0, (cudaStream_t)stream>>>(dg, du, dh, g, u,
                                                                                   n);
    return kutil::launched("areal_k_swiglu_bwd", err);
}

extern "C" int areal_k_add(uint16_t *y, const uint16_t *a, const uint16_t *b, size_t n,
                           void *stream, areal_error *err) {
    if (n == 0)
        return AREAL_OK;
    if (y == NULL || a == NULL || b == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "areal_k_add: NULL buffer (n %zu)", n);
    add<<<kutil::blocks_for(n), kutil::kThreads, 0, (cudaStream_t)stream>>>(y, a, b, n);
    return kutil::launched("areal_k_add", err);
}
