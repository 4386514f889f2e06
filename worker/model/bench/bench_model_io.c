/*
 * bench_model_io.c - `make bench` figures of the model file formats:
 *   1. tokenizer encode throughput (MB/s of text, tokens/s) over the fixture
 *      corpus (English, Chinese, code, maths, emoji), single thread;
 *   2. one pathological piece: 1 MB of "learning" repeated (one regex match, one
 *      BPE word), which shows the merge loop's O(n log n) behaviour;
 *   3. bf16 -> fp32 conversion throughput (GB/s of fp32 written), the hot
 *      part of loading a bf16 checkpoint.
 * Each figure is the median of repeated runs on this machine, wall clock.
 * Run from the repository root (the corpus is model/tests/fixtures/tok/).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/dtype.h"
#include "areal/model/tokenizer.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The corpus lines joined by newlines (new string, caller frees). */
static char *corpus(size_t *len) {
    FILE *f = fopen("worker/model/tests/fixtures/tok/corpus.jsonl", "r");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 20, n = 0;
    char *out = malloc(cap), *line = NULL;
    size_t lcap = 0;
    while (out != NULL && getline(&line, &lcap, f) > 0) {
        json_t *d = json_loads(line, 0, NULL);
        const char *t = json_string_value(json_object_get(d, "text"));
        size_t k = t ? strlen(t) : 0;
        if (n + k + 2 < cap) {
            memcpy(out + n, t, k);
            n += k;
            out[n++] = '\n';
        }
        json_decref(d);
    }
    free(line);
    fclose(f);
    if (out)
        out[n] = '\0';
    *len = n;
    return out;
}

static int bench_tokenizer(void) {
    areal_tokenizer *tok;
    areal_error err;
    if (areal_tokenizer_load("worker/model/tests/fixtures/tok/tokenizer.json", &tok, &err) != 0) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    size_t len;
    char *text = corpus(&len);
    if (text == NULL) {
        areal_tokenizer_free(tok);
        return 1;
    }
    double t[9];
    size_t n_ids = 0;
    for (int r = 0; r < 9; r++) {
        double t0 = now_s();
        for (int k = 0; k < 20; k++) {
            int32_t *ids;
            if (areal_tokenizer_encode(tok, text, len, &ids, &n_ids, &err) != 0)
                return 1;
            free(ids);
        }
        t[r] = (now_s() - t0) / 20;
    }
    double m = median(t, 9);
    printf("tokenizer encode, mixed corpus (%zu bytes, %zu tokens): %.1f MB/s, %.0f tokens/s\n",
           len, n_ids, len / m / 1e6, n_ids / m);
    size_t big = 1 << 20;
    char *run = malloc(big);
    for (size_t i = 0; i < big; i++)
        run[i] = "learning"[i % 8];
    for (int r = 0; r < 3; r++) {
        double t0 = now_s();
        int32_t *ids;
        if (areal_tokenizer_encode(tok, run, big, &ids, &n_ids, &err) != 0)
            return 1;
        free(ids);
        t[r] = now_s() - t0;
    }
    printf("tokenizer encode, one 1 MB word \"learninglearning...\": %.3f s (%zu tokens)\n",
           median(t, 3), n_ids);
    free(run);
    free(text);
    areal_tokenizer_free(tok);
    return 0;
}

static int bench_bf16(void) {
    size_t n = (size_t)64 << 20; /* 64 Mi elements: 128 MB in, 256 MB out */
    uint16_t *src = malloc(n * sizeof *src);
    float *dst = malloc(n * sizeof *dst);
    if (src == NULL || dst == NULL)
        return 1;
    for (size_t i = 0; i < n; i++)
        src[i] = (uint16_t)(0x3f80 + (i & 0x7f));
    double t[5];
    for (int r = 0; r < 5; r++) {
        double t0 = now_s();
        areal_dtype_to_f32(AREAL_DT_BF16, src, dst, n);
        t[r] = now_s() - t0;
    }
    printf("bf16 -> fp32 conversion: %.2f GB/s of fp32 (%.0f M elements/s)\n",
           n * 4.0 / median(t, 5) / 1e9, n / median(t, 5) / 1e6);
    free(src);
    free(dst);
    return 0;
}

int main(void) {
    return bench_tokenizer() || bench_bf16();
}
