/*
 * k_paged.cu - paged KV-cache append and decode attention (areal/kernels/paged.h).
 *
 * Decode: a block is one (sequence, head) with 4 warps; warp w takes chunks
 * w, w + 4, ... of 32 keys, copies the chunk's key rows into its own shared
 * tile (coalesced: consecutive lanes read consecutive columns of a row;
 * rows padded to hd + 1 floats so that lane l's dot product over row l hits
 * 32 banks), scores one key per lane, folds them into its running softmax
 * (max, sum, and NPL output columns per lane, read from V coalesced), and
 * the 4 warps' partial softmaxes are merged at the end through shared
 * memory. A split over more blocks per sequence (flash-decoding) is the
 * next step for long contexts at batch 1; the rollout shapes (hundreds to a
 * few thousand keys) fill the GPU with B x nh blocks already.
 */
#include "areal/kernels/paged.h"

#include <math.h>

#include "k_util.cuh"

namespace {

constexpr int kWarps = 4;

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* the cache row of key j of sequence b, KV head kh */
__device__ __forceinline__ size_t row_at(const int32_t *table, int b, int j, int kh,
                                         areal_k_paged_shape s) {
    const size_t blk = (size_t)table[(size_t)b * s.max_blocks + j / s.block_size];
    return ((blk * s.block_size + (size_t)(j % s.block_size)) * s.nkv + kh) * (size_t)s.hd;
}

__global__ void append_k(uint16_t *kc, uint16_t *vc, const uint16_t *kn, const uint16_t *vn,
                         const int32_t *table, const int32_t *pos, areal_k_paged_shape s) {
    const size_t kvd = (size_t)s.nkv * s.hd, n = (size_t)s.B * kvd;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        const int b = (int)(e / kvd), kh = (int)((e % kvd) / s.hd), c = (int)(e % s.hd);
        const size_t r = row_at(table, b, pos[b], kh, s) + c;
        kc[r] = kn[e];
        vc[r] = vn[e];
    }
}

template <int NPL>
__global__ void decode_k(uint16_t *out, const uint16_t *q, const uint16_t *kc, const uint16_t *vc,
                         const int32_t *table, const int32_t *n_keys, areal_k_paged_shape s) {
    extern __shared__ float sm[];
    const int hd = s.hd, kp = hd + 1, h = blockIdx.x, b = blockIdx.y;
    const int kh = h / (s.nh / s.nkv), lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int n = n_keys[b];
    float *qs = sm, *ks = qs + hd + (size_t)w * 32 * kp;
    float *wm = sm + hd + (size_t)kWarps * 32 * kp, *wl = wm + kWarps, *wo = wl + kWarps;
    const size_t qoff = ((size_t)b * s.nh + h) * hd;
    for (int c = threadIdx.x; c < hd; c += blockDim.x)
        qs[c] = kutil::ld(q, qoff + c);
    __syncthreads();

    float m = -INFINITY, l = 0.0f, o[NPL];
    for (int c = 0; c < NPL; c++)
        o[c] = 0.0f;
    for (int j0 = w * 32; j0 < n; j0 += kWarps * 32) {
        const int nk = min(32, n - j0);
        for (int e = lane; e < nk * hd; e += 32) {
            const int r = e / hd, c = e % hd;
            ks[r * kp + c] = kutil::ld(kc, row_at(table, b, j0 + r, kh, s) + c);
        }
        __syncwarp();
        float sc = -INFINITY;
        if (lane < nk) {
            float d = 0.0f;
            for (int c = 0; c < hd; c++)
                d += qs[c] * ks[lane * kp + c];
            sc = d * s.scale;
        }
        const float mn = fmaxf(m, warp_max(sc)); /* finite: lane 0 holds a key */
        const float corr = expf(m - mn), p = lane < nk ? expf(sc - mn) : 0.0f;
        l = l * corr + warp_sum(p);
        m = mn;
        for (int c = 0; c < NPL; c++)
            o[c] *= corr;
        for (int jj = 0; jj < nk; jj++) {
            const float pj = __shfl_sync(0xffffffffu, p, jj);
            const size_t r = row_at(table, b, j0 + jj, kh, s);
            for (int c = 0; c < NPL; c++) {
                const int col = lane + 32 * c;
                if (col < hd)
                    o[c] += pj * kutil::ld(vc, r + col);
            }
        }
        __syncwarp(); /* the tile is rewritten by the next chunk */
    }
    if (lane == 0)
        wm[w] = m, wl[w] = l;
    for (int c = 0; c < NPL; c++) {
        const int col = lane + 32 * c;
        if (col < hd)
            wo[w * hd + col] = o[c];
    }
    __syncthreads();
    float M = -INFINITY;
    for (int i = 0; i < kWarps; i++)
        M = fmaxf(M, wm[i]);
    float S = 0.0f;
    for (int i = 0; i < kWarps; i++)
        S += wl[i] > 0.0f ? wl[i] * expf(wm[i] - M) : 0.0f;
    for (int c = threadIdx.x; c < hd; c += blockDim.x) {
        float acc = 0.0f;
        for (int i = 0; i < kWarps; i++)
            if (wl[i] > 0.0f) /* a warp with no keys holds m = -inf */
                acc += wo[i * hd + c] * expf(wm[i] - M);
        kutil::st(out, qoff + c, acc / S);
    }
}

