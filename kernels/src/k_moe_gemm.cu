/*
 * k_moe_gemm.cu - the grouped expert GEMMs of areal/kernels/moe.h: one
 * cuBLASLt product per expert with slots, over the expert's rows of the slot
 * buffers. Host code only (a separate file because it needs cuBLASLt, which
 * kernels/module.mk builds only where the wheel is found).
 */
#include "areal/kernels/moe.h"

extern "C" int areal_k_moe_grouped_gemm(areal_k_gemm *g, const int32_t *host_off, int E, int N,
                                        int Kd, const uint16_t *a, size_t lda, const uint16_t *b,
                                        size_t b_stride, int trans_b, void *c, size_t ldc,
                                        areal_k_gemm_out c_type, float beta, void *stream,
                                        areal_error *err) {
    if (g == NULL || host_off == NULL || a == NULL || b == NULL || c == NULL || E < 1 || N < 1 ||
        Kd < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "areal_k_moe_grouped_gemm: NULL argument or E %d, N %d, Kd %d < 1",
                               E, N, Kd);
    const size_t lda_ = lda ? lda : (size_t)Kd, ldc_ = ldc ? ldc : (size_t)N;
    const size_t csz = c_type == AREAL_K_OUT_F32 ? 4 : 2;
    for (int e = 0; e < E; e++) {
        const int32_t r0 = host_off[e], n = host_off[e + 1] - r0;
        if (r0 < 0 || n < 0)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "areal_k_moe_grouped_gemm: off[%d] = %d, off[%d] = %d are not "
                                   "non-decreasing offsets",
                                   e, r0, e + 1, host_off[e + 1]);
        if (n == 0)
            continue; /* an empty expert: nothing to multiply */
        areal_k_gemm_args ga = {};
        ga.M = n, ga.N = N, ga.K = Kd;
        ga.trans_a = 0, ga.trans_b = trans_b;
        ga.A = a + (size_t)r0 * lda_, ga.lda = lda_;
        ga.B = b + (size_t)e * b_stride, ga.ldb = 0;
        ga.C = (char *)c + (size_t)r0 * ldc_ * csz, ga.ldc = ldc_;
        ga.c_type = c_type, ga.alpha = 1.0f, ga.beta = beta;
        int rc = areal_k_gemm_run(g, &ga, stream, err);
        if (rc != AREAL_OK)
            return rc;
    }
    return AREAL_OK;
}
