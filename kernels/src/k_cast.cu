/*
 * k_cast.cu - bf16 <-> fp32 conversion kernels (see areal/kernels/cast.h).
 *
 * One thread per element over a grid-stride loop, so any n works with a fixed
 * grid (at most 65535 blocks of 256 threads). The rounding is done on the
 * integer bit pattern exactly as lib/base/src/dtype.c does it, rather than
 * with __float2bfloat16_rn: the intrinsic keeps a different NaN payload, and
 * the point of these kernels is to be bit-identical to the CPU path.
 * Rejected: vectorised 128-bit loads (a later optimisation, once a benchmark
 * shows the conversion matters next to the copy itself).
 */
#include "areal/kernels/cast.h"

#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 65535;

__global__ void bf16_to_f32(const uint16_t *src, float *dst, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __uint_as_float((uint32_t)src[i] << 16);
}

__global__ void f32_to_bf16(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t u = __float_as_uint(src[i]);
        if ((u & 0x7fffffffu) > 0x7f800000u) { /* NaN: truncate, force quiet */
            dst[i] = (uint16_t)((u >> 16) | 0x40u);
            continue;
        }
        u += 0x7fffu + ((u >> 16) & 1u);
        dst[i] = (uint16_t)(u >> 16);
    }
}

unsigned blocks_for(size_t n) {
    size_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < kMaxBlocks ? b : kMaxBlocks);
}

int launched(const char *what, areal_error *err) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return areal_error_set(err, AREAL_EIO, -1, "%s: kernel launch failed: %s (%s)", what,
                               cudaGetErrorString(e), cudaGetErrorName(e));
    return AREAL_OK;
}

} // namespace

extern "C" int areal_k_bf16_to_f32(const uint16_t *src, float *dst, size_t n, void *stream,
                                   areal_error *err) {
    if (n == 0)
        return AREAL_OK;
    if (src == NULL || dst == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "areal_k_bf16_to_f32: NULL buffer for %zu elements", n);
    bf16_to_f32<<<blocks_for(n), kThreads, 0, (cudaStream_t)stream>>>(src, dst, n);
    return launched("areal_k_bf16_to_f32", err);
}

extern "C" int areal_k_f32_to_bf16(const float *src, uint16_t *dst, size_t n, void *stream,
                                   areal_error *err) {
    if (n == 0)
        return AREAL_OK;
    if (src == NULL || dst == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "areal_k_f32_to_bf16: NULL buffer for %zu elements", n);
    f32_to_bf16<<<blocks_for(n), kThreads, 0, (cudaStream_t)stream>>>(src, dst, n);
    return launched("areal_k_f32_to_bf16", err);
}
