/*
 * gpu_bench_attention.c - the attention kernels' speed (make bench-gpu):
 * causal GQA attention forward, backward and forward + backward TFLOP/s over
 * packed sequences of 2k and 8k tokens (16k tokens per step: 8 x 2k or 2 x
 * 8k) at the Qwen2-0.5B (14 / 2 heads of 64) and -1.5B (12 / 2 heads of 128)
 * shapes, against the H200's ~989 dense bf16 TFLOP/s (issue 17's goal: >=
 * 50% for forward + backward). Two peers per shape, in one run: the
 * tensor-core kernels (areal_k_attn_tc_*, what the model's calls dispatch
 * to at these shapes) and the scalar reference kernels (areal_k_attn_ref_*),
 * forward + backward only and fewer runs (they are an order slower).
 *
 * FLOPs as FlashAttention counts them (areal_k_attn_flops_fwd): forward
 * 4 * sum_s len_s^2 / 2 * nh * hd (QK^T and PV, causal half), backward 2.5
 * times that (five products instead of two; our dQ pass recomputes two more,
 * not counted). Each figure is the median of 10 timed runs (3 for the
 * scalar kernels) after 2 warm-ups (1), timed by kbench.h. Exits 0 without
 * a device (saying so), 1 when a kernel fails.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "areal/error.h"
#include "areal/kernels/attention.h"
#include "areal/kernels/attention_plan.h"
#include "kbench.h"

typedef struct attn_ctx {
    uint16_t *q, *k, *v, *o, *dout, *dq, *dk, *dv;
    float *lse, *delta;
    int32_t *cu;
    areal_k_attn_shape s;
    int which; /* 0 fwd, 1 bwd, 2 fwd + bwd */
    int ref;   /* 1: the scalar kernels */
} attn_ctx;

static int run(void *ctx, areal_error *err) {
    attn_ctx *c = ctx;
    int rc = AREAL_OK;
    if (c->which != 1)
        rc = c->ref ? areal_k_attn_ref_fwd(c->o, c->lse, c->q, c->k, c->v, c->cu, c->s, NULL, err)
                    : areal_k_attn_tc_fwd(c->o, c->lse, c->q, c->k, c->v, c->cu, c->s, NULL, err);
    if (rc == AREAL_OK && c->which != 0)
        rc = c->ref ? areal_k_attn_ref_bwd(c->dq, c->dk, c->dv, c->delta, c->dout, c->o, c->lse,
                                           c->q, c->k, c->v, c->cu, c->s, NULL, err)
                    : areal_k_attn_tc_bwd(c->dq, c->dk, c->dv, c->delta, c->dout, c->o, c->lse,
                                          c->q, c->k, c->v, c->cu, c->s, NULL, err);
    return rc;
}

static int bench(const char *model, int nh, int nkv, int hd, int len, int T) {
    attn_ctx c;
    memset(&c, 0, sizeof c);
    int n_seqs = T / len;
    size_t tq = (size_t)T * nh * hd * 2, tk = (size_t)T * nkv * hd * 2;
    c.q = kb_dev(tq), c.o = kb_dev(tq), c.dout = kb_dev(tq), c.dq = kb_dev(tq);
    c.k = kb_dev(tk), c.v = kb_dev(tk), c.dk = kb_dev(tk), c.dv = kb_dev(tk);
    c.lse = kb_dev((size_t)T * nh * 4), c.delta = kb_dev((size_t)T * nh * 4);
    c.cu = kb_dev(sizeof(int32_t) * (size_t)(n_seqs + 1));
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
    const double fwd = areal_k_attn_flops_fwd(cu, n_seqs, nh, hd);
    const double flops[3] = {fwd, 2.5 * fwd, 3.5 * fwd};
    static const char *const what[3] = {"fwd", "bwd", "fwd+bwd"};
    /* tensor cores: fwd, bwd, fwd+bwd; then the scalar peer: fwd+bwd */
    static const int runs[4][2] = {{0, 0}, {1, 0}, {2, 0}, {2, 1}};
    for (int r = 0; rc == 0 && r < 4; r++) {
        areal_error err;
        areal_error_clear(&err);
        c.which = runs[r][0], c.ref = runs[r][1];
        float ms = kb_time_ms(run, &c, c.ref ? 1 : 2, c.ref ? 3 : 10, &err);
        const char *kind = c.ref ? "scalar" : "tc";
        if (ms < 0) {
            printf("attn %s len %d %s %s FAILED: %s\n", model, len, kind, what[c.which], err.msg);
            rc = 1;
            break;
        }
        double tf = flops[c.which] / (ms * 1e-3) / 1e12;
        printf("attn %-4s %2d/%d heads of %3d, %d x %5d tokens %-6s %-8s %8.3f ms %6.1f TFLOP/s "
               "(%4.1f%% of %g)\n",
               model, nh, nkv, hd, n_seqs, len, kind, what[c.which], ms, tf,
               100 * tf / KB_PEAK_TFLOPS, KB_PEAK_TFLOPS);
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
    printf("gpu_bench_attention on %s (peak used: %g bf16 TFLOP/s)\n", prop.name, KB_PEAK_TFLOPS);
    const int T = 16384;
    int rc = 0;
    rc |= bench("0.5B", 14, 2, 64, 2048, T);
    rc |= bench("0.5B", 14, 2, 64, 8192, T);
    rc |= bench("1.5B", 12, 2, 128, 2048, T);
    rc |= bench("1.5B", 12, 2, 128, 8192, T);
    return rc;
}
