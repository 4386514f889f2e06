/*
 * k_moe.cu - MoE routing, slotting, permute and unpermute, forward and
 * backward (areal/kernels/moe.h).
 *
 * Routing is one warp per token (E is small: 8..128): the softmax's max and
 * sum by shuffles, then K rounds of a warp arg-max over the not-yet-chosen
 * experts, ties to the lower index as moe.c's loop. Slotting is a stable
 * counting sort without atomics, so the order is the CPU's exactly: one block
 * per expert counts its pairs, one block scans the counts, and one block per
 * expert walks the pairs again in order, ranking its own with a block-wide
 * ballot scan. That reads the T*K ids E times; at E = 128, T*K = 64k that is
 * 8M int reads, well under a millisecond. Rejected: atomicAdd cursors (the
 * order within an expert would change from run to run, and with it the
 * layout of every slot-indexed buffer the tests compare against the CPU).
 */
#include "areal/kernels/moe.h"

#include <math.h>

#include "k_util.cuh"

namespace {

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

__device__ __forceinline__ size_t warp_id() {
    return ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
}

__device__ __forceinline__ size_t warp_count() {
    return ((size_t)gridDim.x * blockDim.x) >> 5;
}

__global__ void route_k(float *probs, int32_t *topk, float *topk_w, const float *logits, int T,
                        int E, int K, int norm) {
    const int lane = threadIdx.x & 31;
    for (size_t t = warp_id(); t < (size_t)T; t += warp_count()) {
        const float *lg = logits + t * E;
        float *p = probs + t * E;
        float mx = -INFINITY;
        for (int e = lane; e < E; e += 32)
            mx = fmaxf(mx, lg[e]);
        mx = warp_max(mx);
        float sum = 0.0f;
        for (int e = lane; e < E; e += 32)
            sum += expf(lg[e] - mx);
        const float inv = 1.0f / warp_sum(sum);
        for (int e = lane; e < E; e += 32)
            p[e] = expf(lg[e] - mx) * inv;
        __syncwarp();
        uint32_t chosen_lo = 0; /* lane-local bitmap of chosen experts e = lane + 32 * bit */
        float wsum = 0.0f, mine = 0.0f;
        for (int k = 0; k < K; k++) {
            float bv = -1.0f;
            int be = E;
            for (int e = lane, bit = 0; e < E; e += 32, bit++)
                if (!(chosen_lo >> bit & 1u) && p[e] > bv)
                    bv = p[e], be = e;
            for (int o = 16; o > 0; o >>= 1) { /* arg-max, ties to the lower index */
                const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
                const int oe = __shfl_xor_sync(0xffffffffu, be, o);
                if (ov > bv || (ov == bv && oe < be))
                    bv = ov, be = oe;
            }
            if ((be & 31) == lane)
                chosen_lo |= 1u << (be >> 5);
            if (lane == k)
                mine = bv;
            if (lane == 0)
                topk[t * K + k] = be;
            wsum += bv;
        }
        if (lane < K)
            topk_w[t * K + lane] = norm ? mine / wsum : mine;
    }
}

/* count[e] = pairs routed to e; one block per expert */
__global__ void count_k(int32_t *count, const int32_t *topk, int n) {
    int c = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        c += topk[i] == (int32_t)blockIdx.x;
    c = (int)kutil::block_sum((float)c); /* exact: counts < 2^24 (checked by the caller) */
    if (threadIdx.x == 0)
        count[blockIdx.x] = c;
}

/* off[0] = 0, off[e+1] = off[e] + count[e]; one thread (E is small) */
__global__ void scan_k(int32_t *off, const int32_t *count, int E) {
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    int32_t acc = 0;
    off[0] = 0;
    for (int e = 0; e < E; e++)
        off[e + 1] = (acc += count[e]);
}

/* the slots of expert blockIdx.x, in pair order; blockDim.x == 1024 or less, a multiple of 32 */
__global__ void place_k(int32_t *slot_of, int32_t *slot_tok, const int32_t *off,
                        const int32_t *topk, int n, int K) {
    __shared__ int warp_n[32];
    const int e = blockIdx.x, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int nw = blockDim.x >> 5;
    int base = off[e];
    for (int i0 = 0; i0 < n; i0 += blockDim.x) {
        const int i = i0 + threadIdx.x;
        const bool mine = i < n && topk[i] == e;
        const uint32_t bal = __ballot_sync(0xffffffffu, mine);
        if (lane == 0)
            warp_n[w] = __popc(bal);
        __syncthreads();
        int before = 0, total = 0;
        for (int j = 0; j < nw; j++) {
            before += j < w ? warp_n[j] : 0;
            total += warp_n[j];
        }
        if (mine) {
            const int s = base + before + __popc(bal & ((1u << lane) - 1u));
            slot_of[i] = s;
            slot_tok[s] = i / K;
        }
        base += total;
        __syncthreads(); /* warp_n is rewritten next round */
    }
}

__global__ void permute_k(uint16_t *xs, const uint16_t *x, const int32_t *slot_tok, int TK, int H) {
    const size_t n = (size_t)TK * H;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t s = e / H, c = e % H;
        xs[e] = x[(size_t)slot_tok[s] * H + c];
    }
}

