/*
 * test_task.c - the loop's task (task.h): a GSM8K-shaped JSONL
 * (fixtures/gsm8k_tiny.jsonl: 64 good lines, bad ones at lines 5, 17 and 40)
 * is read with its bad lines counted and named, split into train and
 * held-out prompts, walked in a seeded order whose position restores
 * exactly, and scored by the math reward ("the answer is", the last number;
 * the tiny tokenizer has no braces, so \boxed{} is rl-core's own test) or
 * the exact one; the synthetic task goes through the same
 * JSONL path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "areal/train/job_config.h"
#include "areal/train/task.h"
#include "areal/train/tiny.h"

#define FIX "worker/train/tests/fixtures/"

typedef struct logs {
    char text[8192];
} logs;

static void logline(void *ctx, const char *line) {
    logs *l = ctx;
    size_t used = strlen(l->text);
    snprintf(l->text + used, sizeof l->text - used, "%s\n", line);
}

typedef struct fx {
    char dir[256];
    areal_tokenizer *tok;
    int32_t eos;
} fx;

static int setup(void **st) {
    fx *f = calloc(1, sizeof *f);
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(f->dir, sizeof f->dir, "%s/areal-task-XXXXXX", t);
    assert_non_null(mkdtemp(f->dir));
    char *json = NULL;
    areal_error err;
    assert_int_equal(areal_tiny_tokenizer_json(&json, NULL, &err), AREAL_OK);
    assert_int_equal(areal_tokenizer_parse(json, strlen(json), "tiny", &f->tok, &err), AREAL_OK);
    free(json);
    f->eos = areal_tokenizer_token_id(f->tok, AREAL_TINY_EOS);
    assert_true(f->eos >= 0);
    *st = f;
    return 0;
}

static int teardown(void **st) {
    fx *f = *st;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    areal_tokenizer_free(f->tok);
    free(f);
    return 0;
}

static void cfg_for(areal_rl_config *c, const char *path, long B) {
    areal_train_config_demo(c);
    c->train_dataset.path = path ? strdup(path) : NULL;
    c->train_dataset.prompt_template = strdup("{question}");
    c->rollout.consumer_batch_size = B;
    c->seed = 3;
}

static int load(fx *f, const areal_rl_config *c, areal_task *t, logs *l, areal_error *err) {
    areal_task_cfg tc = {
        c, f->dir, NULL, {49, "+", 0.2, 7}, AREAL_TASK_REWARD_DEFAULT, f->tok, f->eos, logline, l};
    return areal_task_load(t, &tc, err);
}

static int32_t *enc(fx *f, const char *text, int *n, bool eos) {
    int32_t *ids = NULL;
    size_t k = 0;
    areal_error err;
    assert_int_equal(areal_tokenizer_encode(f->tok, text, strlen(text), &ids, &k, &err), 0);
    ids = realloc(ids, (k + 1) * sizeof *ids);
    if (eos)
        ids[k++] = f->eos;
    *n = (int)k;
    return ids;
}

static void gsm8k_jsonl_reads_with_bad_lines_named(void **st) {
    fx *f = *st;
    areal_rl_config c;
    cfg_for(&c, FIX "gsm8k_tiny.jsonl", 8);
    areal_task t;
    logs l = {{0}};
    areal_error err;
    if (load(f, &c, &t, &l, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_false(t.synthetic);
    assert_int_equal(t.reward, AREAL_TASK_REWARD_MATH);
    assert_int_equal(t.n_train + t.n_test, 64);
    assert_int_equal(t.n_test, 7); /* every 10th of a seeded order, rounded up */
    assert_non_null(strstr(l.text, "3 bad lines"));
    assert_non_null(strstr(l.text, "5, 17, 40"));
    /* train and held-out are disjoint file lines */
    for (size_t i = 0; i < t.n_test; i++)
        for (size_t j = 0; j < t.n_train; j++)
            assert_true(t.test[i].line != t.train[j].line);
    /* the prompt is the question's tokens; the gold is the number after #### */
    const areal_task_item *it = &t.train[0];
    assert_true(it->n_prompt >= 4);
    assert_non_null(it->gold);
    assert_true(strtol(it->gold, NULL, 10) >= 0);
    areal_task_free(&t);
    areal_rl_config_free(&c);
}

