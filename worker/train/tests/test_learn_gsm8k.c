/*
 * test_learn_gsm8k.c - the job loop on a GSM8K-shaped dataset: the tiny
 * model (warmed up on the synthetic task) trains a few steps on
 * fixtures/gsm8k_tiny.jsonl (question / answer with "#### N", three bad
 * lines) through the reference SGLang-API server, with the math reward on
 * the decoded responses: rewards are non-trivial (some right, some wrong),
 * the bad lines are reported with their numbers, evaluation runs on the
 * held-out split, and a resumed run continues at the checkpointed data
 * position.
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

#include <cmocka.h>

#include "areal/model/tokenizer.h"
#include "areal/train/hf_save.h"
#include "areal/train/job_config.h"
#include "areal/train/tiny.h"
#include "areal/train/train_loop.h"
#include "areal/train/warmup.h"
#include "sgl_ref_server.h"

typedef struct ctx {
    int n_lines;
    double reward_sum, reward_min, reward_max;
    bool have_eval;
    char log[8192];
} ctx;

static void logline(void *c, const char *line) {
    ctx *x = c;
    fprintf(stderr, "  [train] %s\n", line);
    size_t used = strlen(x->log);
    snprintf(x->log + used, sizeof x->log - used, "%s\n", line);
}

static void progress(void *c, const char *line) {
    ctx *x = c;
    json_error_t je;
    json_t *d = json_loads(line, 0, &je);
    assert_non_null(d);
    json_t *r = json_object_get(d, "reward_mean");
    if (r != NULL) {
        double v = json_number_value(r);
        x->reward_min = x->n_lines == 0 || v < x->reward_min ? v : x->reward_min;
        x->reward_max = x->n_lines == 0 || v > x->reward_max ? v : x->reward_max;
        x->reward_sum += v;
        x->n_lines++;
    }
    if (json_object_get(d, "eval_accuracy"))
        x->have_eval = true;
    fprintf(stderr, "  [progress] %s\n", line);
    json_decref(d);
}

static void make_model(const char *dir, char *model, size_t cap) {
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
    areal_synth_cfg task = {49, "+", 0.2, 7};
    assert_int_equal(areal_synth_make(&task, &sp, &err), AREAL_OK);
    areal_warmup_cfg wc = {300, 32, 3e-3, 12345};
    if (areal_warmup_run(&m, tok, sp.train, sp.n_train, &wc, NULL, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(areal_hf_save_weights(&m, model, &err), AREAL_OK);
    areal_synth_free(&sp);
    areal_tokenizer_free(tok);
    areal_model_free(&m);
}

static void run_job(const char *model, const char *job_dir, sgl_ref *srv, long steps, bool resume,
                    ctx *x, areal_train_result *res) {
    const char *servers[] = {sgl_ref_addr(srv)};
    areal_rl_config cfg;
    areal_train_config_demo(&cfg);
    cfg.train_dataset.path = strdup("worker/train/tests/fixtures/gsm8k_tiny.jsonl");
    cfg.train_dataset.prompt_template = strdup("{question}");
    cfg.train_dataset.batch_size = cfg.rollout.consumer_batch_size = 8;
    cfg.rollout.max_concurrent_rollouts = 16;
    cfg.gconfig.n_samples = cfg.actor.group_size = cfg.actor.reward_norm.group_size = 4;
    cfg.rollout.request_timeout = 60;
    areal_error err;
    assert_int_equal(areal_train_config_settle(&cfg, &err), AREAL_OK);
    areal_train_job job;
    memset(&job, 0, sizeof job);
    job.model_dir = model;
    job.job_dir = job_dir;
    job.servers = servers;
    job.n_servers = 1;
    job.cfg = &cfg;
    job.total_steps = steps;
    job.task = (areal_synth_cfg){49, "+", 0.2, 7};
    job.eval_every = 2;
    job.ckpt_every = 2;
    job.resume = resume;
    job.rollout_workers = 2;
    job.threads = 1;
    job.log = logline;
    job.progress = progress;
    job.ctx = x;
    if (areal_train_run(&job, res, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    areal_rl_config_free(&cfg);
}

static void gsm8k_jsonl_trains_with_the_math_reward(void **st) {
    (void)st;
    char dir[256], model[300], job_dir[300];
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/areal-gsm8k-XXXXXX", t);
    assert_non_null(mkdtemp(dir));
    make_model(dir, model, sizeof model);
    sgl_ref *srv = sgl_ref_start(model);
    assert_non_null(srv);
    snprintf(job_dir, sizeof job_dir, "%s/job", dir);
    ctx x;
    memset(&x, 0, sizeof x);
    areal_train_result res;
    run_job(model, job_dir, srv, 4, false, &x, &res);
    assert_int_equal(res.steps_done, 4);
    assert_int_equal(x.n_lines, 4);
    assert_true(x.have_eval);
    /* the math reward on the tiny model's answers: some right, some wrong */
    assert_true(x.reward_sum > 0);
    assert_true(x.reward_min < 1.0);
    assert_non_null(strstr(x.log, "3 bad lines"));
    assert_non_null(strstr(x.log, "5, 17, 40"));
    assert_non_null(strstr(x.log, "math reward"));
    /* resume from the step-4 checkpoint and run to 6 */
    memset(&x, 0, sizeof x);
    run_job(model, job_dir, srv, 6, true, &x, &res);
    assert_int_equal(res.steps_done, 6);
    assert_int_equal(x.n_lines, 2);
    assert_non_null(strstr(x.log, "resumed"));
    sgl_ref_stop(srv);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gsm8k_jsonl_trains_with_the_math_reward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
