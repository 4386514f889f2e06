/*
 * gpu_bench_kernels.c - the kernels' speed against the H200's peaks (make
 * bench-gpu): bf16 GEMM TFLOP/s at the Qwen2-0.5B and -1.5B layer shapes
 * (forward y = x W^T, input gradient, fp32 weight gradient) against ~989
 * dense bf16 TFLOP/s, and the memory-bound kernels' bytes moved per second
 * against ~4.8 TB/s HBM. Each figure is the median of 20 timed runs (CUDA
 * events) after 3 warm-ups (kbench.h, shared with gpu_bench_attention.c), on
 * constant small bf16 data. Prints one line per figure;
 * exits 0 without a device (saying so), 1 when a kernel fails.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "areal/error.h"
#include "areal/kernels/gemm.h"
#include "areal/kernels/layers.h"
#include "areal/kernels/optim.h"
#include "areal/kernels/vocab.h"
#include "kbench.h"

#define PEAK_TFLOPS KB_PEAK_TFLOPS
#define PEAK_GBS    KB_PEAK_GBS
#define WARM        3
#define ITERS       20

typedef kb_fn bench_fn;

static float time_ms(bench_fn fn, void *ctx, areal_error *err) {
    return kb_time_ms(fn, ctx, WARM, ITERS, err);
}

typedef struct gemm_ctx {
    areal_k_gemm *h;
    areal_k_gemm_args a;
} gemm_ctx;

static int run_gemm(void *c, areal_error *err) {
    gemm_ctx *g = c;
    return areal_k_gemm_run(g->h, &g->a, NULL, err);
}

/* forward, input gradient and weight gradient of y[T,N] = x[T,K] W[N,K]^T */
static int bench_linear(areal_k_gemm *h, const char *model, const char *name, int T, int N, int K) {
    uint16_t *x = kb_dev((size_t)T * K * 2), *w = kb_dev((size_t)N * K * 2);
    uint16_t *y = kb_dev((size_t)T * N * 2);
    float *dw = kb_dev((size_t)N * K * 4);
    if (x == NULL || w == NULL || y == NULL || dw == NULL) {
        printf("gemm %s %s: out of device memory\n", model, name);
        return 1;
    }
    struct {
        const char *pass;
        areal_k_gemm_args a;
    } p[3] = {
        {"fwd  y=xW^T",
         {.M = T,
          .N = N,
          .K = K,
          .trans_b = 1,
          .A = x,
          .B = w,
          .C = y,
          .c_type = AREAL_K_OUT_BF16,
          .alpha = 1}},
        {"dgrad dx=dyW",
         {.M = T, .N = K, .K = N, .A = y, .B = w, .C = x, .c_type = AREAL_K_OUT_BF16, .alpha = 1}},
        {"wgrad dW+=dy^Tx",
         {.M = N,
          .N = K,
          .K = T,
          .trans_a = 1,
          .A = y,
          .B = x,
          .C = dw,
          .c_type = AREAL_K_OUT_F32,
          .alpha = 1,
          .beta = 1}},
    };
    int rc = 0;
    for (int i = 0; i < 3; i++) {
        gemm_ctx c = {h, p[i].a};
        areal_error err;
        areal_error_clear(&err);
        float ms = time_ms(run_gemm, &c, &err);
        if (ms < 0) {
            printf("gemm %s %-8s %-16s FAILED: %s\n", model, name, p[i].pass, err.msg);
            rc = 1;
            continue;
        }
        double tf = 2.0 * T * N * K / (ms * 1e-3) / 1e12;
        printf("gemm %s %-8s %-16s T %5d N %6d K %5d: %8.3f ms %7.1f TFLOP/s (%4.1f%% of %g)\n",
               model, name, p[i].pass, T, N, K, ms, tf, 100 * tf / PEAK_TFLOPS, PEAK_TFLOPS);
    }
    cudaFree(x), cudaFree(w), cudaFree(y), cudaFree(dw);
    return rc;
}

typedef struct mem_ctx {
    int which;
    size_t n, rows;
    int D;
    uint16_t *a, *b, *c;
    float *f, *m, *v, *g;
    int32_t *tg;
} mem_ctx;

