/*
 * k_gemm.cu - bf16 GEMM with fp32 accumulation through cuBLASLt
 * (areal/kernels/gemm.h).
 *
 * Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so the call
 * hands cuBLASLt (B, A) with the same transpose flags and m = N, n = M: no
 * copies. The bias epilogue (CUBLASLT_EPILOGUE_BIAS, per row of the
 * column-major C = per column of ours) saves the separate pass over C that
 * Qwen2's q/k/v biases would otherwise cost. The algorithm is the first of
 * cuBLASLt's heuristic for the shape; rejected for now: caching the
 * descriptors and algorithm per shape (the heuristic call is microseconds
 * next to a 1.5B-shape GEMM; worth it for decode-sized products, later).
 * Rejected: plain cublasGemmEx (no epilogues, and Lt picks Hopper's
 * warp-specialised kernels more reliably).
 */
#include <stdlib.h>

#include <cublasLt.h>

#include "areal/kernels/gemm.h"

#include "k_util.cuh"

struct areal_k_gemm {
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_size;
};

namespace {

/* the largest power of two <= 256 dividing both the address and the row
 * stride in bytes: cuBLASLt's heuristic assumes 256-byte aligned matrices
 * unless told otherwise (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*), and the
 * model passes row offsets into its buffers (an expert's slot rows, a chunk
 * of the LM head's rows) that are not */
uint32_t align_of(const void *p, uint64_t ld, size_t elem) {
    uint64_t a = (uint64_t)(uintptr_t)p | (ld * elem);
    uint32_t al = 256;
    while (al > 1 && (a & (al - 1)) != 0)
        al >>= 1;
    return al;
}

int lt_fail(const char *what, cublasStatus_t s, areal_error *err) {
    return areal_error_set(err, AREAL_EIO, -1, "areal_k_gemm: %s failed: cuBLAS status %d", what,
                           (int)s);
}

} // namespace

extern "C" int areal_k_gemm_create(size_t workspace, areal_k_gemm **out, areal_error *err) {
    if (out == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "areal_k_gemm_create: NULL out");
    *out = NULL;
    areal_k_gemm *g = (areal_k_gemm *)calloc(1, sizeof *g);
    if (g == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "areal_k_gemm_create: out of memory");
    g->ws_size = workspace ? workspace : (size_t)32 << 20;
    cublasStatus_t s = cublasLtCreate(&g->lt);
    if (s != CUBLAS_STATUS_SUCCESS) {
        free(g);
        return lt_fail("cublasLtCreate", s, err);
    }
    cudaError_t e = cudaMalloc(&g->ws, g->ws_size);
    if (e != cudaSuccess) {
        cublasLtDestroy(g->lt);
        free(g);
        return areal_error_set(err, AREAL_ENOMEM, -1,
                               "areal_k_gemm_create: workspace of %zu bytes: %s", workspace,
                               cudaGetErrorString(e));
    }
    *out = g;
    return AREAL_OK;
}

extern "C" void areal_k_gemm_destroy(areal_k_gemm *g) {
    if (g == NULL)
        return;
    cudaFree(g->ws);
    cublasLtDestroy(g->lt);
    free(g);
}