__global__ void unpermute_k(uint16_t *out, const uint16_t *ys, const int32_t *slot_of,
                            const float *w, int T, int K, int H) {
    const size_t n = (size_t)T * H;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t t = e / H, c = e % H;
        float acc = 0.0f;
        for (int k = 0; k < K; k++) {
            const size_t i = t * K + k;
            acc += w[i] * kutil::ld(ys, (size_t)slot_of[i] * H + c);
        }
        kutil::st(out, e, acc);
    }
}

/* one warp per pair */
__global__ void unpermute_bwd_k(uint16_t *dys, float *dw, const uint16_t *dout, const uint16_t *ys,
                                const int32_t *slot_of, const float *w, int T, int K, int H) {
    const int lane = threadIdx.x & 31;
    for (size_t i = warp_id(); i < (size_t)T * K; i += warp_count()) {
        const size_t t = i / K, s = (size_t)slot_of[i];
        float dot = 0.0f;
        for (int c = lane; c < H; c += 32) {
            const float g = kutil::ld(dout, t * H + c);
            dot += g * kutil::ld(ys, s * H + c);
            kutil::st(dys, s * H + c, w[i] * g);
        }
        dot = warp_sum(dot);
        if (lane == 0)
            dw[i] = dot;
    }
}

__global__ void permute_bwd_k(uint16_t *dx, const uint16_t *dxs, const int32_t *slot_of, int T,
                              int K, int H) {
    const size_t n = (size_t)T * H;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t t = e / H, c = e % H;
        float acc = 0.0f;
        for (int k = 0; k < K; k++)
            acc += kutil::ld(dxs, (size_t)slot_of[t * K + k] * H + c);
        kutil::st(dx, e, acc);
    }
}

/* one warp per token: d(weights) -> d(probs) -> d(logits), as moe.c's router backward */
__global__ void route_bwd_k(float *dl, const float *dw, const float *probs, const int32_t *topk,
                            const float *topk_w, int T, int E, int K, int norm) {
    const int lane = threadIdx.x & 31;
    for (size_t t = warp_id(); t < (size_t)T; t += warp_count()) {
        const float *p = probs + t * E;
        float *d = dl + t * E;
        float S = 0.0f, wdot = 0.0f;
        if (lane < K) {
            S = p[topk[t * K + lane]];
            wdot = dw[t * K + lane] * topk_w[t * K + lane];
        }
        S = warp_sum(S);
        wdot = warp_sum(wdot);
        for (int e = lane; e < E; e += 32)
            d[e] = 0.0f;
        __syncwarp();
        if (lane < K) {
            const float g = dw[t * K + lane];
            d[topk[t * K + lane]] = norm ? (g - wdot) / S : g;
        }
        __syncwarp();
        float pd = 0.0f;
        for (int e = lane; e < E; e += 32)
            pd += p[e] * d[e];
        pd = warp_sum(pd);
        for (int e = lane; e < E; e += 32)
            d[e] = p[e] * (d[e] - pd);
        __syncwarp();
    }
}

int bad(const char *fn, areal_error *err, const char *why) {
    return areal_error_set(err, AREAL_EINVAL, -1, "%s: %s", fn, why);
}

int shape(const char *fn, int T, int E, int K, areal_error *err) {
    if (T < 0 || E < 1 || E > 1024 || K < 1 || K > E || K > 32)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: T %d, E %d, K %d: need T >= 0, E <= 1024, 1 <= K <= min(E, 32)",
                               fn, T, E, K);
    if ((size_t)T * K >= (1u << 24))
        return areal_error_set(err, AREAL_EINVAL, -1, "%s: T*K %zu pairs exceed 2^24", fn,
                               (size_t)T * K);
    return AREAL_OK;
}

unsigned warp_blocks(size_t warps) {
    return kutil::blocks_for(warps * 32);
}

} // namespace

extern "C" int areal_k_moe_route(float *probs, int32_t *topk, float *topk_w, const float *logits,
                                 int T, int E, int K, int norm_topk, void *stream,
                                 areal_error *err) {
    int rc = shape("areal_k_moe_route", T, E, K, err);
    if (rc != AREAL_OK || T == 0)
        return rc;
    if (probs == NULL || topk == NULL || topk_w == NULL || logits == NULL)
        return bad("areal_k_moe_route", err, "NULL buffer");
    route_k<<<warp_blocks((size_t)T), kutil::kThreads, 0, (cudaStream_t)stream>>>(
        probs, topk, topk_w, logits, T, E, K, norm_topk);
    return kutil::launched("areal_k_moe_route", err);
}

