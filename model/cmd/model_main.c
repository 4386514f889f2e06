/*
 * model_main.c - `areal-model score|generate --model DIR --input FILE`: the
 * CPU model from the command line, until the worker runtime integrates these
 * as `areal-worker score` and `areal-worker generate`.
 *
 * Input is JSONL, one request per line ({"input_ids": [...]} or {"text":
 * "..."}); output is one JSON line per request, in order (see model_cmds.c).
 * Options: --threads N (default 1), --temperature T (score: 1; generate: 0 =
 * greedy), --top-k K, --top-p P, --seed S, --max-new-tokens N (16), --stop
 * ID[,ID...]. Exit 0; 1 on a bad model, input or run; 2 on bad usage.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_cmd.h"

static int usage(void) {
    fprintf(
        stderr,
        "usage: areal-model score --model DIR --input FILE [--temperature T] [--threads N]\n"
        "       areal-model generate --model DIR --input FILE [--max-new-tokens N]\n"
        "                   [--temperature T] [--top-k K] [--top-p P] [--seed S]\n"
        "                   [--stop ID,ID...] [--threads N]\n"
        "FILE is JSONL: {\"input_ids\": [...]} or {\"text\": \"...\"} per line (\"-\": stdin)\n");
    return 2;
}

static int num(const char *s, double lo, double hi, double *v) {
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return errno == 0 && end != s && *end == '\0' && *v >= lo && *v <= hi ? 0 : -1;
}

static int parse_stop(const char *s, mc_opts *o) {
    while (*s != '\0') {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > INT32_MAX || o->n_stop == MC_MAX_STOP)
            return -1;
        o->stop[o->n_stop++] = (int32_t)v;
        s = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0')
            return -1;
    }
    return 0;
}

static int parse(int argc, char **argv, int gen, mc_opts *o) {
    memset(o, 0, sizeof *o);
    o->threads = 1;
    o->temperature = gen ? 0.0f : 1.0f;
    o->top_p = 1.0f;
    o->max_new_tokens = 16;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d;
        if (v == NULL)
            return fprintf(stderr, "areal-model: %s needs a value\n", a), -1;
        i++;
        if (strcmp(a, "--model") == 0)
            o->model = v;
        else if (strcmp(a, "--input") == 0)
            o->input = v;
        else if (strcmp(a, "--threads") == 0 && num(v, 1, 256, &d) == 0)
            o->threads = (int)d;
        else if (strcmp(a, "--temperature") == 0 && num(v, gen ? 0 : 1e-6, 1e6, &d) == 0)
            o->temperature = (float)d;
        else if (gen && strcmp(a, "--top-k") == 0 && num(v, 0, 1e9, &d) == 0)
            o->top_k = (int)d;
        else if (gen && strcmp(a, "--top-p") == 0 && num(v, 1e-9, 1, &d) == 0)
            o->top_p = (float)d;
        else if (gen && strcmp(a, "--seed") == 0 && num(v, 0, 1.8e19, &d) == 0)
            o->seed = (uint64_t)d;
        else if (gen && strcmp(a, "--max-new-tokens") == 0 && num(v, 0, 1e6, &d) == 0)
            o->max_new_tokens = (int)d;
        else if (gen && strcmp(a, "--stop") == 0 && parse_stop(v, o) == 0)
            ;
        else
            return fprintf(stderr, "areal-model: bad option or value: %s %s\n", a, v), -1;
    }
    if (o->model == NULL || o->input == NULL)
        return fprintf(stderr, "areal-model: --model and --input are required\n"), -1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return usage();
    int gen = strcmp(argv[1], "generate") == 0;
    if (!gen && strcmp(argv[1], "score") != 0)
        return usage();
    mc_opts o;
    if (parse(argc, argv, gen, &o) != 0)
        return usage();
    areal_error err;
    areal_tokenizer *tok = NULL;
    char tpath[4096];
    struct stat st;
    snprintf(tpath, sizeof tpath, "%s/tokenizer.json", o.model);
    if (stat(tpath, &st) == 0 && areal_tokenizer_load(tpath, &tok, &err) != AREAL_OK) {
        fprintf(stderr, "areal-model: %s\n", err.msg);
        return 1;
    }
    areal_pool *pool = NULL;
    areal_model m;
    mc_request *reqs = NULL;
    int n = 0, rc = 1;
    if (o.threads > 1 && areal_pool_create(o.threads, &pool, &err) != AREAL_OK) {
        fprintf(stderr, "areal-model: %s\n", err.msg);
        areal_tokenizer_free(tok);
        return 1;
    }
    if (areal_model_load(&m, o.model, pool, &err) != AREAL_OK) {
        fprintf(stderr, "areal-model: %s\n", err.msg);
    } else {
        if (mc_read_requests(o.input, tok, &reqs, &n) == 0)
            rc =
                gen ? mc_generate(&m, tok, &o, reqs, n, stdout) : mc_score(&m, &o, reqs, n, stdout);
        mc_requests_free(reqs, n);
        areal_model_free(&m);
    }
    areal_pool_destroy(pool);
    areal_tokenizer_free(tok);
    return rc;
}
