/*
 * k_rmsnorm.cu - RMSNorm forward and backward on bf16 rows (areal/kernels/layers.h).
 *
 * One block of 256 threads per row; the sums are fp32 block reductions (the
 * CPU twin sums in double; over D <= 16k the difference is far below bf16's
 * resolution). dw is reduced per block over a strip of rows in registers and
 * added with one atomicAdd per column per block, so the atomics scale with
 * D * blocks, not D * rows. Rejected: a two-pass dw (partials buffer then a
 * column sum), which needs a scratch buffer the caller would have to size.
 */
#include "areal/kernels/layers.h"

#include "k_util.cuh"

namespace {

__global__ void rms_fwd(uint16_t *y, float *rstd, const uint16_t *x, const uint16_t *w, size_t rows,
                        int D, float eps) {
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const size_t base = r * (size_t)D;
        float ss = 0.0f;
        for (int i = threadIdx.x; i < D; i += blockDim.x) {
            float v = kutil::ld(x, base + i);
            ss += v * v;
        }
        ss = kutil::block_sum(ss);
        float rs = rsqrtf(ss / (float)D + eps);
        if (rstd != NULL && threadIdx.x == 0)
            rstd[r] = rs;
        for (int i = threadIdx.x; i < D; i += blockDim.x)
            kutil::st(y, base + i, kutil::ld(w, i) * (kutil::ld(x, base + i) * rs));
    }
}

/* dx = dy*w*rs - x * (sum(dy*w*x)/D) * rs^3; dw += dy * x * rs */
__global__ void rms_bwd(uint16_t *dx, float *dw, const uint16_t *dy, const uint16_t *x,
                        const uint16_t *w, const float *rstd, size_t rows, int D) {
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const size_t base = r * (size_t)D;
        const float rs = rstd[r];
        float dot = 0.0f;
        for (int i = threadIdx.x; i < D; i += blockDim.x)
            dot += kutil::ld(dy, base + i) * kutil::ld(w, i) * kutil::ld(x, base + i);
        dot = kutil::block_sum(dot);
        const float c2 = dot / (float)D * rs * rs * rs;
        for (int i = threadIdx.x; i < D; i += blockDim.x) {
            float g = kutil::ld(dy, base + i), xv = kutil::ld(x, base + i);
            kutil::st(dx, base + i, g * kutil::ld(w, i) * rs - xv * c2);
        }
    }
    if (dw == NULL)
        return;
    /* this block's rows, column by column: one atomic per column per block */
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
        float acc = 0.0f;
        for (size_t r = blockIdx.x; r < rows; r += gridDim.x)
            acc += kutil::ld(dy, r * (size_t)D + i) * kutil::ld(x, r * (size_t)D + i) * rstd[r];
        atomicAdd(&dw[i], acc);
    }
}

unsigned row_blocks(size_t rows) {
    return (unsigned)(rows < 4096 ? rows : 4096);
}

} // namespace

extern "C" int areal_k_rmsnorm_fwd(uint16_t *y, float *rstd, const uint16_t *x, const uint16_t *w,
                                   size_t rows, int D, float eps, void *stream, areal_error *err) {
    if (rows == 0)
        return AREAL_OK;
    if (y == NULL || x == NULL || w == NULL || D < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "areal_k_rmsnorm_fwd: NULL buffer or D %d < 1 (rows %zu)", D, rows);
    rms_fwd<<<row_blocks(rows), kutil::kThreads, 0, (cudaStream_t)stream>>>(y, rstd, x, w, rows, D,
                                                                            eps);
    return kutil::launched("areal_k_rmsnorm_fwd", err);
}

extern "C" int areal_k_rmsnorm_bwd(uint16_t *dx, float *dw, const uint16_t *dy, const uint16_t *x,
                                   const uint16_t *w, const float *rstd, size_t rows, int D,
                                   void *stream, areal_error *err) {
    if (rows == 0)
        return AREAL_OK;
    if (dx == NULL || dy == NULL || x == NULL || w == NULL || rstd == NULL || D < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "areal_k_rmsnorm_bwd: NULL buffer or D %d < 1 (rows %zu)", D, rows);
    rms_bwd<<<row_blocks(rows), kutil::kThreads, 0, (cudaStream_t)stream>>>(dx, dw, dy, x, w, rstd,
                                                                            rows, D);
    return kutil::launched("areal_k_rmsnorm_bwd", err);
}
