/*
 * k_logprob.cu - the fused log-softmax / logprob / entropy over the vocabulary
 * (areal/kernels/vocab.h).
 *
 * Forward: one block per row, one read of the row (the online softmax of
 * k_softmax.cuh gives logZ and H with no second pass). Backward: one block
 * per row, one read and one write of the row. Rejected: Liger-style fusion
 * with the LM-head GEMM (needs our own GEMM tiles; cuBLASLt + chunked rows
 * get most of the memory saving).
 */
#include "areal/kernels/vocab.h"

#include "k_softmax.cuh"

namespace {

__global__ void lp_fwd(float *logprob, float *entropy, float *logz, const uint16_t *logits,
                       size_t ld, const int32_t *target, size_t rows, int V, float inv_t) {
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const uint16_t *row = logits + r * ld;
        ksoft::online o = ksoft::row_softmax(row, V, inv_t);
        if (threadIdx.x == 0) {
            float lz = o.m + logf(o.s);
            if (logz != NULL)
                logz[r] = lz;
            if (entropy != NULL)
                entropy[r] = lz - o.t / o.s;
            logprob[r] = kutil::ld(row, target[r]) * inv_t - lz;
        }
    }
}

__global__ void lp_bwd(uint16_t *dlogits, const uint16_t *logits, size_t ld, const int32_t *target,
                       const float *logz, const float *entropy, const float *g_lp,
                       const float *g_ent, size_t rows, int V, float inv_t) {
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const uint16_t *row = logits + r * ld;
        uint16_t *drow = dlogits + r * ld;
        const float lz = logz[r], glp = g_lp != NULL ? g_lp[r] : 0.0f;
        const float gent = g_ent != NULL ? g_ent[r] : 0.0f;
        const float H = g_ent != NULL ? entropy[r] : 0.0f;
        const int tg = target[r];
        for (int i = threadIdx.x; i < V; i += blockDim.x) {
            float lp = kutil::ld(row, i) * inv_t - lz, p = __expf(lp);
            float d = glp * ((i == tg ? 1.0f : 0.0f) - p) - (p > 0.0f ? gent * p * (lp + H) : 0.0f);
            kutil::st(drow, i, d * inv_t);
        }
    }
}

unsigned row_blocks(size_t rows) {
    return (unsigned)(rows < 8192 ? rows : 8192);
}

} // namespace

extern "C" int areal_k_logprob_fwd(float *logprob, float *entropy, float *logz,
                                   const uint16_t *logits, size_t ld, const int32_t *target,
                                   size_t rows, int V, float temp, void *stream, areal_error *err) {
    if (rows == 0)
        return AREAL_OK;
    if (logprob == NULL || logits == NULL || target == NULL || V < 1 || ld < (size_t)V ||
        !(temp > 0.0f))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "areal_k_logprob_fwd: NULL buffer or bad shape/temperature "
                               "(V %d, ld %zu, temp %g; need V >= 1, ld >= V, temp > 0)",
                               V, ld, (double)temp);
    lp_fwd<<<row_blocks(rows), kutil::kThreads, 0, (cudaStream_t)stream>>>(
        logprob, entropy, logz, logits, ld, target, rows, V, 1.0f / temp);
    return kutil::launched("areal_k_logprob_fwd", err);
}

extern "C" int areal_k_logprob_bwd(uint16_t *dlogits, const uint16_t *logits, size_t ld,
                                   const int32_t *target, const float *logz, const float *entropy,
                                   const float *g_lp, const float *g_ent, size_t rows, int V,
                                   float temp, void *stream, areal_error *err) {
    if (rows == 0)
        return AREAL_OK;
    if (dlogits == NULL || logits == NULL || target == NULL || logz == NULL ||
        (g_ent != NULL && entropy == NULL) || V < 1 || ld < (size_t)V || !(temp > 0.0f))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "areal_k_logprob_bwd: NULL buffer (entropy is needed with g_ent) "
                               "or bad shape/temperature (V %d, ld %zu, temp %g)",
                               V, ld, (double)temp);
    lp_bwd<<<row_blocks(rows), kutil::kThreads, 0, (cudaStream_t)stream>>>(
        dlogits, logits, ld, target, logz, entropy, g_lp, g_ent, rows, V, 1.0f / temp);
    return kutil::launched("areal_k_logprob_bwd", err);
}
