/*
 * gpu_test_optim.c - gradient norm, clipping and AdamW on the GPU
 * (areal/kernels/optim.h) against double-precision references written here
 * from PyTorch's definitions (torch.nn.utils.clip_grad_norm_, torch.optim.AdamW),
 * on odd sizes, over several steps, with and without clipping.
 * Tolerances: norm rtol 1e-6 (a double total of fp32 block sums); master
 * weights rtol 1e-5, atol 1e-7 after 5 steps (fp32 arithmetic on the device);
 * the bf16 copy must be exactly the master weight rounded to nearest even.
 */
#include "ktest.h"

#include "areal/kernels/optim.h"

static void test_gradnorm_clip(void **state) {
    (void)state;
    kt_need_device();
    const size_t sizes[] = {1, 1001, 4864 * 896 + 3}; /* three "tensors" */
    uint64_t s = 41;
    double ref = 0;
    double *acc = kt_dev(sizeof(double));
    for (int t = 0; t < 3; t++) {
        size_t n = sizes[t];
        float *g = malloc(n * 4);
        for (size_t i = 0; i < n; i++) {
            g[i] = kt_unif(&s, 0.01f);
            ref += (double)g[i] * g[i];
        }
        float *dg = kt_up(g, n * 4);
        KT_OK(areal_k_sumsq(dg, n, acc, NULL, KT_ERR));
        assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
        cudaFree(dg);
        free(g);
    }
    double rn = sqrt(ref);
    float *dscale = kt_dev(4), *dnorm = kt_dev(4), scale, norm;
    const float maxes[] = {0.0f, (float)rn * 0.25f, (float)rn * 4.0f};
    for (int k = 0; k < 3; k++) {
        KT_OK(areal_k_clip_scale(acc, maxes[k], dscale, dnorm, NULL, KT_ERR));
        kt_down(&scale, dscale, 4);
        kt_down(&norm, dnorm, 4);
        double want = maxes[k] > 0 ? fmin(1.0, maxes[k] / (rn + 1e-6)) : 1.0;
        printf("norm %.9g (ref %.9g), max_norm %g: scale %.9g (ref %.9g)\n", (double)norm, rn,
               (double)maxes[k], (double)scale, want);
        assert_true(fabs(norm - rn) <= 1e-6 * rn);
        assert_true(fabs(scale - want) <= 1e-6 * want);
    }
    cudaFree(acc), cudaFree(dscale), cudaFree(dnorm);
}

static void adamw_case(size_t n, float clip, uint64_t seed) {
    uint64_t s = seed;
    areal_k_adamw_cfg c = {
        .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 0};
    float *p = malloc(n * 4), *g = malloc(n * 4), *got = malloc(n * 4), *refp = malloc(n * 4);
    double *rp = malloc(n * 8), *rm = calloc(n, 8), *rv = calloc(n, 8);
    uint16_t *b = malloc(n * 2);
    for (size_t i = 0; i < n; i++)
        rp[i] = p[i] = kt_unif(&s, 0.5f);
    float *dp = kt_up(p, n * 4), *dg = kt_dev(n * 4), *dm = kt_dev(n * 4), *dv = kt_dev(n * 4);
    float *dscale = kt_dev(4);
    double *acc = kt_dev(8);
    uint16_t *db = kt_dev(n * 2);
    for (int step = 1; step <= 5; step++) {
        double ss = 0;
        for (size_t i = 0; i < n; i++) {
            g[i] = kt_unif(&s, 0.02f) + (float)(i % 7) * 1e-3f;
            ss += (double)g[i] * g[i];
        }
        double sc = clip > 0 ? fmin(1.0, clip / (sqrt(ss) + 1e-6)) : 1.0;
        assert_int_equal(cudaMemcpy(dg, g, n * 4, cudaMemcpyHostToDevice), cudaSuccess);
        assert_int_equal(cudaMemset(acc, 0, 8), cudaSuccess);
        KT_OK(areal_k_sumsq(dg, n, acc, NULL, KT_ERR));
        KT_OK(areal_k_clip_scale(acc, clip, dscale, NULL, NULL, KT_ERR));
        c.step = step;
        KT_OK(areal_k_adamw(dp, db, dg, dm, dv, n, dscale, c, NULL, KT_ERR));
        double bc1 = 1 - pow(c.beta1, step), bc2 = 1 - pow(c.beta2, step);
        for (size_t i = 0; i < n; i++) {
            double gi = g[i] * sc;
            rm[i] = c.beta1 * rm[i] + (1 - c.beta1) * gi;
            rv[i] = c.beta2 * rv[i] + (1 - c.beta2) * gi * gi;
            rp[i] *= 1 - (double)c.lr * c.weight_decay;
            rp[i] -= c.lr * (rm[i] / bc1) / (sqrt(rv[i] / bc2) + c.eps);
        }
    }
    for (size_t i = 0; i < n; i++)
        refp[i] = (float)rp[i];
    kt_down(got, dp, n * 4);
    kt_down(b, db, n * 2);
    printf("adamw n %zu clip %g, 5 steps\n", n, (double)clip);
    assert_int_equal(kt_close("  master", got, refp, n, 1e-5, 1e-7), 0);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += b[i] != areal_f32_to_bf16(got[i]);
    printf("  bf16 copy: %zu of %zu differ from the rounded master\n", bad, n);
    assert_int_equal(bad, 0);
    cudaFree(dp), cudaFree(dg), cudaFree(dm), cudaFree(dv), cudaFree(dscale), cudaFree(acc);
    cudaFree(db);
    free(p), free(g), free(got), free(refp), free(rp), free(rm), free(rv), free(b);
}

static void test_adamw(void **state) {
    (void)state;
    kt_need_device();
    adamw_case(1, 0.0f, 51);
    adamw_case(100003, 0.0f, 52);
    adamw_case(100003, 0.05f, 53); /* clipping active every step */
}

static void test_bad_input(void **state) {
    (void)state;
    areal_error err;
    areal_error_clear(&err);
    float x[1];
    areal_k_adamw_cfg c = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .step = 0};
    assert_int_equal(areal_k_adamw(x, NULL, x, x, x, 1, NULL, c, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "step"));
    assert_int_equal(areal_k_sumsq(NULL, 3, NULL, NULL, &err), AREAL_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradnorm_clip),
        cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
