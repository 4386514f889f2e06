/*
 * test_model_cmds.c - `areal-worker score|generate` ($AREAL_BIN/areal-worker)
 * as child processes against the committed reference models: greedy
 * `generate` equals transformers' generations, `score` equals PyTorch's
 * logprobs and final-position top logits, a sampled generation's logprobs
 * equal `score` of the same tokens, `generate --prompt` agrees with
 * `tokenize` and the ids path, and bad input or usage exits 2 with one error
 * line naming the line or option.
 */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "child.h"

#include "model_ref_util.h"
#include "model_test_util.h"

typedef struct run_result {
    int status;
    char out[1 << 16];
    char err[4096];
} run_result;

static run_result result;

static run_result *run(const char *first, ...) {
    char bin[512];
    snprintf(bin, sizeof bin, "%s/areal-worker",
             getenv("AREAL_BIN") ? getenv("AREAL_BIN") : "build/rel");
    va_list ap;
    va_start(ap, first);
    int rc = child_run_va(bin, first, ap, &result.status, result.out, sizeof result.out, result.err,
                          sizeof result.err);
    va_end(ap);
    assert_int_equal(rc, 0);
    return &result;
}

/* Writes `text` into a new scratch dir's req.jsonl; path into p. */
static void write_input(char *dir, size_t dcap, char *p, size_t pcap, const char *text) {
    assert_int_equal(mt_tmpdir(dir, dcap), 0);
    snprintf(p, pcap, "%s/req.jsonl", dir);
    assert_int_equal(mt_write(p, text, strlen(text)), 0);
}

/* Line i (0-based) of out as JSON (caller decrefs). */
static json_t *line_json(const char *out, int i) {
    const char *s = out;
    for (int k = 0; k < i && s != NULL; k++)
        s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL;
    assert_non_null(s);
    json_error_t je;
    json_t *j = json_loadb(s, strcspn(s, "\n"), 0, &je);
    if (j == NULL)
        fail_msg("line %d is not JSON: %s", i, je.text);
    return j;
}

static void ids_line(char *buf, size_t cap, const int32_t *ids, int n) {
    size_t k = (size_t)snprintf(buf, cap, "{\"input_ids\": [");
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%d", i ? "," : "", ids[i]);
    snprintf(buf + k, cap - k, "]}\n");
}

static void greedy_generate_and_score_match_references(void **s) {
    (void)s;
    areal_st_file f;
    assert_int_equal(areal_st_open(FIX "ref-qwen3-moe/ref.safetensors", &f, NULL), AREAL_OK);
    char in[4096] = "", dir[128], p[200];
    size_t n0 = 0, n1 = 0;
    int32_t *p0 = ref_i32(&f, "gen.prompt0", &n0), *p1 = ref_i32(&f, "gen.prompt1", &n1);
    ids_line(in, sizeof in, p0, (int)n0);
    ids_line(in + strlen(in), sizeof in - strlen(in), p1, (int)n1);
    write_input(dir, sizeof dir, p, sizeof p, in);
    run_result *r = run("generate", "--model", FIX "ref-qwen3-moe", "--input", p,
                        "--max-new-tokens", "8", "--threads", "2", NULL);
    if (r->status != 0)
        fail_msg("exit %d: %s", r->status, r->err);
    for (int i = 0; i < 2; i++) {
        json_t *j = line_json(r->out, i);
        size_t wn = 0;
        int32_t *want = ref_i32(&f, i ? "gen.out1" : "gen.out0", &wn);
        json_t *ids = json_object_get(j, "ids");
        assert_int_equal(json_array_size(ids), wn);
        for (size_t k = 0; k < wn; k++)
            assert_int_equal(json_integer_value(json_array_get(ids, k)), want[k]);
        assert_string_equal(json_string_value(json_object_get(j, "finish_reason")), "length");
        free(want);
        json_decref(j);
    }
    mt_rmdir(dir);
    /* score the three packed reference sequences */
    size_t nt = 0, ns = 0;
    int32_t *tok = ref_i32(&f, "tokens", &nt), *cu = ref_i32(&f, "cu_seqlens", &ns);
    float *lp = ref_f32(&f, "logprobs", NULL);
    in[0] = '\0';
    for (size_t q = 0; q + 1 < ns; q++)
        ids_line(in + strlen(in), sizeof in - strlen(in), tok + cu[q], cu[q + 1] - cu[q]);
    write_input(dir, sizeof dir, p, sizeof p, in);
    r = run("score", "--model", FIX "ref-qwen3-moe", "--input", p, "--top", "5", NULL);
    if (r->status != 0)
        fail_msg("exit %d: %s", r->status, r->err);
    size_t nl = 0;
    float *logits = ref_f32(&f, "logits", &nl);
    size_t V = nl / nt;
    for (size_t q = 0; q + 1 < ns; q++) {
        json_t *j = line_json(r->out, (int)q), *a = json_object_get(j, "logprobs");
        assert_int_equal(json_array_size(a), (size_t)(cu[q + 1] - cu[q] - 1));
        for (int k = 0; k < cu[q + 1] - cu[q] - 1; k++)
            assert_true(fabs(json_real_value(json_array_get(a, (size_t)k)) - lp[cu[q] + k]) < 1e-4);
        /* the final position's top 5 are PyTorch's 5 largest logits of that row, in order */
        const float *row = logits + (size_t)(cu[q + 1] - 1) * V;
        json_t *ti = json_object_get(j, "top_ids"), *tl = json_object_get(j, "top_logits");
        assert_int_equal(json_array_size(ti), 5);
        assert_int_equal(json_array_size(tl), 5);
        float prev = INFINITY;
        for (size_t k = 0; k < 5; k++) {
            json_int_t id = json_integer_value(json_array_get(ti, k));
            double v = json_real_value(json_array_get(tl, k));
            assert_true(id >= 0 && (size_t)id < V);
            assert_true(fabs(v - row[id]) < 1e-4);
            assert_true(v <= prev);
            prev = (float)v;
            size_t above = 0; /* tokens PyTorch puts clearly above this one */
            for (size_t w = 0; w < V; w++)
                above += row[w] > v + 1e-4;
            assert_true(above <= k);
        }
        json_decref(j);
    }
    mt_rmdir(dir);
    free(logits);
    free(tok);
    free(cu);
    free(lp);
    free(p0);
    free(p1);
    areal_st_close(&f);
}

