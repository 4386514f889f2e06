/*
 * test_hf_checkpoints.c - model directories written by transformers' own
 * save_pretrained (worker/model/fixtures/make_hf_fixtures.py): for each family the
 * 5.x spelling (sharded, fp32), the 4.x spelling, bf16 and fp16 must give
 * transformers' fp32 logprobs within 1e-4 and its greedy generations token for
 * token (padding ids included, with the mask off as transformers has it), and
 * a config key nobody understands must be refused by name - by the loader the
 * rollout server uses (areal_model_load) and by `score` and `generate`.
 */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "areal/model/cmd.h"
#include "areal/model/gen_config.h"
#include "areal/model/generate.h"
#include "areal/model/heads.h"
#include "areal/model/model.h"
#include "model_test_util.h"

#define HF FIX "hf/"

static const char *const families[] = {"qwen2", "qwen3", "qwen3-moe", "qwen2-moe", "llama"};
static const char *const variants[] = {"", "-v4", "-bf16", "-fp16"};

static json_t *ref(const char *fam) {
    char p[256];
    snprintf(p, sizeof p, HF "ref-%s.json", fam);
    json_t *r = json_load_file(p, 0, NULL);
    if (r == NULL)
        fail_msg("cannot read %s", p);
    return r;
}

static int32_t *ints(json_t *a, int *n) {
    *n = (int)json_array_size(a);
    int32_t *v = malloc(sizeof(int32_t) * (size_t)(*n + 1));
    for (int i = 0; i < *n; i++)
        v[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
    return v;
}

/* Max |logprob - transformers'| over every next token of the reference sequences. */
static double logprob_error(areal_model *m, json_t *r) {
    json_t *seqs = json_object_get(r, "seqs"), *want = json_object_get(r, "logprobs");
    double worst = 0;
    for (size_t s = 0; s < json_array_size(seqs); s++) {
        int n;
        int32_t *tok = ints(json_array_get(seqs, s), &n);
        int32_t cu[2] = {0, n}, *tgt = malloc(sizeof(int32_t) * (size_t)n);
        for (int t = 0; t < n; t++)
            tgt[t] = t + 1 < n ? tok[t + 1] : -1;
        areal_batch b = {tok, cu, n, 1};
        areal_acts a = {0};
        areal_error err;
        if (areal_model_forward(m, &b, &a, &err) != AREAL_OK)
            fail_msg("forward: %s", err.msg);
        float *lp = malloc(sizeof(float) * (size_t)n * 2);
        areal_token_logprobs(NULL, a.logits, n, m->cfg.vocab_size, tgt, 1.0f, lp, lp + n);
        json_t *w = json_array_get(want, s);
        for (int t = 0; t + 1 < n; t++) {
            double e = fabs((double)lp[t] - json_real_value(json_array_get(w, (size_t)t)));
            worst = e > worst ? e : worst;
        }
        areal_acts_free(&a);
        free(lp);
        free(tgt);
        free(tok);
    }
    return worst;
}

/* Greedy generations with no stop and no padding mask equal transformers'. */
static void check_greedy(areal_model *m, json_t *r, const char *dir) {
    json_t *prompts = json_object_get(r, "prompts"), *greedy = json_object_get(r, "greedy");
    int B = (int)json_array_size(prompts);
    int32_t **p = calloc((size_t)B, sizeof *p);
    int *lens = calloc((size_t)B, sizeof *lens);
    for (int b = 0; b < B; b++)
        p[b] = ints(json_array_get(prompts, (size_t)b), &lens[b]);
    areal_sampling s = {.temperature = 0, .top_p = 1, .max_new_tokens = 8};
    areal_gen_out *out = calloc((size_t)B, sizeof *out);
    areal_error err;
    if (areal_generate(m, (const int32_t *const *)p, lens, B, &s, out, &err) != AREAL_OK)
        fail_msg("%s: generate: %s", dir, err.msg);
    for (int b = 0; b < B; b++) {
        int n;
        int32_t *want = ints(json_array_get(greedy, (size_t)b), &n);
        assert_int_equal(out[b].n, n);
        for (int i = 0; i < n; i++)
            if (out[b].tokens[i] != want[i])
                fail_msg("%s: prompt %d token %d: %d, transformers %d", dir, b, i, out[b].tokens[i],
                         want[i]);
        free(want);
        areal_gen_out_free(&out[b]);
        free(p[b]);
    }
    free(out);
    free(p);
    free(lens);
}

static void every_family_and_spelling_matches_transformers(void **state) {
    (void)state;
    for (size_t f = 0; f < sizeof families / sizeof *families; f++) {
        json_t *r = ref(families[f]);
        for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
            char dir[256];
            snprintf(dir, sizeof dir, HF "%s%s", families[f], variants[v]);
            areal_model m;
            areal_error err;
            if (areal_model_load(&m, dir, NULL, &err) != AREAL_OK)
                fail_msg("%s: %s", dir, err.msg);
            double e = logprob_error(&m, r);
            print_message("%-28s max |logprob error| %.3g\n", dir + strlen(HF), e);
            if (!(e <= 1e-4))
                fail_msg("%s: logprobs differ from transformers by %g", dir, e);
            check_greedy(&m, r, dir);
            areal_model_free(&m);
        }
        json_decref(r);
    }
}

