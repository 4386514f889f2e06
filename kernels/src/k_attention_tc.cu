/*
 * k_attention_tc.cu - causal GQA attention over packed sequences on tensor
 * cores (areal_k_attn_tc_fwd / _bwd in areal/kernels/attention.h), in the
 * FlashAttention-2 manner: bf16 mma.sync m16n8k16 with fp32 accumulation,
 * online softmax in registers, the forward keeps the log-sum-exp, the
 * backward recomputes P from it. hd 64 and 128 only (attention_plan.h); the
 * scalar kernel of k_attention.cu serves every other shape and is the
 * reference these kernels are tested against (gpu_test_attention.c).
 *
 * Which and why: our own kernel, not cuDNN's SDPA. cuDNN is not in the
 * build's CUDA cache (scripts/install-cuda.sh unpacks the runtime, nvcc,
 * NCCL and cuBLAS wheels; PyPI's nvidia-cudnn-cu13 would add ~1 GB), and its
 * fused flash attention is reached only through the graph API: the C++ cudnn-frontend (a header
 * library that is not in those wheels and is C++, which the worker's C cannot include), or several
 * hundred lines of backend descriptors per graph (tensors with ragged-offset descriptors for the
 * packed layout, the SDPA fprop and bprop operation graphs, engine heuristics, execution plans and
 * variant packs), none of which can be exercised without a GPU on the build machine, and whose
 * support matrix (ragged offsets need cuDNN >= 9.x on Hopper, a per-sequence offset tensor of the
 * padded batch) changes with the version the pod's driver pairs with. An own kernel builds with the
 * nvcc the build already has, is tested like every other kernel, and serves the packed cu_seqlens
 * layout as is. The price: FlashAttention-2's design reaches ~35-45% of the H100/H200 bf16 peak in
 * its own benchmarks (FA3's wgmma + TMA pipeline or cuDNN reach 60%+), so the issue's 50% goal is
 * expected to need the cuDNN path or a wgmma kernel later; this one is the tensor-core step from
 * the scalar kernel's few percent.
 *
 * Work split. Forward and dQ: a block is a tile of 64 query rows of one head
 * of one sequence, 4 warps of 16 rows; key tiles of 64 rows stream through
 * shared memory up to the diagonal (causal block skipping: tiles past the
 * block's last query are never loaded). dK/dV: a block is a tile of 64 key
 * rows of one KV head; it walks the query heads of its GQA group and their
 * query tiles of 32 rows from the diagonal on, so dK and dV are summed over
 * the group in registers and written once: no atomics, deterministic. dQ is
 * a separate pass (the recompute of QK^T and dO V^T costs two more products
 * than atomics into an fp32 dQ, but needs no T x nh x hd fp32 scratch the
 * interface does not have, and is deterministic). Tiles are visited last
 * first (blockIdx.x reversed): the long causal rows start early.
 *
 * Fragments (PTX ISA, mma.m16n8k16 with .bf16): g = lane / 4, t = lane % 4;
 * A (16 x 16, row-major) regs {row g, cols 2t..2t+1}, {row g+8, 2t..},
 * {row g, 2t+8..}, {row g+8, 2t+8..}; B (16 x 8) regs {rows 2t..2t+1, col g},
 * {rows 2t+8..2t+9, col g}; C (16 x 8) c0, c1 at row g, cols 2t, 2t+1; c2, c3
 * at row g+8. Two adjacent C tiles of S are exactly the A fragment of P for
 * the next product, so P never leaves registers. All tiles sit row-major in
 * shared memory (rows padded by 8 bf16); a B operand read along its rows
 * (K in Q K^T) is one 32-bit load, one read across rows (V in P V) is two
 * 16-bit loads. Rejected for now: ldmatrix(.trans) and cp.async double
 * buffering (the next steps for speed; each is a layout change this first
 * version could not be run against on a GPU while it was written).
 */
#include "areal/kernels/attention.h"
#include "areal/kernels/attention_plan.h"

#include <math.h>

#include "k_attn_common.cuh"
#include "k_util.cuh"

namespace {

constexpr int kBM = AREAL_K_ATTN_TC_BM, kBN = AREAL_K_ATTN_TC_BN, kBQ = AREAL_K_ATTN_TC_BQ;
constexpr int kThreads = AREAL_K_ATTN_TC_THREADS, kPad = AREAL_K_ATTN_TC_PAD;
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
static_assert(kThreads == 128 && kBM == 4 * 16 && kBN == 4 * 16, "4 warps of 16 rows");
static_assert(kBM == kBN && kBN % kBQ == 0, "query and key tiles aligned (the causal skip)");

__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t bf16_bits(float x) {
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(x));
}

