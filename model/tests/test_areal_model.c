/*
 * test_areal_model.c - the areal-model program ($AREAL_BIN/areal-model):
 * greedy `generate` equals transformers' generations, `score` equals
 * PyTorch's logprobs, a sampled generation's logprobs equal `score` of the
 * same tokens, and bad input or usage exits 1 or 2 with the line or option
 * named.
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
    snprintf(bin, sizeof bin, "%s/areal-model",
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
        json_t *ids = json_object_get(j, "output_ids");
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
    r = run("score", "--model", FIX "ref-qwen3-moe", "--input", p, NULL);
    if (r->status != 0)
        fail_msg("exit %d: %s", r->status, r->err);
    for (size_t q = 0; q + 1 < ns; q++) {
        json_t *j = line_json(r->out, (int)q), *a = json_object_get(j, "logprobs");
        assert_int_equal(json_array_size(a), (size_t)(cu[q + 1] - cu[q] - 1));
        for (int k = 0; k < cu[q + 1] - cu[q] - 1; k++)
            assert_true(fabs(json_real_value(json_array_get(a, (size_t)k)) - lp[cu[q] + k]) < 1e-4);
        json_decref(j);
    }
    mt_rmdir(dir);
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
    json_t *g = line_json(r->out, 0), *ids = json_object_get(g, "output_ids");
    json_t *glp = json_object_get(g, "output_logprobs");
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

static void bad_input_and_usage(void **s) {
    (void)s;
    char dir[128], p[200];
    write_input(dir, sizeof dir, p, sizeof p,
                "{\"input_ids\": [1, 2]}\n{\"input_ids\": [1, -4]}\n");
    run_result *r = run("score", "--model", FIX "ref-qwen2", "--input", p, NULL);
    assert_int_equal(r->status, 1);
    assert_non_null(strstr(r->err, "line 2"));
    mt_rmdir(dir);
    write_input(dir, sizeof dir, p, sizeof p, "{\"text\": \"hello\"}\n");
    r = run("generate", "--model", FIX "ref-qwen2", "--input", p, NULL);
    assert_int_equal(r->status, 1);
    assert_non_null(strstr(r->err, "tokenizer.json"));
    mt_rmdir(dir);
    write_input(dir, sizeof dir, p, sizeof p, "{\"input_ids\": [1, 200]}\n");
    r = run("generate", "--model", FIX "ref-qwen2", "--input", p, NULL);
    assert_int_equal(r->status, 1);
    assert_non_null(strstr(r->err, "outside"));
    r = run("generate", "--model", FIX "no-such-model", "--input", p, NULL);
    assert_int_equal(r->status, 1);
    assert_non_null(strstr(r->err, "no-such-model"));
    r = run("generate", "--model", FIX "ref-qwen2", "--input", p, "--top-p", "0", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "--top-p"));
    r = run("train", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "usage"));
    mt_rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(greedy_generate_and_score_match_references),
        cmocka_unit_test(sampled_logprobs_equal_score),
        cmocka_unit_test(bad_input_and_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
