/*
 * gpu_test_kernels.c - every CUDA kernel of kernels/ against its CPU twin
 * (make test-gpu). Bit-exact: each bf16 pattern (all 65,536) widened on the
 * device must equal areal_bf16_to_f32, and fp32 -> bf16 of the special values
 * (zeros, subnormals, ties, the largest finite, infinities, NaNs with payloads)
 * and of a million seeded random bit patterns must equal areal_f32_to_bf16.
 * Without a device the tests are skipped with CUDA's reason, never passed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "areal/dtype.h"
#include "areal/kernels/cast.h"

static void need_device(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("gpu_test_kernels: no CUDA device (%s); skipped\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        skip();
    }
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* xorshift64*: a fixed seed, so a failure names a reproducible input */
static uint32_t rnd(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (uint32_t)((*s * 2685821657736338717ull) >> 32);
}

static void test_bf16_to_f32_every_pattern(void **state) {
    (void)state;
    need_device();
    const size_t n = 65536;
    uint16_t *h = malloc(n * sizeof *h);
    float *out = malloc(n * sizeof *out);
    assert_non_null(h);
    assert_non_null(out);
    for (size_t i = 0; i < n; i++)
        h[i] = (uint16_t)i;
    uint16_t *d_src = NULL;
    float *d_dst = NULL;
    assert_int_equal(cudaMalloc((void **)&d_src, n * sizeof *d_src), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&d_dst, n * sizeof *d_dst), cudaSuccess);
    assert_int_equal(cudaMemcpy(d_src, h, n * sizeof *h, cudaMemcpyHostToDevice), cudaSuccess);
    areal_error err;
    areal_error_clear(&err);
    assert_int_equal(areal_k_bf16_to_f32(d_src, d_dst, n, NULL, &err), AREAL_OK);
    assert_int_equal(cudaMemcpy(out, d_dst, n * sizeof *out, cudaMemcpyDeviceToHost), cudaSuccess);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (f32_bits(out[i]) != f32_bits(areal_bf16_to_f32(h[i])) && bad++ < 5)
            printf("bf16 0x%04x: device 0x%08x, host 0x%08x\n", h[i], f32_bits(out[i]),
                   f32_bits(areal_bf16_to_f32(h[i])));
    }
    assert_int_equal(bad, 0);
    cudaFree(d_src);
    cudaFree(d_dst);
    free(h);
    free(out);
}

static void test_f32_to_bf16_matches_host(void **state) {
    (void)state;
    need_device();
    static const uint32_t special[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u, /* zeros, subnormals */
        0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x3f807fffu, /* ties to even, near ties */
        0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u,              /* largest finite, overflow */
        0x7f800000u, 0xff800000u,                           /* infinities */
        0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fbfffffu, /* quiet and signalling NaNs */
    };
    const size_t ns = sizeof special / sizeof special[0];
    const size_t n = ns + (1u << 20);
    float *h = malloc(n * sizeof *h);
    uint16_t *out = malloc(n * sizeof *out);
    assert_non_null(h);
    assert_non_null(out);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++)
        h[i] = bits_f32(i < ns ? special[i] : rnd(&seed));
    float *d_src = NULL;
    uint16_t *d_dst = NULL;
    assert_int_equal(cudaMalloc((void **)&d_src, n * sizeof *d_src), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&d_dst, n * sizeof *d_dst), cudaSuccess);
    assert_int_equal(cudaMemcpy(d_src, h, n * sizeof *h, cudaMemcpyHostToDevice), cudaSuccess);
    areal_error err;
    areal_error_clear(&err);
    assert_int_equal(areal_k_f32_to_bf16(d_src, d_dst, n, NULL, &err), AREAL_OK);
    assert_int_equal(cudaMemcpy(out, d_dst, n * sizeof *out, cudaMemcpyDeviceToHost), cudaSuccess);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t want = areal_f32_to_bf16(h[i]);
        if (out[i] != want && bad++ < 5)
            printf("f32 0x%08x: device 0x%04x, host 0x%04x\n", f32_bits(h[i]), out[i], want);
    }
    assert_int_equal(bad, 0);
    cudaFree(d_src);
    cudaFree(d_dst);
    free(h);
    free(out);
}

static void test_null_buffers_are_refused(void **state) {
    (void)state;
    areal_error err;
    areal_error_clear(&err);
    /* no device needed: the arguments are checked before any launch */
    assert_int_equal(areal_k_f32_to_bf16(NULL, NULL, 4, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "NULL buffer"));
    assert_int_equal(areal_k_bf16_to_f32(NULL, NULL, 0, NULL, &err), AREAL_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_to_f32_every_pattern),
        cmocka_unit_test(test_f32_to_bf16_matches_host),
        cmocka_unit_test(test_null_buffers_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