int check(const char *fn, areal_k_paged_shape s, areal_error *err) {
    if (s.nh < 1 || s.nkv < 1 || s.nh % s.nkv != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: nh %d must be a positive multiple of nkv %d", fn, s.nh, s.nkv);
    if (s.hd < 1 || s.hd > 256 || s.block_size < 1 || s.max_blocks < 1 || s.B > 65535)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: hd %d (1..256), block_size %d, max_blocks %d (>= 1) or B %d "
                               "(<= 65535) out of range",
                               fn, s.hd, s.block_size, s.max_blocks, s.B);
    return AREAL_OK;
}

template <int NPL>
int run_decode(uint16_t *out, const uint16_t *q, const uint16_t *kc, const uint16_t *vc,
               const int32_t *table, const int32_t *n_keys, areal_k_paged_shape s, cudaStream_t st,
               areal_error *err) {
    const size_t sm = sizeof(float) * ((size_t)s.hd + (size_t)kWarps * 32 * (s.hd + 1) +
                                       2 * kWarps + (size_t)kWarps * s.hd);
    if (sm > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(decode_k<NPL>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);
        if (e != cudaSuccess)
            return areal_error_set(err, AREAL_EIO, -1,
                                   "areal_k_paged_decode: %zu bytes of shared memory: %s", sm,
                                   cudaGetErrorString(e));
    }
    decode_k<NPL><<<dim3((unsigned)s.nh, (unsigned)s.B), kWarps * 32, sm, st>>>(out, q, kc, vc,
                                                                                table, n_keys, s);
    return kutil::launched("areal_k_paged_decode", err);
}

} // namespace

extern "C" int areal_k_paged_append(uint16_t *k_cache, uint16_t *v_cache, const uint16_t *k_new,
                                    const uint16_t *v_new, const int32_t *table, const int32_t *pos,
                                    areal_k_paged_shape s, void *stream, areal_error *err) {
    if (s.B == 0)
        return AREAL_OK;
    if (k_cache == NULL || v_cache == NULL || k_new == NULL || v_new == NULL || table == NULL ||
        pos == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "areal_k_paged_append: NULL buffer");
    int rc = check("areal_k_paged_append", s, err);
    if (rc != AREAL_OK)
        return rc;
    const size_t n = (size_t)s.B * s.nkv * s.hd;
    append_k<<<kutil::blocks_for(n), kutil::kThreads, 0, (cudaStream_t)stream>>>(
        k_cache, v_cache, k_new, v_new, table, pos, s);
    return kutil::launched("areal_k_paged_append", err);
}

extern "C" int areal_k_paged_decode(uint16_t *out, const uint16_t *q, const uint16_t *k_cache,
                                    const uint16_t *v_cache, const int32_t *table,
                                    const int32_t *n_keys, areal_k_paged_shape s, void *stream,
                                    areal_error *err) {
    if (s.B == 0)
        return AREAL_OK;
    if (out == NULL || q == NULL || k_cache == NULL || v_cache == NULL || table == NULL ||
        n_keys == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "areal_k_paged_decode: NULL buffer");
    int rc = check("areal_k_paged_decode", s, err);
    if (rc != AREAL_OK)
        return rc;
    cudaStream_t st = (cudaStream_t)stream;
    if (s.hd <= 32)
        return run_decode<1>(out, q, k_cache, v_cache, table, n_keys, s, st, err);
    if (s.hd <= 64)
        return run_decode<2>(out, q, k_cache, v_cache, table, n_keys, s, st, err);
    if (s.hd <= 128)
        return run_decode<4>(out, q, k_cache, v_cache, table, n_keys, s, st, err);
    return run_decode<8>(out, q, k_cache, v_cache, table, n_keys, s, st, err);
}
