/*
 * kbench.h - what the GPU benches of kernels/ share (bench-only,
 * header-only): the H200 peaks the figures are quoted against, the median
 * time of a step over timed runs (CUDA events on the default stream, after
 * warm-ups), and device buffers filled with small constant bf16 / fp32
 * values (the kernels' speed does not depend on the values).
 */
#ifndef AREAL_KERNELS_KBENCH_H
#define AREAL_KERNELS_KBENCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "areal/error.h"

#define KB_PEAK_TFLOPS 989.0  /* H100 / H200 dense bf16 */
#define KB_PEAK_GBS    4800.0 /* H200 HBM3e */
#define KB_MAX_ITERS   64

/* one step of a benchmark: AREAL_OK, or an error with err set */
typedef int (*kb_fn)(void *ctx, areal_error *err);

static inline int kb_cmpf(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* the median ms of `iters` (1..KB_MAX_ITERS) timed runs of fn after `warm`
 * untimed ones, or -1 on failure (err says why) */
static inline float kb_time_ms(kb_fn fn, void *ctx, int warm, int iters, areal_error *err) {
    cudaEvent_t a, b;
    float t[KB_MAX_ITERS];
    if (iters < 1 || iters > KB_MAX_ITERS) {
        areal_error_set(err, AREAL_EINVAL, -1, "kb_time_ms: iters %d outside 1..%d", iters,
                        KB_MAX_ITERS);
        return -1;
    }
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    float ms = -1;
    for (int i = 0; i < warm; i++)
        if (fn(ctx, err) != AREAL_OK)
            goto out;
    for (int i = 0; i < iters; i++) {
        cudaEventRecord(a, NULL);
        if (fn(ctx, err) != AREAL_OK)
            goto out;
        cudaEventRecord(b, NULL);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&t[i], a, b);
    }
    qsort(t, (size_t)iters, sizeof t[0], kb_cmpf);
    ms = t[iters / 2];
out:
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms;
}

/* `bytes` of device memory filled with 0x3c (bf16 0x3c3c = 0.0115, fp32
 * 0x3c3c3c3c = 0.0115: finite softmax, no overflow), or NULL */
static inline void *kb_dev(size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess)
        return NULL;
    cudaMemset(p, 0x3c, bytes);
    return p;
}

#endif