/* Copies the fp32 5.x directory of fam into a scratch one with config key `key` added. */
static void with_extra_key(const char *fam, const char *key, json_t *value, char *dir, size_t cap) {
    char src[256], p[512];
    snprintf(src, sizeof src, HF "%s-v4", fam);
    mt_tmpdir(dir, cap);
    const char *files[] = {"model.safetensors", "tokenizer.json", "tokenizer_config.json"};
    for (size_t i = 0; i < 3; i++) {
        size_t n = 0;
        snprintf(p, sizeof p, "%s/%s", src, files[i]);
        char *data = mt_read(p, &n);
        assert_non_null(data);
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        assert_int_equal(mt_write(p, data, n), 0);
        free(data);
    }
    snprintf(p, sizeof p, "%s/config.json", src);
    json_t *cfg = json_load_file(p, 0, NULL);
    json_object_set_new(cfg, key, value);
    snprintf(p, sizeof p, "%s/config.json", dir);
    assert_int_equal(json_dump_file(cfg, p, 0), 0);
    json_decref(cfg);
}

static void run_cmd(const char *name, char **argv, int argc, const char *needle) {
    FILE *out = tmpfile(), *err = tmpfile();
    int rc = areal_cmd_run(argc, argv, out, err);
    char buf[1024] = {0};
    rewind(err);
    size_t n = fread(buf, 1, sizeof buf - 1, err);
    buf[n] = '\0';
    fclose(out);
    fclose(err);
    if (rc != 2 || strstr(buf, needle) == NULL)
        fail_msg("%s exited %d without naming %s: %s", name, rc, needle, buf);
}

static void unknown_math_keys_are_refused_by_name(void **state) {
    (void)state;
    for (size_t f = 0; f < sizeof families / sizeof *families; f++) {
        char dir[256], input[512];
        with_extra_key(families[f], "attn_logit_softcapping", json_real(30.0), dir, sizeof dir);
        areal_model m;
        areal_error err;
        assert_int_equal(areal_model_load(&m, dir, NULL, &err), AREAL_EINVAL);
        if (strstr(err.msg, "\"attn_logit_softcapping\"") == NULL)
            fail_msg("%s: %s", families[f], err.msg);
        snprintf(input, sizeof input, "%s/in.jsonl", dir);
        assert_int_equal(mt_write(input, "{\"input_ids\": [1, 2, 3]}\n", 25), 0);
        char *score[] = {"score", "--model", dir, "--input", input};
        run_cmd("score", score, 5, "attn_logit_softcapping");
        char *gen[] = {"generate", "--model", dir, "--prompt", "hi"};
        run_cmd("generate", gen, 5, "attn_logit_softcapping");
        mt_rmdir(dir);
    }
    /* a rope key nobody knows, inside rope_parameters */
    char dir[256];
    with_extra_key("qwen3", "rope_parameters",
                   json_pack("{s:s,s:f,s:[i,i]}", "rope_type", "default", "rope_theta", 1e6,
                             "mrope_section", 2, 2),
                   dir, sizeof dir);
    areal_model m;
    areal_error err;
    assert_int_equal(areal_model_load(&m, dir, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "rope_parameters.mrope_section"));
    mt_rmdir(dir);
}

/* Runs a command; returns its exit code with stdout in *out (caller frees). */
static int capture(char **argv, int argc, char **out_text) {
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len), *err = tmpfile();
    int rc = areal_cmd_run(argc, argv, out, err);
    fclose(out);
    fclose(err);
    *out_text = buf;
    return rc;
}