static int run_mem(void *p, areal_error *err) {
    mem_ctx *c = p;
    areal_k_adamw_cfg cfg = {
        .lr = 1e-6f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f, .step = 1};
    switch (c->which) {
    case 0:
        return areal_k_rmsnorm_fwd(c->c, c->f, c->a, c->b, c->rows, c->D, 1e-6f, NULL, err);
    case 1:
        return areal_k_swiglu_fwd(c->c, c->a, c->b, c->n, NULL, err);
    case 2:
        return areal_k_add(c->c, c->a, c->b, c->n, NULL, err);
    case 3:
        return areal_k_adamw(c->f, c->a, c->g, c->m, c->v, c->n, NULL, cfg, NULL, err);
    default:
        return areal_k_logprob_fwd(c->f, c->m, c->v, c->a, c->D, c->tg, c->rows, c->D, 1.0f, NULL,
                                   err);
    }
}

static int bench_mem(const char *name, mem_ctx *c, double bytes) {
    areal_error err;
    areal_error_clear(&err);
    float ms = time_ms(run_mem, c, &err);
    if (ms < 0) {
        printf("mem %-34s FAILED: %s\n", name, err.msg);
        return 1;
    }
    double gbs = bytes / (ms * 1e-3) / 1e9;
    printf("mem %-34s %8.3f ms %7.0f GB/s (%4.1f%% of %g)\n", name, ms, gbs, 100 * gbs / PEAK_GBS,
           PEAK_GBS);
    return 0;
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("gpu_bench_kernels: no CUDA device; nothing measured\n");
        return 0;
    }
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("gpu_bench_kernels on %s (peaks used: %g bf16 TFLOP/s, %g GB/s)\n", prop.name,
           PEAK_TFLOPS, PEAK_GBS);
    areal_k_gemm *h = NULL;
    areal_error err;
    areal_error_clear(&err);
    if (areal_k_gemm_create(0, &h, &err) != AREAL_OK) {
        printf("areal_k_gemm_create: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    const int T = 8192;
    /* Qwen2-0.5B: H 896, 14 heads / 2 KV heads of 64, I 4864, V 151936 */
    rc |= bench_linear(h, "0.5B", "qkv", T, 896 + 2 * 2 * 64, 896);
    rc |= bench_linear(h, "0.5B", "o", T, 896, 896);
    rc |= bench_linear(h, "0.5B", "gate_up", T, 2 * 4864, 896);
    rc |= bench_linear(h, "0.5B", "down", T, 896, 4864);
    rc |= bench_linear(h, "0.5B", "lm_head", 2048, 151936, 896);
    /* Qwen2-1.5B: H 1536, 12 heads / 2 KV heads of 128, I 8960 */
    rc |= bench_linear(h, "1.5B", "qkv", T, 1536 + 2 * 2 * 128, 1536);
    rc |= bench_linear(h, "1.5B", "o", T, 1536, 1536);
    rc |= bench_linear(h, "1.5B", "gate_up", T, 2 * 8960, 1536);
    rc |= bench_linear(h, "1.5B", "down", T, 1536, 8960);
    rc |= bench_linear(h, "1.5B", "lm_head", 2048, 151936, 1536);
    areal_k_gemm_destroy(h);

    const size_t n = (size_t)T * 8960,
                 P = (size_t)256 << 20; /* 1.5B MLP activations; 256M params */
    mem_ctx c = {.n = n, .rows = T, .D = 1536};
    c.a = kb_dev(P * 2), c.b = kb_dev(n * 2), c.c = kb_dev(n * 2);
    c.f = kb_dev(P * 4), c.m = kb_dev(P * 4), c.v = kb_dev(P * 4), c.g = kb_dev(P * 4);
    c.tg = kb_dev((size_t)2048 * 4);
    if (!c.a || !c.b || !c.c || !c.f || !c.m || !c.v || !c.g || !c.tg) {
        printf("mem: out of device memory\n");
        return 1;
    }
    cudaMemset(c.tg, 0, 2048 * 4);
    c.which = 0;
    rc |= bench_mem("rmsnorm fwd [8192,1536]", &c, 2.0 * 2 * T * 1536);
    c.which = 1;
    rc |= bench_mem("swiglu fwd [8192,8960]", &c, 3.0 * 2 * n);
    c.which = 2;
    rc |= bench_mem("residual add [8192,8960]", &c, 3.0 * 2 * n);
    c.which = 3, c.n = P;
    rc |= bench_mem("adamw 256M params (fp32 + bf16)", &c, 30.0 * P);
    c.which = 4, c.rows = 2048, c.D = 151936;
    rc |= bench_mem("logprob+entropy [2048,151936]", &c, 2.0 * 2048 * 151936);
    cudaFree(c.a), cudaFree(c.b), cudaFree(c.c), cudaFree(c.f), cudaFree(c.m), cudaFree(c.v);
    cudaFree(c.g), cudaFree(c.tg);
    return rc;
}
