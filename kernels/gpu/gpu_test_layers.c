/*
 * gpu_test_layers.c - RMSNorm, RoPE, SwiGLU and the residual add on the GPU
 * (areal/kernels/layers.h) against the CPU model's own kernels
 * (worker/model/src/k_rmsnorm.c, k_rope.c, k_swiglu.c) on the same bf16
 * inputs widened to fp32, forward and backward, at odd shapes (D not a
 * multiple of the block, a single row, hd 2) and at Qwen2's. The CPU side
 * computes in fp32 from the bf16 values; the GPU rounds its outputs to bf16.
 * Tolerances: bf16 outputs rtol 2^-8 (half an ulp is 2^-9, plus fp32
 * reordering) and atol 2^-8 * max|ref| where the formula subtracts (the
 * backward's dx); fp32 weight gradients rtol 1e-4, atol 1e-5 * max|ref|
 * (atomics reorder the sum). Without a device every test is skipped.
 */
#include "ktest.h"

#include "../../worker/model/src/kernels.h"
#include "areal/kernels/layers.h"

static void rmsnorm_case(size_t rows, int D, uint64_t seed) {
    uint64_t s = seed;
    size_t n = rows * (size_t)D;
    uint16_t *xb = malloc(n * 2), *wb = malloc(D * 2), *dyb = malloc(n * 2);
    float *x = malloc(n * 4), *w = malloc(D * 4), *dy = malloc(n * 4), *y = malloc(n * 4);
    float *rs = malloc(rows * 4), *dx = calloc(n, 4), *dw = calloc(D, 4);
    float *gy = malloc(n * 4), *grs = malloc(rows * 4), *gdx = malloc(n * 4), *gdw = malloc(D * 4);
    kt_fill_bf16(xb, x, n, &s, 3.0f);
    kt_fill_bf16(wb, w, D, &s, 1.5f);
    kt_fill_bf16(dyb, dy, n, &s, 1.0f);
    k_rmsnorm_fwd(NULL, y, rs, x, w, rows, D, 1e-6f);
    k_rmsnorm_bwd(NULL, dx, dw, dy, x, w, rs, rows, D);

    uint16_t *dxd = kt_up(xb, n * 2), *dwd = kt_up(wb, D * 2), *ddy = kt_up(dyb, n * 2);
    uint16_t *dy_out = kt_dev(n * 2), *ddx = kt_dev(n * 2);
    float *drs = kt_dev(rows * 4), *ddw = kt_dev(D * 4);
    KT_OK(areal_k_rmsnorm_fwd(dy_out, drs, dxd, dwd, rows, D, 1e-6f, NULL, KT_ERR));
    KT_OK(areal_k_rmsnorm_bwd(ddx, ddw, ddy, dxd, dwd, drs, rows, D, NULL, KT_ERR));
    kt_down_bf16(gy, dy_out, n);
    kt_down(grs, drs, rows * 4);
    kt_down_bf16(gdx, ddx, n);
    kt_down(gdw, ddw, D * 4);
    printf("rmsnorm rows %zu D %d\n", rows, D);
    assert_int_equal(kt_close("  y", gy, y, n, 1.0 / 256, 1e-6), 0);
    assert_int_equal(kt_close("  rstd", grs, rs, rows, 1e-5, 0), 0);
    assert_int_equal(kt_close("  dx", gdx, dx, n, 1.0 / 256, kt_maxabs(dx, n) / 256), 0);
    assert_int_equal(kt_close("  dw", gdw, dw, D, 1e-4, kt_maxabs(dw, D) * 1e-5), 0);
    cudaFree(dxd), cudaFree(dwd), cudaFree(ddy), cudaFree(dy_out), cudaFree(ddx), cudaFree(drs);
    cudaFree(ddw);
    free(xb), free(wb), free(dyb), free(x), free(w), free(dy), free(y), free(rs), free(dx);
    free(dw), free(gy), free(grs), free(gdx), free(gdw);
}

static void test_rmsnorm(void **state) {
    (void)state;
    kt_need_device();
    rmsnorm_case(1, 1, 1);
    rmsnorm_case(7, 37, 2);
    rmsnorm_case(33, 257, 3);
    rmsnorm_case(300, 896, 4);   /* Qwen2-0.5B hidden */
    rmsnorm_case(5000, 1536, 5); /* more rows than blocks: the grid-stride path */
}