/*
 * One batch on the padded qwen2 checkpoint with the padding mask off (as
 * transformers samples): some sequences emit padding ids, one line is bad;
 * every other result equals transformers' ids and decoded text, and the bad
 * line's place holds its error. With the mask on (the default) no padding id
 * is ever drawn.
 */
static void padding_ids_never_cost_a_batch(void **state) {
    (void)state;
    json_t *r = ref("qwen2");
    json_t *prompts = json_object_get(r, "prompts"), *greedy = json_object_get(r, "greedy");
    json_t *texts = json_object_get(r, "texts");
    int ntok = (int)json_integer_value(json_object_get(r, "tokenizer_size"));
    char dir[256], input[512];
    mt_tmpdir(dir, sizeof dir);
    snprintf(input, sizeof input, "%s/in.jsonl", dir);
    FILE *f = fopen(input, "w");
    size_t B = json_array_size(prompts);
    for (size_t b = 0; b < B; b++) {
        if (b == 2)
            fprintf(f, "{\"input_ids\": [1, 99999]}\n"); /* bad: outside the model */
        char *p = json_dumps(json_array_get(prompts, b), JSON_COMPACT);
        fprintf(f, "{\"input_ids\": %s}\n", p);
        free(p);
    }
    fclose(f);
    char *argv[] = {"generate",        "--model", HF "qwen2", "--input",          input,
                    "--greedy",        "--stop",  "",         "--max-new-tokens", "8",
                    "--sample-padding"};
    char *text;
    assert_int_equal(capture(argv, 11, &text), 2); /* one bad line: exit 2, all printed */
    char *line = text, *next;
    int padded = 0;
    for (size_t i = 0; i <= B; i++, line = next) {
        next = strchr(line, '\n');
        assert_non_null(next);
        *next++ = '\0';
        json_t *got = json_loads(line, 0, NULL);
        assert_non_null(got);
        if (i == 2) {
            assert_non_null(strstr(json_string_value(json_object_get(got, "error")), "line 3"));
            json_decref(got);
            continue;
        }
        size_t b = i < 2 ? i : i - 1;
        json_t *want = json_array_get(greedy, b);
        if (!json_equal(json_object_get(got, "ids"), want))
            fail_msg("request %zu: %s", b, line);
        assert_string_equal(json_string_value(json_object_get(got, "text")),
                            json_string_value(json_array_get(texts, b)));
        for (size_t k = 0; k < json_array_size(want); k++)
            padded += json_integer_value(json_array_get(want, k)) >= ntok;
        json_decref(got);
    }
    assert_true(padded > 0); /* the batch did emit padding ids */
    free(text);
    /* the default masks them */
    assert_int_equal(capture(argv, 10, &text), 2);
    json_t *all = json_array();
    for (line = text; (next = strchr(line, '\n')) != NULL; line = next + 1) {
        *next = '\0';
        json_t *got = json_loads(line, 0, NULL);
        json_t *ids = json_object_get(got, "ids");
        for (size_t k = 0; k < json_array_size(ids); k++)
            assert_true(json_integer_value(json_array_get(ids, k)) < ntok);
        json_array_append_new(all, got);
    }
    assert_int_equal(json_array_size(all), B + 1);
    json_decref(all);
    free(text);
    mt_rmdir(dir);
    json_decref(r);
}

/* generation_config.json: its eos list stops generation, its sampling defaults are read. */
static void generation_config_is_honoured(void **state) {
    (void)state;
    areal_gen_config g;
    areal_error err;
    assert_int_equal(areal_gen_config_load(HF "qwen2-moe", &g, &err), AREAL_OK);
    assert_true(g.present && g.do_sample && g.n_eos == 2);
    assert_true(g.temperature == 0.7f && g.top_p == 0.8f && g.top_k == 20);
    /* transformers' greedy output of prompt 4 starts with id 288, an eos of the file */
    json_t *r = ref("qwen2-moe");
    json_t *want = json_array_get(json_object_get(r, "greedy"), 4);
    assert_int_equal(json_integer_value(json_array_get(want, 0)), g.eos[1]);
    char dir[256], input[512];
    mt_tmpdir(dir, sizeof dir);
    snprintf(input, sizeof input, "%s/in.jsonl", dir);
    char *p = json_dumps(json_array_get(json_object_get(r, "prompts"), 4), JSON_COMPACT);
    char line[256];
    int n = snprintf(line, sizeof line, "{\"input_ids\": %s}\n", p);
    free(p);
    assert_int_equal(mt_write(input, line, (size_t)n), 0);
    char *argv[] = {"generate", "--model",  HF "qwen2-moe",    "--input",
                    input,      "--greedy", "--sample-padding"};
    char *text;
    assert_int_equal(capture(argv, 7, &text), 0);
    json_t *got = json_loads(text, 0, NULL);
    assert_int_equal(json_array_size(json_object_get(got, "ids")), 1);
    assert_string_equal(json_string_value(json_object_get(got, "finish_reason")), "stop");
    json_decref(got);
    free(text);
    mt_rmdir(dir);
    json_decref(r);
}

