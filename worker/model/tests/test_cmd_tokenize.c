/*
 * test_cmd_tokenize.c - `areal-worker tokenize` ($AREAL_BIN/areal-worker), as
 * a child process: ids as a JSON array equal to HF's for corpus lines, the
 * chat wrapper, the decoder, and one error line with exit 2 on bad input.
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "child.h"

#include "model_test_util.h"

typedef struct run_result {
    int status;
    char out[1 << 16];
    char err[4096];
} run_result;

static run_result result;

/* Runs `areal-worker tokenize` with the NULL-terminated arguments. */
static run_result *run(const char *first, ...) {
    char bin[512];
    snprintf(bin, sizeof bin, "%s/areal-worker",
             getenv("AREAL_BIN") ? getenv("AREAL_BIN") : "build/rel");
    const char *argv[32] = {bin, "tokenize", first};
    int n = 3;
    va_list ap;
    va_start(ap, first);
    const char *a;
    while (n < 31 && (a = va_arg(ap, const char *)) != NULL)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    int rc = child_run(argv, &result.status, result.out, sizeof result.out, result.err,
                       sizeof result.err);
    assert_int_equal(rc, 0);
    return &result;
}

/* One line on stderr: a single newline, at the end. */
static void one_error_line(const run_result *r) {
    const char *nl = strchr(r->err, '\n');
    if (nl == NULL || nl[1] != '\0')
        fail_msg("expected one error line, got: %s", r->err);
}

static void ids_equal_hf_for_corpus_lines(void **state) {
    (void)state;
    FILE *f = fopen(FIX "tok/corpus.jsonl", "r");
    assert_non_null(f);
    char *line = NULL;
    size_t cap = 0;
    int checked = 0;
    while (getline(&line, &cap, f) > 0 && checked < 12) {
        json_t *d = json_loads(line, 0, NULL);
        const char *text = json_string_value(json_object_get(d, "text"));
        if (text[0] != '\0') {
            run_result *r = run("--model", FIX "tok", "--text", text, NULL);
            assert_int_equal(r->status, 0);
            json_t *got = json_loads(r->out, 0, NULL);
            assert_non_null(got);
            assert_true(json_equal(got, json_object_get(d, "ids")));
            json_decref(got);
            checked++;
        }
        json_decref(d);
    }
    free(line);
    fclose(f);
    assert_int_equal(checked, 12);
}

static void chat_and_decode(void **state) {
    (void)state;
    FILE *f = fopen(FIX "tok/chat.jsonl", "r");
    char *line = NULL;
    size_t cap = 0;
    assert_true(getline(&line, &cap, f) > 0); /* first conversation: one user message */
    fclose(f);
    json_t *d = json_loads(line, 0, NULL);
    free(line);
    const char *content = json_string_value(
        json_object_get(json_array_get(json_object_get(d, "messages"), 0), "content"));
    run_result *r =
        run("--model", FIX "tok/tokenizer.json", "--chat", "user", "--text", content, NULL);
    assert_int_equal(r->status, 0);
    json_t *got = json_loads(r->out, 0, NULL);
    assert_true(json_equal(got, json_object_get(d, "ids")));
    char *ids = json_dumps(got, JSON_COMPACT);
    r = run("--model", FIX "tok", "--decode", "--text", ids, NULL);
    assert_int_equal(r->status, 0);
    char want[1024];
    snprintf(want, sizeof want, "%s\n", json_string_value(json_object_get(d, "text")));
    assert_string_equal(r->out, want);
    free(ids);
    json_decref(got);
    json_decref(d);
}

static void errors_and_usage(void **state) {
    (void)state;
    run_result *r = run("--model", FIX "no-such-dir", "--text", "x", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "no-such-dir"));
    one_error_line(r);
    r = run("--model", FIX "qwen2", "--text", "x", NULL); /* a model dir without tokenizer.json */
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "tokenizer.json"));
    one_error_line(r);
    r = run("--model", FIX "tok", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "usage"));
    one_error_line(r);
    r = run("--model", FIX "tok", "--text", "x", "--colour", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "--colour"));
    one_error_line(r);
    r = run("--model", FIX "tok", "--decode", "--text", "[-3]", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "element 0"));
    one_error_line(r);
    /* an id past the tokenizer (a padding row) spells nothing, as HF decodes it */
    r = run("--model", FIX "tok", "--decode", "--text", "[99999]", NULL);
    assert_int_equal(r->status, 0);
    r = run("--model", FIX "tok", "--text", "bad \xff byte", NULL);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "UTF-8"));
    one_error_line(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ids_equal_hf_for_corpus_lines),
        cmocka_unit_test(chat_and_decode),
        cmocka_unit_test(errors_and_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
