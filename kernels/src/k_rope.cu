/*
 * k_rope.cu - rotate-half RoPE in place on bf16 [T, nh, hd] (areal/kernels/layers.h).
 *
 * One thread per (t, h, i < hd/2) pair: it reads x[i] and x[i + hd/2] and
 * writes both, so pairs never race. The angle is fp32 pos * inv_freq with
 * sincosf, as the CPU twin computes it (same operands, so the angles agree to
 * fp32 rounding of sin/cos). Rejected: a cos/sin table per position (saves the
 * sincos but costs a buffer the caller must keep in step with the positions).
 */
#include "areal/kernels/layers.h"

#include "k_util.cuh"

namespace {

__global__ void rope(uint16_t *x, const int32_t *pos, const float *inv_freq, int T, int nh, int hd,
                     float sign) {
    const int half = hd / 2;
    const size_t n = (size_t)T * nh * half;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(k % half);
        size_t th = k / half; /* t * nh + h */
        int t = (int)(th / nh);
        float s, c;
        sincosf((float)pos[t] * inv_freq[i], &s, &c);
        s *= sign;
        size_t b = th * hd;
        float x1 = kutil::ld(x, b + i), x2 = kutil::ld(x, b + i + half);
        kutil::st(x, b + i, x1 * c - x2 * s);
        kutil::st(x, b + i + half, x2 * c + x1 * s);
    }
}

int launch(const char *what, uint16_t *x, const int32_t *pos, const float *inv_freq, int T, int nh,
           int hd, float sign, void *stream, areal_error *err) {
    if (T == 0 || nh == 0)
        return AREAL_OK;
    if (x == NULL || pos == NULL || inv_freq == NULL || T < 0 || nh < 0 || hd < 2 || hd % 2)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: NULL buffer or bad shape T %d nh %d hd %d (hd must be even)",
                               what, T, nh, hd);
    size_t n = (size_t)T * nh * (hd / 2);
    rope<<<kutil::blocks_for(n), kutil::kThreads, 0, (cudaStream_t)stream>>>(x, pos, inv_freq, T,
                                                                             nh, hd, sign);
    return kutil::launched(what, err);
}

} // namespace

extern "C" int areal_k_rope_fwd(uint16_t *x, const int32_t *pos, const float *inv_freq, int T,
                                int nh, int hd, void *stream, areal_error *err) {
    return launch("areal_k_rope_fwd", x, pos, inv_freq, T, nh, hd, 1.0f, stream, err);
}

extern "C" int areal_k_rope_bwd(uint16_t *dx, const int32_t *pos, const float *inv_freq, int T,
                                int nh, int hd, void *stream, areal_error *err) {
    return launch("areal_k_rope_bwd", dx, pos, inv_freq, T, nh, hd, -1.0f, stream, err);
}
