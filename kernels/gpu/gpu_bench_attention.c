/*
 * gpu_bench_attention.c - the attention kernels' speed (make bench-gpu):
 * causal GQA attention forward, backward and forward + backward TFLOP/s over
 * packed sequences of 2k and 8k tokens (16k tokens per step: 8 x 2k or 2 x
 * 8k) at the Qwen2-0.5B (14 / 2 heads of 64) and -1.5B (12 / 2 heads of 128)
 * shapes, against the H200's ~989 dense bf16 TFLOP/s (issue 17's goal: >=
 * 50% for forward + backward).
 *
 * FLOPs as FlashAttention counts them: forward 4 * sum_s len_s^2 / 2 * nh *
 * hd (QK^T and PV, causal half), backward 2.5 times that (five products
 * instead of two). Each figure is the median of 10 timed runs (CUDA events)
 * after 2 warm-ups, on constant small bf16 data (the kernels' speed does not
 * depend on the values). Exits 0 without a device (saying so), 1 when a
 * kernel fails.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "areal/error.h"
#include "areal/kernels/attention.h"

#define PEAK_TFLOPS 989.0
#define WARM        2
#define ITERS       10

typedef struct attn_ctx {
    uint16_t *q, *k, *v, *o, *dout, *dq, *dk, *dv;
    float *lse, *delta;
    int32_t *cu;
    areal_k_attn_shape s;
    int which; /* 0 fwd, 1 bwd, 2 fwd + bwd */
} attn_ctx;

static int run(attn_ctx *c, areal_error *err) {
    int rc = AREAL_OK;
    if (c->which != 1)
        rc = areal_k_attn_fwd(c->o, c->lse, c->q, c->k, c->v, c->cu, c->s, NULL, err);
    if (rc == AREAL_OK && c->which != 0)
        rc = areal_k_attn_bwd(c->dq, c->dk, c->dv, c->delta, c->dout, c->o, c->lse, c->q, c->k,
                              c->v, c->cu, c->s, NULL, err);
    return rc;
}

static int cmpf(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* the median ms of run(c), or -1 (err says why) */
static float time_ms(attn_ctx *c, areal_error *err) {
    cudaEvent_t a, b;
    float t[ITERS];
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < WARM; i++)
        if (run(c, err) != AREAL_OK)
            return -1;
    for (int i = 0; i < ITERS; i++) {
        cudaEventRecord(a, NULL);
        if (run(c, err) != AREAL_OK)
            return -1;
        cudaEventRecord(b, NULL);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&t[i], a, b);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    qsort(t, ITERS, sizeof t[0], cmpf);
    return t[ITERS / 2];
}

static void *dev(size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess)
        return NULL;
    cudaMemset(p, 0x3c, bytes); /* bf16 0.0115: finite softmax, no overflow */
    return p;
}

static int bench(const char *model, int nh, int nkv, int hd, int len, int T) {
    attn_ctx c;
    memset(&c, 0, sizeof c);
    int n_seqs = T / len;
    size_t tq = (size_t)T * nh * hd * 2, tk = (size_t)T * nkv * hd * 2;
    c.q = dev(tq), c.o = dev(tq), c.dout = dev(tq), c.dq = dev(tq);
    c.k = dev(tk), c.v = dev(tk), c.dk = dev(tk), c.dv = dev(tk);
    c.lse = dev((size_t)T * nh * 4), c.delta = dev((size_t)T * nh * 4);
    c.cu = dev(sizeof(int32_t) * (size_t)(n_seqs + 1));
    int rc = 0;
    if (!c.q || !c.o || !c.dout || !c.dq || !c.k || !c.v || !c.dk || !c.dv || !c.lse || !c.delta ||
        !c.cu) {
        printf("attn %s: out of device memory\n", model);
        rc = 1;
    }
    int32_t cu[64];
    for (int s = 0; s <= n_seqs && s < 64; s++)
        cu[s] = s * len;
    if (rc == 0)
        cudaMemcpy(c.cu, cu, sizeof(int32_t) * (size_t)(n_seqs + 1), cudaMemcpyHostToDevice);
    c.s = (areal_k_attn_shape){T, n_seqs, len, nh, nkv, hd, 1.0f / sqrtf((float)hd)};
    double fwd = 4.0 * (double)n_seqs * len * (double)len / 2.0 * nh * hd;
    const double flops[3] = {fwd, 2.5 * fwd, 3.5 * fwd};
    static const char *const what[3] = {"fwd", "bwd", "fwd+bwd"};
    for (int w = 0; rc == 0 && w < 3; w++) {
        areal_error err;
        areal_error_clear(&err);
        c.which = w;
        float ms = time_ms(&c, &err);
        if (ms < 0) {
            printf("attn %s len %d %s FAILED: %s\n", model, len, what[w], err.msg);
            rc = 1;
            break;
        }
        double tf = flops[w] / (ms * 1e-3) / 1e12;
        printf("attn %-4s %2d/%d heads of %3d, %d x %5d tokens %-8s %8.3f ms %6.1f TFLOP/s "
               "(%4.1f%% of %g)\n",
               model, nh, nkv, hd, n_seqs, len, what[w], ms, tf, 100 * tf / PEAK_TFLOPS,
               PEAK_TFLOPS);
    }
    cudaFree(c.q), cudaFree(c.o), cudaFree(c.dout), cudaFree(c.dq), cudaFree(c.k);
    cudaFree(c.v), cudaFree(c.dk), cudaFree(c.dv), cudaFree(c.lse), cudaFree(c.delta);
    cudaFree(c.cu);
    return rc;
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("gpu_bench_attention: no CUDA device; nothing measured\n");
        return 0;
    }
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("gpu_bench_attention on %s (peak used: %g bf16 TFLOP/s)\n", prop.name, PEAK_TFLOPS);
    const int T = 16384;
    int rc = 0;
    rc |= bench("0.5B", 14, 2, 64, 2048, T);
    rc |= bench("0.5B", 14, 2, 64, 8192, T);
    rc |= bench("1.5B", 12, 2, 128, 2048, T);
    rc |= bench("1.5B", 12, 2, 128, 8192, T);
    return rc;
}
