/*
 * bench_model_train.c - `make bench` figures of the CPU fp32 model on a
 * ~20M-parameter Qwen2-shaped model (hidden 512, 4 layers, 8 heads / 2 KV
 * heads, intermediate 1408, vocabulary 8192, untied), random weights:
 *   1. training step throughput: forward + cross-entropy + backward + AdamW
 *      on 4 packed sequences of 256 tokens (tokens/s, ms/step, and the
 *      achieved GFLOP/s counting 6 * params * tokens plus causal attention);
 *   2. generation: batch 8, prompts of 32 tokens, 32 new tokens each with
 *      temperature sampling (new tokens/s, prefill included).
 * Threads: AREAL_THREADS (default: online CPUs) for the pool; OpenBLAS keeps
 * its own setting (OPENBLAS_NUM_THREADS). Each figure is the median of runs;
 * the CPU seconds per step (all threads) show how much of the wall time was
 * this process computing when the machine is shared.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "areal/model/generate.h"
#include "areal/model/heads.h"
#include "areal/model/model.h"
#include "areal/model/optim.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t lcg(uint64_t *x) {
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 33;
}

int main(void) {
    areal_model_config c;
    memset(&c, 0, sizeof c);
    c.arch = AREAL_ARCH_QWEN2;
    snprintf(c.model_type, sizeof c.model_type, "qwen2");
    c.vocab_size = 8192;
    c.hidden_size = 512;
    c.intermediate_size = 1408;
    c.num_layers = 4;
    c.num_heads = 8;
    c.num_kv_heads = 2;
    c.head_dim = 64;
    c.max_position_embeddings = 4096;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = 10000;
    c.qkv_bias = true;
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (getenv("AREAL_THREADS"))
        threads = atoi(getenv("AREAL_THREADS"));
    areal_pool *pool = NULL;
    areal_model m;
    areal_error err;
    if ((threads > 1 && areal_pool_create(threads, &pool, &err) != AREAL_OK) ||
        areal_model_init(&m, &c, pool, &err) != AREAL_OK) {
        fprintf(stderr, "bench_model_train: %s\n", err.msg);
        return 1;
    }
    uint64_t x = 1;
    for (size_t i = 0; i < m.n_params; i++)
        m.params[i] = ((float)(lcg(&x) % 2001) / 1000.0f - 1.0f) * 0.04f;
    for (size_t i = 0; i < m.n_specs; i++)
        if (strstr(m.specs[i].name, "norm") != NULL)
            for (int64_t j = 0; j < m.specs[i].shape[0]; j++)
                m.params[m.offset[i] + (size_t)j] = 1.0f;
    enum { NS = 4, L = 256, T = NS * L, RUNS = 3 };
    int32_t *tok = malloc(sizeof(int32_t) * T * 2), *tgt = tok + T, cu[NS + 1];
    float *dlogits = malloc(sizeof(float) * (size_t)T * c.vocab_size);
    areal_adamw opt;
    if (tok == NULL || dlogits == NULL || areal_adamw_init(&opt, m.n_params, &err) != AREAL_OK) {
        fprintf(stderr, "bench_model_train: out of memory\n");
        return 1;
    }
    for (int s = 0; s <= NS; s++)
        cu[s] = s * L;
    for (int t = 0; t < T; t++)
        tok[t] = (int32_t)(lcg(&x) % (uint64_t)c.vocab_size);
    for (int t = 0; t < T; t++)
        tgt[t] = (t + 1) % L ? tok[t + 1] : -1;
    areal_adamw_cfg ac = {1e-4, 0.9, 0.95, 1e-8, 0.1};
    double times[RUNS], cpus[RUNS], loss = 0;
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_s(), c0 = cpu_s();
        areal_batch b = {tok, cu, T, NS};
        areal_acts a;
        areal_model_zero_grad(&m);
        if (areal_model_forward(&m, &b, &a, &err) != AREAL_OK ||
            areal_cross_entropy(pool, a.logits, T, c.vocab_size, tgt, &loss, dlogits, &err) ||
            areal_model_backward(&m, &a, dlogits, &err) != AREAL_OK) {
            fprintf(stderr, "bench_model_train: %s\n", err.msg);
            return 1;
        }
        areal_clip_grad_norm(m.grads, m.n_params, 1.0);
        areal_adamw_step(&opt, &ac, ac.lr, m.params, m.grads, pool);
        areal_acts_free(&a);
        times[r] = now_s() - t0;
        cpus[r] = cpu_s() - c0;
    }
    qsort(times, RUNS, sizeof times[0], cmp_double);
    qsort(cpus, RUNS, sizeof cpus[0], cmp_double);
    double step = times[RUNS / 2];
    double flops = 6.0 * (double)m.n_params * T +
                   6.0 * c.num_layers * (double)NS * L * L * c.num_heads * c.head_dim;
    printf("model train step: %.1fM params, %d tokens (%dx%d packed), %d threads: %.0f ms/step, "
           "%.0f tokens/s, %.1f GFLOP/s; %.2f CPU s/step (loss %.3f)\n",
           (double)m.n_params / 1e6, T, NS, L, threads, step * 1e3, T / step, flops / step / 1e9,
           cpus[RUNS / 2], loss);
    enum { B = 8, P = 32, NEW = 32 };
    const int32_t *prompts[B];
    int plen[B];
    for (int b = 0; b < B; b++) {
        prompts[b] = tok + b * P;
        plen[b] = P;
    }
    areal_sampling sp = {.temperature = 1.0f, .top_p = 1.0f, .seed = 1, .max_new_tokens = NEW};
    areal_gen_out out[B];
    double g0 = now_s(), gc0 = cpu_s();
    if (areal_generate(&m, prompts, plen, B, &sp, out, &err) != AREAL_OK) {
        fprintf(stderr, "bench_model_train: %s\n", err.msg);
        return 1;
    }
    double gt = now_s() - g0, gc = cpu_s() - gc0;
    int made = 0;
    for (int b = 0; b < B; b++) {
        made += out[b].n;
        areal_gen_out_free(&out[b]);
    }
    printf("model generate: batch %d, prompts %d, %d new tokens each: %.0f new tokens/s "
           "(%.2f s, %.2f CPU s, prefill included)\n",
           B, P, NEW, made / gt, gt, gc);
    areal_adamw_free(&opt);
    free(tok);
    free(dlogits);
    areal_model_free(&m);
    areal_pool_destroy(pool);
    return 0;
}
