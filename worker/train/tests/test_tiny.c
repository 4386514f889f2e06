/*
 * test_tiny.c - the project's tiny model and synthetic task: the tokenizer
 * loads in the model core and round-trips the task's text, the created
 * directory opens as a HF checkpoint with the init the seed names, the HF
 * save round-trips every parameter bit for bit, the split is disjoint,
 * complete and seed-determined, and the JSONL has GSM8K's fields.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "areal/model/tokenizer.h"
#include "areal/train/hf_save.h"
#include "areal/train/synth.h"
#include "areal/train/tiny.h"

static void tmpdir(char *buf, size_t cap) {
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(buf, cap, "%s/areal-tiny-XXXXXX", t);
    assert_non_null(mkdtemp(buf));
}

static void rmdir_rf(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void tokenizer_round_trips_the_task(void **s) {
    (void)s;
    areal_error err;
    char *json = NULL;
    int vocab = 0;
    assert_int_equal(areal_tiny_tokenizer_json(&json, &vocab, &err), AREAL_OK);
    areal_tokenizer *tok = NULL;
    if (areal_tokenizer_parse(json, strlen(json), "tiny", &tok, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_int_equal((int)areal_tokenizer_size(tok), vocab);
    const char *text = "37+45=82 the answer is 9*3-1 (ok)\n" AREAL_TINY_EOS;
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(areal_tokenizer_encode(tok, text, strlen(text), &ids, &n, &err), AREAL_OK);
    /* digits are single tokens; the end token is one id */
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 7);
    assert_int_equal(ids[n - 1], areal_tokenizer_token_id(tok, AREAL_TINY_EOS));
    char *back = NULL;
    size_t blen = 0;
    assert_int_equal(areal_tokenizer_decode(tok, ids, n, false, &back, &blen, &err), AREAL_OK);
    assert_string_equal(back, text);
    free(back);
    free(ids);
    areal_tokenizer_free(tok);
    free(json);
}

static void created_dir_loads_and_save_round_trips(void **s) {
    (void)s;
    char dir[256], out[300], path[400];
    tmpdir(dir, sizeof dir);
    areal_error err;
    areal_tiny_cfg t = areal_tiny_default();
    t.seed = 5;
    if (areal_tiny_create(dir, &t, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    areal_model m, m2, ref;
    if (areal_model_load(&m, dir, NULL, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    /* the file holds the seed's init, not zeros */
    areal_model_config cfg;
    assert_int_equal(areal_tiny_model_config(&t, &cfg, &err), AREAL_OK);
    assert_int_equal(areal_model_init(&ref, &cfg, NULL, &err), AREAL_OK);
    areal_tiny_init_weights(&ref, 5);
    assert_int_equal(m.n_params, ref.n_params);
    assert_memory_equal(m.params, ref.params, m.n_params * sizeof(float));
    double sq = 0;
    for (size_t i = 0; i < m.n_params; i++)
        sq += (double)m.params[i] * m.params[i];
    assert_true(sq > 0);
    /* a different seed gives different weights */
    areal_tiny_init_weights(&ref, 6);
    assert_true(memcmp(m.params, ref.params, m.n_params * sizeof(float)) != 0);
    /* perturb, save with the small files, reload: bit-identical */
    for (size_t i = 0; i < m.n_params; i++)
        m.params[i] += 1e-3f * (float)(i % 7);
    snprintf(out, sizeof out, "%s/v1", dir);
    if (areal_hf_save(&m, dir, out, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    snprintf(path, sizeof path, "%s/tokenizer.json", out);
    assert_int_equal(access(path, R_OK), 0);
    snprintf(path, sizeof path, "%s.tmp", out);
    assert_int_not_equal(access(path, F_OK), 0);
    if (areal_model_load(&m2, out, NULL, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_memory_equal(m.params, m2.params, m.n_params * sizeof(float));
    /* saving again over an existing directory replaces it */
    m.params[0] = 42;
    assert_int_equal(areal_hf_save(&m, dir, out, &err), AREAL_OK);
    areal_model_free(&m2);
    assert_int_equal(areal_model_load(&m2, out, NULL, &err), AREAL_OK);
    assert_true(m2.params[0] == 42);
    areal_model_free(&m2);
    areal_model_free(&m);
    areal_model_free(&ref);
    rmdir_rf(dir);
}

static void bad_shapes_are_named(void **s) {
    (void)s;
    areal_error err;
    areal_model_config cfg;
    areal_tiny_cfg t = areal_tiny_default();
    t.num_kv_heads = 3;
    assert_int_equal(areal_tiny_model_config(&t, &cfg, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "num_kv_heads"));
    t = areal_tiny_default();
    t.hidden_size = 60;
    t.num_heads = 8;
    assert_int_equal(areal_tiny_model_config(&t, &cfg, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "hidden_size"));
}

static void split_is_disjoint_complete_and_seeded(void **s) {
    (void)s;
    areal_error err;
    areal_synth_cfg c = {20, "+-", 0.25, 9};
    areal_synth_split a, b;
    assert_int_equal(areal_synth_make(&c, &a, &err), AREAL_OK);
    /* 21*21 sums and 21*22/2 differences */
    size_t total = 21 * 21 + 21 * 22 / 2;
    assert_int_equal(a.n_train + a.n_test, total);
    assert_int_equal(a.n_test, (size_t)(total * 0.25 + 0.5));
    for (size_t i = 0; i < a.n_test; i++)
        for (size_t j = 0; j < a.n_train; j++)
            assert_string_not_equal(a.test[i].question, a.train[j].question);
    /* answers are right */
    for (size_t i = 0; i < a.n_train; i++) {
        long x, y;
        char op;
        assert_int_equal(sscanf(a.train[i].question, "%ld%c%ld=", &x, &op, &y), 3);
        assert_int_equal(a.train[i].answer, op == '+' ? x + y : x - y);
        assert_true(a.train[i].answer >= 0);
    }
    assert_int_equal(areal_synth_make(&c, &b, &err), AREAL_OK);
    assert_string_equal(a.test[0].question, b.test[0].question);
    areal_synth_free(&b);
    c.seed = 10;
    assert_int_equal(areal_synth_make(&c, &b, &err), AREAL_OK);
    int same = 0;
    for (size_t i = 0; i < 10; i++)
        same += strcmp(a.test[i].question, b.test[i].question) == 0;
    assert_true(same < 10);
    areal_synth_free(&b);
    c.ops = "+/";
    assert_int_equal(areal_synth_make(&c, &b, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "ops"));
    c.ops = "+";
    c.test_fraction = 1.0;
    assert_int_equal(areal_synth_make(&c, &b, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "test_fraction"));

    char dir[256], path[300];
    tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/train.jsonl", dir);
    assert_int_equal(areal_synth_write_jsonl(path, a.train, 2, &err), AREAL_OK);
    FILE *f = fopen(path, "r");
    char line[128], want[128];
    assert_non_null(fgets(line, sizeof line, f));
    snprintf(want, sizeof want, "{\"question\": \"%s\", \"answer\": \"#### %ld\"}\n",
             a.train[0].question, a.train[0].answer);
    assert_string_equal(line, want);
    fclose(f);
    rmdir_rf(dir);
    areal_synth_free(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tokenizer_round_trips_the_task),
        cmocka_unit_test(created_dir_loads_and_save_round_trips),
        cmocka_unit_test(bad_shapes_are_named),
        cmocka_unit_test(split_is_disjoint_complete_and_seeded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
