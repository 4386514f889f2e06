/*
 * test_resume.c - exact resume: with eta = 0 a run stopped at step 2 (the
 * stop flag, as SIGTERM sets it: the loop checkpoints and returns) and
 * resumed to step 4 ends with weights bit-identical to an uninterrupted
 * 4-step run, and its servers are given the checkpoint's weights before the
 * first resumed rollout. With eta = 0 every trained token is of the policy
 * being trained (staleness 0 throughout). A server failing throughout one
 * run has its requests retried on the other and the run completes.
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

#include "areal/model/model.h"
#include "areal/train/tiny.h"
#include "areal/train/train_loop.h"
#include "sgl_ref_server.h"

typedef struct ctx {
    volatile sig_atomic_t stop;
    long stop_at;
    long max_staleness;
    int lines;
} ctx;

static void progress(void *c, const char *line) {
    ctx *x = c;
    json_error_t je;
    json_t *d = json_loads(line, 0, &je);
    json_t *ms = json_object_get(d, "max_staleness");
    if (ms) {
        x->lines++;
        if (json_integer_value(ms) > x->max_staleness)
            x->max_staleness = json_integer_value(ms);
        if (x->stop_at > 0 && json_integer_value(json_object_get(d, "step")) == x->stop_at)
            x->stop = 1;
    }
    json_decref(d);
}

static void config(areal_rl_config *c) {
    memset(c, 0, sizeof *c);
    c->seed = 3;
    areal_actor_config *a = &c->actor;
    a->optimizer.lr = 1e-3;
    a->optimizer.beta1 = 0.9;
    a->optimizer.beta2 = 0.999;
    a->optimizer.eps = 1e-8;
    a->optimizer.weight_decay = 0.01;
    a->optimizer.gradient_clipping = 1.0;
    a->ppo_n_minibatches = 1;
    a->eps_clip = 0.2;
    a->reward_scaling = 10.0;
    a->reward_bias = -0.5;
    a->reward_clip = 20;
    a->reward_norm.enabled = true;
    a->reward_norm.mean_level = AREAL_NORM_GROUP;
    a->reward_norm.std_level = AREAL_NORM_GROUP;
    a->reward_norm.std_unbiased = true;
    a->reward_norm.eps = 1e-5;
    a->reward_norm.group_size = 4;
    a->recompute_logprob = true;
    a->use_decoupled_loss = true;
    a->temperature = 1;
    a->group_size = 4;
    c->gconfig.n_samples = 4;
    c->gconfig.max_new_tokens = 5;
    c->gconfig.temperature = 1;
    c->gconfig.top_p = 1;
    c->rollout.max_head_offpolicyness = 0;
    c->rollout.consumer_batch_size = 4;
    c->rollout.max_concurrent_rollouts = 8;
    c->rollout.request_timeout = 30;
}

static int run(const char *model, const char *job_dir, long steps, bool resume, ctx *x,
               sgl_ref **srv, int n_srv, areal_train_result *res) {
    areal_rl_config cfg;
    config(&cfg);
    const char *addrs[2];
    for (int i = 0; i < n_srv; i++)
        addrs[i] = sgl_ref_addr(srv[i]);
    areal_train_job job;
    memset(&job, 0, sizeof job);
    job.model_dir = model;
    job.job_dir = job_dir;
    job.servers = addrs;
    job.n_servers = n_srv;
    job.cfg = &cfg;
    job.total_steps = steps;
    job.task = (areal_synth_cfg){9, "+", 0.2, 7};
    job.eval_n = 10;
    job.eval_every = 1000; /* evaluations only at the ends */
    job.resume = resume;
    job.rollout_workers = 3;
    job.threads = 1;
    job.stop = &x->stop;
    job.progress = progress;
    job.ctx = x;
    areal_error err;
    int rc = areal_train_run(&job, res, &err);
    if (rc != AREAL_OK)
        fprintf(stderr, "train: %s\n", err.msg);
    return rc;
}

static void load(const char *job_dir, long step, areal_model *m) {
    char p[512];
    snprintf(p, sizeof p, "%s/recover/step_%08ld/model", job_dir, step);
    areal_error err;
    if (areal_model_load(m, p, NULL, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
}

static void interrupted_run_resumes_bit_identically(void **st) {
    (void)st;
    char dir[256], model[300], ja[300], jb[300];
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/areal-resume-XXXXXX", t);
    assert_non_null(mkdtemp(dir));
    snprintf(model, sizeof model, "%s/model", dir);
    snprintf(ja, sizeof ja, "%s/a", dir);
    snprintf(jb, sizeof jb, "%s/b", dir);
    assert_int_equal(mkdir(model, 0755), 0);
    areal_tiny_cfg tc = areal_tiny_default();
    tc.hidden_size = 32;
    tc.intermediate_size = 64;
    areal_error err;
    assert_int_equal(areal_tiny_create(model, &tc, &err), AREAL_OK);
    areal_train_result res;

    /* A: 4 steps in one go */
    sgl_ref *sa = sgl_ref_start(model);
    ctx xa = {0};
    assert_int_equal(run(model, ja, 4, false, &xa, &sa, 1, &res), AREAL_OK);
    assert_int_equal(res.steps_done, 4);
    assert_int_equal(xa.max_staleness, 0); /* eta = 0: synchronous */
    sgl_ref_stop(sa);

    /* B: stopped after step 2 (a checkpoint), then resumed on fresh servers */
    sgl_ref *sb = sgl_ref_start(model);
    ctx xb = {0};
    xb.stop_at = 2;
    assert_int_equal(run(model, jb, 4, false, &xb, &sb, 1, &res), AREAL_OK);
    assert_true(res.stopped);
    assert_int_equal(res.steps_done, 2);
    sgl_ref_stop(sb);
    sgl_ref *sb2[2] = {sgl_ref_start(model), sgl_ref_start(model)};
    sgl_ref_set_failing(sb2[0], 1); /* and one of the two new servers fails every request */
    ctx xb2 = {0};
    assert_int_equal(run(model, jb, 4, true, &xb2, sb2, 2, &res), AREAL_OK);
    assert_int_equal(res.steps_done, 4);
    assert_int_equal(xb2.lines, 2);
    assert_int_equal(xb2.max_staleness, 0);
    assert_true(sgl_ref_weight_loads(sb2[1]) >= 3); /* the checkpoint's weights, then 2 steps */
    assert_true(sgl_ref_generates(sb2[0]) >= 1);    /* it was tried, and its work moved on */
    sgl_ref_stop(sb2[0]);
    sgl_ref_stop(sb2[1]);

    areal_model a, b, init;
    load(ja, 4, &a);
    load(jb, 4, &b);
    assert_int_equal(a.n_params, b.n_params);
    assert_memory_equal(a.params, b.params, a.n_params * sizeof(float));
    assert_int_equal(areal_model_load(&init, model, NULL, &err), AREAL_OK);
    assert_true(memcmp(a.params, init.params, a.n_params * sizeof(float)) != 0); /* it trained */
    areal_model_free(&a);
    areal_model_free(&b);
    areal_model_free(&init);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(interrupted_run_resumes_bit_identically),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
