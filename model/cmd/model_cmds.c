/*
 * model_cmds.c - the two commands of `areal-model`.
 *
 * score: every request is one sequence of a single packed training forward;
 * for each position i >= 1 it prints log p(ids[i] | ids[..i)) and the entropy
 * of that predictive distribution (at --temperature), which is what the
 * trainer recomputes for the PPO ratio. generate: all requests form one batch
 * of areal_generate; each line gets the new ids, their logprobs under the
 * sampling distribution and the finish reason ("stop" or "length", as SGLang
 * names them), plus the decoded text when the model has a tokenizer.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/heads.h"
#include "model_cmd.h"

static json_t *floats(const float *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_real(v[i]));
    return a;
}

static json_t *ints(const int32_t *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

static void print_line(FILE *out, json_t *o) {
    char *s = json_dumps(o, JSON_COMPACT);
    if (s != NULL)
        fprintf(out, "%s\n", s);
    free(s);
    json_decref(o);
}

int mc_score(areal_model *m, const mc_opts *o, const mc_request *reqs, int n, FILE *out) {
    int T = 0;
    for (int i = 0; i < n; i++) {
        if (reqs[i].n < 1) {
            fprintf(stderr, "areal-model score: request %d has no tokens\n", i + 1);
            return 1;
        }
        T += reqs[i].n;
    }
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)T * 2), *tgt = tok + T;
    int32_t *cu = malloc(sizeof(int32_t) * ((size_t)n + 1));
    float *lp = malloc(sizeof(float) * (size_t)T * 2), *ent = lp + T;
    int rc = 1;
    areal_acts a = {0};
    if (tok == NULL || cu == NULL || lp == NULL) {
        fprintf(stderr, "areal-model score: out of memory for %d tokens\n", T);
        goto done;
    }
    cu[0] = 0;
    for (int i = 0; i < n; i++) {
        memcpy(tok + cu[i], reqs[i].ids, sizeof(int32_t) * (size_t)reqs[i].n);
        cu[i + 1] = cu[i] + reqs[i].n;
        for (int t = cu[i]; t < cu[i + 1]; t++)
            tgt[t] = t + 1 < cu[i + 1] ? tok[t + 1] : -1;
    }
    areal_batch b = {tok, cu, T, n};
    areal_error err;
    if (areal_model_forward(m, &b, &a, &err) != AREAL_OK) {
        fprintf(stderr, "areal-model score: %s\n", err.msg);
        goto done;
    }
    areal_token_logprobs(m->pool, a.logits, T, m->cfg.vocab_size, tgt, o->temperature, lp, ent);
    for (int i = 0; i < n; i++) {
        json_t *line = json_object();
        json_object_set_new(line, "logprobs", floats(lp + cu[i], reqs[i].n - 1));
        json_object_set_new(line, "entropy", floats(ent + cu[i], reqs[i].n - 1));
        print_line(out, line);
    }
    rc = 0;
done:
    areal_acts_free(&a);
    free(tok);
    free(cu);
    free(lp);
    return rc;
}

int mc_generate(areal_model *m, const areal_tokenizer *tok, const mc_opts *o,
                const mc_request *reqs, int n, FILE *out) {
    const int32_t **prompts = calloc((size_t)n, sizeof *prompts);
    int *lens = calloc((size_t)n, sizeof *lens);
    areal_gen_out *res = calloc((size_t)n, sizeof *res);
    int rc = 1;
    if (prompts == NULL || lens == NULL || res == NULL) {
        fprintf(stderr, "areal-model generate: out of memory for %d requests\n", n);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        prompts[i] = reqs[i].ids;
        lens[i] = reqs[i].n;
    }
    areal_sampling s = {.temperature = o->temperature,
                        .top_k = o->top_k,
                        .top_p = o->top_p,
                        .seed = o->seed,
                        .max_new_tokens = o->max_new_tokens,
                        .stop = o->stop,
                        .n_stop = o->n_stop};
    areal_error err;
    if (areal_generate(m, prompts, lens, n, &s, res, &err) != AREAL_OK) {
        fprintf(stderr, "areal-model generate: %s\n", err.msg);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        json_t *line = json_object();
        json_object_set_new(line, "output_ids", ints(res[i].tokens, res[i].n));
        json_object_set_new(line, "output_logprobs", floats(res[i].logprobs, res[i].n));
        json_object_set_new(line, "finish_reason", json_string(res[i].stopped ? "stop" : "length"));
        char *text = NULL;
        size_t tl = 0;
        if (tok != NULL && areal_tokenizer_decode(tok, res[i].tokens, (size_t)res[i].n, true, &text,
                                                  &tl, NULL) == AREAL_OK)
            json_object_set_new(line, "text", json_stringn(text, tl));
        free(text);
        print_line(out, line);
        areal_gen_out_free(&res[i]);
    }
    rc = 0;
done:
    free(prompts);
    free(lens);
    free(res);
    return rc;
}
