/*
 * ktest.h - what the GPU tests of kernels/ share (test-only, header-only):
 * the skip-without-device check, a seeded generator, bf16 rounding of host
 * inputs, device upload/download that fail the test loudly, and the
 * tolerance comparison that prints the worst element.
 *
 * Tolerance rule used by every test: |got - ref| <= rtol * |ref| + atol, with
 * the rtol/atol pair stated at each call (bf16 outputs: rtol 2^-8 covers the
 * output's own rounding, half an ulp is 2^-9, plus fp32 reordering).
 */
#ifndef AREAL_KERNELS_KTEST_H
#define AREAL_KERNELS_KTEST_H

#include <math.h>
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
#include "areal/error.h"

static inline void kt_need_device(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("no CUDA device (%s); skipped\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        skip();
    }
}

/* xorshift64*: fixed seeds, so a failure names a reproducible input */
static inline uint32_t kt_rnd(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (uint32_t)((*s * 2685821657736338717ull) >> 32);
}

/* uniform in [-a, a) */
static inline float kt_unif(uint64_t *s, float a) {
    return a * (2.0f * (float)(kt_rnd(s) >> 8) / 16777216.0f - 1.0f);
}

/* n random bf16 in [-a, a): bits into b, their fp32 values into f (either may be NULL) */
static inline void kt_fill_bf16(uint16_t *b, float *f, size_t n, uint64_t *s, float a) {
    for (size_t i = 0; i < n; i++) {
        uint16_t h = areal_f32_to_bf16(kt_unif(s, a));
        if (b != NULL)
            b[i] = h;
        if (f != NULL)
            f[i] = areal_bf16_to_f32(h);
    }
}

static inline void *kt_dev(size_t bytes) {
    void *p = NULL;
    assert_int_equal(cudaMalloc(&p, bytes ? bytes : 1), cudaSuccess);
    assert_int_equal(cudaMemset(p, 0, bytes ? bytes : 1), cudaSuccess);
    return p;
}

static inline void *kt_up(const void *h, size_t bytes) {
    void *p = kt_dev(bytes);
    assert_int_equal(cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return p;
}

static inline void kt_down(void *h, const void *d, size_t bytes) {
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    assert_int_equal(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}

/* device bf16 [n] -> host fp32 */
static inline void kt_down_bf16(float *h, const uint16_t *d, size_t n) {
    uint16_t *t = malloc(n * sizeof *t + 1);
    assert_non_null(t);
    kt_down(t, d, n * sizeof *t);
    for (size_t i = 0; i < n; i++)
        h[i] = areal_bf16_to_f32(t[i]);
    free(t);
}

/* the number of elements outside rtol * |ref| + atol; prints the worst */
static inline size_t kt_close(const char *what, const float *got, const float *ref, size_t n,
                              double rtol, double atol) {
    size_t bad = 0, worst = 0;
    double worst_x = -1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]), lim = rtol * fabs(ref[i]) + atol;
        if (!(d <= lim))
            bad++;
        double x = lim > 0 ? d / lim : d;
        if (x > worst_x || isnan(d)) {
            worst_x = isnan(d) ? INFINITY : x;
            worst = i;
        }
    }
    if (n > 0)
        printf("%s: n %zu, %zu outside rtol %.2g atol %.2g; worst [%zu] got %.7g ref %.7g (%.2f of "
               "the limit)\n",
               what, n, bad, rtol, atol, worst, got[worst], ref[worst], worst_x);
    return bad;
}

static inline double kt_maxabs(const float *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* KT_OK(f(..., KT_ERR)): asserts AREAL_OK, printing the message otherwise */
#define KT_ERR (&kt_err_)
#define KT_OK(call)                                                                                \
    do {                                                                                           \
        areal_error kt_err_;                                                                       \
        areal_error_clear(&kt_err_);                                                               \
        int kt_rc_ = (call);                                                                       \
        if (kt_rc_ != AREAL_OK)                                                                    \
            printf("%s: %s\n", #call, kt_err_.msg);                                                \
        assert_int_equal(kt_rc_, AREAL_OK);                                                        \
    } while (0)

#endif
