/*
 * bench_rollout_engine.c - `make bench` figures of the rollout engine on the
 * ~20M-parameter Qwen2-shaped bench model of bench_model_train.c (hidden
 * 512, 4 layers, 8 / 2 heads, intermediate 1408, vocabulary 8192; random
 * weights), in one run, same threads:
 *   1. generation throughput (new tokens/s) and mean time to first token at
 *      1, 8, 32 and 128 concurrent requests (32-token prompts, 64 new tokens,
 *      seeded temperature sampling), beside areal_generate's static batch of
 *      the same size (the `generate` command's loop) and their ratio;
 *   2. the GRPO shape: 16 prompts x n = 8 samples x 128 new tokens (prompts
 *      of 128 tokens), wall time with and without the prefix cache;
 *   3. the decode step's achieved memory bandwidth at 1 request (weights +
 *      KV read per step over the step time) against this machine's measured
 *      copy bandwidth (memcpy of 256 MiB, read + write, best of 3).
 * llama.cpp and transformers columns belong to the HTTP server's bench,
 * which drives the same engine. AREAL_BENCH_THREADS=N sets the threads (1 by
 * default: the machine is shared); AREAL_BENCH_QUICK=1 shrinks the GRPO
 * shape to 4 prompts for a smoke run; AREAL_BENCH_CONC=128 (one
 * concurrency, engine only: no static batch, GRPO or bandwidth) is the run
 * to profile (`perf record`).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/model/generate.h"
#include "areal/rollout/engine.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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

static int make_model(areal_model *m) {
    areal_model_config c;
    config(&c);
    areal_error err;
    if (areal_model_init(m, &c, NULL, &err) != AREAL_OK) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return -1;
    }
    uint64_t x = 42;
    for (size_t i = 0; i < m->n_params; i++)
        m->params[i] = ((float)(lcg(&x) % 2001) / 1000.0f - 1.0f) * 0.04f;
    for (size_t i = 0; i < m->n_specs; i++)
        if (strstr(m->specs[i].name, "norm") != NULL)
            for (int64_t j = 0; j < m->specs[i].shape[0]; j++)
                m->params[m->offset[i] + (size_t)j] = 1.0f;
    return 0;
}

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    double t_submit, ttft_sum;
    int n_first;
} waiter;

static void on_done(void *user, areal_engine_result *r) {
    waiter *w = user;
    areal_engine_result_free(r);
    pthread_mutex_lock(&w->mu);
    w->done++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static int on_token(void *user, const areal_engine_token *t) {
    waiter *w = user;
    if (t->position == 0) {
        pthread_mutex_lock(&w->mu);
        w->ttft_sum += now_s() - w->t_submit;
        w->n_first++;
        pthread_mutex_unlock(&w->mu);
    }
    return 0;
}

/* Runs n_req requests of n samples each; returns the wall seconds (-1 on error). */
static double run(areal_engine *e, int32_t *const *prompts, int plen, int n_req, int n, int max_new,
                  waiter *w) {
    pthread_mutex_lock(&w->mu);
    w->done = 0;
    w->ttft_sum = 0;
    w->n_first = 0;
    pthread_mutex_unlock(&w->mu);
    double t0 = now_s();
    w->t_submit = t0;
    for (int i = 0; i < n_req; i++) {
        areal_engine_request r = {.input_ids = prompts[i],
                                  .n_input = plen,
                                  .on_done = on_done,
                                  .on_token = on_token,
                                  .user = w};
        areal_engine_params_default(&r.params);
        r.params.max_new_tokens = max_new;
        r.params.n = n;
        r.params.has_seed = true;
        r.params.sampling_seed = (uint64_t)i;
        areal_error err;
        if (areal_engine_submit(e, &r, &err) != AREAL_OK) {
            fprintf(stderr, "bench: %s\n", err.msg);
            return -1;
        }
    }
    pthread_mutex_lock(&w->mu);
    while (w->done < n_req)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    return now_s() - t0;
}

static areal_engine *start(int threads, int max_running, bool no_cache) {
    areal_model m;
    if (make_model(&m) != 0)
        return NULL;
    areal_engine_config cfg = {.kv_bytes = (size_t)256 << 20,
                               .max_running = max_running,
                               .max_queued = 4096,
                               .threads = threads,
                               .disable_prefix_cache = no_cache};
    areal_engine *e = NULL;
    areal_error err;
    if (areal_engine_create(&m, &cfg, &e, &err) != AREAL_OK) {
        fprintf(stderr, "bench: %s\n", err.msg);
        areal_model_free(&m);
        return NULL;
    }
    return e;
}

static double copy_bandwidth(void) {
    size_t n = (size_t)256 << 20;
    char *a = malloc(n), *b = malloc(n);
    double best = 1e30;
    if (a == NULL || b == NULL) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, n);
    memset(b, 2, n);
    for (int r = 0; r < 3; r++) {
        double t0 = now_s();
        memcpy(b, a, n);
        double dt = now_s() - t0;
        best = dt < best ? dt : best;
    }
    volatile char sink = b[n / 2];
    (void)sink;
    free(a);
    free(b);
    return 2.0 * (double)n / best;
}