extern "C" int areal_k_moe_slots(int32_t *off, int32_t *slot_of, int32_t *slot_tok,
                                 const int32_t *topk, int T, int E, int K, void *stream,
                                 areal_error *err) {
    int rc = shape("areal_k_moe_slots", T, E, K, err);
    if (rc != AREAL_OK)
        return rc;
    if (off == NULL || slot_of == NULL || slot_tok == NULL || (T > 0 && topk == NULL))
        return bad("areal_k_moe_slots", err, "NULL buffer");
    cudaStream_t st = (cudaStream_t)stream;
    /* the counts go into off[1..E], then are scanned in place into off[0..E] */
    const int n = T * K;
    count_k<<<(unsigned)E, kutil::kThreads, 0, st>>>(off + 1, topk, n);
    rc = kutil::launched("areal_k_moe_slots (count)", err);
    if (rc != AREAL_OK)
        return rc;
    scan_k<<<1, 32, 0, st>>>(off, off + 1, E);
    rc = kutil::launched("areal_k_moe_slots (scan)", err);
    if (rc != AREAL_OK || n == 0)
        return rc;
    place_k<<<(unsigned)E, 1024, 0, st>>>(slot_of, slot_tok, off, topk, n, K);
    return kutil::launched("areal_k_moe_slots (place)", err);
}

extern "C" int areal_k_moe_permute(uint16_t *xs, const uint16_t *x, const int32_t *slot_tok, int TK,
                                   int H, void *stream, areal_error *err) {
    if (TK == 0)
        return AREAL_OK;
    if (xs == NULL || x == NULL || slot_tok == NULL || TK < 0 || H < 1)
        return bad("areal_k_moe_permute", err, "NULL buffer, TK < 0 or H < 1");
    permute_k<<<kutil::blocks_for((size_t)TK * H), kutil::kThreads, 0, (cudaStream_t)stream>>>(
        xs, x, slot_tok, TK, H);
    return kutil::launched("areal_k_moe_permute", err);
}

extern "C" int areal_k_moe_unpermute(uint16_t *out, const uint16_t *ys, const int32_t *slot_of,
                                     const float *topk_w, int T, int K, int H, void *stream,
                                     areal_error *err) {
    if (T == 0)
        return AREAL_OK;
    if (out == NULL || ys == NULL || slot_of == NULL || topk_w == NULL || T < 0 || K < 1 || H < 1)
        return bad("areal_k_moe_unpermute", err, "NULL buffer, T < 0, K < 1 or H < 1");
    unpermute_k<<<kutil::blocks_for((size_t)T * H), kutil::kThreads, 0, (cudaStream_t)stream>>>(
        out, ys, slot_of, topk_w, T, K, H);
    return kutil::launched("areal_k_moe_unpermute", err);
}

extern "C" int areal_k_moe_unpermute_bwd(uint16_t *dys, float *dw, const uint16_t *dout,
                                         const uint16_t *ys, const int32_t *slot_of,
                                         const float *topk_w, int T, int K, int H, void *stream,
                                         areal_error *err) {
    if (T == 0)
        return AREAL_OK;
    if (dys == NULL || dw == NULL || dout == NULL || ys == NULL || slot_of == NULL ||
        topk_w == NULL || T < 0 || K < 1 || H < 1)
        return bad("areal_k_moe_unpermute_bwd", err, "NULL buffer, T < 0, K < 1 or H < 1");
    unpermute_bwd_k<<<warp_blocks((size_t)T * K), kutil::kThreads, 0, (cudaStream_t)stream>>>(
        dys, dw, dout, ys, slot_of, topk_w, T, K, H);
    return kutil::launched("areal_k_moe_unpermute_bwd", err);
}

extern "C" int areal_k_moe_permute_bwd(uint16_t *dx, const uint16_t *dxs, const int32_t *slot_of,
                                       int T, int K, int H, void *stream, areal_error *err) {
    if (T == 0)
        return AREAL_OK;
    if (dx == NULL || dxs == NULL || slot_of == NULL || T < 0 || K < 1 || H < 1)
        return bad("areal_k_moe_permute_bwd", err, "NULL buffer, T < 0, K < 1 or H < 1");
    permute_bwd_k<<<kutil::blocks_for((size_t)T * H), kutil::kThreads, 0, (cudaStream_t)stream>>>(
        dx, dxs, slot_of, T, K, H);
    return kutil::launched("areal_k_moe_permute_bwd", err);
}

extern "C" int areal_k_moe_route_bwd(float *dlogits, const float *dw, const float *probs,
                                     const int32_t *topk, const float *topk_w, int T, int E, int K,
                                     int norm_topk, void *stream, areal_error *err) {
    int rc = shape("areal_k_moe_route_bwd", T, E, K, err);
    if (rc != AREAL_OK || T == 0)
        return rc;
    if (dlogits == NULL || dw == NULL || probs == NULL || topk == NULL || topk_w == NULL)
        return bad("areal_k_moe_route_bwd", err, "NULL buffer");
    route_bwd_k<<<warp_blocks((size_t)T), kutil::kThreads, 0, (cudaStream_t)stream>>>(
        dlogits, dw, probs, topk, topk_w, T, E, K, norm_topk);
    return kutil::launched("areal_k_moe_route_bwd", err);
}
