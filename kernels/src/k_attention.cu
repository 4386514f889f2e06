/*
 * k_attention.cu - flash-style causal GQA attention over packed sequences
 * (areal/kernels/attention.h), forward and backward: the scalar kernels
 * (areal_k_attn_ref_fwd / _bwd, every hd up to 256: the reference the
 * tensor-core kernels of k_attention_tc.cu are tested against, and the
 * fallback for the shapes those do not serve), and areal_k_attn_fwd / _bwd,
 * which pick between the two.
 *
 * Work split (the same in all three kernels): a block is one sequence, one
 * head and a strip of 16 rows (4 warps x 4 rows, rows interleaved across
 * warps so the causal triangle loads them evenly). The other side of the
 * product streams through shared memory in tiles of 32 rows widened to fp32,
 * and lane l of a warp owns row l of the tile: it computes one score with a
 * full dot product over hd (tile rows padded to hd + 1 floats, so the 32
 * lanes read 32 banks), the warp folds the 32 scores with shuffles (online
 * softmax in the forward), and the products with the other operand are
 * accumulated with lane l owning columns l, l + 32, ... of hd (NPL of them,
 * in registers). Backward is FlashAttention-2's: delta = rowsum(dO * O),
 * then one kernel for dK/dV (a block owns key rows and loops over the query
 * heads of its KV group, so GQA needs no atomics) and one for dQ.
 *
 * The scalar kernels use no tensor cores on purpose: a kernel that is
 * obviously right is what the fast one (k_attention_tc.cu, mma.sync tiles)
 * is tested against; this is that kernel. The dispatch sends hd 64 / 128
 * with 16-byte aligned buffers to the tensor cores, all else here.
 */
#include "areal/kernels/attention.h"
#include "areal/kernels/attention_plan.h"

#include <math.h>

#include "k_attn_common.cuh"
#include "k_util.cuh"

