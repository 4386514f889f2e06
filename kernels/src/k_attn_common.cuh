/*
 * k_attn_common.cuh - what the scalar (k_attention.cu) and the tensor-core
 * (k_attention_tc.cu) attention share (internal): the backward's first pass,
 * delta = rowsum(dO * O) per token and head, FlashAttention-2's D.
 */
#ifndef AREAL_KERNELS_K_ATTN_COMMON_CUH
#define AREAL_KERNELS_K_ATTN_COMMON_CUH

#include "k_util.cuh"

namespace kattn {
namespace { /* one copy per file that includes it: no duplicate kernel symbol at link */

/* delta[t * nh + h] = sum_c dout * out, one warp per (t, h) row of hd */
__global__ void delta_k(float *delta, const uint16_t *dout, const uint16_t *out, size_t rows,
                        int hd) {
    const int lane = threadIdx.x & 31;
    const size_t warps = (size_t)gridDim.x * (blockDim.x >> 5);
    for (size_t r = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows;
         r += warps) {
        float d = 0.0f;
        for (int c = lane; c < hd; c += 32)
            d += kutil::ld(dout, r * hd + c) * kutil::ld(out, r * hd + c);
        for (int o = 16; o > 0; o >>= 1)
            d += __shfl_xor_sync(0xffffffffu, d, o);
        if (lane == 0)
            delta[r] = d;
    }
}

/* delta of `rows` (T * nh) rows of hd on stream st; AREAL_OK or AREAL_EIO */
inline int launch_delta(float *delta, const uint16_t *dout, const uint16_t *out, size_t rows,
                        int hd, cudaStream_t st, areal_error *err) {
    delta_k<<<kutil::blocks_for(rows * 32), kutil::kThreads, 0, st>>>(delta, dout, out, rows, hd);
    return kutil::launched("attention backward (delta)", err);
}

} // namespace
} // namespace kattn

#endif