static void sampled_logprobs_equal_score(void **s) {
    (void)s;
    char dir[128], p[200], in[4096];
    write_input(dir, sizeof dir, p, sizeof p, "{\"input_ids\": [5, 6, 7, 8]}\n");
    run_result *r = run("generate", "--model", FIX "ref-qwen2", "--input", p, "--temperature",
                        "0.8", "--seed", "9", "--max-new-tokens", "10", NULL);
    assert_int_equal(r->status, 0);
    json_t *g = line_json(r->out, 0), *ids = json_object_get(g, "ids");
    json_t *glp = json_object_get(g, "logprobs");
    assert_int_equal(json_array_size(ids), 10);
    int32_t all[14] = {5, 6, 7, 8};
    for (int k = 0; k < 10; k++)
        all[4 + k] = (int32_t)json_integer_value(json_array_get(ids, (size_t)k));
    mt_rmdir(dir);
    ids_line(in, sizeof in, all, 14);
    write_input(dir, sizeof dir, p, sizeof p, in);
    r = run("score", "--model", FIX "ref-qwen2", "--input", p, "--temperature", "0.8", NULL);
    assert_int_equal(r->status, 0);
    json_t *sc = line_json(r->out, 0), *slp = json_object_get(sc, "logprobs");
    assert_int_equal(json_array_size(slp), 13);
    for (int k = 0; k < 10; k++) {
        double a = json_real_value(json_array_get(glp, (size_t)k));
        double b = json_real_value(json_array_get(slp, (size_t)(3 + k)));
        if (fabs(a - b) > 1e-5)
            fail_msg("token %d: generate logprob %.8f, score %.8f", k, a, b);
    }
    json_decref(g);
    json_decref(sc);
    mt_rmdir(dir);
}

/* One line on stderr: a single newline, at the end. */
static void one_error_line(const run_result *r) {
    const char *nl = strchr(r->err, '\n');
    if (nl == NULL || nl[1] != '\0')
        fail_msg("expected one error line, got: %s", r->err);
}

static void bad_input_and_usage(void **s) {
    (void)s;
    char dir[128], p[200];
    write_input(dir, sizeof dir, p, sizeof p,
                "{\"input_ids\": [1, 2]}\n{\"input_ids\": [1, -4]}\n");
    run_result *r = run("score", "--model", FIX "ref-qwen2", "--input", p, NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "line 2"));
    one_error_line(r);
    mt_rmdir(dir);
    write_input(dir, sizeof dir, p, sizeof p, "{\"input_ids\": [1, 2]}\n\n{\"input_ids\": [1,\n");
    r = run("score", "--model", FIX "ref-qwen2", "--input", p, NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "line 3"));
    one_error_line(r);
    mt_rmdir(dir);
    write_input(dir, sizeof dir, p, sizeof p, "{\"text\": \"hello\"}\n");
    r = run("generate", "--model", FIX "ref-qwen2", "--input", p, NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "tokenizer.json"));
    one_error_line(r);
    mt_rmdir(dir);
    write_input(dir, sizeof dir, p, sizeof p, "{\"input_ids\": [1, 96]}\n");
    r = run("generate", "--model", FIX "ref-qwen2", "--input", p, NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "input_ids[1]"));
    one_error_line(r);
    r = run("score", "--model", FIX "no-such-model", "--input", p, NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "no-such-model"));
    one_error_line(r);
    r = run("generate", "--model", FIX "ref-qwen2", "--prompt", "12", NULL);
    assert_int_equal(r->status, 2); /* --prompt needs tokenizer.json */
    assert_non_null(strstr(r->err, "tokenizer.json"));
    one_error_line(r);
    r = run("generate", "--model", FIX "ref-qwen2", "--input", p, "--top-p", "0", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "--top-p"));
    one_error_line(r);
    r = run("generate", "--model", FIX "ref-qwen2", "--input", p, "--greedy", "--temperature",
            "0.5", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "--greedy"));
    one_error_line(r);
    r = run("score", "--model", FIX "ref-qwen2", "--input", p, "--fast", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "unknown option --fast"));
    one_error_line(r);
    r = run("score", "--model", FIX "ref-qwen2", "--input", "no-such-file.jsonl", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "no-such-file.jsonl"));
    one_error_line(r);
    mt_rmdir(dir);
}