/* score: a bad line between two good ones; both good ones match transformers. */
static void score_keeps_good_lines(void **state) {
    (void)state;
    json_t *r = ref("qwen3");
    json_t *seqs = json_object_get(r, "seqs"), *want = json_object_get(r, "logprobs");
    char dir[256], input[512];
    mt_tmpdir(dir, sizeof dir);
    snprintf(input, sizeof input, "%s/in.jsonl", dir);
    FILE *f = fopen(input, "w");
    char *a = json_dumps(json_array_get(seqs, 0), JSON_COMPACT);
    char *b = json_dumps(json_array_get(seqs, 1), JSON_COMPACT);
    fprintf(f, "{\"input_ids\": %s}\n{\"input_ids\": []}\nnot json\n{\"input_ids\": %s}\n", a, b);
    fclose(f);
    free(a);
    free(b);
    char *argv[] = {"score", "--model", HF "qwen3", "--input", input};
    char *text;
    assert_int_equal(capture(argv, 5, &text), 2);
    char *line = text, *next;
    for (int i = 0; i < 4; i++, line = next) {
        next = strchr(line, '\n');
        assert_non_null(next);
        *next++ = '\0';
        json_t *got = json_loads(line, 0, NULL);
        if (i == 1 || i == 2) {
            assert_non_null(json_object_get(got, "error"));
        } else {
            json_t *lp = json_object_get(got, "logprobs"), *w = json_array_get(want, i ? 1 : 0);
            assert_int_equal(json_array_size(lp), json_array_size(w));
            for (size_t k = 0; k < json_array_size(w); k++)
                assert_true(fabs(json_real_value(json_array_get(lp, k)) -
                                 json_real_value(json_array_get(w, k))) <= 1e-4);
        }
        json_decref(got);
    }
    free(text);
    mt_rmdir(dir);
    json_decref(r);
}

/* Without sampling flags, generation_config.json's do_sample/temperature/top_p/top_k apply. */
static void generation_config_sampling_defaults(void **state) {
    (void)state;
    char dir[256], input[512];
    mt_tmpdir(dir, sizeof dir);
    snprintf(input, sizeof input, "%s/in.jsonl", dir);
    const char *req = "{\"input_ids\": [3, 17, 42]}\n{\"input_ids\": [90, 5, 9]}\n";
    assert_int_equal(mt_write(input, req, strlen(req)), 0);
    char *dflt[] = {"generate", "--model", HF "llama", "--input", input,
                    "--seed",   "7",       "--stop",   ""};
    char *expl[] = {"generate", "--model", HF "llama", "--input", input,
                    "--seed",   "7",       "--stop",   "",        "--temperature",
                    "0.7",      "--top-p", "0.8",      "--top-k", "20"};
    char *t1, *t2;
    assert_int_equal(capture(dflt, 9, &t1), 0);
    assert_int_equal(capture(expl, 15, &t2), 0);
    assert_string_equal(t1, t2);
    free(t2);
    expl[10] = "1.0"; /* another temperature gives other logprobs */
    assert_int_equal(capture(expl, 15, &t2), 0);
    assert_true(strcmp(t1, t2) != 0);
    free(t1);
    free(t2);
    mt_rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_family_and_spelling_matches_transformers),
        cmocka_unit_test(unknown_math_keys_are_refused_by_name),
        cmocka_unit_test(padding_ids_never_cost_a_batch),
        cmocka_unit_test(generation_config_is_honoured),
        cmocka_unit_test(score_keeps_good_lines),
        cmocka_unit_test(generation_config_sampling_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
