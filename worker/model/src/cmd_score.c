/*
 * cmd_score.c - `areal-worker score`: what the trainer recomputes for the PPO
 * ratio, from the command line. Every request is one sequence of a single
 * packed training forward (areal_model_forward); for each position i >= 1 it
 * prints log p(ids[i] | ids[..i)) and the entropy of that predictive
 * distribution (softmax(logits / temperature)), then the --top N largest raw
 * logits of the final position (the next-token prediction) with their ids.
 * Rejected: one forward per request (slower, and not the packed path that
 * training runs); a KV-cache pass (score must match the training forward).
 */
#include <stdlib.h>
#include <string.h>

#include "areal/model/cmd.h"
#include "areal/model/heads.h"
#include "cmd_internal.h"

typedef struct score_opts {
    const char *model, *input;
    int threads, top;
    float temperature;
} score_opts;

/* One line: what is wrong, then the usage. Returns 2. */
static int usage(FILE *err, const char *why, const char *arg) {
    fprintf(err,
            "%s score: %s%s; usage: score --model DIR --input FILE.jsonl [--top N] "
            "[--temperature T] [--threads N]\n",
            CMD_PROG, why, arg);
    return 2;
}

static int parse(int argc, char **argv, score_opts *o, FILE *err) {
    *o = (score_opts){NULL, NULL, 1, 5, 1.0f};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d = 0;
        if (strncmp(a, "--", 2) != 0 ||
            (strcmp(a, "--model") && strcmp(a, "--input") && strcmp(a, "--threads") &&
             strcmp(a, "--top") && strcmp(a, "--temperature"))) {
            return usage(err, "unknown option ", a);
        }
        if (v == NULL) {
            return usage(err, "a value is missing after ", a);
        }
        i++;
        if (strcmp(a, "--model") == 0)
            o->model = v;
        else if (strcmp(a, "--input") == 0)
            o->input = v;
        else if (strcmp(a, "--threads") == 0 && cmd_num(v, 1, 256, &d) == 0)
            o->threads = (int)d;
        else if (strcmp(a, "--top") == 0 && cmd_num(v, 0, 1e9, &d) == 0)
            o->top = (int)d;
        else if (strcmp(a, "--temperature") == 0 && cmd_num(v, 1e-6, 1e6, &d) == 0)
            o->temperature = (float)d;
        else {
            return usage(err, "bad value for ", a);
        }
    }
    if (o->model == NULL || o->input == NULL) {
        return usage(err, "--model and --input are required", "");
    }
    return 0;
}

/* The k largest entries of row[0..V) (ties: lower id first), largest first. */
static void top_k(const float *row, int V, int k, int32_t *ids, float *vals) {
    int n = 0;
    for (int v = 0; v < V && k > 0; v++) {
        if (n == k && !(row[v] > vals[k - 1]))
            continue;
        int j = n < k ? n++ : k - 1;
        while (j > 0 && row[v] > vals[j - 1]) {
            ids[j] = ids[j - 1];
            vals[j] = vals[j - 1];
            j--;
        }
        ids[j] = v;
        vals[j] = row[v];
    }
}

/*
 * Scores the valid requests as one packed forward and prints one line per
 * request in input order: the scores, or {"error"} for a line that had none.
 * Returns 0, 1, or 2 when some line was bad (every other line still printed).
 */
static int run(areal_model *m, const score_opts *o, const cmd_request *reqs, int n, FILE *out,
               FILE *err) {
    int T = 0, V = m->cfg.vocab_size, K = o->top < V ? o->top : V, ns = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        T += reqs[i].n;
        ns += reqs[i].error == NULL;
    }
    int32_t *tok = malloc(sizeof(int32_t) * ((size_t)T * 2 + (size_t)K + 1)), *tgt = tok + T;
    int32_t *cu = malloc(sizeof(int32_t) * ((size_t)n + 1));
    float *lp = malloc(sizeof(float) * ((size_t)T * 2 + (size_t)K + 1)), *ent = lp + T;
    int rc = 1;
    areal_acts a = {0};
    if (tok == NULL || cu == NULL || lp == NULL) {
        fprintf(err, "%s score: out of memory for %d tokens\n", CMD_PROG, T);
        goto done;
    }
    int32_t *top_ids = tgt + T;
    float *top_vals = ent + T;
    /* cu over the valid requests only; start[i] is request i's first token */
    cu[0] = 0;
    for (int i = 0, s = 0; i < n; i++) {
        if (reqs[i].error != NULL)
            continue;
        memcpy(tok + cu[s], reqs[i].ids, sizeof(int32_t) * (size_t)reqs[i].n);
        cu[s + 1] = cu[s] + reqs[i].n;
        for (int t = cu[s]; t < cu[s + 1]; t++)
            tgt[t] = t + 1 < cu[s + 1] ? tok[t + 1] : -1;
        s++;
    }
    areal_error e;
    if (ns > 0) {
        areal_batch b = {tok, cu, T, ns};
        int r = areal_model_forward(m, &b, &a, &e);
        if (r != AREAL_OK) {
            fprintf(err, "%s score: %s\n", CMD_PROG, e.msg);
            rc = cmd_code(r);
            goto done;
        }
        areal_token_logprobs(m->pool, a.logits, T, V, tgt, o->temperature, lp, ent);
    }
    rc = 0;
    for (int i = 0, s = 0; i < n && rc == 0; i++) {
        if (reqs[i].error != NULL) {
            bad = 1;
            rc = cmd_print_error(out, reqs[i].error);
            continue;
        }
        json_t *line = json_object();
        json_object_set_new(line, "logprobs", cmd_floats(lp + cu[s], reqs[i].n - 1));
        json_object_set_new(line, "entropy", cmd_floats(ent + cu[s], reqs[i].n - 1));
        top_k(a.logits + (size_t)(cu[s + 1] - 1) * (size_t)V, V, K, top_ids, top_vals);
        json_object_set_new(line, "top_ids", cmd_ints(top_ids, K));
        json_object_set_new(line, "top_logits", cmd_floats(top_vals, K));
        s++;
        if (cmd_print(out, line) != 0) {
            fprintf(err, "%s score: out of memory printing request %d\n", CMD_PROG, i + 1);
            rc = 1;
        }
    }
    if (rc == 0 && bad)
        rc = 2;
done:
    areal_acts_free(&a);
    free(tok);
    free(cu);
    free(lp);
    return rc;
}

int areal_cmd_score(int argc, char **argv, FILE *out, FILE *err) {
    score_opts o;
    if (parse(argc, argv, &o, err) != 0)
        return 2;
    areal_tokenizer *tok = NULL;
    areal_pool *pool = NULL;
    areal_model m;
    cmd_request *reqs = NULL;
    int n = 0;
    int rc = cmd_model("score", o.model, o.threads, &m, &pool, err);
    if (rc != 0)
        return rc;
    rc = cmd_tokenizer("score", o.model, 0, &tok, err);
    if (rc == 0)
        rc = cmd_read_requests("score", o.input, tok, m.cfg.vocab_size, &reqs, &n, err);
    if (rc == 0)
        rc = run(&m, &o, reqs, n, out, err);
    cmd_requests_free(reqs, n);
    areal_tokenizer_free(tok);
    areal_model_free(&m);
    areal_pool_destroy(pool);
    return rc;
}
