/*
 * test_train_xccl.c - the trainer loop's xccl weight sync against real
 * `areal-worker serve` processes:
 *   - a loop run of 3 steps in xccl mode (buckets smaller than the model, so
 *     several per update) leaves both servers at version 3 with greedy
 *     outputs and logprobs equal to a server started on the trainer's
 *     exported step-3 weights (and different from the initial model's), and
 *     every progress line reports the mode, bytes, buckets and seconds;
 *   - a server SIGKILLed mid-bucket: the update fails over to the servers
 *     that answer (one log line naming the bucket and the server), the
 *     survivor serves the new version, the dead one is kept out of rollouts,
 *     no hang; once it is restarted catch_up brings it to the same weights.
 */
#include "serve_proc.h"
#include "demo_config.h"

#include "areal/train/rollout_ctl.h"
#include "areal/train/train_loop.h"
#include "areal/train/xccl.h"

static const int32_t prompts[3][5] = {{5, 9, 3, 12, 2}, {20, 4, 7}, {1, 2, 3, 4}};
static const int n_prompt[3] = {5, 3, 4};

typedef struct lines {
    int n_steps, n_xccl, max_buckets;
    double sync_s;
    char log[8][600];
    int n_log;
} lines;

static void on_log(void *c, const char *line) {
    lines *x = c;
    fprintf(stderr, "  [train] %s\n", line);
    if (x->n_log < 8)
        snprintf(x->log[x->n_log++], sizeof x->log[0], "%s", line);
}

static void on_progress(void *c, const char *line) {
    lines *x = c;
    json_t *d = json_loads(line, 0, NULL);
    assert_non_null(d);
    if (json_object_get(d, "max_staleness")) {
        x->n_steps++;
        const char *mode = json_string_value(json_object_get(d, "weight_sync_mode"));
        x->n_xccl += mode && strcmp(mode, "xccl") == 0;
        int b = (int)json_integer_value(json_object_get(d, "weight_sync_buckets"));
        if (b > x->max_buckets)
            x->max_buckets = b;
        assert_true(json_integer_value(json_object_get(d, "weight_sync_bytes")) > 0);
        x->sync_s += json_number_value(json_object_get(d, "weight_sync_s"));
    }
    json_decref(d);
}

