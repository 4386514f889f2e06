/*
 * k_embed.cu - token embedding gather / scatter-add and the seeded uniform
 * fill (areal/kernels/embed.h).
 *
 * One block per token row, threads over the row. The backward adds with fp32
 * atomicAdd rather than sorting the tokens first: a training batch repeats
 * only a few ids per row of H, so contention is low, and the gradient is fp32
 * (the sum's order changes only its last bits). The fill hashes (seed, i)
 * with splitmix64 so any grid gives the same values.
 */
#include "areal/kernels/embed.h"

#include "k_util.cuh"

namespace {

__global__ void embed_fwd(uint16_t *y, const uint16_t *table, const int32_t *tok, int T, int H) {
    for (int t = blockIdx.x; t < T; t += gridDim.x) {
        const uint16_t *src = table + (size_t)tok[t] * H;
        uint16_t *dst = y + (size_t)t * H;
        for (int i = threadIdx.x; i < H; i += blockDim.x)
            dst[i] = src[i];
    }
}

__global__ void embed_bwd(float *dtable, const uint16_t *dy, const int32_t *tok, int T, int H) {
    for (int t = blockIdx.x; t < T; t += gridDim.x) {
        float *dst = dtable + (size_t)tok[t] * H;
        for (int i = threadIdx.x; i < H; i += blockDim.x)
            atomicAdd(&dst[i], kutil::ld(dy, (size_t)t * H + i));
    }
}

__device__ __forceinline__ uint64_t splitmix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

__global__ void fill_uniform(float *x, size_t n, uint64_t seed, float a) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint64_t r = splitmix(seed ^ splitmix(i));
        float u = (float)(r >> 40) / 16777216.0f; /* [0, 1) */
        x[i] = a * (2.0f * u - 1.0f);
    }
}

unsigned row_blocks(int T) {
    return (unsigned)(T < 65535 ? T : 65535);
}

} // namespace

extern "C" int areal_k_embed_fwd(uint16_t *y, const uint16_t *table, const int32_t *tok, int T,
                                 int H, void *stream, areal_error *err) {
    if (T == 0)
        return AREAL_OK;
    if (y == NULL || table == NULL || tok == NULL || T < 0 || H < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "areal_k_embed_fwd: NULL buffer or T %d / H %d out of range", T, H);
    embed_fwd<<<row_blocks(T), kutil::kThreads, 0, (cudaStream_t)stream>>>(y, table, tok, T, H);
    return kutil::launched("areal_k_embed_fwd", err);
}

extern "C" int areal_k_embed_bwd(float *dtable, const uint16_t *dy, const int32_t *tok, int T,
                                 int H, void *stream, areal_error *err) {
    if (T == 0)
        return AREAL_OK;
    if (dtable == NULL || dy == NULL || tok == NULL || T < 0 || H < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "areal_k_embed_bwd: NULL buffer or T %d / H %d out of range", T, H);
    embed_bwd<<<row_blocks(T), kutil::kThreads, 0, (cudaStream_t)stream>>>(dtable, dy, tok, T, H);
    return kutil::launched("areal_k_embed_bwd", err);
}

extern "C" int areal_k_fill_uniform(float *x, size_t n, uint64_t seed, float a, void *stream,
                                    areal_error *err) {
    if (n == 0)
        return AREAL_OK;
    if (x == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "areal_k_fill_uniform: NULL buffer");
    fill_uniform<<<kutil::blocks_for(n), kutil::kThreads, 0, (cudaStream_t)stream>>>(x, n, seed, a);
    return kutil::launched("areal_k_fill_uniform", err);
}
