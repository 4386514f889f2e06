/*
 * gpu_test_dp.c - the GPU step's data-parallel reduction on its own stream
 * (areal_gpu_model_set_dp) is ordered by events between the backward and the
 * optimizer (make test-gpu; skipped without a device). One process, one GPU:
 * the "group" is a fake hook on a second, non-blocking stream that does what
 * a reduction may do - read the gradients (a snapshot copy) and write them
 * (here: zero them all, as a mean with a rank whose gradients cancel would) -
 * and returns without waiting, so only the events order it:
 * - the snapshot equals the gradients of the same step without DP (the group
 *   stream started after the backward; before it, it would copy zeros or a
 *   half-written buffer);
 * - the step's gradients are all zero and every weight moved by exactly the
 *   decoupled weight decay (AdamW with zero gradients: p (1 - lr wd)), so the
 *   optimizer ran after the reduction (before it, the weights would carry
 *   lr-sized updates).
 * A real group passes areal_ncclpg_all_reduce (AREAL_AVG) and
 * areal_ncclpg_stream (worker/comm/nccl) through the same hook.
 * Tolerances: snapshot vs plain gradients ||d|| <= 1e-5 ||ref|| (the
 * embedding's backward adds with atomics, in any order); weights within
 * 1e-6 |p| + 1e-12 of p (1 - lr wd) (one fp32 rounding).
 */
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

#include "../../../kernels/gpu/ktest.h"
#include "areal/gpumodel/model.h"

#define HF "worker/model/tests/fixtures/hf/"

typedef struct fake_group {
    cudaStream_t stream;
    float *snap; /* device copy of what the reduction saw */
    int calls;
} fake_group;

static int fake_mean(void *ctx, float *buf, size_t n, areal_error *err) {
    fake_group *f = ctx;
    f->calls++;
    if (cudaMemcpyAsync(f->snap, buf, n * sizeof(float), cudaMemcpyDeviceToDevice, f->stream) !=
            cudaSuccess ||
        cudaMemsetAsync(buf, 0, n * sizeof(float), f->stream) != cudaSuccess)
        return areal_error_set(err, AREAL_EIO, -1, "fake group: copy / memset failed");
    return AREAL_OK; /* no wait: the model's events alone order it */
}

static double l2d(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (b != NULL ? b[i] : 0.0f);
        s += d * d;
    }
    return sqrt(s);
}

static void test_dp_stream_ordering(void **state) {
    (void)state;
    kt_need_device();
    areal_model m;
    KT_OK(areal_model_load(&m, HF "qwen3-bf16", NULL, KT_ERR));
    const int V = m.cfg.vocab_size;
    int cu[3] = {0, 11, 24}, T = 24;
    int32_t tok[24], tgt[24];
    uint64_t seed = 0xd9ull;
    for (int t = 0; t < T; t++)
        tok[t] = (int32_t)(kt_rnd(&seed) % (uint32_t)V);
    for (int t = 0; t < T; t++)
        tgt[t] = t + 1 == cu[1] || t + 1 == cu[2] ? -1 : tok[t + 1];
    areal_batch b = {tok, cu, T, 2};
    const float lr = 1e-3f, wd = 0.01f;
    areal_gpu_step_cfg sc = {{lr, 0.9f, 0.999f, 1e-8f, wd, 0}, 0.0f};
    size_t n = m.n_params;
    float *ga = malloc(sizeof(float) * n), *gb = malloc(sizeof(float) * n);
    float *pb = malloc(sizeof(float) * n), *snap = malloc(sizeof(float) * n);
    /* the plain step */
    areal_gpu_model *g = NULL;
    KT_OK(areal_gpu_model_create(&m, T, 2, 0, &g, KT_ERR));
    KT_OK(areal_gpu_model_upload(g, &m, KT_ERR));
    areal_gpu_step_out so;
    KT_OK(areal_gpu_train_step(g, &b, tgt, &sc, &so, KT_ERR));
    KT_OK(areal_gpu_model_download(g, NULL, ga, KT_ERR));
    areal_gpu_model_free(g);
    /* the same step with the fake group on its own stream */
    fake_group f = {NULL, NULL, 0};
    assert_int_equal(cudaStreamCreateWithFlags(&f.stream, cudaStreamNonBlocking), cudaSuccess);
    f.snap = kt_dev(sizeof(float) * n);
    KT_OK(areal_gpu_model_create(&m, T, 2, 0, &g, KT_ERR));
    KT_OK(areal_gpu_model_upload(g, &m, KT_ERR));
    areal_gpu_dp dp = {fake_mean, &f, f.stream};
    KT_OK(areal_gpu_model_set_dp(g, &dp, KT_ERR));
    KT_OK(areal_gpu_train_step(g, &b, tgt, &sc, &so, KT_ERR));
    KT_OK(areal_gpu_model_download(g, pb, gb, KT_ERR));
    assert_int_equal(cudaStreamSynchronize(f.stream), cudaSuccess);
    kt_down(snap, f.snap, sizeof(float) * n);
    assert_int_equal(f.calls, 1);
    double ref = l2d(ga, NULL, n), d = l2d(snap, ga, n);
    printf("DP on its own stream: |snapshot - plain grads| %.3g of |plain| %.3g; |grads after| "
           "%.3g\n",
           d, ref, l2d(gb, NULL, n));
    assert_true(ref > 0 && d <= 1e-5 * ref);
    assert_true(l2d(gb, NULL, n) == 0.0);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double want = (double)m.params[i] * (1.0 - (double)lr * wd);
        if (!(fabs(pb[i] - want) <= 1e-6 * fabs(want) + 1e-12))
            bad++;
    }
    printf("  weights after: %zu of %zu off the pure decay\n", bad, n);
    assert_int_equal(bad, 0);
    /* refusals; and DP off again */
    areal_gpu_dp no_stream = {fake_mean, &f, NULL};
    areal_error e;
    assert_int_equal(areal_gpu_model_set_dp(g, &no_stream, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "stream"));
    KT_OK(areal_gpu_model_set_dp(g, NULL, KT_ERR));
    areal_gpu_model_free(g);
    cudaFree(f.snap);
    cudaStreamDestroy(f.stream);
    free(ga), free(gb), free(pb), free(snap);
    areal_model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dp_stream_ordering),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