static void loop_xccl_equals_exported_weights(void **st) {
    (void)st;
    char dir[256], model[300], job_dir[300], exported[400];
    sp_tmpdir(dir, sizeof dir, "xccl");
    areal_synth_cfg task = {49, "+", 0.2, 7};
    sp_make_model(dir, model, sizeof model, &task, 200);
    sp_server s[2] = {sp_start(model, 0), sp_start(model, 0)};
    char before[3][4096], v[32];
    for (int p = 0; p < 3; p++)
        sp_greedy(s[0].addr, prompts[p], n_prompt[p], before[p], sizeof before[p], NULL, 0);
    const char *servers[] = {s[0].addr, s[1].addr};
    areal_rl_config cfg;
    demo_config_mode(&cfg, 4, 8, 1, "xccl");
    cfg.actor.optimizer.lr = 1e-3;
    snprintf(job_dir, sizeof job_dir, "%s/job", dir);
    lines x = {0};
    areal_train_job job;
    memset(&job, 0, sizeof job);
    job.model_dir = model;
    job.job_dir = job_dir;
    job.servers = servers;
    job.n_servers = 2;
    job.cfg = &cfg;
    job.total_steps = 3;
    job.task = task;
    job.eval_every = 0;
    job.eval_n = 16;
    job.rollout_workers = 4;
    job.threads = 1;
    job.xccl.bucket_bytes = 64 << 10; /* the model is ~500 KB: several buckets */
    job.xccl.timeout_ms = 10000;
    job.log = on_log;
    job.progress = on_progress;
    job.ctx = &x;
    areal_train_result res;
    areal_error err;
    if (areal_train_run(&job, &res, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(res.steps_done, 3);
    assert_int_equal(x.n_steps, 3);
    assert_int_equal(x.n_xccl, 3);
    assert_true(x.max_buckets >= 4);
    assert_true(x.sync_s > 0);
    fprintf(stderr, "  xccl: %d buckets per update, %.3f s per update\n", x.max_buckets,
            x.sync_s / 3);
    /* the trainer's exported step-3 policy, on a server of its own */
    snprintf(exported, sizeof exported, "%s/recover/step_00000003/model", job_dir);
    sp_server ref = sp_start(exported, 0);
    int differ = 0;
    for (int p = 0; p < 3; p++) {
        char want[4096], got[4096];
        sp_greedy(ref.addr, prompts[p], n_prompt[p], want, sizeof want, NULL, 0);
        for (int k = 0; k < 2; k++) {
            sp_greedy(s[k].addr, prompts[p], n_prompt[p], got, sizeof got, v, sizeof v);
            assert_string_equal(got, want);
            assert_string_equal(v, "3");
        }
        differ += strcmp(want, before[p]) != 0;
    }
    assert_true(differ > 0); /* training moved the weights: the comparison can fail */
    sp_kill(&ref, SIGKILL);
    sp_kill(&s[0], SIGKILL);
    sp_kill(&s[1], SIGKILL);
    sp_rm_rf(dir);
}

/* ---- a server killed mid-bucket --------------------------------------------------- */

static int no_prompt(void *ctx, areal_rollout_prompt *p) {
    (void)ctx;
    (void)p;
    return 0;
}

typedef struct victim {
    sp_server *s;
    int at;
    bool done;
} victim;

static void kill_at(void *ctx, int bucket) {
    victim *v = ctx;
    if (!v->done && bucket == v->at) {
        sp_kill(v->s, SIGKILL); /* its POST is out, it is waiting in the broadcast */
        v->done = true;
    }
}

static void server_killed_mid_bucket_fails_over(void **st) {
    (void)st;
    char dir[256], model[300];
    sp_tmpdir(dir, sizeof dir, "xccl-kill");
    areal_synth_cfg task = {49, "+", 0.2, 7};
    sp_make_model(dir, model, sizeof model, &task, 0);
    sp_server s[2] = {sp_start(model, 0), sp_start(model, 0)};
    const char *servers[] = {s[0].addr, s[1].addr};
    areal_rollout_cfg rc;
    memset(&rc, 0, sizeof rc);
    rc.group_size = 1;
    rc.n_workers = 1;
    rc.sampling.max_new_tokens = 4;
    rc.batch_size = 1;
    rc.request_timeout_s = 30;
    areal_rollout_callbacks cb = {no_prompt, NULL, NULL, NULL, NULL};
    areal_rollout_ctl *ctl = NULL;
    areal_error e;
    assert_int_equal(areal_rollout_ctl_start(&rc, servers, 2, &cb, &ctl, &e), 0);
    lines x = {0};
    victim vic = {&s[1], 2, false};
    areal_xccl_cfg xc = {.bucket_bytes = 32 << 10,
                         .timeout_ms = 5000,
                         .http_timeout_s = 20,
                         .on_bucket = kill_at,
                         .hook_ctx = &vic,
                         .log = on_log,
                         .log_ctx = &x};
    areal_xccl *w = NULL;
    if (areal_xccl_open(&xc, ctl, &w, &e) != 0)
        fail_msg("%s", e.msg);
    /* new weights: the initial ones scaled, also written out as the reference */
    areal_model m;
    assert_int_equal(areal_model_load(&m, model, NULL, &e), 0);
    for (size_t i = 0; i < m.n_params; i++)
        m.params[i] *= 1.25f;
    char ref_dir[400];
    snprintf(ref_dir, sizeof ref_dir, "%s/new", dir);
    assert_int_equal(areal_hf_save(&m, model, ref_dir, &e), 0);
    double t0 = sp_now();
    areal_xccl_stats ws;
    if (areal_xccl_update(w, ctl, &m, 1, true, &ws, &e) != 0)
        fail_msg("%s", e.msg);
    double took = sp_now() - t0;
    assert_true(vic.done);
    assert_int_equal(ws.attempts, 2);
    assert_int_equal(ws.servers, 1);
    assert_true(took < 20); /* a retry, not a wait for every timeout */
    bool named = false;
    for (int i = 0; i < x.n_log; i++)
        named |=
            strstr(x.log[i], "failed at bucket 2") != NULL && strstr(x.log[i], "resending") != NULL;
    assert_true(named);
    char addrs[4][128];
    bool stale[4];
    assert_int_equal(areal_rollout_ctl_addrs(ctl, addrs, stale, 4), 2);
    assert_false(stale[0]);
    assert_true(stale[1]); /* the dead one gets no requests */
    sp_server ref = sp_start(ref_dir, 0);
    char want[4096], got[4096], v[32];
    sp_greedy(ref.addr, prompts[0], n_prompt[0], want, sizeof want, NULL, 0);
    sp_greedy(s[0].addr, prompts[0], n_prompt[0], got, sizeof got, v, sizeof v);
    assert_string_equal(got, want);
    assert_string_equal(v, "1");
    /* restarted on its old port with the initial weights: catch_up sends it version 1 */
    s[1] = sp_start(model, s[1].port);
    assert_int_equal(areal_xccl_catch_up(w, ctl, &m, 1, &e), 0);
    sp_greedy(s[1].addr, prompts[0], n_prompt[0], got, sizeof got, v, sizeof v);
    assert_string_equal(got, want);
    assert_string_equal(v, "1");
    assert_int_equal(areal_rollout_ctl_addrs(ctl, addrs, stale, 4), 2);
    assert_false(stale[1]);
    /* and the next update reaches both through a rebuilt main group */
    for (size_t i = 0; i < m.n_params; i++)
        m.params[i] /= 1.25f;
    assert_int_equal(areal_xccl_update(w, ctl, &m, 2, true, &ws, &e), 0);
    assert_int_equal(ws.servers, 2);
    assert_int_equal(ws.attempts, 1);
    areal_xccl_close(w);
    areal_rollout_ctl_stop(ctl);
    areal_model_free(&m);
    sp_kill(&ref, SIGKILL);
    sp_kill(&s[0], SIGKILL);
    sp_kill(&s[1], SIGKILL);
    sp_rm_rf(dir);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(loop_xccl_equals_exported_weights),
        cmocka_unit_test(server_killed_mid_bucket_fails_over),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