/* A model directory of ref-qwen2's weights and the fixture tokenizer.json (its
 * digits and ASCII punctuation are byte tokens below the model's 96 ids). */
static void prompt_model_dir(char *dir, size_t cap) {
    char abs[4096], src[4200], dst[300];
    assert_int_equal(mt_tmpdir(dir, cap), 0);
    assert_non_null(realpath(FIX "ref-qwen2", abs));
    const char *names[] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(src, sizeof src, "%s/%s", abs, names[i]);
        assert_int_equal(symlink(src, mt_path(dst, sizeof dst, dir, names[i])), 0);
    }
    size_t n = 0;
    char *tok = mt_read(FIX "tok/tokenizer.json", &n);
    assert_non_null(tok);
    assert_int_equal(mt_write(mt_path(dst, sizeof dst, dir, "tokenizer.json"), tok, n), 0);
    free(tok);
}

static void prompt_agrees_with_tokenize_and_ids(void **s) {
    (void)s;
    char dir[128], p[200], in[512];
    prompt_model_dir(dir, sizeof dir);
    run_result *r = run("tokenize", "--model", dir, "--text", "12+34=", NULL);
    assert_int_equal(r->status, 0);
    json_t *pids = json_loads(r->out, 0, NULL);
    assert_int_equal(json_array_size(pids), 6);
    int32_t prompt[6];
    for (size_t k = 0; k < 6; k++)
        prompt[k] = (int32_t)json_integer_value(json_array_get(pids, k));
    json_decref(pids);
    r = run("generate", "--model", dir, "--prompt", "12+34=", "--max-new-tokens", "7", "--json",
            NULL);
    if (r->status != 0)
        fail_msg("exit %d: %s", r->status, r->err);
    json_t *g = line_json(r->out, 0), *ids = json_object_get(g, "ids");
    assert_int_equal(json_array_size(ids), 7);
    char *text = strdup(json_string_value(json_object_get(g, "text")));
    /* the same prompt as ids gives the same tokens and logprobs */
    mt_path(p, sizeof p, dir, "req.jsonl");
    ids_line(in, sizeof in, prompt, 6);
    assert_int_equal(mt_write(p, in, strlen(in)), 0);
    r = run("generate", "--model", dir, "--input", p, "--max-new-tokens", "7", "--greedy", NULL);
    assert_int_equal(r->status, 0);
    json_t *g2 = line_json(r->out, 0);
    assert_true(json_equal(json_object_get(g2, "ids"), ids));
    assert_true(json_equal(json_object_get(g2, "logprobs"), json_object_get(g, "logprobs")));
    /* plain output is the decoded text; tokenize --decode says the same */
    r = run("generate", "--model", dir, "--prompt", "12+34=", "--max-new-tokens", "7", NULL);
    assert_int_equal(r->status, 0);
    char want[256];
    snprintf(want, sizeof want, "%s\n", text);
    assert_string_equal(r->out, want);
    char *arr = json_dumps(ids, JSON_COMPACT);
    r = run("tokenize", "--model", dir, "--decode", "--text", arr, NULL);
    assert_int_equal(r->status, 0);
    assert_string_equal(r->out, want);
    /* greedy: the first new token is score's top id after the prompt */
    r = run("score", "--model", dir, "--input", p, "--top", "1", NULL);
    assert_int_equal(r->status, 0);
    json_t *sc = line_json(r->out, 0);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(sc, "top_ids"), 0)),
                     json_integer_value(json_array_get(ids, 0)));
    json_decref(sc);
    free(arr);
    free(text);
    json_decref(g);
    json_decref(g2);
    mt_rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(greedy_generate_and_score_match_references),
        cmocka_unit_test(sampled_logprobs_equal_score),
        cmocka_unit_test(bad_input_and_usage),
        cmocka_unit_test(prompt_agrees_with_tokenize_and_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
