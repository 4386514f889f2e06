/*
 * bench_model_train.c - `make bench` figures of the CPU fp32 model on a
 * ~20M-parameter Qwen2-shaped model (hidden 512, 4 layers, 8 heads / 2 KV
 * heads, intermediate 1408, vocabulary 8192, untied), random weights:
 *   1. training step throughput: forward + cross-entropy + backward + grad
 *      clip + AdamW on 4 packed sequences of 256 tokens (tokens/s; one warm-up
 *      step, then the median of 3);
 *   2. generation: batch 8, prompts of 32 tokens, 32 new tokens each with
 *      temperature sampling (new tokens/s, prefill included);
 *   3. PyTorch CPU on the same shapes, batch and generation in the same run
 *      (worker/model/bench/torch_step.py through AREAL_BENCH_PYTHON, default
 *      python3), and the ratio ours / PyTorch; skipped with one line when that
 *      python cannot import torch and transformers;
 *   4. OpenBLAS sgemm peak (a 2048^3 square product, best of 3) and the
 *      fraction of it the model's matrix products reach, two ways: (a) the
 *      FLOPs of every sgemm of a step (linear layers 6 * T * weights, and the
 *      causal-block attention products the kernel computes) over the whole step
 *      time, a lower bound since the step also does non-BLAS work; (b) the
 *      same sgemm shapes and transposes replayed alone on compact operands,
 *      the matrix products' own rate. Timers inside the library were rejected
 *      (they would need mutable global counters).
 * AREAL_BENCH_TRAIN_ONLY=1 stops after the training steps (for `perf record`).
 * Threads: 1 by default for both sides, to be fair on a shared machine;
 * AREAL_BENCH_THREADS=N raises it (the pool, OpenBLAS and torch all get N).
 * CPU seconds show how much of the wall time was this process computing; the
 * ratios are printed by wall time and by CPU seconds (the latter holds when
 * other work shares the cores, at 1 thread).
 */
#include <cblas.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "areal/clock.h"
#include "areal/model/generate.h"
#include "areal/model/heads.h"
#include "areal/model/model.h"
#include "areal/model/optim.h"

enum { NS = 4, L = 256, T = NS * L, RUNS = 3, GB = 8, GP = 32, GNEW = 32, PEAK_N = 2000 };

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

static void config(areal_model_config *c) {
    memset(c, 0, sizeof *c);
    c->arch = AREAL_ARCH_QWEN2;
    snprintf(c->model_type, sizeof c->model_type, "qwen2");
    c->vocab_size = 8192;
    c->hidden_size = 512;
    c->intermediate_size = 1408;
    c->num_layers = 4;
    c->num_heads = 8;
    c->num_kv_heads = 2;
    c->head_dim = 64;
    c->max_position_embeddings = 4096;
    c->rms_norm_eps = 1e-6;
    c->rope_theta = 10000;
    c->qkv_bias = true;
}

/* sgemm of row-major compact operands: C[M,N] = op(A) op(B), 2 M N K FLOPs. */
static double gemm(int ta, int tb, int M, int N, int K, const float *A, const float *B, float *C) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                K, 1.0f, A, ta ? M : K, B, tb ? K : N, 0.0f, C, N);
    return 2.0 * M * N * K;
}

/* The three products of one linear layer of a step: y = x W^T, dx = dy W, dW = dy^T x. */
static double linear3(int n_in, int n_out, const float *A, const float *B, float *C) {
    return gemm(0, 1, T, n_out, n_in, A, B, C) + gemm(0, 0, T, n_in, n_out, A, B, C) +
           gemm(1, 0, n_out, n_in, T, A, B, C);
}

/* Replays every sgemm shape of one training step (model_fwd/model_bwd and
 * k_attention's 64-row causal query blocks); returns the FLOPs done. A, B, C
 * hold max_elems floats each. */
static double replay_step(const areal_model_config *c, const float *A, const float *B, float *C) {
    int H = c->hidden_size, qd = c->num_heads * c->head_dim, kvd = c->num_kv_heads * c->head_dim;
    int hd = c->head_dim, ffn = c->intermediate_size;
    double f = 0;
    for (int l = 0; l < c->num_layers; l++) {
        f += linear3(H, qd, A, B, C) + linear3(H, kvd, A, B, C) + linear3(H, kvd, A, B, C);
        f += linear3(qd, H, A, B, C) + linear3(H, ffn, A, B, C) + linear3(H, ffn, A, B, C);
        f += linear3(ffn, H, A, B, C);
        for (int s = 0; s < NS * c->num_heads; s++)
            for (int i0 = 0; i0 < L; i0 += 64) {
                int e = i0 + 64 < L ? i0 + 64 : L, nb = e - i0;
                f += gemm(0, 1, nb, e, hd, A, B, C) + gemm(0, 0, nb, hd, e, A, B, C); /* fwd */
                f += gemm(0, 1, nb, e, hd, A, B, C) + gemm(1, 0, e, hd, nb, A, B, C); /* dP, dV */
                f += gemm(0, 0, nb, hd, e, A, B, C) + gemm(1, 0, e, hd, nb, A, B, C); /* dQ, dK */
            }
    }
    return f + linear3(H, c->vocab_size, A, B, C);
}