extern "C" int areal_k_gemm_run(areal_k_gemm *g, const areal_k_gemm_args *a, void *stream,
                                areal_error *err) {
    if (g == NULL || a == NULL || a->A == NULL || a->B == NULL || a->C == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "areal_k_gemm_run: NULL handle or matrix");
    if (a->M < 1 || a->N < 1 || a->K < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "areal_k_gemm_run: M %d, N %d, K %d must all be >= 1", a->M, a->N,
                               a->K);
    if (a->bias != NULL && a->c_type != AREAL_K_OUT_BF16)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "areal_k_gemm_run: bias is supported with a bf16 C only");
    /* row-major storage widths: A is [M,K] or [K,M]; B is [K,N] or [N,K] */
    const uint64_t wa = a->trans_a ? a->M : a->K, ha = a->trans_a ? a->K : a->M;
    const uint64_t wb = a->trans_b ? a->K : a->N, hb = a->trans_b ? a->N : a->K;
    const uint64_t lda = a->lda ? a->lda : wa, ldb = a->ldb ? a->ldb : wb;
    const uint64_t ldc = a->ldc ? a->ldc : (uint64_t)a->N;
    if (lda < wa || ldb < wb || ldc < (uint64_t)a->N)
        return areal_error_set(
            err, AREAL_EINVAL, -1,
            "areal_k_gemm_run: a row stride is below its row width (lda %llu/%llu, "
            "ldb %llu/%llu, ldc %llu/%d)",
            (unsigned long long)lda, (unsigned long long)wa, (unsigned long long)ldb,
            (unsigned long long)wb, (unsigned long long)ldc, a->N);
    const cudaDataType_t ct = a->c_type == AREAL_K_OUT_F32 ? CUDA_R_32F : CUDA_R_16BF;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    int rc = AREAL_OK;
    cublasStatus_t s;
    /* column-major view: "A" is our B (rows wb... as columns), "B" is our A */
    cublasOperation_t opa = a->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = a->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epi = a->bias != NULL ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    cudaDataType_t bias_t = CUDA_R_16BF;
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    uint32_t al_a, al_b, al_c;
#define LT(call)                                                                                   \
    do {                                                                                           \
        s = (call);                                                                                \
        if (s != CUBLAS_STATUS_SUCCESS) {                                                          \
            rc = lt_fail(#call, s, err);                                                           \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)
    LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (a->bias != NULL) {
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &a->bias,
                                          sizeof a->bias));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_t,
                                          sizeof bias_t));
    }
    /* column-major layouts (rows, cols, ld): our row-major [h, w] is col-major [w, h] */
    LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, wb, hb, ldb));
    LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, wa, ha, lda));
    LT(cublasLtMatrixLayoutCreate(&lc, ct, (uint64_t)a->N, (uint64_t)a->M, ldc));
    LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                            &g->ws_size, sizeof g->ws_size));
    /* cuBLASLt's "A" is our B and its "B" our A (the column-major view above) */
    al_a = align_of(a->B, ldb, 2);
    al_b = align_of(a->A, lda, 2);
    al_c = align_of(a->C, ldc, a->c_type == AREAL_K_OUT_F32 ? 4 : 2);
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a,
                                            sizeof al_a));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b,
                                            sizeof al_b));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c,
                                            sizeof al_c));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c,
                                            sizeof al_c));
    LT(cublasLtMatmulAlgoGetHeuristic(g->lt, op, la, lb, lc, lc, pref, 1, &heur, &found));
    if (found < 1) {
        rc = areal_error_set(err, AREAL_EIO, -1,
                             "areal_k_gemm_run: cuBLASLt has no algorithm for M %d N %d K %d "
                             "(trans %d %d, strides %llu %llu %llu)",
                             a->M, a->N, a->K, a->trans_a, a->trans_b, (unsigned long long)lda,
                             (unsigned long long)ldb, (unsigned long long)ldc);
        goto done;
    }
    LT(cublasLtMatmul(g->lt, op, &a->alpha, a->B, la, a->A, lb, &a->beta, a->C, lc, a->C, lc,
                      &heur.algo, g->ws, g->ws_size, (cudaStream_t)stream));
#undef LT
done:
    if (pref != NULL)
        cublasLtMatmulPreferenceDestroy(pref);
    if (lc != NULL)
        cublasLtMatrixLayoutDestroy(lc);
    if (lb != NULL)
        cublasLtMatrixLayoutDestroy(lb);
    if (la != NULL)
        cublasLtMatrixLayoutDestroy(la);
    if (op != NULL)
        cublasLtMatmulDescDestroy(op);
    return rc;
}
