/*
 * k_softmax.cuh - the one-pass online softmax over a bf16 row that the
 * vocabulary kernels share (internal to kernels/src: k_logprob.cu, k_ppo.cu).
 *
 * Each thread keeps a running max m, s = sum e^(z-m) and t = sum e^(z-m) z
 * over its strided share of the row; the block merges them, so logZ = m +
 * log s and the entropy H = logZ - t / s come out of one read. -inf entries
 * (masked tokens) carry no mass. Rejected: a separate max pass (a second read
 * of 151k bf16 per row for no accuracy gain).
 */
#ifndef AREAL_KERNELS_K_SOFTMAX_CUH
#define AREAL_KERNELS_K_SOFTMAX_CUH

#include "k_util.cuh"

namespace ksoft {

struct online {
    float m, s, t;
};

__device__ __forceinline__ online merge(online a, online b) {
    float m = fmaxf(a.m, b.m);
    if (m == -INFINITY)
        return a;
    float ea = __expf(a.m - m), eb = __expf(b.m - m);
    return {m, a.s * ea + b.s * eb, a.t * ea + b.t * eb};
}

/* the merge over the block; every thread gets it (blockDim.x a multiple of 32) */
__device__ __forceinline__ online block_merge(online v) {
    __shared__ online part[32];
    for (int o = 16; o > 0; o >>= 1) {
        online w = {__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o),
                    __shfl_xor_sync(0xffffffffu, v.t, o)};
        v = merge(v, w);
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = lane < nw ? part[lane] : online{-INFINITY, 0.0f, 0.0f};
    for (int o = 16; o > 0; o >>= 1) {
        online w = {__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o),
                    __shfl_xor_sync(0xffffffffu, v.t, o)};
        v = merge(v, w);
    }
    return v;
}

/* this thread's share of row[0..V) scaled by inv_t, merged over the block */
__device__ __forceinline__ online row_softmax(const uint16_t *row, int V, float inv_t) {
    online o = {-INFINITY, 0.0f, 0.0f};
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float z = kutil::ld(row, i) * inv_t;
        if (z == -INFINITY) /* a masked token: no mass, and no inf - inf below */
            continue;
        if (z > o.m) { /* rescale what we have to the new max */
            float e = __expf(o.m - z);
            o.s = o.s * e + 1.0f;
            o.t = o.t * e + z;
            o.m = z;
        } else {
            float e = __expf(z - o.m);
            o.s += e;
            o.t += e * z;
        }
    }
    return block_merge(o);
}

} // namespace ksoft

#endif