/* Best (least) wall and CPU seconds of a PEAK_N^3 square sgemm; returns its FLOPs. */
static double sgemm_peak(float *A, float *B, float *C, double *wall, double *cpu) {
    double f = 0;
    *wall = *cpu = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = areal_mono_s(), c0 = cpu_s();
        f = gemm(0, 0, PEAK_N, PEAK_N, PEAK_N, A, B, C);
        double dt = areal_mono_s() - t0, dc = cpu_s() - c0;
        *wall = dt < *wall ? dt : *wall;
        *cpu = dc < *cpu ? dc : *cpu;
    }
    return f;
}

/* Runs torch_step.py under AREAL_BENCH_PYTHON (or python3) with our shapes;
 * returns its JSON line (caller decrefs), or NULL after printing why not. */
static json_t *run_torch(const areal_model_config *c, int threads) {
    const char *py = getenv("AREAL_BENCH_PYTHON") ? getenv("AREAL_BENCH_PYTHON") : "python3";
    char cmd[2048];
    if (strchr(py, '\'') != NULL) {
        printf("pytorch: AREAL_BENCH_PYTHON must not contain a quote; ratio skipped\n");
        return NULL;
    }
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torch, transformers' >/dev/null 2>&1", py);
    if (system(cmd) != 0) {
        printf("pytorch: not installed for %s (torch and transformers do not import); the "
               "ratio ours/PyTorch is skipped (set AREAL_BENCH_PYTHON to a python that has them)\n",
               py);
        return NULL;
    }
    snprintf(
        cmd, sizeof cmd,
        "OMP_NUM_THREADS=%d MKL_NUM_THREADS=%d '%s' worker/model/bench/torch_step.py --threads %d "
        "--vocab %d --hidden %d --inter %d --layers %d --heads %d --kv-heads %d --seqs %d "
        "--seq-len %d --gen-batch %d --gen-prompt %d --gen-new %d --runs %d",
        threads, threads, py, threads, c->vocab_size, c->hidden_size, c->intermediate_size,
        c->num_layers, c->num_heads, c->num_kv_heads, NS, L, GB, GP, GNEW, RUNS);
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    char line[4096] = "";
    json_t *j = NULL;
    if (p != NULL) {
        while (fgets(line, sizeof line, p) != NULL)
            if (line[0] == '{')
                j = json_loads(line, 0, NULL);
        if (pclose(p) != 0) {
            json_decref(j);
            j = NULL;
        }
    }
    if (j == NULL)
        printf("pytorch: worker/model/bench/torch_step.py failed under %s; ratio skipped\n", py);
    return j;
}

