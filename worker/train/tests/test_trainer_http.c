/*
 * test_trainer_http.c - the trainer's /status, /metrics and /healthz
 * (trainer_http.h, the contract in the operator's hands): a published
 * snapshot renders with nulls for the unknown and the contract's names, and
 * a running job loop (tiny model, reference SGLang-API server) publishes
 * each step the numbers of its progress line, read over libcurl while it
 * runs and after it ends.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "areal/train/job_config.h"
#include "areal/train/tiny.h"
#include "areal/train/train_loop.h"
#include "areal/train/trainer_http.h"
#include "sgl_ref_server.h"

typedef struct body {
    char buf[65536];
    size_t n;
} body;

static size_t sink(char *p, size_t sz, size_t n, void *ud) {
    body *b = ud;
    size_t k = sz * n;
    if (b->n + k >= sizeof b->buf)
        k = sizeof b->buf - 1 - b->n;
    memcpy(b->buf + b->n, p, k);
    b->n += k;
    b->buf[b->n] = '\0';
    return sz * n;
}

/* GET http://127.0.0.1:port/path; returns the status code, body into *b. */
static long get(int port, const char *path, body *b, char *ctype, size_t cap) {
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    b->n = 0;
    b->buf[0] = '\0';
    CURL *c = curl_easy_init();
    assert_non_null(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    long code = 0;
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    char *ct = NULL;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    if (ctype)
        snprintf(ctype, cap, "%s", ct ? ct : "");
    curl_easy_cleanup(c);
    return code;
}

static json_t *get_status(int port) {
    body b;
    char ct[128];
    assert_int_equal(get(port, "/status", &b, ct, sizeof ct), 200);
    assert_non_null(strstr(ct, "application/json"));
    json_error_t je;
    json_t *d = json_loads(b.buf, 0, &je);
    if (d == NULL)
        fail_msg("/status is not JSON: %s", b.buf);
    return d;
}

static double num(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    if (!json_is_number(v))
        fail_msg("%s is not a number", k);
    return json_number_value(v);
}

static void snapshot_renders_the_contract(void **st) {
    (void)st;
    areal_trainer_http *h = NULL;
    areal_error err;
    assert_int_equal(areal_trainer_http_start(NULL, 0, &h, &err), AREAL_OK);
    int port = areal_trainer_http_port(h);
    assert_true(port > 0);
    /* nothing published: starting, unknowns null */
    json_t *d = get_status(port);
    assert_string_equal(json_string_value(json_object_get(d, "phase")), "starting");
    assert_true(json_is_null(json_object_get(d, "reward_mean")));
    assert_true(json_is_null(json_object_get(d, "eval_accuracy")));
    assert_true(json_is_null(json_object_get(d, "checkpoint_step")));
    assert_true(json_is_null(json_object_get(d, "last_weight_sync_seconds")));
    assert_true(json_is_null(json_object_get(json_object_get(d, "staleness"), "max")));
    json_decref(d);
    areal_train_status s;
    memset(&s, 0, sizeof s);
    s.phase = AREAL_PHASE_TRAINING;
    s.step = 12;
    s.total_steps = 500;
    s.policy_version = 12;
    s.has_reward = true;
    s.reward_mean = 0.41;
    s.has_eval = true;
    s.eval_accuracy = 0.52;
    s.has_staleness = true;
    s.staleness_max = 1;
    s.staleness_mean = 0.93;
    s.staleness_bound = 1;
    s.samples_per_second = 35.2;
    s.tokens_per_second = 410.0;
    s.has_sync = true;
    s.last_weight_sync_seconds = 0.21;
    s.train_seconds = 0.8;
    s.servers = 2;
    s.running_ahead = true;
    s.has_checkpoint = true;
    s.checkpoint_step = 10;
    areal_trainer_http_publish(h, &s, true);
    d = get_status(port);
    assert_string_equal(json_string_value(json_object_get(d, "phase")), "training");
    assert_int_equal(json_integer_value(json_object_get(d, "step")), 12);
    assert_int_equal(json_integer_value(json_object_get(d, "total_steps")), 500);
    assert_int_equal(json_integer_value(json_object_get(d, "policy_version")), 12);
    assert_true(num(d, "reward_mean") == 0.41);
    assert_true(num(d, "eval_accuracy") == 0.52);
    json_t *sl = json_object_get(d, "staleness");
    assert_int_equal(json_integer_value(json_object_get(sl, "max")), 1);
    assert_true(num(sl, "mean") == 0.93);
    assert_int_equal(json_integer_value(json_object_get(sl, "bound")), 1);
    assert_true(num(d, "samples_per_second") == 35.2);
    assert_true(num(d, "tokens_per_second") == 410.0);
    assert_true(num(d, "last_weight_sync_seconds") == 0.21);
    assert_true(num(d, "rollout_wait_seconds") == 0.0);
    assert_true(num(d, "train_seconds") == 0.8);
    assert_int_equal(json_integer_value(json_object_get(d, "servers")), 2);
    assert_true(json_is_false(json_object_get(d, "waiting_for_samples")));
    assert_true(json_is_true(json_object_get(d, "running_ahead")));
    assert_int_equal(json_integer_value(json_object_get(d, "checkpoint_step")), 10);
    json_decref(d);
    body b;
    char ct[128];
    assert_int_equal(get(port, "/metrics", &b, ct, sizeof ct), 200);
    assert_non_null(strstr(ct, "text/plain"));
    const char *names[] = {"areal_trainer_step 12",
                           "areal_trainer_policy_version 12",
                           "areal_trainer_reward_mean 0.41",
                           "areal_trainer_eval_accuracy 0.52",
                           "areal_trainer_staleness_max 1",
                           "areal_trainer_samples_per_second 35.2",
                           "areal_trainer_tokens_per_second 410",
                           "# TYPE areal_trainer_weight_sync_seconds histogram",
                           "areal_trainer_weight_sync_seconds_count 1",
                           "# TYPE areal_trainer_rollout_wait_seconds histogram",
                           "# TYPE areal_trainer_train_seconds histogram",
                           "areal_trainer_servers 2"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strstr(b.buf, names[i]) == NULL)
            fail_msg("/metrics lacks '%s':\n%s", names[i], b.buf);
    assert_int_equal(get(port, "/healthz", &b, NULL, 0), 200);
    assert_string_equal(b.buf, "ok");
    assert_int_equal(get(port, "/nothing", &b, NULL, 0), 404);
    areal_trainer_http_stop(h);
}

/* ---- against a running loop ---------------------------------------------- */

typedef struct run {
    areal_train_job job;
    areal_train_result res;
    int rc;
    char msg[600];
    pthread_mutex_t mu;
    json_t *last; /* the last step's progress line */
    json_t *last_eval;
} run;

static void progress(void *c, const char *line) {
    run *r = c;
    json_t *d = json_loads(line, 0, NULL);
    pthread_mutex_lock(&r->mu);
    if (d && json_object_get(d, "reward_mean")) {
        json_decref(r->last);
        r->last = json_incref(d);
    }
    if (d && json_object_get(d, "eval_accuracy")) {
        json_decref(r->last_eval);
        r->last_eval = json_incref(d);
    }
    pthread_mutex_unlock(&r->mu);
    json_decref(d);
}

static void *loop_thread(void *ud) {
    run *r = ud;
    areal_error err;
    r->rc = areal_train_run(&r->job, &r->res, &err);
    if (r->rc != AREAL_OK)
        snprintf(r->msg, sizeof r->msg, "%s", err.msg);
    return NULL;
}

static void running_loop_publishes_each_step(void **st) {
    (void)st;
    char dir[256], model[300], job_dir[300];
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/areal-thttp-XXXXXX", t);
    assert_non_null(mkdtemp(dir));
    snprintf(model, sizeof model, "%s/model", dir);
    snprintf(job_dir, sizeof job_dir, "%s/job", dir);
    assert_int_equal(mkdir(model, 0755), 0);
    areal_tiny_cfg tc = areal_tiny_default();
    areal_error err;
    assert_int_equal(areal_tiny_create(model, &tc, &err), AREAL_OK);
    sgl_ref *srv = sgl_ref_start(model);
    assert_non_null(srv);
    const char *servers[] = {sgl_ref_addr(srv)};
    areal_trainer_http *h = NULL;
    assert_int_equal(areal_trainer_http_start(NULL, 0, &h, &err), AREAL_OK);
    int port = areal_trainer_http_port(h);
    areal_rl_config cfg;
    areal_train_config_demo(&cfg);
    cfg.rollout.consumer_batch_size = cfg.train_dataset.batch_size = 4;
    cfg.rollout.max_concurrent_rollouts = 8;
    cfg.gconfig.n_samples = cfg.actor.group_size = cfg.actor.reward_norm.group_size = 2;
    assert_int_equal(areal_train_config_settle(&cfg, &err), AREAL_OK);
    run r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    r.job.model_dir = model;
    r.job.job_dir = job_dir;
    r.job.servers = servers;
    r.job.n_servers = 1;
    r.job.cfg = &cfg;
    r.job.total_steps = 6;
    r.job.task = (areal_synth_cfg){9, "+", 0.2, 7};
    r.job.eval_every = 3;
    r.job.ckpt_every = 4;
    r.job.rollout_workers = 2;
    r.job.threads = 1;
    r.job.http = h;
    char tlog[300];
    snprintf(tlog, sizeof tlog, "%s/termination-log", dir);
    r.job.termination_log = tlog;
    r.job.progress = progress;
    r.job.ctx = &r;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, loop_thread, &r), 0);
    /* while it runs: the phase moves on, steps only grow */
    long last_step = -1;
    bool saw_training = false;
    for (int i = 0; i < 2000; i++) {
        json_t *d = get_status(port);
        const char *ph = json_string_value(json_object_get(d, "phase"));
        long step = (long)json_integer_value(json_object_get(d, "step"));
        assert_true(step >= last_step);
        last_step = step;
        saw_training |= strcmp(ph, "training") == 0;
        bool done = strcmp(ph, "done") == 0 || strcmp(ph, "failed") == 0;
        json_decref(d);
        if (done)
            break;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    pthread_join(th, NULL);
    if (r.rc != AREAL_OK)
        fail_msg("%s", r.msg);
    assert_true(saw_training);
    /* after: the last step's numbers, as its progress line has them */
    json_t *d = get_status(port);
    assert_string_equal(json_string_value(json_object_get(d, "phase")), "done");
    assert_int_equal(json_integer_value(json_object_get(d, "step")), 6);
    assert_int_equal(json_integer_value(json_object_get(d, "total_steps")), 6);
    assert_int_equal(json_integer_value(json_object_get(d, "policy_version")),
                     json_integer_value(json_object_get(r.last, "version")));
    assert_true(num(d, "reward_mean") == num(r.last, "reward_mean"));
    assert_true(num(d, "eval_accuracy") == num(r.last_eval, "eval_accuracy"));
    json_t *sl = json_object_get(d, "staleness");
    assert_int_equal(json_integer_value(json_object_get(sl, "max")),
                     json_integer_value(json_object_get(r.last, "max_staleness")));
    assert_int_equal(json_integer_value(json_object_get(sl, "bound")), 1);
    assert_true(num(d, "train_seconds") == num(r.last, "train_s"));
    assert_true(num(d, "rollout_wait_seconds") == num(r.last, "rollout_wait_s"));
    assert_true(num(d, "last_weight_sync_seconds") == num(r.last, "weight_sync_s"));
    assert_true(num(d, "tokens_per_second") == num(r.last, "tokens_per_s"));
    assert_true(num(d, "samples_per_second") > 0);
    assert_int_equal(json_integer_value(json_object_get(d, "servers")), 1);
    assert_int_equal(json_integer_value(json_object_get(d, "checkpoint_step")), 6);
    /* the last words: the same object as the final GET /status, in at most 4096 bytes */
    FILE *f = fopen(tlog, "r");
    assert_non_null(f);
    char words[8192];
    size_t n = fread(words, 1, sizeof words - 1, f);
    fclose(f);
    words[n] = '\0';
    assert_true(n > 0 && n <= AREAL_TERMINATION_MESSAGE_MAX);
    assert_null(strchr(words, '\n')); /* compact */
    json_error_t je;
    json_t *fin = json_loads(words, 0, &je);
    if (fin == NULL)
        fail_msg("termination log does not parse: %s: %s", je.text, words);
    assert_string_equal(json_string_value(json_object_get(fin, "phase")), "done");
    assert_int_equal(json_integer_value(json_object_get(fin, "step")), 6);
    assert_true(json_equal(fin, d));
    json_decref(fin);
    json_decref(d);
    body b;
    assert_int_equal(get(port, "/metrics", &b, NULL, 0), 200);
    assert_non_null(strstr(b.buf, "areal_trainer_step 6"));
    assert_non_null(strstr(b.buf, "areal_trainer_train_seconds_count 6"));
    json_decref(r.last);
    json_decref(r.last_eval);
    pthread_mutex_destroy(&r.mu);
    areal_rl_config_free(&cfg);
    areal_trainer_http_stop(h);
    sgl_ref_stop(srv);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* A path that cannot be written is an error naming it (the loop logs it and goes on). */
static void final_status_write_failure_is_named(void **st) {
    (void)st;
    areal_train_status s;
    memset(&s, 0, sizeof s);
    s.phase = AREAL_PHASE_FAILED;
    s.step = 3;
    areal_error err;
    assert_int_equal(areal_train_status_write("/nonexistent-areal-dir/termination-log", &s, &err),
                     AREAL_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent-areal-dir/termination-log"));
    char dir[256];
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/areal-tlog-XXXXXX", t);
    assert_non_null(mkdtemp(dir));
    char path[300];
    snprintf(path, sizeof path, "%s/log", dir);
    assert_int_equal(areal_train_status_write(path, &s, &err), AREAL_OK);
    json_t *d = json_load_file(path, 0, NULL);
    assert_non_null(d);
    assert_string_equal(json_string_value(json_object_get(d, "phase")), "failed");
    assert_int_equal(json_integer_value(json_object_get(d, "step")), 3);
    json_decref(d);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(snapshot_renders_the_contract),
        cmocka_unit_test(running_loop_publishes_each_step),
        cmocka_unit_test(final_status_write_failure_is_named),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