/* two floats as a bf16 pair, lo in the low half (the lower column) */
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
    return bf16_bits(lo) | (bf16_bits(hi) << 16);
}

__device__ __forceinline__ uint32_t ld32(const uint16_t *p) {
    return *reinterpret_cast<const uint32_t *>(p);
}

__device__ __forceinline__ uint32_t ld2(const uint16_t *lo, const uint16_t *hi) {
    return (uint32_t)*lo | ((uint32_t)*hi << 16);
}

/* rows [row0, row0 + n) of the [*, ld] bf16 matrix src (already at the head's
 * column) into dst [n][D + kPad]; rows at or past `valid` are zeros */
template <int D>
__device__ __forceinline__ void load_rows(uint16_t *dst, const uint16_t *src, size_t ld, int row0,
                                          int valid, int n) {
    constexpr int C = D / 8; /* 16-byte chunks per row */
    for (int e = threadIdx.x; e < n * C; e += kThreads) {
        const int r = e / C, c = (e % C) * 8;
        uint4 x = make_uint4(0u, 0u, 0u, 0u);
        if (r < valid)
            x = *reinterpret_cast<const uint4 *>(src + (size_t)(row0 + r) * ld + c);
        *reinterpret_cast<uint4 *>(dst + r * (D + kPad) + c) = x;
    }
}

/* the A fragment at rows [m0, m0 + 16), cols [k0, k0 + 16) of row-major X */
template <int D>
__device__ __forceinline__ void frag_a(uint32_t (&a)[4], const uint16_t *X, int m0, int k0, int g,
                                       int t) {
    constexpr int LD = D + kPad;
    const uint16_t *p = X + (m0 + g) * LD + k0 + 2 * t;
    a[0] = ld32(p);
    a[1] = ld32(p + 8 * LD);
    a[2] = ld32(p + 8);
    a[3] = ld32(p + 8 * LD + 8);
}

/* B[k][n] = Y[n0 + n][k0 + k] (Y row-major, read along its rows: K in Q K^T) */
template <int D>
__device__ __forceinline__ void frag_b_rows(uint32_t &b0, uint32_t &b1, const uint16_t *Y, int n0,
                                            int k0, int g, int t) {
    const uint16_t *p = Y + (n0 + g) * (D + kPad) + k0 + 2 * t;
    b0 = ld32(p);
    b1 = ld32(p + 8);
}

/* B[k][n] = Z[k0 + k][n0 + n] (Z row-major, read across its rows: V in P V) */
template <int D>
__device__ __forceinline__ void frag_b_cols(uint32_t &b0, uint32_t &b1, const uint16_t *Z, int k0,
                                            int n0, int g, int t) {
    constexpr int LD = D + kPad;
    const uint16_t *p = Z + (k0 + 2 * t) * LD + n0 + g;
    b0 = ld2(p, p + LD);
    b1 = ld2(p + 8 * LD, p + 9 * LD);
}

/* acc[16 x 8*NT] += X[m0.., D] Y[0.., D]^T: the scores of a warp's 16 rows */
template <int D, int NT>
__device__ __forceinline__ void scores(float (&acc)[NT][4], const uint16_t *X, int m0,
                                       const uint16_t *Y, int g, int t) {
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        uint32_t a[4];
        frag_a<D>(a, X, m0, kk * 16, g, t);
#pragma unroll
        for (int nb = 0; nb < NT; nb++) {
            uint32_t b0, b1;
            frag_b_rows<D>(b0, b1, Y, nb * 8, kk * 16, g, t);
            mma(acc[nb], a, b0, b1);
        }
    }
}

/* out[16 x D] += P[16 x 8*NT] Z[0 .. 8*NT, D], P the warp's C tiles */
template <int D, int NT>
__device__ __forceinline__ void times(float (&out)[D / 8][4], const float (&P)[NT][4],
                                      const uint16_t *Z, int g, int t) {
#pragma unroll
    for (int j = 0; j < NT / 2; j++) {
        const uint32_t a[4] = {pack(P[2 * j][0], P[2 * j][1]), pack(P[2 * j][2], P[2 * j][3]),
                               pack(P[2 * j + 1][0], P[2 * j + 1][1]),
                               pack(P[2 * j + 1][2], P[2 * j + 1][3])};
#pragma unroll
        for (int dt = 0; dt < D / 8; dt++) {
            uint32_t b0, b1;
            frag_b_cols<D>(b0, b1, Z, j * 16, dt * 8, g, t);
            mma(out[dt], a, b0, b1);
        }
    }
}