int main(void) {
    areal_model_config c;
    config(&c);
    int threads = getenv("AREAL_BENCH_THREADS") ? atoi(getenv("AREAL_BENCH_THREADS")) : 1;
    if (threads < 1 || threads > 256) {
        fprintf(stderr, "bench_model_train: AREAL_BENCH_THREADS must be 1..256\n");
        return 1;
    }
    openblas_set_num_threads(threads);
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
    for (int r = -1; r < RUNS; r++) { /* r = -1: warm-up */
        double t0 = areal_mono_s(), c0 = cpu_s();
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
        if (r >= 0) {
            times[r] = areal_mono_s() - t0;
            cpus[r] = cpu_s() - c0;
        }
    }
    qsort(times, RUNS, sizeof times[0], cmp_double);
    qsort(cpus, RUNS, sizeof cpus[0], cmp_double);
    double step = times[RUNS / 2];
    double flops = 6.0 * (double)m.n_params * T +
                   6.0 * c.num_layers * (double)NS * L * L * c.num_heads * c.head_dim;
    printf("model train step (ours): %.1fM params, %d tokens (%dx%d packed), %d thread(s): "
           "%.0f ms/step, %.0f tokens/s, %.1f GFLOP/s; %.2f CPU s/step (loss %.3f)\n",
           (double)m.n_params / 1e6, T, NS, L, threads, step * 1e3, T / step, flops / step / 1e9,
           cpus[RUNS / 2], loss);
    if (getenv("AREAL_BENCH_TRAIN_ONLY") != NULL) { /* profiling the step: stop here */
        areal_adamw_free(&opt);
        free(tok);
        free(dlogits);
        areal_model_free(&m);
        areal_pool_destroy(pool);
        return 0;
    }
    const int32_t *prompts[GB];
    int plen[GB];
    for (int b = 0; b < GB; b++) {
        prompts[b] = tok + b * GP;
        plen[b] = GP;
    }
    areal_sampling sp = {.temperature = 1.0f, .top_p = 1.0f, .seed = 1, .max_new_tokens = GNEW};
    areal_gen_out out[GB];
    double g0 = areal_mono_s(), gc0 = cpu_s();
    if (areal_generate(&m, prompts, plen, GB, &sp, out, &err) != AREAL_OK) {
        fprintf(stderr, "bench_model_train: %s\n", err.msg);
        return 1;
    }
    double gt = areal_mono_s() - g0, gc = cpu_s() - gc0;
    int made = 0;
    for (int b = 0; b < GB; b++) {
        made += out[b].n;
        areal_gen_out_free(&out[b]);
    }
    printf("model generate (ours): batch %d, prompts %d, %d new tokens each: %.0f new tokens/s "
           "(%.2f s, %.2f CPU s, prefill included)\n",
           GB, GP, GNEW, made / gt, gt, gc);

    /* sgemm peak and the model's matrix products */
    size_t cap = (size_t)T * c.vocab_size + (size_t)c.vocab_size * c.hidden_size;
    if (cap < (size_t)PEAK_N * PEAK_N)
        cap = (size_t)PEAK_N * PEAK_N;
    float *A = malloc(sizeof(float) * cap), *B = malloc(sizeof(float) * cap),
          *C = malloc(sizeof(float) * cap);
    if (A == NULL || B == NULL || C == NULL) {
        fprintf(stderr, "bench_model_train: out of memory for the sgemm buffers\n");
        return 1;
    }
    for (size_t i = 0; i < cap; i++)
        A[i] = B[i] = C[i] = (float)(lcg(&x) % 17) / 17.0f - 0.5f;
    double pw, pc, pf = sgemm_peak(A, B, C, &pw, &pc), rw = 1e30, rc = 1e30, rf = 0;
    for (int r = 0; r < RUNS; r++) {
        double t0 = areal_mono_s(), c0 = cpu_s();
        rf = replay_step(&c, A, B, C);
        double dt = areal_mono_s() - t0, dc = cpu_s() - c0;
        rw = dt < rw ? dt : rw;
        rc = dc < rc ? dc : rc;
    }
    double peak = pf / pw / 1e9;
    printf("sgemm peak (OpenBLAS, %d^3, %d thread(s), best of 5): %.1f GFLOP/s (%.1f per CPU "
           "second)\n",
           PEAK_N, threads, peak, pf / pc / 1e9);
    printf("model matmuls: %.1f GFLOP of sgemm per step; over the whole step %.1f GFLOP/s = %.0f%% "
           "of peak; the same sgemm shapes replayed alone (best of %d) %.1f GFLOP/s = %.0f%% of "
           "peak (per CPU second: %.0f%% of peak); sgemm is %.0f%% of the step time\n",
           rf / 1e9, rf / step / 1e9, 100 * rf / step / 1e9 / peak, RUNS, rf / rw / 1e9,
           100 * rf / rw / 1e9 / peak, 100 * (rf / rc) / (pf / pc), 100 * rw / step);
    free(A);
    free(B);
    free(C);

    json_t *pt = run_torch(&c, threads);
    if (pt != NULL) {
        double ptt = json_real_value(json_object_get(pt, "train_tokens_per_s"));
        double ptg = json_real_value(json_object_get(pt, "gen_tokens_per_s"));
        json_int_t pp = json_integer_value(json_object_get(pt, "params"));
        printf("model train step (PyTorch %s, transformers %s, %d thread(s), %.1fM params): "
               "%.0f tokens/s\n",
               json_string_value(json_object_get(pt, "torch")),
               json_string_value(json_object_get(pt, "transformers")),
               (int)json_integer_value(json_object_get(pt, "threads")), (double)pp / 1e6, ptt);
        printf("model generate (PyTorch): %.0f new tokens/s\n", ptg);
        double pcs = json_real_value(json_object_get(pt, "train_cpu_s_per_step"));
        double pgc = json_real_value(json_object_get(pt, "gen_cpu_s"));
        printf("ratio ours/PyTorch (wall time): training step %.2f, generation %.2f (goal >= "
               "1.0)%s\n",
               T / step / ptt, made / gt / ptg,
               (size_t)pp == m.n_params ? "" : " WARNING: parameter counts differ");
        printf("ratio ours/PyTorch (CPU seconds, robust to a loaded machine): training step "
               "%.2f, generation %.2f\n",
               pcs / cpus[RUNS / 2], pgc / gc);
        json_decref(pt);
    }
    areal_adamw_free(&opt);
    free(tok);
    free(dlogits);
    areal_model_free(&m);
    areal_pool_destroy(pool);
    return 0;
}
