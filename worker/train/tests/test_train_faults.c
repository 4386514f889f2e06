/*
 * test_train_faults.c - issue 13's named faults of the trainer loop, against
 * real `areal-worker serve` processes killed with SIGKILL (a crash):
 *   - a rollout server killed mid-step (xccl mode, two servers): its
 *     requests are retried on the other server (logged, naming it), the
 *     weight update leaves it out, and every step completes;
 *   - the only server killed (disk mode): the trainer waits with one log
 *     line, and when a server comes back at that address (restarted from the
 *     initial weights) it is kept out until the trainer catches it up, and
 *     the run continues to the end with the server at the trainer's final
 *     version.
 * (A trainer rank killed under `arealctl run` is cli/tests/test_arealctl.c.)
 */
#include <pthread.h>

#include "serve_proc.h"
#include "demo_config.h"

#include "areal/train/train_loop.h"

typedef struct ctx {
    pthread_mutex_t mu;
    sp_server *victim;
    int kill_after; /* steps */
    int steps;
    char log[64][600];
    int n_log;
    const char *restart_model; /* nullable: restart the victim this long after the kill */
    int restart_ms;
    pthread_t restarter;
    bool restarting;
} ctx;

static void on_log(void *c, const char *line) {
    ctx *x = c;
    fprintf(stderr, "  [train] %s\n", line);
    pthread_mutex_lock(&x->mu);
    if (x->n_log < 64)
        snprintf(x->log[x->n_log++], sizeof x->log[0], "%s", line);
    pthread_mutex_unlock(&x->mu);
}

static int count(ctx *x, const char *a, const char *b) {
    int n = 0;
    pthread_mutex_lock(&x->mu);
    for (int i = 0; i < x->n_log; i++)
        n += strstr(x->log[i], a) != NULL && (b == NULL || strstr(x->log[i], b) != NULL);
    pthread_mutex_unlock(&x->mu);
    return n;
}

static void *restart_main(void *arg) {
    ctx *x = arg;
    sp_sleep_ms(x->restart_ms);
    *x->victim = sp_start(x->restart_model, x->victim->port);
    return NULL;
}

static void on_progress(void *c, const char *line) {
    ctx *x = c;
    if (strstr(line, "\"max_staleness\"") == NULL)
        return;
    if (++x->steps == x->kill_after) {
        /* the next batch's rollouts are in flight on it (eta 1) */
        sp_kill(x->victim, SIGKILL);
        if (x->restart_model) {
            x->restarting = true;
            assert_int_equal(pthread_create(&x->restarter, NULL, restart_main, x), 0);
        }
    }
}

static void job_init(areal_train_job *job, const char *model, const char *job_dir,
                     const char *const *servers, int n, areal_rl_config *cfg, long steps, ctx *x) {
    memset(job, 0, sizeof *job);
    job->model_dir = model;
    job->job_dir = job_dir;
    job->servers = servers;
    job->n_servers = n;
    job->cfg = cfg;
    job->total_steps = steps;
    job->task = (areal_synth_cfg){49, "+", 0.2, 7};
    job->eval_every = 0;
    job->eval_n = 8;
    job->rollout_workers = 4;
    job->threads = 1;
    job->xccl.bucket_bytes = 128 << 10;
    job->xccl.timeout_ms = 10000;
    job->log = on_log;
    job->progress = on_progress;
    job->ctx = x;
}

static void server_killed_mid_step_is_retried_elsewhere(void **st) {
    (void)st;
    char dir[256], model[300], job_dir[300];
    sp_tmpdir(dir, sizeof dir, "faults");
    areal_synth_cfg task = {49, "+", 0.2, 7};
    sp_make_model(dir, model, sizeof model, &task, 0);
    sp_server s[2] = {sp_start(model, 0), sp_start(model, 0)};
    const char *servers[] = {s[0].addr, s[1].addr};
    areal_rl_config cfg;
    demo_config_mode(&cfg, 4, 8, 1, "xccl");
    cfg.rollout.request_timeout = 30;
    snprintf(job_dir, sizeof job_dir, "%s/job", dir);
    ctx x = {.mu = PTHREAD_MUTEX_INITIALIZER, .victim = &s[1], .kill_after = 1};
    areal_train_job job;
    job_init(&job, model, job_dir, servers, 2, &cfg, 4, &x);
    areal_train_result res;
    areal_error err;
    double t0 = sp_now();
    if (areal_train_run(&job, &res, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    fprintf(stderr, "  4 steps with a server killed after the first: %.1f s\n", sp_now() - t0);
    assert_int_equal(res.steps_done, 4);
    assert_int_equal(x.steps, 4);
    /* its in-flight requests went to the other server, and the next update left it out */
    assert_true(count(&x, "retrying the request on another server", s[1].addr) +
                    count(&x, "missed a weight update", s[1].addr) >=
                1);
    char v[32], out[4096];
    sp_greedy(s[0].addr, (const int32_t[]){5, 9, 3}, 3, out, sizeof out, v, sizeof v);
    assert_string_equal(v, "4");
    sp_kill(&s[0], SIGKILL);
    sp_rm_rf(dir);
}

static void only_server_killed_waits_then_continues(void **st) {
    (void)st;
    char dir[256], model[300], job_dir[300];
    sp_tmpdir(dir, sizeof dir, "faults1");
    areal_synth_cfg task = {49, "+", 0.2, 7};
    sp_make_model(dir, model, sizeof model, &task, 0);
    sp_server s = sp_start(model, 0);
    const char *servers[] = {s.addr};
    areal_rl_config cfg;
    demo_config_mode(&cfg, 4, 8, 1, "disk");
    cfg.rollout.request_timeout = 30;
    snprintf(job_dir, sizeof job_dir, "%s/job", dir);
    ctx x = {.mu = PTHREAD_MUTEX_INITIALIZER,
             .victim = &s,
             .kill_after = 1,
             .restart_model = model,
             .restart_ms = 2000};
    areal_train_job job;
    job_init(&job, model, job_dir, servers, 1, &cfg, 3, &x);
    areal_train_result res;
    areal_error err;
    int rc = areal_train_run(&job, &res, &err);
    if (x.restarting)
        pthread_join(x.restarter, NULL);
    if (rc != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(res.steps_done, 3);
    /* one line while it waited, however many requests waited */
    assert_int_equal(count(&x, "no rollout server is reachable", NULL), 1);
    /* the restarted server came back with the initial weights: kept out (a server-wide call
     * that missed it, or the version check when a request finds it first) and caught up */
    assert_true(count(&x, "it gets no requests until a weight update reaches it", s.addr) >= 1);
    assert_true(count(&x, "has the current weights again", s.addr) >= 1);
    char v[32], out[4096];
    sp_greedy(s.addr, (const int32_t[]){5, 9, 3}, 3, out, sizeof out, v, sizeof v);
    assert_string_equal(v, "3");
    sp_kill(&s, SIGKILL);
    sp_rm_rf(dir);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(server_killed_mid_step_is_retried_elsewhere),
        cmocka_unit_test(only_server_killed_waits_then_continues),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