namespace {

constexpr int kWarps = 4, kRows = 4, kStrip = kWarps * kRows, kTile = 32;

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

/* rows [r0, r0 + n) of a [*, ld] bf16 matrix at column c0, hd wide, into
 * dst [n][stride] fp32 (rows past `valid` zeroed); the whole block cooperates */
__device__ void load_tile(float *dst, int stride, const uint16_t *src, size_t ld, int r0, int n,
                          int valid, int c0, int hd) {
    for (int e = threadIdx.x; e < n * hd; e += blockDim.x) {
        int r = e / hd, c = e % hd;
        dst[r * stride + c] = r < valid ? kutil::ld(src, (size_t)(r0 + r) * ld + c0 + c) : 0.0f;
    }
}

/* the strip's row of warp w, slot r: interleaved so every warp gets early and late rows */
__device__ __forceinline__ int strip_row(int r, int w) {
    return r * kWarps + w;
}

template <int NPL>
__global__ void fwd(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k,
                    const uint16_t *v, const int32_t *cu, areal_k_attn_shape s) {
    extern __shared__ float sm[];
    const int hd = s.hd, seq = blockIdx.z, h = blockIdx.y, kh = h / (s.nh / s.nkv);
    const int t0 = cu[seq], L = cu[seq + 1] - t0, i0 = blockIdx.x * kStrip;
    if (i0 >= L)
        return;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, kp = hd + 1;
    const size_t qd = (size_t)s.nh * hd, kvd = (size_t)s.nkv * hd;
    float *Ks = sm, *Vs = Ks + kTile * kp, *Qs = Vs + kTile * hd;
    const int nq = min(kStrip, L - i0);
    load_tile(Qs, hd, q, qd, t0 + i0, kStrip, nq, h * hd, hd);

    float m[kRows], l[kRows], o[kRows][NPL];
#pragma unroll
    for (int r = 0; r < kRows; r++) {
        m[r] = -INFINITY, l[r] = 0.0f;
        for (int c = 0; c < NPL; c++)
            o[r][c] = 0.0f;
    }
    const int last = i0 + nq - 1; /* no row of the strip sees a key past it */
    for (int j0 = 0; j0 <= last; j0 += kTile) {
        const int nk = min(kTile, L - j0);
        __syncthreads(); /* the previous tile is no longer read */
        load_tile(Ks, kp, k, kvd, t0 + j0, kTile, nk, kh * hd, hd);
        load_tile(Vs, hd, v, kvd, t0 + j0, kTile, nk, kh * hd, hd);
        __syncthreads();
#pragma unroll
        for (int r = 0; r < kRows; r++) {
            const int sr = strip_row(r, w), i = i0 + sr;
            if (sr >= nq || j0 > i)
                continue; /* uniform over the warp */
            const int j = j0 + lane;
            const bool ok = j <= i && lane < nk;
            float sc = -INFINITY;
            if (ok) {
                float d = 0.0f;
                const float *qr = Qs + sr * hd, *kr = Ks + lane * kp;
                for (int c = 0; c < hd; c++)
                    d += qr[c] * kr[c];
                sc = d * s.scale;
            }
            const float mn = fmaxf(m[r], warp_max(sc)); /* finite: key j0 <= i is valid */
            const float corr = expf(m[r] - mn), p = ok ? expf(sc - mn) : 0.0f;
            l[r] = l[r] * corr + warp_sum(p);
            m[r] = mn;
            for (int c = 0; c < NPL; c++)
                o[r][c] *= corr;
            const int upto = min(nk, i - j0 + 1);
            for (int jj = 0; jj < upto; jj++) {
                const float pj = __shfl_sync(0xffffffffu, p, jj);
                for (int c = 0; c < NPL; c++) {
                    const int col = lane + 32 * c;
                    if (col < hd)
                        o[r][c] += pj * Vs[jj * hd + col];
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < kRows; r++) {
        const int sr = strip_row(r, w);
        if (sr >= nq)
            continue;
        const size_t t = (size_t)(t0 + i0 + sr);
        const float inv = 1.0f / l[r];
        for (int c = 0; c < NPL; c++) {
            const int col = lane + 32 * c;
            if (col < hd)
                kutil::st(out, t * qd + (size_t)h * hd + col, o[r][c] * inv);
        }
        if (lane == 0)
            lse[t * s.nh + h] = m[r] + logf(l[r]);
    }
}

/* dK, dV for a strip of key rows of one KV head, over every query head of its group */
template <int NPL>
__global__ void bwd_dkdv(uint16_t *dk, uint16_t *dv, const uint16_t *dout, const float *lse,
                         const float *delta, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, const int32_t *cu, areal_k_attn_shape s) {
    extern __shared__ float sm[];
    const int hd = s.hd, seq = blockIdx.z, kh = blockIdx.y, grp = s.nh / s.nkv;
    const int t0 = cu[seq], L = cu[seq + 1] - t0, j0 = blockIdx.x * kStrip;
    if (j0 >= L)
        return;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, qp = hd + 1;
    const size_t qd = (size_t)s.nh * hd, kvd = (size_t)s.nkv * hd;
    float *Qs = sm, *Ds = Qs + kTile * qp, *Ks = Ds + kTile * qp, *Vs = Ks + kStrip * hd;
    float *Ls = Vs + kStrip * hd, *Es = Ls + kTile;
    const int nk = min(kStrip, L - j0);
    load_tile(Ks, hd, k, kvd, t0 + j0, kStrip, nk, kh * hd, hd);
    load_tile(Vs, hd, v, kvd, t0 + j0, kStrip, nk, kh * hd, hd);

    float gk[kRows][NPL], gv[kRows][NPL];
#pragma unroll
    for (int r = 0; r < kRows; r++)
        for (int c = 0; c < NPL; c++)
            gk[r][c] = gv[r][c] = 0.0f;
    for (int h = kh * grp; h < (kh + 1) * grp; h++) {
        for (int i0 = (j0 / kTile) * kTile; i0 < L; i0 += kTile) {
            const int nq = min(kTile, L - i0);
            __syncthreads();
            load_tile(Qs, qp, q, qd, t0 + i0, kTile, nq, h * hd, hd);
            load_tile(Ds, qp, dout, qd, t0 + i0, kTile, nq, h * hd, hd);
            for (int e = threadIdx.x; e < kTile; e += blockDim.x) {
                const size_t t = (size_t)(t0 + i0 + e) * s.nh + h;
                Ls[e] = e < nq ? lse[t] : 0.0f;
                Es[e] = e < nq ? delta[t] : 0.0f;
            }
            __syncthreads();
#pragma unroll
            for (int r = 0; r < kRows; r++) {
                const int sr = strip_row(r, w), j = j0 + sr;
                if (sr >= nk || i0 + nq - 1 < j)
                    continue;
                const int i = i0 + lane;
                const bool ok = lane < nq && i >= j;
                float p = 0.0f, ds = 0.0f;
                if (ok) {
                    const float *qr = Qs + lane * qp, *dr = Ds + lane * qp;
                    const float *kr = Ks + sr * hd, *vr = Vs + sr * hd;
                    float sc = 0.0f, dp = 0.0f;
                    for (int c = 0; c < hd; c++) {
                        sc += qr[c] * kr[c];
                        dp += dr[c] * vr[c];
                    }
                    p = expf(sc * s.scale - Ls[lane]);
                    ds = p * (dp - Es[lane]) * s.scale;
                }
                for (int ii = max(0, j - i0); ii < nq; ii++) {
                    const float pi = __shfl_sync(0xffffffffu, p, ii);
                    const float di = __shfl_sync(0xffffffffu, ds, ii);
                    for (int c = 0; c < NPL; c++) {
                        const int col = lane + 32 * c;
                        if (col < hd) {
                            gv[r][c] += pi * Ds[ii * qp + col];
                            gk[r][c] += di * Qs[ii * qp + col];
                        }
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < kRows; r++) {
        const int sr = strip_row(r, w);
        if (sr >= nk)
            continue;
        const size_t base = (size_t)(t0 + j0 + sr) * kvd + (size_t)kh * hd;
        for (int c = 0; c < NPL; c++) {
            const int col = lane + 32 * c;
            if (col < hd) {
                kutil::st(dk, base + col, gk[r][c]);
                kutil::st(dv, base + col, gv[r][c]);
            }
        }
    }
}

/* dQ for a strip of query rows of one head */
template <int NPL>
__global__ void bwd_dq(uint16_t *dq, const uint16_t *dout, const float *lse, const float *delta,
                       const uint16_t *q, const uint16_t *k, const uint16_t *v, const int32_t *cu,
                       areal_k_attn_shape s) {
    extern __shared__ float sm[];
    const int hd = s.hd, seq = blockIdx.z, h = blockIdx.y, kh = h / (s.nh / s.nkv);
    const int t0 = cu[seq], L = cu[seq + 1] - t0, i0 = blockIdx.x * kStrip;
    if (i0 >= L)
        return;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, kp = hd + 1;
    const size_t qd = (size_t)s.nh * hd, kvd = (size_t)s.nkv * hd;
    float *Ks = sm, *Vs = Ks + kTile * kp, *Qs = Vs + kTile * kp, *Ds = Qs + kStrip * hd;
    const int nq = min(kStrip, L - i0);
    load_tile(Qs, hd, q, qd, t0 + i0, kStrip, nq, h * hd, hd);
    load_tile(Ds, hd, dout, qd, t0 + i0, kStrip, nq, h * hd, hd);
    float g[kRows][NPL], rl[kRows], rd[kRows];
#pragma unroll
    for (int r = 0; r < kRows; r++) {
        const int sr = strip_row(r, w);
        const size_t t = (size_t)(t0 + i0 + (sr < nq ? sr : 0)) * s.nh + h;
        rl[r] = lse[t], rd[r] = delta[t];
        for (int c = 0; c < NPL; c++)
            g[r][c] = 0.0f;
    }
    const int last = i0 + nq - 1;
    for (int j0 = 0; j0 <= last; j0 += kTile) {
        const int nk = min(kTile, L - j0);
        __syncthreads();
        load_tile(Ks, kp, k, kvd, t0 + j0, kTile, nk, kh * hd, hd);
        load_tile(Vs, kp, v, kvd, t0 + j0, kTile, nk, kh * hd, hd);
        __syncthreads();
#pragma unroll
        for (int r = 0; r < kRows; r++) {
            const int sr = strip_row(r, w), i = i0 + sr;
            if (sr >= nq || j0 > i)
                continue;
            const int j = j0 + lane;
            const bool ok = lane < nk && j <= i;
            float ds = 0.0f;
            if (ok) {
                const float *qr = Qs + sr * hd, *dr = Ds + sr * hd;
                const float *kr = Ks + lane * kp, *vr = Vs + lane * kp;
                float sc = 0.0f, dp = 0.0f;
                for (int c = 0; c < hd; c++) {
                    sc += qr[c] * kr[c];
                    dp += dr[c] * vr[c];
                }
                const float p = expf(sc * s.scale - rl[r]);
                ds = p * (dp - rd[r]) * s.scale;
            }
            const int upto = min(nk, i - j0 + 1);
            for (int jj = 0; jj < upto; jj++) {
                const float dj = __shfl_sync(0xffffffffu, ds, jj);
                for (int c = 0; c < NPL; c++) {
                    const int col = lane + 32 * c;
                    if (col < hd)
                        g[r][c] += dj * Ks[jj * kp + col];
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < kRows; r++) {
        const int sr = strip_row(r, w);
        if (sr >= nq)
            continue;
        const size_t base = (size_t)(t0 + i0 + sr) * qd + (size_t)h * hd;
        for (int c = 0; c < NPL; c++) {
            const int col = lane + 32 * c;
            if (col < hd)
                kutil::st(dq, base + col, g[r][c]);
        }
    }
}

int check(const char *fn, const void *a, const void *b, const void *c, const void *d,
          const int32_t *cu, areal_k_attn_shape s, areal_error *err) {
    if (a == NULL || b == NULL || c == NULL || d == NULL || cu == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "%s: NULL buffer", fn);
    if (s.nh < 1 || s.nkv < 1 || s.nh % s.nkv != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: nh %d must be a positive multiple of nkv %d", fn, s.nh, s.nkv);
    if (s.hd < 1 || s.hd > 256)
        return areal_error_set(err, AREAL_EINVAL, -1, "%s: hd %d outside 1..256", fn, s.hd);
    if (s.T < 0 || s.n_seqs < 0 || s.max_len < 0 || s.n_seqs > 65535 || s.nh > 65535)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: T %d, n_seqs %d, max_len %d or nh %d out of range", fn, s.T,
                               s.n_seqs, s.max_len, s.nh);
    return AREAL_OK;
}

/* a kernel's dynamic shared memory, allowed past the 48 KiB default when it needs it */
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

template <int NPL>
int run_fwd(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k, const uint16_t *v,
            const int32_t *cu, areal_k_attn_shape s, cudaStream_t st, areal_error *err) {
    const int hd = s.hd;
    size_t sm = sizeof(float) * ((size_t)kTile * (hd + 1) + (size_t)kTile * hd + kStrip * hd);
    int rc = smem_ok(fwd<NPL>, sm, "areal_k_attn_fwd", err);
    if (rc != AREAL_OK)
        return rc;
    dim3 grid((unsigned)((s.max_len + kStrip - 1) / kStrip), (unsigned)s.nh, (unsigned)s.n_seqs);
    fwd<NPL><<<grid, kWarps * 32, sm, st>>>(out, lse, q, k, v, cu, s);
    return kutil::launched("areal_k_attn_fwd", err);
}

template <int NPL>
int run_bwd(uint16_t *dq, uint16_t *dk, uint16_t *dv, const float *delta, const uint16_t *dout,
            const float *lse, const uint16_t *q, const uint16_t *k, const uint16_t *v,
            const int32_t *cu, areal_k_attn_shape s, cudaStream_t st, areal_error *err) {
    const int hd = s.hd;
    size_t sm_kv =
        sizeof(float) * (2 * (size_t)kTile * (hd + 1) + 2 * (size_t)kStrip * hd + 2 * kTile);
    size_t sm_q = sizeof(float) * (2 * (size_t)kTile * (hd + 1) + 2 * (size_t)kStrip * hd);
    int rc = smem_ok(bwd_dkdv<NPL>, sm_kv, "areal_k_attn_bwd", err);
    if (rc == AREAL_OK)
        rc = smem_ok(bwd_dq<NPL>, sm_q, "areal_k_attn_bwd", err);
    if (rc != AREAL_OK)
        return rc;
    const unsigned strips = (unsigned)((s.max_len + kStrip - 1) / kStrip);
    bwd_dkdv<NPL><<<dim3(strips, (unsigned)s.nkv, (unsigned)s.n_seqs), kWarps * 32, sm_kv, st>>>(
        dk, dv, dout, lse, delta, q, k, v, cu, s);
    rc = kutil::launched("areal_k_attn_bwd (dk, dv)", err);
    if (rc != AREAL_OK)
        return rc;
    bwd_dq<NPL><<<dim3(strips, (unsigned)s.nh, (unsigned)s.n_seqs), kWarps * 32, sm_q, st>>>(
        dq, dout, lse, delta, q, k, v, cu, s);
    return kutil::launched("areal_k_attn_bwd (dq)", err);
}

} // namespace

extern "C" int areal_k_attn_ref_fwd(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k,
                                    const uint16_t *v, const int32_t *cu, areal_k_attn_shape s,
                                    void *stream, areal_error *err) {
    if (s.T == 0 || s.n_seqs == 0 || s.max_len == 0)
        return AREAL_OK;
    int rc = check("areal_k_attn_fwd", out, q, k, v, cu, s, err);
    if (rc == AREAL_OK && lse == NULL)
        rc = areal_error_set(err, AREAL_EINVAL, -1, "areal_k_attn_fwd: NULL lse");
    if (rc != AREAL_OK)
        return rc;
    cudaStream_t st = (cudaStream_t)stream;
    if (s.hd <= 32)
        return run_fwd<1>(out, lse, q, k, v, cu, s, st, err);
    if (s.hd <= 64)
        return run_fwd<2>(out, lse, q, k, v, cu, s, st, err);
    if (s.hd <= 128)
        return run_fwd<4>(out, lse, q, k, v, cu, s, st, err);
    return run_fwd<8>(out, lse, q, k, v, cu, s, st, err);
}

extern "C" int areal_k_attn_ref_bwd(uint16_t *dq, uint16_t *dk, uint16_t *dv, float *delta,
                                    const uint16_t *dout, const uint16_t *out, const float *lse,
                                    const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                    const int32_t *cu, areal_k_attn_shape s, void *stream,
                                    areal_error *err) {
    if (s.T == 0 || s.n_seqs == 0 || s.max_len == 0)
        return AREAL_OK;
    int rc = check("areal_k_attn_bwd", q, k, v, dout, cu, s, err);
    if (rc == AREAL_OK &&
        (dq == NULL || dk == NULL || dv == NULL || delta == NULL || out == NULL || lse == NULL))
        rc = areal_error_set(err, AREAL_EINVAL, -1,
                             "areal_k_attn_bwd: NULL dq, dk, dv, delta, out or lse");
    if (rc != AREAL_OK)
        return rc;
    cudaStream_t st = (cudaStream_t)stream;
    rc = kattn::launch_delta(delta, dout, out, (size_t)s.T * s.nh, s.hd, st, err);
    if (rc != AREAL_OK)
        return rc;
    if (s.hd <= 32)
        return run_bwd<1>(dq, dk, dv, delta, dout, lse, q, k, v, cu, s, st, err);
    if (s.hd <= 64)
        return run_bwd<2>(dq, dk, dv, delta, dout, lse, q, k, v, cu, s, st, err);
    if (s.hd <= 128)
        return run_bwd<4>(dq, dk, dv, delta, dout, lse, q, k, v, cu, s, st, err);
    return run_bwd<8>(dq, dk, dv, delta, dout, lse, q, k, v, cu, s, st, err);
}

/* the tensor-core kernels serve s with these buffers: hd 64 or 128 (the plan)
 * and every buffer 16-byte aligned (their tile loads are 16 bytes wide) */
static bool tc_serves(areal_k_attn_shape s, const void *const *bufs, int n) {
    areal_k_attn_plan p;
    areal_error e;
    areal_error_clear(&e);
    if (areal_k_attn_plan_make(s, &p, &e) != AREAL_OK || !p.tc)
        return false;
    for (int i = 0; i < n; i++)
        if (bufs[i] == NULL || ((uintptr_t)bufs[i] & 15u) != 0)
            return false;
    return true;
}

extern "C" int areal_k_attn_fwd(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k,
                                const uint16_t *v, const int32_t *cu, areal_k_attn_shape s,
                                void *stream, areal_error *err) {
    const void *bufs[] = {out, q, k, v};
    if (tc_serves(s, bufs, 4))
        return areal_k_attn_tc_fwd(out, lse, q, k, v, cu, s, stream, err);
    return areal_k_attn_ref_fwd(out, lse, q, k, v, cu, s, stream, err);
}

extern "C" int areal_k_attn_bwd(uint16_t *dq, uint16_t *dk, uint16_t *dv, float *delta,
                                const uint16_t *dout, const uint16_t *out, const float *lse,
                                const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                const int32_t *cu, areal_k_attn_shape s, void *stream,
                                areal_error *err) {
    const void *bufs[] = {dq, dk, dv, dout, q, k, v};
    if (tc_serves(s, bufs, 7))
        return areal_k_attn_tc_bwd(dq, dk, dv, delta, dout, out, lse, q, k, v, cu, s, stream, err);
    return areal_k_attn_ref_bwd(dq, dk, dv, delta, dout, out, lse, q, k, v, cu, s, stream, err);
}