/* a warp's rows g and g + 8 of a [16 x D] fp32 accumulator, times mul, as
 * bf16 into dst rows (row0 + g, row0 + g + 8) of stride ld where below L */
template <int D>
__device__ __forceinline__ void store_rows(uint16_t *dst, size_t ld, const float (&acc)[D / 8][4],
                                           int r0, int r1, int L, float mul0, float mul1, int t) {
#pragma unroll
    for (int dt = 0; dt < D / 8; dt++) {
        const int c = dt * 8 + 2 * t;
        if (r0 < L)
            *reinterpret_cast<uint32_t *>(dst + (size_t)r0 * ld + c) =
                pack(acc[dt][0] * mul0, acc[dt][1] * mul0);
        if (r1 < L)
            *reinterpret_cast<uint32_t *>(dst + (size_t)r1 * ld + c) =
                pack(acc[dt][2] * mul1, acc[dt][3] * mul1);
    }
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    tc_fwd(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k, const uint16_t *v,
           const int32_t *cu, areal_k_attn_shape s) {
    constexpr int LD = D + kPad, NT = kBN / 8, DT = D / 8;
    extern __shared__ __align__(16) uint16_t sm[];
    uint16_t *Qs = sm, *Ks = Qs + kBM * LD, *Vs = Ks + kBN * LD;
    const int seq = blockIdx.z, h = blockIdx.y, kh = h / (s.nh / s.nkv);
    const int t0 = cu[seq], L = cu[seq + 1] - t0;
    const int i0 = (int)(gridDim.x - 1 - blockIdx.x) * kBM;
    if (i0 >= L)
        return;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const size_t qd = (size_t)s.nh * D, kvd = (size_t)s.nkv * D;
    load_rows<D>(Qs, q + (size_t)h * D, qd, t0 + i0, min(kBM, L - i0), kBM);

    float o[DT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
        o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
    const float c = s.scale * kLog2e; /* scores in log2 units: exp2f */
    const int row[2] = {i0 + w * 16 + g, i0 + w * 16 + g + 8};
    const int jend = min(L, i0 + kBM); /* no query of the tile sees a key past it */
    for (int j0 = 0; j0 < jend; j0 += kBN) {
        __syncthreads(); /* the previous tile is no longer read */
        load_rows<D>(Ks, k + (size_t)kh * D, kvd, t0 + j0, min(kBN, L - j0), kBN);
        load_rows<D>(Vs, v + (size_t)kh * D, kvd, t0 + j0, min(kBN, L - j0), kBN);
        __syncthreads();
        float sc[NT][4];
#pragma unroll
        for (int nb = 0; nb < NT; nb++)
            sc[nb][0] = sc[nb][1] = sc[nb][2] = sc[nb][3] = 0.0f;
        scores<D, NT>(sc, Qs, w * 16, Ks, g, t);
        const bool edge = j0 + kBN > i0 || j0 + kBN > L; /* the diagonal or the sequence's end */
        float mx[2] = {m[0], m[1]};
#pragma unroll
        for (int nb = 0; nb < NT; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int col = j0 + nb * 8 + 2 * t + (e & 1);
                float x = sc[nb][e] * c;
                if (edge && (col > row[e >> 1] || col >= L))
                    x = -INFINITY;
                sc[nb][e] = x;
                mx[e >> 1] = fmaxf(mx[e >> 1], x);
            }
        float base[2], alpha[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            base[r] = mx[r] == -INFINITY ? 0.0f : mx[r]; /* a row with no key yet: no NaN */
            alpha[r] = exp2f(m[r] - base[r]);
            m[r] = mx[r];
            l[r] *= alpha[r];
        }
#pragma unroll
        for (int nb = 0; nb < NT; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                sc[nb][e] = exp2f(sc[nb][e] - base[e >> 1]);
                l[e >> 1] += sc[nb][e]; /* this thread's columns; the quad sums at the end */
            }
#pragma unroll
        for (int dt = 0; dt < DT; dt++) {
            o[dt][0] *= alpha[0], o[dt][1] *= alpha[0];
            o[dt][2] *= alpha[1], o[dt][3] *= alpha[1];
        }
        times<D, NT>(o, sc, Vs, g, t);
    }
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        inv[r] = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        if (t == 0 && row[r] < L) /* ln(sum exp(scale s)) = (m + log2 l) ln 2 */
            lse[(size_t)(t0 + row[r]) * s.nh + h] = (m[r] + log2f(l[r])) * kLn2;
    }
    store_rows<D>(out + (size_t)t0 * qd + (size_t)h * D, qd, o, row[0], row[1], L, inv[0], inv[1],
                  t);
}

/* dK, dV of a tile of 64 key rows of KV head blockIdx.y, over its query heads */
template <int D>
__global__ void __launch_bounds__(kThreads)
    tc_dkdv(uint16_t *dk, uint16_t *dv, const uint16_t *dout, const float *lse, const float *delta,
            const uint16_t *q, const uint16_t *k, const uint16_t *v, const int32_t *cu,
            areal_k_attn_shape s) {
    constexpr int LD = D + kPad, NT = kBQ / 8, DT = D / 8;
    extern __shared__ __align__(16) uint16_t sm[];
    uint16_t *Ks = sm, *Vs = Ks + kBN * LD, *Qs = Vs + kBN * LD, *Ds = Qs + kBQ * LD;
    float *Ls = reinterpret_cast<float *>(Ds + kBQ * LD), *Es = Ls + kBQ;
    const int seq = blockIdx.z, kh = blockIdx.y, grp = s.nh / s.nkv;
    const int t0 = cu[seq], L = cu[seq + 1] - t0;
    const int j0 = (int)(gridDim.x - 1 - blockIdx.x) * kBN;
    if (j0 >= L)
        return;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const size_t qd = (size_t)s.nh * D, kvd = (size_t)s.nkv * D;
    load_rows<D>(Ks, k + (size_t)kh * D, kvd, t0 + j0, min(kBN, L - j0), kBN);
    load_rows<D>(Vs, v + (size_t)kh * D, kvd, t0 + j0, min(kBN, L - j0), kBN);
    const float c = s.scale * kLog2e;
    const int key[2] = {j0 + w * 16 + g, j0 + w * 16 + g + 8};
    float gk[DT][4], gv[DT][4];
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            gk[dt][e] = gv[dt][e] = 0.0f;
    for (int h = kh * grp; h < (kh + 1) * grp; h++) {
        for (int i0 = j0; i0 < L; i0 += kBQ) { /* queries before j0 see no key of the tile */
            const int nq = min(kBQ, L - i0);
            __syncthreads();
            load_rows<D>(Qs, q + (size_t)h * D, qd, t0 + i0, nq, kBQ);
            load_rows<D>(Ds, dout + (size_t)h * D, qd, t0 + i0, nq, kBQ);
            for (int e = threadIdx.x; e < kBQ; e += kThreads) {
                const size_t r = (size_t)(t0 + i0 + e) * s.nh + h;
                Ls[e] = e < nq ? lse[r] * kLog2e : 0.0f;
                Es[e] = e < nq ? delta[r] : 0.0f;
            }
            __syncthreads();
            /* S^T and dP^T: the warp's 16 keys against the tile's queries */
            float p[NT][4], dp[NT][4];
#pragma unroll
            for (int nb = 0; nb < NT; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    p[nb][e] = dp[nb][e] = 0.0f;
            scores<D, NT>(p, Ks, w * 16, Qs, g, t);
            scores<D, NT>(dp, Vs, w * 16, Ds, g, t);
#pragma unroll
            for (int nb = 0; nb < NT; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int qi = nb * 8 + 2 * t + (e & 1), qpos = i0 + qi;
                    const bool ok = qpos < L && qpos >= key[e >> 1];
                    const float pe = ok ? exp2f(p[nb][e] * c - Ls[qi]) : 0.0f;
                    p[nb][e] = pe;
                    dp[nb][e] = pe * (dp[nb][e] - Es[qi]); /* dS / scale */
                }
            times<D, NT>(gv, p, Ds, g, t);  /* dV += P^T dO */
            times<D, NT>(gk, dp, Qs, g, t); /* dK += dS^T Q (scale at the end) */
        }
    }
    const size_t base = (size_t)t0 * kvd + (size_t)kh * D;
    store_rows<D>(dk + base, kvd, gk, key[0], key[1], L, s.scale, s.scale, t);
    store_rows<D>(dv + base, kvd, gv, key[0], key[1], L, 1.0f, 1.0f, t);
}

/* dQ of a tile of 64 query rows of head blockIdx.y */
template <int D>
__global__ void __launch_bounds__(kThreads)
    tc_dq(uint16_t *dq, const uint16_t *dout, const float *lse, const float *delta,
          const uint16_t *q, const uint16_t *k, const uint16_t *v, const int32_t *cu,
          areal_k_attn_shape s) {
    constexpr int LD = D + kPad, NT = kBN / 8, DT = D / 8;
    extern __shared__ __align__(16) uint16_t sm[];
    uint16_t *Qs = sm, *Ds = Qs + kBM * LD, *Ks = Ds + kBM * LD, *Vs = Ks + kBN * LD;
    const int seq = blockIdx.z, h = blockIdx.y, kh = h / (s.nh / s.nkv);
    const int t0 = cu[seq], L = cu[seq + 1] - t0;
    const int i0 = (int)(gridDim.x - 1 - blockIdx.x) * kBM;
    if (i0 >= L)
        return;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const size_t qd = (size_t)s.nh * D, kvd = (size_t)s.nkv * D;
    const int nq = min(kBM, L - i0);
    load_rows<D>(Qs, q + (size_t)h * D, qd, t0 + i0, nq, kBM);
    load_rows<D>(Ds, dout + (size_t)h * D, qd, t0 + i0, nq, kBM);
    const float c = s.scale * kLog2e;
    const int row[2] = {i0 + w * 16 + g, i0 + w * 16 + g + 8};
    float ls[2], de[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const size_t x = (size_t)(t0 + (row[r] < L ? row[r] : 0)) * s.nh + h;
        ls[r] = lse[x] * kLog2e, de[r] = delta[x];
    }
    float gq[DT][4];
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
        gq[dt][0] = gq[dt][1] = gq[dt][2] = gq[dt][3] = 0.0f;
    const int jend = min(L, i0 + kBM);
    for (int j0 = 0; j0 < jend; j0 += kBN) {
        __syncthreads();
        load_rows<D>(Ks, k + (size_t)kh * D, kvd, t0 + j0, min(kBN, L - j0), kBN);
        load_rows<D>(Vs, v + (size_t)kh * D, kvd, t0 + j0, min(kBN, L - j0), kBN);
        __syncthreads();
        float p[NT][4], dp[NT][4];
#pragma unroll
        for (int nb = 0; nb < NT; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                p[nb][e] = dp[nb][e] = 0.0f;
        scores<D, NT>(p, Qs, w * 16, Ks, g, t);
        scores<D, NT>(dp, Ds, w * 16, Vs, g, t);
#pragma unroll
        for (int nb = 0; nb < NT; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int col = j0 + nb * 8 + 2 * t + (e & 1), r = row[e >> 1];
                const bool ok = r < L && col <= r && col < L;
                const float pe = ok ? exp2f(p[nb][e] * c - ls[e >> 1]) : 0.0f;
                dp[nb][e] = pe * (dp[nb][e] - de[e >> 1]);
            }
        times<D, NT>(gq, dp, Ks, g, t); /* dQ += dS K */
    }
    store_rows<D>(dq + (size_t)t0 * qd + (size_t)h * D, qd, gq, row[0], row[1], L, s.scale, s.scale,
                  t);
}

/* a kernel's dynamic shared memory, allowed past the 48 KiB default */
template <typename K> int smem_ok(K kernel, size_t bytes, const char *fn, areal_error *err) {
    if (bytes <= 48 * 1024)
        return AREAL_OK;
    cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e != cudaSuccess)
        return areal_error_set(err, AREAL_EIO, -1, "%s: %zu bytes of shared memory: %s", fn, bytes,
                               cudaGetErrorString(e));
    return AREAL_OK;
}

dim3 dims(const unsigned g[3]) {
    return dim3(g[0], g[1], g[2]);
}

template <int D>
int run_fwd(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k, const uint16_t *v,
            const int32_t *cu, areal_k_attn_shape s, const areal_k_attn_plan &p, cudaStream_t st,
            areal_error *err) {
    int rc = smem_ok(tc_fwd<D>, p.smem_fwd, "areal_k_attn_tc_fwd", err);
    if (rc != AREAL_OK)
        return rc;
    tc_fwd<D><<<dims(p.grid_fwd), kThreads, p.smem_fwd, st>>>(out, lse, q, k, v, cu, s);
    return kutil::launched("areal_k_attn_tc_fwd", err);
}

template <int D>
int run_bwd(uint16_t *dq, uint16_t *dk, uint16_t *dv, const float *delta, const uint16_t *dout,
            const float *lse, const uint16_t *q, const uint16_t *k, const uint16_t *v,
            const int32_t *cu, areal_k_attn_shape s, const areal_k_attn_plan &p, cudaStream_t st,
            areal_error *err) {
    int rc = smem_ok(tc_dkdv<D>, p.smem_dkdv, "areal_k_attn_tc_bwd", err);
    if (rc == AREAL_OK)
        rc = smem_ok(tc_dq<D>, p.smem_dq, "areal_k_attn_tc_bwd", err);
    if (rc != AREAL_OK)
        return rc;
    tc_dkdv<D><<<dims(p.grid_dkdv), kThreads, p.smem_dkdv, st>>>(dk, dv, dout, lse, delta, q, k, v,
                                                                 cu, s);
    rc = kutil::launched("areal_k_attn_tc_bwd (dk, dv)", err);
    if (rc != AREAL_OK)
        return rc;
    tc_dq<D><<<dims(p.grid_dq), kThreads, p.smem_dq, st>>>(dq, dout, lse, delta, q, k, v, cu, s);
    return kutil::launched("areal_k_attn_tc_bwd (dq)", err);
}

/* the plan, AREAL_EINVAL when the tensor-core kernels cannot serve s or a
 * buffer is not 16-byte aligned (their tile loads are 16 bytes wide) */
int tc_plan(const char *fn, const void *const *bufs, int n, areal_k_attn_shape s,
            areal_k_attn_plan *p, areal_error *err) {
    for (int i = 0; i < n; i++) {
        if (bufs[i] == NULL)
            return areal_error_set(err, AREAL_EINVAL, -1, "%s: NULL buffer (argument %d)", fn,
                                   i + 1);
        if (((uintptr_t)bufs[i] & 15u) != 0)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "%s: buffer %d is not 16-byte aligned (use the scalar kernel)",
                                   fn, i + 1);
    }
    int rc = areal_k_attn_plan_make(s, p, err);
    if (rc == AREAL_OK && !p->tc)
        rc = areal_error_set(err, AREAL_EINVAL, -1, "%s: hd %d: %s", fn, s.hd, p->why);
    return rc;
}

} // namespace