int main(void) {
    int threads = getenv("AREAL_BENCH_THREADS") ? atoi(getenv("AREAL_BENCH_THREADS")) : 1;
    bool quick = getenv("AREAL_BENCH_QUICK") != NULL;
    threads = threads < 1 ? 1 : threads;
    enum { PLEN = 32, NEW = 64, GP = 128, GNEW = 128 };
    int conc[] = {1, 8, 32, 128}, n_conc = 4;
    const char *only = getenv("AREAL_BENCH_CONC");
    if (only != NULL) {
        conc[0] = atoi(only);
        n_conc = 1;
        if (conc[0] < 1 || conc[0] > 128) {
            fprintf(stderr, "bench: AREAL_BENCH_CONC must be 1..128 (got %s)\n", only);
            return 2;
        }
    }
    int32_t *prompts[128];
    uint64_t x = 7;
    for (int i = 0; i < 128; i++) {
        prompts[i] = malloc(sizeof(int32_t) * GP);
        for (int j = 0; j < GP; j++)
            prompts[i][j] = (int32_t)(lcg(&x) % 8192);
    }
    waiter w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    areal_model ref;
    if (make_model(&ref) != 0)
        return 1;
    areal_engine *e = start(threads, 128, false);
    if (e == NULL)
        return 1;
    printf("rollout engine, 20M Qwen2-shaped model, %d thread(s)\n", threads);
    printf("%-12s %14s %12s %18s %8s\n", "concurrent", "engine tok/s", "TTFT ms",
           "static batch tok/s", "ratio");
    double step_s = 0, steps_at1 = 0;
    for (int k = 0; k < n_conc; k++) {
        int C = conc[k];
        areal_engine_stats s0, s1;
        areal_engine_get_stats(e, &s0);
        double wall = run(e, prompts, PLEN, C, 1, NEW, &w);
        areal_engine_get_stats(e, &s1);
        if (wall < 0)
            return 1;
        if (C == 1) {
            steps_at1 = (double)(s1.steps - s0.steps);
            step_s = wall / steps_at1;
        }
        if (only != NULL) {
            printf("%-12d %14.0f %12.1f   (%llu steps, %.2f ms/step)\n", C, C * NEW / wall,
                   1e3 * w.ttft_sum / w.n_first, (unsigned long long)(s1.steps - s0.steps),
                   1e3 * wall / (double)(s1.steps - s0.steps));
            continue;
        }
        areal_engine_flush_cache(e);
        areal_sampling sp = {.temperature = 1, .top_p = 1, .seed = 1, .max_new_tokens = NEW};
        int lens[128];
        for (int i = 0; i < C; i++)
            lens[i] = PLEN;
        areal_gen_out *o = calloc((size_t)C, sizeof *o);
        areal_error err;
        double t0 = now_s();
        if (areal_generate(&ref, (const int32_t *const *)prompts, lens, C, &sp, o, &err) !=
            AREAL_OK) {
            fprintf(stderr, "bench: %s\n", err.msg);
            return 1;
        }
        double st = now_s() - t0;
        for (int i = 0; i < C; i++)
            areal_gen_out_free(&o[i]);
        free(o);
        double ours = C * NEW / wall, base = C * NEW / st;
        printf("%-12d %14.0f %12.1f %18.0f %7.2fx\n", C, ours, 1e3 * w.ttft_sum / w.n_first, base,
               ours / base);
    }
    if (only != NULL) {
        areal_engine_destroy(e);
        areal_model_free(&ref);
        for (int i = 0; i < 128; i++)
            free(prompts[i]);
        return 0;
    }
    /* GRPO shape with and without the prefix cache */
    int groups = quick ? 4 : 16;
    double with = run(e, prompts, GP, groups, 8, GNEW, &w);
    areal_engine_stats st;
    areal_engine_get_stats(e, &st);
    areal_engine_destroy(e);
    areal_engine *nc = start(threads, 128, true);
    if (nc == NULL || with < 0)
        return 1;
    double without = run(nc, prompts, GP, groups, 8, GNEW, &w);
    areal_engine_destroy(nc);
    printf("GRPO %d prompts x n=8 x %d new (prompt %d): %.2f s with prefix sharing, %.2f s "
           "without (%.2fx)\n",
           groups, GNEW, GP, with, without, without / with);
    /* decode bandwidth at one request: every step reads all weights and the KV so far */
    areal_model_config c;
    config(&c);
    double kv_per_tok = 2.0 * c.num_layers * c.num_kv_heads * c.head_dim * sizeof(float);
    double bytes = (double)ref.n_params * sizeof(float) + kv_per_tok * (PLEN + NEW / 2.0);
    double bw = copy_bandwidth();
    printf("decode step at 1 request: %.2f ms, %.2f GB/s achieved (weights %.0f MB + KV) vs "
           "%.2f GB/s memcpy (%.0f%%)\n",
           1e3 * step_s, bytes / step_s / 1e9, (double)ref.n_params * 4 / 1e6, bw / 1e9,
           100.0 * bytes / step_s / bw);
    (void)steps_at1;
    areal_model_free(&ref);
    for (int i = 0; i < 128; i++)
        free(prompts[i]);
    return 0;
}
