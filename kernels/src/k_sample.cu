/*
 * k_sample.cu - temperature / top-k / top-p sampling with logprobs
 * (areal/kernels/sample.h).
 *
 * One block per row. The logits are bf16, so the cut thresholds are found by
 * a bisection over the 16-bit *ordered keys* of bf16 values (sign-flipped so
 * integer order is value order): 16 passes over the row, each a block-wide
 * count (top-k) or mass (top-p) of the keys >= the probe - exact, no sort, no
 * scratch memory, and ties at a cut are kept on both sides by construction.
 * The draw then splits the row into one contiguous segment per thread, scans
 * the segment masses in shared memory and lets the owning thread walk its
 * segment. Rejected: a full sort per row (CUB segmented radix sort needs
 * V-sized scratch per row and is slower at decode batch sizes) and
 * FlashInfer-style rejection sampling (faster, but its draw is not a simple
 * function of u that a CPU test can replay).
 */
#include "areal/kernels/sample.h"

#include "k_util.cuh"

namespace {

/* bf16 bits -> an unsigned key with the same order as the values (NaN aside) */
__device__ __forceinline__ uint32_t key_of(uint16_t b) {
    return (b & 0x8000u) ? (uint32_t)(~b & 0xffffu) : (uint32_t)(b | 0x8000u);
}

/* the largest key t with f(t) true, f monotone (true at 0); 16 probes */
template <class F> __device__ uint32_t bisect(F f) {
    uint32_t lo = 0, hi = 0xffffu; /* f(lo) holds */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (f(mid))
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

__global__ void sample(int32_t *token, float *logprob, int32_t *kept, const uint16_t *logits,
                       size_t ld, const float *u, size_t rows, int V, float temp, int top_k,
                       float top_p) {
    __shared__ float seg[kutil::kThreads + 1];
    __shared__ int pick;
    const int nt = blockDim.x, tid = threadIdx.x;
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const uint16_t *row = logits + r * ld;
        /* the max key, and greedy's lowest index at it */
        float mx = -INFINITY;
        for (int i = tid; i < V; i += nt)
            mx = fmaxf(mx, kutil::ld(row, i));
        mx = kutil::block_max(mx);
        const float inv_t = temp > 0.0f ? 1.0f / temp : 1.0f;
        float s = 0.0f; /* full-vocabulary normaliser of z = logit * inv_t */
        for (int i = tid; i < V; i += nt)
            s += __expf((kutil::ld(row, i) - mx) * inv_t);
        s = kutil::block_sum(s);
        const float logz = mx * inv_t + logf(s);
        if (temp <= 0.0f) {
            if (tid == 0)
                pick = V;
            __syncthreads();
            for (int i = tid; i < V; i += nt)
                if (kutil::ld(row, i) == mx)
                    atomicMin(&pick, i);
            __syncthreads();
            if (tid == 0) {
                token[r] = pick;
                logprob[r] = kutil::ld(row, pick) - logz;
                if (kept != NULL)
                    kept[r] = 1;
            }
            __syncthreads();
            continue;
        }
        auto count_ge = [&](uint32_t t) {
            float c = 0.0f;
            for (int i = tid; i < V; i += nt)
                c += key_of(row[i]) >= t ? 1.0f : 0.0f;
            return kutil::block_sum(c);
        };
        auto mass_ge = [&](uint32_t t) {
            float m = 0.0f;
            for (int i = tid; i < V; i += nt)
                if (key_of(row[i]) >= t)
                    m += __expf((kutil::ld(row, i) - mx) * inv_t);
            return kutil::block_sum(m);
        };
        uint32_t tau = 0;
        if (top_k > 0 && top_k < V)
            tau = bisect([&](uint32_t t) { return count_ge(t) >= (float)top_k; });
        if (top_p < 1.0f) {
            const float need = top_p * mass_ge(tau);
            uint32_t tp = bisect([&](uint32_t t) { return t <= tau || mass_ge(t) >= need; });
            tau = tp > tau ? tp : tau;
        }
        /* the draw: per-thread contiguous segments, scanned in index order */
        const int per = (V + nt - 1) / nt, b = tid * per, e = min(V, b + per);
        float m = 0.0f, cnt = 0.0f;
        for (int i = b; i < e; i++)
            if (key_of(row[i]) >= tau) {
                m += __expf((kutil::ld(row, i) - mx) * inv_t);
                cnt += 1.0f;
            }
        cnt = kutil::block_sum(cnt);
        seg[tid + 1] = m;
        __syncthreads();
        if (tid == 0) {
            seg[0] = 0.0f;
            for (int i = 1; i <= nt; i++)
                seg[i] += seg[i - 1];
            pick = -1;
        }
        __syncthreads();
        const float target = u[r] * seg[nt];
        if (seg[tid] <= target && target < seg[tid + 1]) {
            float acc = seg[tid];
            int last = -1;
            for (int i = b; i < e; i++)
                if (key_of(row[i]) >= tau) {
                    last = i;
                    acc += __expf((kutil::ld(row, i) - mx) * inv_t);
                    if (acc > target)
                        break;
                }
            pick = last; /* one thread owns the target */
        }
        __syncthreads();
        if (tid == 0) {
            int p = pick;
            if (p < 0) /* u * mass rounded onto the total: the last kept token */
                for (int i = V - 1; i >= 0 && p < 0; i--)
                    if (key_of(row[i]) >= tau)
                        p = i;
            token[r] = p;
            logprob[r] = kutil::ld(row, p) * inv_t - logz;
            if (kept != NULL)
                kept[r] = (int32_t)cnt;
        }
        __syncthreads();
    }
}

} // namespace

extern "C" int areal_k_sample(int32_t *token, float *logprob, int32_t *kept, const uint16_t *logits,
                              size_t ld, const float *u, size_t rows, int V, areal_k_sample_cfg c,
                              void *stream, areal_error *err) {
    if (rows == 0)
        return AREAL_OK;
    if (token == NULL || logprob == NULL || logits == NULL || (c.temp > 0.0f && u == NULL) ||
        V < 1 || ld < (size_t)V)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "areal_k_sample: NULL buffer (u is needed when temp > 0) or bad "
                               "shape (V %d, ld %zu)",
                               V, ld);
    if (!(c.top_p > 0.0f))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "areal_k_sample: top_p %g must be > 0 (>= 1 turns it off)",
                               (double)c.top_p);
    unsigned blocks = (unsigned)(rows < 4096 ? rows : 4096);
    sample<<<blocks, kutil::kThreads, 0, (cudaStream_t)stream>>>(
        token, logprob, kept, logits, ld, u, rows, V, c.temp, c.top_k, c.top_p);
    return kutil::launched("areal_k_sample", err);
}