static void order_is_seeded_and_restores(void **st) {
    fx *f = *st;
    areal_rl_config c;
    cfg_for(&c, FIX "gsm8k_tiny.jsonl", 8);
    areal_task a, b;
    logs l = {{0}};
    areal_error err;
    assert_int_equal(load(f, &c, &a, &l, &err), AREAL_OK);
    assert_int_equal(load(f, &c, &b, &l, &err), AREAL_OK);
    long ka[64], kb[64];
    int seen[64] = {0};
    for (int i = 0; i < 56; i++) { /* one epoch: 57 / 8 = 7 batches */
        areal_task_next(&a, &ka[i]);
        seen[ka[i]]++;
    }
    for (int i = 0; i < 56; i++)
        assert_true(seen[ka[i]] == 1); /* a permutation within the epoch */
    bool moved = false;
    for (int i = 1; i < 56; i++)
        moved |= ka[i] != ka[i - 1] + 1;
    assert_true(moved); /* shuffled, not file order */
    /* b resumes at step 3 (24 prompts) and then hands out what a did */
    assert_int_equal(areal_task_seek(&b, 24, &err), AREAL_OK);
    for (int i = 24; i < 56; i++) {
        areal_task_next(&b, &kb[i]);
        assert_int_equal(kb[i], ka[i]);
    }
    assert_int_equal(areal_task_seek(&b, 5, &err), AREAL_ERANGE);
    areal_task_free(&a);
    areal_task_free(&b);
    areal_rl_config_free(&c);
}

static void rewards_math_and_exact(void **st) {
    fx *f = *st;
    areal_rl_config c;
    cfg_for(&c, FIX "gsm8k_tiny.jsonl", 8);
    areal_task t;
    logs l = {{0}};
    areal_error err;
    assert_int_equal(load(f, &c, &t, &l, &err), AREAL_OK);
    areal_task_item it = t.train[0];
    char right[64], phrase[96], wrong[64];
    long g = strtol(it.gold, NULL, 10);
    snprintf(right, sizeof right, "%ld", g);
    snprintf(phrase, sizeof phrase, "the answer is %ld.", g);
    snprintf(wrong, sizeof wrong, "%ld", g + 1);
    int n;
    int32_t *r = enc(f, right, &n, true);
    assert_true(areal_task_reward(&t, &it, r, n) == 1.0f); /* the end token is special */
    free(r);
    r = enc(f, right, &n, false);
    assert_true(areal_task_reward(&t, &it, r, n) == 1.0f); /* math: no end token needed */
    free(r);
    r = enc(f, phrase, &n, true);
    assert_true(areal_task_reward(&t, &it, r, n) == 1.0f);
    free(r);
    r = enc(f, wrong, &n, true);
    assert_true(areal_task_reward(&t, &it, r, n) == 0.0f);
    free(r);
    int32_t junk[3] = {-5, 100000, 7};
    assert_true(areal_task_reward(&t, &it, junk, 3) == 0.0f); /* junk scores 0 */
    t.reward = AREAL_TASK_REWARD_EXACT;
    r = enc(f, right, &n, true);
    assert_true(areal_task_reward(&t, &it, r, n) == 1.0f);
    free(r);
    r = enc(f, right, &n, false);
    assert_true(areal_task_reward(&t, &it, r, n) == 0.0f); /* exact: must stop */
    free(r);
    areal_task_free(&t);
    areal_rl_config_free(&c);
}

static void synthetic_task_goes_through_jsonl(void **st) {
    fx *f = *st;
    areal_rl_config c;
    cfg_for(&c, NULL, 32);
    areal_task t;
    logs l = {{0}};
    areal_error err;
    assert_int_equal(load(f, &c, &t, &l, &err), AREAL_OK);
    assert_true(t.synthetic);
    assert_int_equal(t.reward, AREAL_TASK_REWARD_EXACT);
    assert_int_equal(t.n_train, 2000); /* 50 x 50 problems, 20 % held out */
    assert_int_equal(t.n_test, 500);
    char path[400];
    snprintf(path, sizeof path, "%s/synth_train.jsonl", f->dir);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_true(sb.st_size > 0);
    areal_task_free(&t);
    /* a batch larger than the data is refused, naming the key */
    c.rollout.consumer_batch_size = 5000;
    assert_int_equal(load(f, &c, &t, &l, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "train_dataset.batch_size"));
    areal_rl_config_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(gsm8k_jsonl_reads_with_bad_lines_named, setup, teardown),
        cmocka_unit_test_setup_teardown(order_is_seeded_and_restores, setup, teardown),
        cmocka_unit_test_setup_teardown(rewards_math_and_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(synthetic_task_goes_through_jsonl, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
