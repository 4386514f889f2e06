/*
 * k_util.cuh - what every kernel file of kernels/src shares (internal): the
 * launch-status check that turns CUDA's sticky error into an areal_error, the
 * bf16 load/store helpers (bf16 is carried as uint16_t in the C headers, so
 * callers need no CUDA types), and a block-wide sum.
 *
 * Rounding fp32 -> bf16 here uses __float2bfloat16_rn (nearest even): the
 * activations only need to be within bf16 tolerance of the CPU reference, not
 * bit-identical (k_cast.cu keeps its own bit-exact path for that).
 */
#ifndef AREAL_KERNELS_K_UTIL_CUH
#define AREAL_KERNELS_K_UTIL_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "areal/error.h"

namespace kutil {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 65535;

inline unsigned blocks_for(size_t n) {
    size_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < kMaxBlocks ? (b ? b : 1) : kMaxBlocks);
}

/* AREAL_OK, or AREAL_EIO naming `what` and CUDA's reason for a failed launch */
inline int launched(const char *what, areal_error *err) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return areal_error_set(err, AREAL_EIO, -1, "%s: kernel launch failed: %s (%s)", what,
                               cudaGetErrorString(e), cudaGetErrorName(e));
    return AREAL_OK;
}

__device__ __forceinline__ float ld(const uint16_t *p, size_t i) {
    return __uint_as_float((uint32_t)p[i] << 16);
}

__device__ __forceinline__ void st(uint16_t *p, size_t i, float v) {
    __nv_bfloat16 b = __float2bfloat16_rn(v);
    p[i] = *reinterpret_cast<uint16_t *>(&b);
}

/* the sum of v over the block (blockDim.x a multiple of 32, <= 1024); every
 * thread gets it. Uses 33 floats of shared memory; callable repeatedly. */
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float part[33];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); /* a previous call may still read part[] */
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = lane < nw ? part[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float block_max(float v) {
    __shared__ float part[33];
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = lane < nw ? part[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

} // namespace kutil

#endif