static void rope_case(int T, int nh, int hd, uint64_t seed) {
    uint64_t s = seed;
    size_t n = (size_t)T * nh * hd;
    int half = hd / 2;
    uint16_t *xb = malloc(n * 2);
    float *x = malloc(n * 4), *fx = malloc(n * 4), *bx = malloc(n * 4), *g = malloc(n * 4);
    int32_t *pos = malloc(T * 4);
    float *inv = malloc(half * 4);
    kt_fill_bf16(xb, x, n, &s, 2.0f);
    for (int t = 0; t < T; t++)
        pos[t] = (int32_t)(kt_rnd(&s) % 32768); /* packed sequences: positions restart, jump */
    for (int i = 0; i < half; i++)
        inv[i] = powf(1000000.0f, -2.0f * i / hd);
    memcpy(fx, x, n * 4);
    memcpy(bx, x, n * 4);
    k_rope_fwd(NULL, fx, pos, inv, T, nh, hd);
    k_rope_bwd(NULL, bx, pos, inv, T, nh, hd);
    uint16_t *d = kt_up(xb, n * 2), *d2 = kt_up(xb, n * 2);
    int32_t *dpos = kt_up(pos, T * 4);
    float *dinv = kt_up(inv, half * 4);
    KT_OK(areal_k_rope_fwd(d, dpos, dinv, T, nh, hd, NULL, KT_ERR));
    KT_OK(areal_k_rope_bwd(d2, dpos, dinv, T, nh, hd, NULL, KT_ERR));
    printf("rope T %d nh %d hd %d\n", T, nh, hd);
    /* the same fp32 angle on both sides; CUDA's sincosf and libm's agree to a
     * few fp32 ulps even at |angle| ~ 3e4, so bf16 rounding dominates; the atol
     * (2^-8 * max|x|) is for outputs near 0 after the rotation cancels */
    kt_down_bf16(g, d, n);
    assert_int_equal(kt_close("  fwd", g, fx, n, 1.0 / 256, kt_maxabs(x, n) / 256), 0);
    kt_down_bf16(g, d2, n);
    assert_int_equal(kt_close("  bwd", g, bx, n, 1.0 / 256, kt_maxabs(x, n) / 256), 0);
    cudaFree(d), cudaFree(d2), cudaFree(dpos), cudaFree(dinv);
    free(xb), free(x), free(fx), free(bx), free(g), free(pos), free(inv);
}

static void test_rope(void **state) {
    (void)state;
    kt_need_device();
    rope_case(1, 1, 2, 11);
    rope_case(13, 3, 6, 12);
    rope_case(257, 14, 64, 13); /* Qwen2-0.5B: 14 heads of 64 */
    rope_case(100, 2, 128, 14);
}

static void swiglu_case(size_t n, uint64_t seed) {
    uint64_t s = seed;
    uint16_t *gb = malloc(n * 2), *ub = malloc(n * 2), *dhb = malloc(n * 2);
    float *g = malloc(n * 4), *u = malloc(n * 4), *dh = malloc(n * 4), *h = malloc(n * 4);
    float *dg = malloc(n * 4), *du = malloc(n * 4), *y = malloc(n * 4), *got = malloc(n * 4);
    kt_fill_bf16(gb, g, n, &s, 6.0f);
    kt_fill_bf16(ub, u, n, &s, 2.0f);
    kt_fill_bf16(dhb, dh, n, &s, 1.0f);
    k_swiglu_fwd(NULL, h, g, u, n);
    k_swiglu_bwd(NULL, dg, du, dh, g, u, n);
    k_add(NULL, y, g, u, n);
    uint16_t *dgd = kt_up(gb, n * 2), *dud = kt_up(ub, n * 2), *ddh = kt_up(dhb, n * 2);
    uint16_t *o1 = kt_dev(n * 2), *o2 = kt_dev(n * 2), *o3 = kt_dev(n * 2);
    printf("swiglu/add n %zu\n", n);
    KT_OK(areal_k_swiglu_fwd(o1, dgd, dud, n, NULL, KT_ERR));
    kt_down_bf16(got, o1, n);
    /* __expf vs expf: ~2 ulp of fp32, far below bf16; atol for values near 0 */
    assert_int_equal(kt_close("  h", got, h, n, 1.0 / 256, 1e-5), 0);
    KT_OK(areal_k_swiglu_bwd(o1, o2, ddh, dgd, dud, n, NULL, KT_ERR));
    kt_down_bf16(got, o1, n);
    assert_int_equal(kt_close("  dg", got, dg, n, 1.0 / 256, 1e-5), 0);
    kt_down_bf16(got, o2, n);
    assert_int_equal(kt_close("  du", got, du, n, 1.0 / 256, 1e-5), 0);
    KT_OK(areal_k_add(o3, dgd, dud, n, NULL, KT_ERR));
    kt_down_bf16(got, o3, n);
    assert_int_equal(kt_close("  add", got, y, n, 1.0 / 256, 0), 0);
    KT_OK(areal_k_add(dgd, dgd, dud, n, NULL, KT_ERR)); /* in place, as the residual stream is */
    kt_down_bf16(got, dgd, n);
    assert_int_equal(kt_close("  add in place", got, y, n, 1.0 / 256, 0), 0);
    cudaFree(dgd), cudaFree(dud), cudaFree(ddh), cudaFree(o1), cudaFree(o2), cudaFree(o3);
    free(gb), free(ub), free(dhb), free(g), free(u), free(dh), free(h), free(dg), free(du);
    free(y), free(got);
}

static void test_swiglu_add(void **state) {
    (void)state;
    kt_need_device();
    swiglu_case(1, 21);
    swiglu_case(1000003, 22); /* odd: a partial last block */
    swiglu_case(4864 * 37, 23);
}

static void test_bad_input(void **state) {
    (void)state;
    areal_error err;
    areal_error_clear(&err);
    /* no device needed: arguments are checked before any launch */
    assert_int_equal(areal_k_rmsnorm_fwd(NULL, NULL, NULL, NULL, 3, 8, 1e-6f, NULL, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "areal_k_rmsnorm_fwd"));
    uint16_t x[4];
    int32_t p[1] = {0};
    float f[2] = {1, 1};
    assert_int_equal(areal_k_rope_fwd(x, p, f, 1, 1, 3, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "even"));
    assert_int_equal(areal_k_swiglu_fwd(NULL, x, x, 4, NULL, &err), AREAL_EINVAL);
    assert_int_equal(areal_k_add(x, x, x, 0, NULL, &err), AREAL_OK); /* n 0: nothing to do */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_swiglu_add),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
