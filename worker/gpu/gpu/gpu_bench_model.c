/*
 * gpu_bench_model.c - the GPU model's speed on the H200 (make bench-gpu):
 * training tokens/s and MFU for Qwen2-shaped 0.5B and 1.5B models (Qwen2.5's
 * sizes, random weights drawn on the device) at 8k tokens per step (one
 * sequence of 8192) and 16k (8 sequences of 2048), and decode tokens/s at batch 1, 32 and 256 for
 * the 0.5B shape at 1024 keys per sequence with the achieved fraction of HBM bandwidth.
 *
 * MFU = (6 N T + attention) / step time / 989 TFLOP/s (dense bf16 peak, see
 * the reference numbers): N the matrices' parameters (every weight but the
 * embedding gather; the tied LM head counts), attention 6 nh hd sum_s L_s^2
 * per layer (forward: QK^T and PV, 2 FLOPs per multiply-add, over the
 * causal half of L^2 = 2 nh hd L^2; the backward twice that). Decode bandwidth = (bf16 weights +
 * the keys and values read) / step time against 4.8 TB/s. Each figure is the median of the timed
 * runs after warm-ups (wall clock around a synchronised step: the step synchronises itself). Prints
 * one line per figure; exits 0 without a device (saying so), 1 when a step fails.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "areal/error.h"
#include "areal/gpumodel/model.h"

#define PEAK_TFLOPS 989.0
#define PEAK_GBS    4800.0

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct shape {
    const char *name;
    int hidden, inter, layers, heads, kv_heads;
} shape;

static const shape s05 = {"qwen2-0.5B", 896, 4864, 24, 14, 2};
static const shape s15 = {"qwen2-1.5B", 1536, 8960, 28, 12, 2};

/* a Qwen2 config of shape s: the tiny fixture's config with the sizes replaced */
static int make_model(const shape *s, areal_model *m, areal_error *err) {
    areal_model_config c;
    int rc =
        areal_model_config_load("worker/model/tests/fixtures/hf/qwen2-bf16/config.json", &c, err);
    if (rc != AREAL_OK)
        return rc;
    c.vocab_size = 151936;
    c.hidden_size = s->hidden;
    c.intermediate_size = s->inter;
    c.num_layers = s->layers;
    c.num_heads = s->heads;
    c.num_kv_heads = s->kv_heads;
    c.head_dim = s->hidden / s->heads;
    c.tie_word_embeddings = true;
    c.max_position_embeddings = 32768;
    c.rope_theta = 1e6;
    return areal_model_init(m, &c, NULL, err); /* zero host buffers: never touched here */
}

static int bench_train(const shape *s, int n_seqs, int len, areal_error *err) {
    areal_model m;
    int rc = make_model(s, &m, err);
    if (rc != AREAL_OK)
        return rc;
    int T = n_seqs * len;
    areal_gpu_model *g = NULL;
    rc = areal_gpu_model_create(&m, T, n_seqs, 4096, &g, err);
    int nh = m.cfg.num_heads, hd = m.cfg.head_dim, L = m.cfg.num_layers, V = m.cfg.vocab_size;
    areal_model_free(&m);
    if (rc == AREAL_OK)
        rc = areal_gpu_model_randomize(g, 1234, 0.02f, err);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)T), *tgt = malloc(sizeof(int32_t) * (size_t)T);
    int32_t *cu = malloc(sizeof(int32_t) * (size_t)(n_seqs + 1));
    if (tok == NULL || tgt == NULL || cu == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the batch");
    for (int t = 0; rc == AREAL_OK && t < T; t++) {
        tok[t] = (int32_t)(((uint64_t)t * 2654435761u) % (uint64_t)V);
        tgt[t] = (t + 1) % len == 0 ? -1 : (int32_t)(((uint64_t)(t + 1) * 2654435761u) % V);
    }
    for (int i = 0; rc == AREAL_OK && i <= n_seqs; i++)
        cu[i] = i * len;
    areal_batch b = {tok, cu, T, n_seqs};
    areal_gpu_step_cfg sc = {{1e-5f, 0.9f, 0.95f, 1e-8f, 0.01f, 0}, 1.0f};
    areal_gpu_step_out so;
    enum { WARM = 2, RUNS = 5 };
    double t[RUNS];
    for (int i = 0; rc == AREAL_OK && i < WARM + RUNS; i++) {
        double t0 = now();
        rc = areal_gpu_train_step(g, &b, tgt, &sc, &so, err);
        if (i >= WARM)
            t[i - WARM] = now() - t0;
    }
    if (rc == AREAL_OK) {
        qsort(t, RUNS, sizeof t[0], cmpd);
        double sec = t[RUNS / 2], N = areal_gpu_model_matmul_params(g);
        double attn = 6.0 * nh * hd * (double)len * len * n_seqs * L; /* see the top */
        double flops = 6.0 * N * T + attn;
        printf("train %s: %d tokens (%d x %d) per step: %.1f ms, %.0f tokens/s, %.1f TFLOP/s, "
               "MFU %.1f%% of %.0f (N %.3g matmul params; loss %.3f, grad norm %.3g)\n",
               s->name, T, n_seqs, len, 1e3 * sec, T / sec, flops / sec / 1e12,
               100.0 * flops / sec / (PEAK_TFLOPS * 1e12), PEAK_TFLOPS, N, so.loss, so.grad_norm);
    }
    free(tok);
    free(tgt);
    free(cu);
    areal_gpu_model_free(g);
    return rc;
}

