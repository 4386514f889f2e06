/*
 * k_adamw.cu - AdamW on fp32 master weights with a bf16 copy
 * (areal/kernels/optim.h). One fused pass: read grad, m, v, master; write m,
 * v, master and the bf16 copy (24 bytes of traffic per parameter + 2).
 * The update is written as the CPU optimizer (worker/model/src/optim.c)
 * writes it - p *= 1 - lr wd; p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps),
 * the factors computed once in double on the host - so both round alike. Rejected: a multi-tensor
 * launch (one list of tensors per call, llm.c style) - the caller can lay all parameters out in one
 * flat buffer instead, which is what the GPU model will do.
 */
#include <math.h>

#include "areal/kernels/optim.h"

#include "k_util.cuh"

namespace {

__global__ void adamw(float *master, uint16_t *bf16, const float *grad, float *m, float *v,
                      size_t n, const float *scale, float b1, float b2, float eps, float decay,
                      float step_size, float bc2_sqrt) {
    const float sc = scale != NULL ? *scale : 1.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = grad[i] * sc;
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float p = master[i] * decay;
        p -= step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
        master[i] = p;
        if (bf16 != NULL)
            kutil::st(bf16, i, p);
    }
}

} // namespace

extern "C" int areal_k_adamw(float *master, uint16_t *bf16, const float *grad, float *m, float *v,
                             size_t n, const float *scale, areal_k_adamw_cfg c, void *stream,
                             areal_error *err) {
    if (n == 0)
        return AREAL_OK;
    if (master == NULL || grad == NULL || m == NULL || v == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "areal_k_adamw: NULL buffer (n %zu)", n);
    if (c.step < 1 || !(c.lr >= 0.0f) || !(c.beta1 >= 0.0f && c.beta1 < 1.0f) ||
        !(c.beta2 >= 0.0f && c.beta2 < 1.0f) || !(c.eps > 0.0f))
        return areal_error_set(
            err, AREAL_EINVAL, -1,
            "areal_k_adamw: bad config (step %d >= 1, lr %g >= 0, betas %g %g in "
            "[0,1), eps %g > 0)",
            c.step, (double)c.lr, (double)c.beta1, (double)c.beta2, (double)c.eps);
    /* in double on the host, then fp32, exactly as worker/model/src/optim.c does */
    double bc1 = 1.0 - pow(c.beta1, (double)c.step), bc2 = 1.0 - pow(c.beta2, (double)c.step);
    adamw<<<kutil::blocks_for(n), kutil::kThreads, 0, (cudaStream_t)stream>>>(
        master, bf16, grad, m, v, n, scale, c.beta1, c.beta2, c.eps,
        (float)(1.0 - (double)c.lr * c.weight_decay), (float)(c.lr / bc1), (float)sqrt(bc2));
    return kutil::launched("areal_k_adamw", err);
}