extern "C" int areal_k_attn_tc_fwd(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k,
                                   const uint16_t *v, const int32_t *cu, areal_k_attn_shape s,
                                   void *stream, areal_error *err) {
    if (s.T == 0 || s.n_seqs == 0 || s.max_len == 0)
        return AREAL_OK;
    areal_k_attn_plan p;
    const void *bufs[] = {out, q, k, v};
    int rc = tc_plan("areal_k_attn_tc_fwd", bufs, 4, s, &p, err);
    if (rc == AREAL_OK && (lse == NULL || cu == NULL))
        rc = areal_error_set(err, AREAL_EINVAL, -1, "areal_k_attn_tc_fwd: NULL lse or cu");
    if (rc != AREAL_OK)
        return rc;
    cudaStream_t st = (cudaStream_t)stream;
    if (s.hd == 64)
        return run_fwd<64>(out, lse, q, k, v, cu, s, p, st, err);
    return run_fwd<128>(out, lse, q, k, v, cu, s, p, st, err);
}

extern "C" int areal_k_attn_tc_bwd(uint16_t *dq, uint16_t *dk, uint16_t *dv, float *delta,
                                   const uint16_t *dout, const uint16_t *out, const float *lse,
                                   const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                   const int32_t *cu, areal_k_attn_shape s, void *stream,
                                   areal_error *err) {
    if (s.T == 0 || s.n_seqs == 0 || s.max_len == 0)
        return AREAL_OK;
    areal_k_attn_plan p;
    const void *bufs[] = {dq, dk, dv, dout, q, k, v};
    int rc = tc_plan("areal_k_attn_tc_bwd", bufs, 7, s, &p, err);
    if (rc == AREAL_OK && (delta == NULL || out == NULL || lse == NULL || cu == NULL))
        rc = areal_error_set(err, AREAL_EINVAL, -1,
                             "areal_k_attn_tc_bwd: NULL delta, out, lse or cu");
    if (rc != AREAL_OK)
        return rc;
    cudaStream_t st = (cudaStream_t)stream;
    rc = kattn::launch_delta(delta, dout, out, (size_t)s.T * s.nh, s.hd, st, err);
    if (rc != AREAL_OK)
        return rc;
    if (s.hd == 64)
        return run_bwd<64>(dq, dk, dv, delta, dout, lse, q, k, v, cu, s, p, st, err);
    return run_bwd<128>(dq, dk, dv, delta, dout, lse, q, k, v, cu, s, p, st, err);
}