static int bench_decode(const shape *s, areal_error *err) {
    areal_model m;
    int rc = make_model(s, &m, err);
    if (rc != AREAL_OK)
        return rc;
    areal_gpu_model *g = NULL;
    rc = areal_gpu_model_create(&m, 1, 1, 1, &g, err);
    int L = m.cfg.num_layers, KV = m.cfg.num_kv_heads * m.cfg.head_dim, V = m.cfg.vocab_size;
    areal_model_free(&m);
    if (rc == AREAL_OK)
        rc = areal_gpu_model_randomize(g, 99, 0.02f, err);
    const int keys = 1024, bs = 16, per = keys / bs, maxB = 256;
    areal_gpu_kv_cfg kv = {maxB, bs, maxB * per, per};
    if (rc == AREAL_OK)
        rc = areal_gpu_decode_init(g, &kv, err);
    int32_t *table = malloc(sizeof(int32_t) * (size_t)maxB * per);
    int32_t *tok = malloc(sizeof(int32_t) * maxB), *pos = malloc(sizeof(int32_t) * maxB);
    int32_t *next = malloc(sizeof(int32_t) * maxB);
    float *lp = malloc(sizeof(float) * maxB);
    if (table == NULL || tok == NULL || pos == NULL || next == NULL || lp == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the decode batch");
    for (int i = 0; rc == AREAL_OK && i < maxB * per; i++)
        table[i] = i;
    for (int i = 0; rc == AREAL_OK && i < maxB; i++) {
        tok[i] = (int32_t)((i * 7919) % V);
        pos[i] = keys - 1; /* attends 1024 keys */
    }
    static const int batches[] = {1, 32, 256};
    areal_k_sample_cfg greedy = {0.0f, 0, 1.0f};
    /* each batch plain, then replayed from CUDA graphs (captured in the warm-up) */
    for (int k = 0; rc == AREAL_OK && k < 6; k++) {
        int B = batches[k % 3], graphs = k >= 3;
        if (k == 3)
            rc = areal_gpu_decode_graphs(g, true, err);
        enum { WARM = 5, RUNS = 30 };
        double t[RUNS];
        for (int i = 0; rc == AREAL_OK && i < WARM + RUNS; i++) {
            double t0 = now();
            rc = areal_gpu_decode_step(g, B, tok, pos, table, greedy, NULL, next, lp, NULL, err);
            if (i >= WARM)
                t[i - WARM] = now() - t0;
        }
        if (rc != AREAL_OK)
            break;
        qsort(t, RUNS, sizeof t[0], cmpd);
        double sec = t[RUNS / 2];
        double bytes =
            (double)areal_gpu_model_weight_bytes(g) + (double)B * keys * L * 2.0 * KV * 2;
        printf("decode %s%s: batch %d at %d keys: %.3f ms/step, %.0f tokens/s, %.0f GB/s = %.1f%% "
               "of %.0f GB/s HBM\n",
               s->name, graphs ? " (CUDA graphs)" : "", B, keys, 1e3 * sec, B / sec,
               bytes / sec / 1e9, 100.0 * bytes / sec / (PEAK_GBS * 1e9), PEAK_GBS);
    }
    free(table);
    free(tok);
    free(pos);
    free(next);
    free(lp);
    areal_gpu_model_free(g);
    return rc;
}

int main(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("gpu_bench_model: no CUDA device (%s); nothing measured\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 0;
    }
    areal_error err;
    areal_error_clear(&err);
    int rc = bench_decode(&s05, &err);
    /* 8k tokens in one sequence (the long-context end) and 16k in 8 x 2k, per issue 17 */
    if (rc == AREAL_OK)
        rc = bench_train(&s05, 1, 8192, &err);
    if (rc == AREAL_OK)
        rc = bench_train(&s05, 8, 2048, &err);
    if (rc == AREAL_OK)
        rc = bench_train(&s15, 1, 8192, &err);
    if (rc == AREAL_OK)
        rc = bench_train(&s15, 8, 2048, &err);
    if (rc != AREAL_OK) {
        printf("gpu_bench_model: %s\n", err.msg);
        return 1;
    }
    return 0;
}
