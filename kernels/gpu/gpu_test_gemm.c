/*
 * gpu_test_gemm.c - the cuBLASLt bf16 GEMM (areal/kernels/gemm.h) against a
 * double-precision product of the same bf16 inputs, for all four transpose
 * combinations, odd shapes (1 x 1 x 1, 7 x 13 x 5, 129 x 65 x 257), padded
 * row strides, beta = 1 accumulation into fp32 C (the weight gradient), and
 * the bias epilogue (nn.Linear y = x W^T + b).
 * Tolerances: bf16 C rtol 2^-8, atol 2^-8 * sqrt(K) * max|a| max|b| (fp32
 * accumulation, one final bf16 rounding); fp32 C rtol 1e-5, atol 1e-5 *
 * sqrt(K) * max|a| max|b| (cuBLASLt may split K).
 */
#include "ktest.h"

#include "areal/kernels/gemm.h"

static areal_k_gemm *g_h;

static int setup(void **state) {
    (void)state;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
        return 0; /* each test skips */
    areal_error err;
    areal_error_clear(&err);
    if (areal_k_gemm_create(0, &g_h, &err) != AREAL_OK) {
        printf("areal_k_gemm_create: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    areal_k_gemm_destroy(g_h);
    return 0;
}

static void gemm_case(int M, int N, int K, int ta, int tb, int pad, int f32, int bias) {
    uint64_t s = (uint64_t)M * 1000003u + N * 1009u + K + ta * 7 + tb * 13 + f32 * 17 + bias;
    size_t lda = (size_t)(ta ? M : K) + pad, ldb = (size_t)(tb ? K : N) + pad, ldc = N + pad;
    size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
    uint16_t *ab = malloc(na * 2), *bb = malloc(nb * 2), *cb = malloc(nc * 2),
             *biasb = malloc(N * 2);
    float *a = malloc(na * 4), *b = malloc(nb * 4), *c0 = malloc(nc * 4), *bv = malloc(N * 4);
    float *ref = malloc((size_t)M * N * 4), *got = malloc(nc * 4),
          *gotc = malloc((size_t)M * N * 4);
    kt_fill_bf16(ab, a, na, &s, 1.0f);
    kt_fill_bf16(bb, b, nb, &s, 1.0f);
    kt_fill_bf16(cb, c0, nc, &s, 1.0f);
    kt_fill_bf16(biasb, bv, N, &s, 1.0f);
    const float alpha = 0.75f, beta = f32 ? 1.0f : 0.0f;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int k = 0; k < K; k++) {
                double x = ta ? a[(size_t)k * lda + i] : a[(size_t)i * lda + k];
                double y = tb ? b[(size_t)j * ldb + k] : b[(size_t)k * ldb + j];
                acc += x * y;
            }
            acc = alpha * acc + beta * c0[(size_t)i * ldc + j] + (bias ? bv[j] : 0);
            ref[(size_t)i * N + j] = (float)acc;
        }
    uint16_t *da = kt_up(ab, na * 2), *db = kt_up(bb, nb * 2), *dbias = kt_up(biasb, N * 2);
    void *dc = f32 ? kt_up(c0, nc * 4) : kt_dev(nc * 2);
    areal_k_gemm_args args = {.M = M,
                              .N = N,
                              .K = K,
                              .trans_a = ta,
                              .trans_b = tb,
                              .A = da,
                              .B = db,
                              .C = dc,
                              .lda = lda,
                              .ldb = ldb,
                              .ldc = ldc,
                              .c_type = f32 ? AREAL_K_OUT_F32 : AREAL_K_OUT_BF16,
                              .alpha = alpha,
                              .beta = beta,
                              .bias = bias ? dbias : NULL};
    KT_OK(areal_k_gemm_run(g_h, &args, NULL, KT_ERR));
    if (f32)
        kt_down(got, dc, nc * 4);
    else
        kt_down_bf16(got, dc, nc);
    for (int i = 0; i < M; i++)
        memcpy(gotc + (size_t)i * N, got + (size_t)i * ldc, N * 4);
    char what[96];
    snprintf(what, sizeof what, "gemm M %d N %d K %d ta %d tb %d pad %d %s%s", M, N, K, ta, tb, pad,
             f32 ? "fp32 C beta 1" : "bf16 C", bias ? " +bias" : "");
    double scale = sqrt((double)K) * alpha;
    assert_int_equal(kt_close(what, gotc, ref, (size_t)M * N, f32 ? 1e-5 : 1.0 / 256,
                              (f32 ? 1e-5 : 1.0 / 256) * scale),
                     0);
    cudaFree(da), cudaFree(db), cudaFree(dbias), cudaFree(dc);
    free(ab), free(bb), free(cb), free(biasb), free(a), free(b), free(c0), free(bv), free(ref);
    free(got), free(gotc);
}

static void test_gemm_shapes(void **state) {
    (void)state;
    kt_need_device();
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            gemm_case(1, 1, 1, ta, tb, 0, 0, 0);
            gemm_case(7, 13, 5, ta, tb, 0, 0, 0);
            gemm_case(129, 65, 257, ta, tb, 0, 0, 0);
            gemm_case(64, 72, 96, ta, tb, 8, 0, 0); /* padded strides (16-byte aligned) */
            gemm_case(33, 40, 48, ta, tb, 0, 1, 0); /* fp32 C, beta 1 */
        }
}

static void test_gemm_linear_bias(void **state) {
    (void)state;
    kt_need_device();
    gemm_case(37, 1152, 896, 0, 1, 0, 0, 1); /* Qwen2-0.5B q/k/v: y = x W^T + b */
    gemm_case(5, 24, 16, 0, 1, 0, 0, 1);
}

static void test_bad_input(void **state) {
    (void)state;
    areal_error err;
    areal_error_clear(&err);
    areal_k_gemm_args args = {.M = 0, .N = 1, .K = 1};
    uint16_t x[1];
    args.A = args.B = x;
    args.C = x;
    assert_int_equal(areal_k_gemm_run((areal_k_gemm *)x, &args, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "M 0"));
    assert_int_equal(areal_k_gemm_run(NULL, &args, NULL, &err), AREAL_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_shapes),
        cmocka_unit_test(test_gemm_linear_bias),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
