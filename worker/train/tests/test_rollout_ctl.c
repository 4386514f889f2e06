/*
 * test_rollout_ctl.c - the rollout controller against scripted servers that
 * speak SGLang's /generate (kube/tests/util/kube_test_server.h with a
 * handler): G requests per prompt spread round robin, the staleness bound
 * (eta = 0 admits exactly B prompts per version), abort -> resubmission of
 * prompt + partial output with the version pinned per request, a failing
 * server's requests retried on another, waiting with one log line while no
 * server is reachable, a server back at an old weight version kept out until
 * weights reach it, and evaluation outside the bound.
 *
 * The scripted server answers each /generate with tokens derived from its
 * input (next = last input id + 1), so the test can check what was sent.
 */
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "areal/train/rollout_ctl.h"
#include "kube_test_server.h"

typedef struct fake {
    kts *srv;
    char addr[64];
    pthread_mutex_t mu;
    int n_generate, n_pause, n_continue;
    int n_served;    /* /generate answered with tokens */
    int fail;        /* answer every /generate with 503 */
    int paused;      /* between /pause_generation and /continue_generation: /generate gets 503 */
    int abort_first; /* the first request of each sample (input = prompt only) answers abort */
    areal_rollout_ctl **bump; /* set the controller's version to 1 before an aborted answer */
    int prompt_len;
    int max_input;        /* longest input seen */
    char version[16];     /* weight_version of GET /get_model_info ("" : no such endpoint) */
    char gen_version[16]; /* meta_info.weight_version of /generate answers ("": none) */
} fake;

static int handler(void *ud, const kts_request *rq, kts_answer *ans) {
    fake *f = ud;
    if (strcmp(rq->target, "/pause_generation") == 0 ||
        strcmp(rq->target, "/continue_generation") == 0) {
        pthread_mutex_lock(&f->mu);
        if (rq->target[1] == 'p')
            f->n_pause++;
        else
            f->n_continue++;
        f->paused = rq->target[1] == 'p';
        pthread_mutex_unlock(&f->mu);
        ans->status = 200;
        ans->body = strdup("{}");
        ans->len = 2;
        return 1;
    }
    if (strcmp(rq->target, "/get_model_info") == 0 && f->version[0] != '\0') {
        pthread_mutex_lock(&f->mu);
        ans->body = strdup(f->version);
        pthread_mutex_unlock(&f->mu);
        json_t *j = json_pack("{s:s}", "weight_version", ans->body);
        free(ans->body);
        ans->status = 200;
        ans->body = json_dumps(j, JSON_COMPACT);
        ans->len = strlen(ans->body);
        json_decref(j);
        return 1;
    }
    if (strcmp(rq->target, "/get_model_info") == 0) { /* "no such endpoint" */
        ans->status = 404;
        ans->body = strdup("{}");
        ans->len = 2;
        return 1;
    }
    if (strcmp(rq->target, "/update_weights_from_disk") == 0) {
        pthread_mutex_lock(&f->mu);
        snprintf(f->version, sizeof f->version, "2");
        pthread_mutex_unlock(&f->mu);
        ans->status = 200;
        ans->body = strdup("{\"success\":true}");
        ans->len = strlen(ans->body);
        return 1;
    }
    if (strcmp(rq->target, "/generate") != 0)
        return 0;
    json_error_t je;
    json_t *doc = json_loads(rq->body, 0, &je);
    json_t *ids = json_object_get(doc, "input_ids");
    json_t *sp = json_object_get(doc, "sampling_params");
    int n_in = (int)json_array_size(ids);
    long last = json_integer_value(json_array_get(ids, (size_t)n_in - 1));
    int max_new = (int)json_integer_value(json_object_get(sp, "max_new_tokens"));
    assert_true(json_is_true(json_object_get(doc, "return_logprob")));
    pthread_mutex_lock(&f->mu);
    f->n_generate++;
    if (n_in > f->max_input)
        f->max_input = n_in;
    /* SGLang holds a paused server's requests until it is continued; answering 503 keeps
     * a test that never continues it from hanging, and sends nothing back either way */
    int fail = f->fail || f->paused;
    int do_abort = f->abort_first && n_in == f->prompt_len;
    pthread_mutex_unlock(&f->mu);
    if (fail) {
        json_decref(doc);
        ans->status = 503;
        ans->body = strdup("busy");
        ans->len = 4;
        return 1;
    }
    pthread_mutex_lock(&f->mu);
    f->n_served++;
    pthread_mutex_unlock(&f->mu);
    int n_out = do_abort ? 2 : max_new;
    if (do_abort && f->bump)
        areal_rollout_ctl_set_version(*f->bump, 1);
    json_t *lp = json_array();
    for (int i = 0; i < n_out; i++)
        json_array_append_new(lp, json_pack("[f,i,n]", -0.25, (int)(last + 1 + i)));
    json_t *out = json_pack("{s:s,s:{s:{s:s},s:o}}", "text", "", "meta_info", "finish_reason",
                            "type", do_abort ? "abort" : "length", "output_token_logprobs", lp);
    if (f->gen_version[0] != '\0')
        json_object_set_new(json_object_get(out, "meta_info"), "weight_version",
                            json_string(f->gen_version));
    ans->status = 200;
    ans->body = json_dumps(out, JSON_COMPACT);
    ans->len = strlen(ans->body);
    json_decref(out);
    json_decref(doc);
    return 1;
}

static void fake_start(fake *f) {
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    f->srv = kts_start();
    assert_non_null(f->srv);
    kts_set_handler(f->srv, handler, f);
    snprintf(f->addr, sizeof f->addr, "%s", kts_url(f->srv) + strlen("http://"));
    f->prompt_len = 3;
}

static void fake_stop(fake *f) {
    kts_stop(f->srv);
    pthread_mutex_destroy(&f->mu);
}

static int count(fake *f) {
    pthread_mutex_lock(&f->mu);
    int n = f->n_generate;
    pthread_mutex_unlock(&f->mu);
    return n;
}

typedef struct source {
    long next, limit;
    int32_t ids[3];
    char log[8][256];
    int n_log;
    pthread_mutex_t mu;
} source;

static int next_prompt(void *ctx, areal_rollout_prompt *p) {
    source *s = ctx;
    if (s->next >= s->limit)
        return -1;
    s->ids[0] = 1;
    s->ids[1] = 2;
    s->ids[2] = (int32_t)(10 * s->next);
    p->ids = s->ids;
    p->n_ids = 3;
    p->index = s->next++;
    return 1;
}

static float reward(void *ctx, long index, const int32_t *resp, int n) {
    (void)ctx;
    /* right when the first response token continues the prompt */
    return n > 0 && resp[0] == (int32_t)(10 * index + 1) ? 1.0f : 0.0f;
}

static void logline(void *ctx, const char *line) {
    source *s = ctx;
    pthread_mutex_lock(&s->mu);
    if (s->n_log < 8)
        snprintf(s->log[s->n_log++], sizeof s->log[0], "%s", line);
    pthread_mutex_unlock(&s->mu);
}

static areal_rollout_cfg base_cfg(void) {
    areal_rollout_cfg c;
    memset(&c, 0, sizeof c);
    c.group_size = 4;
    c.n_workers = 3;
    c.sampling.max_new_tokens = 5;
    c.sampling.temperature = 1;
    c.sampling.top_p = 1;
    c.eta = 0;
    c.batch_size = 2;
    c.max_concurrent = 8;
    c.request_timeout_s = 10;
    c.server_backoff_s = 0.2;
    return c;
}

static void start(source *src, long limit, areal_rollout_cfg *cfg, const char *const *addrs, int n,
                  areal_rollout_ctl **ctl) {
    memset(src, 0, sizeof *src);
    pthread_mutex_init(&src->mu, NULL);
    src->limit = limit;
    areal_rollout_callbacks cb = {next_prompt, reward, NULL, logline, src};
    areal_error err;
    if (areal_rollout_ctl_start(cfg, addrs, n, &cb, ctl, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
}

static void eta0_admits_batch_per_version_round_robin(void **st) {
    (void)st;
    fake a, b;
    fake_start(&a);
    fake_start(&b);
    const char *addrs[] = {a.addr, b.addr};
    areal_rollout_cfg cfg = base_cfg();
    source src;
    areal_rollout_ctl *ctl;
    start(&src, 100, &cfg, addrs, 2, &ctl);
    areal_group g[2];
    areal_error err;
    assert_int_equal(areal_rollout_ctl_wait(ctl, g, 2, 10, &err), AREAL_OK);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(g[k].G, 4);
        for (int i = 0; i < 4; i++) {
            areal_traj *s = &g[k].s[i];
            assert_int_equal(s->n_prompt, 3);
            assert_int_equal(s->n, 8);
            assert_int_equal(s->tokens[3], (int32_t)(10 * g[k].index + 1));
            assert_true(s->versions[2] == -1 && s->versions[3] == 0);
            assert_true(s->logprobs[2] == 0.0f && s->logprobs[4] == -0.25f);
            assert_true(s->reward == 1.0f);
            assert_true(s->no_eos);
        }
        areal_group_free(&g[k]);
    }
    usleep(300000);
    /* eta = 0: exactly B = 2 prompts (8 requests) at version 0, split over both servers */
    assert_int_equal(count(&a) + count(&b), 8);
    assert_true(count(&a) >= 2 && count(&b) >= 2);
    areal_staleness c = areal_rollout_ctl_counters(ctl);
    assert_int_equal(c.accepted, 2);
    assert_int_equal(c.running, 0);
    assert_int_equal(areal_rollout_ctl_wait(ctl, g, 1, 0.3, &err), AREAL_ERANGE);
    areal_rollout_ctl_set_version(ctl, 1);
    assert_int_equal(areal_rollout_ctl_wait(ctl, g, 2, 10, &err), AREAL_OK);
    areal_group_free(&g[0]);
    areal_group_free(&g[1]);
    usleep(200000);
    assert_int_equal(count(&a) + count(&b), 16);
    /* pause and resume reach every server */
    assert_int_equal(areal_rollout_ctl_pause(ctl, &err), AREAL_OK);
    assert_int_equal(areal_rollout_ctl_resume(ctl, &err), AREAL_OK);
    assert_int_equal(a.n_pause + b.n_pause, 2);
    assert_int_equal(a.n_continue + b.n_continue, 2);
    areal_rollout_ctl_stop(ctl);
    fake_stop(&a);
    fake_stop(&b);
}

static void abort_resubmits_partial_and_pins_versions(void **st) {
    (void)st;
    fake a;
    fake_start(&a);
    areal_rollout_ctl *ctl = NULL;
    a.abort_first = 1;
    a.bump = &ctl;
    const char *addrs[] = {a.addr};
    areal_rollout_cfg cfg = base_cfg();
    cfg.group_size = 1;
    cfg.batch_size = 1;
    cfg.n_workers = 1;
    source src;
    start(&src, 1, &cfg, addrs, 1, &ctl);
    areal_group g;
    areal_error err;
    assert_int_equal(areal_rollout_ctl_wait(ctl, &g, 1, 10, &err), AREAL_OK);
    areal_traj *s = &g.s[0];
    /* 2 tokens before the abort, 3 after: the budget of 5 is kept */
    assert_int_equal(s->n, 3 + 5);
    assert_int_equal(s->n_requests, 2);
    assert_int_equal(a.max_input, 3 + 2); /* resubmitted with prompt + partial output */
    assert_int_equal(s->versions[3], 0);  /* pinned when the first request was sent */
    assert_int_equal(s->versions[4], 0);
    assert_int_equal(s->versions[5], 1); /* the resubmission saw the new version */
    assert_int_equal(s->versions[7], 1);
    /* tokens continue the partial output: 1 2 0 | 1 2 | 3 4 5 */
    assert_int_equal(s->tokens[5], 3);
    areal_group_free(&g);
    /* the source is exhausted: waiting for more fails at once */
    assert_int_equal(areal_rollout_ctl_wait(ctl, &g, 1, 5, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "exhausted"));
    areal_rollout_ctl_stop(ctl);
    fake_stop(&a);
}

static void failing_server_is_retried_elsewhere(void **st) {
    (void)st;
    fake a, b;
    fake_start(&a);
    fake_start(&b);
    a.fail = 1;
    const char *addrs[] = {a.addr, b.addr};
    areal_rollout_cfg cfg = base_cfg();
    source src;
    areal_rollout_ctl *ctl;
    start(&src, 100, &cfg, addrs, 2, &ctl);
    areal_group g[2];
    areal_error err;
    assert_int_equal(areal_rollout_ctl_wait(ctl, g, 2, 10, &err), AREAL_OK);
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 4; i++)
            assert_int_equal(g[k].s[i].n, 8);
        areal_group_free(&g[k]);
    }
    assert_true(count(&a) >= 1);
    assert_true(count(&b) >= 8);
    pthread_mutex_lock(&src.mu);
    assert_true(src.n_log >= 1);
    assert_non_null(strstr(src.log[0], "retrying the request on another server"));
    assert_non_null(strstr(src.log[0], a.addr));
    pthread_mutex_unlock(&src.mu);
    areal_rollout_ctl_stop(ctl);
    fake_stop(&a);
    fake_stop(&b);
}

static void no_server_waits_then_continues(void **st) {
    (void)st;
    fake b;
    fake_start(&b);
    const char *dead[] = {"127.0.0.1:1"};
    areal_rollout_cfg cfg = base_cfg();
    cfg.batch_size = 1;
    source src;
    areal_rollout_ctl *ctl;
    start(&src, 100, &cfg, dead, 1, &ctl);
    areal_group g;
    areal_error err;
    assert_int_equal(areal_rollout_ctl_wait(ctl, &g, 1, 0.6, &err), AREAL_ERANGE);
    int known = 0, up = 0;
    areal_rollout_ctl_servers(ctl, &known, &up);
    assert_int_equal(known, 1);
    pthread_mutex_lock(&src.mu);
    int waited = 0;
    for (int i = 0; i < src.n_log; i++)
        waited += strstr(src.log[i], "no rollout server is reachable") != NULL;
    assert_int_equal(waited, 1); /* said once, not per retry */
    pthread_mutex_unlock(&src.mu);
    const char *live[] = {b.addr};
    assert_int_equal(areal_rollout_ctl_set_servers(ctl, live, 1, &err), AREAL_OK);
    assert_int_equal(areal_rollout_ctl_wait(ctl, &g, 1, 10, &err), AREAL_OK);
    assert_int_equal(g.s[0].n, 8);
    areal_group_free(&g);
    areal_rollout_ctl_stop(ctl);
    fake_stop(&b);
}

/* One server a (its other fields set by the caller) answering at weight version 0, a policy
 * at version 2 and one group a batch: the server is behind until a weight update. */
static void start_behind(fake *a, source *src, areal_rollout_ctl **ctl) {
    snprintf(a->version, sizeof a->version, "0");
    const char *addrs[] = {a->addr};
    areal_rollout_cfg cfg = base_cfg();
    cfg.batch_size = 1;
    cfg.start_version = 2;
    start(src, 100, &cfg, addrs, 1, ctl);
}

/* The weight update from disk to the servers that need one; it must succeed. */
static void sync_from_disk(areal_rollout_ctl *ctl) {
    areal_error err;
    json_t *body = json_pack("{s:s}", "model_path", "/nonexistent");
    int rc = areal_rollout_ctl_sync_stale(ctl, "/update_weights_from_disk", body, &err);
    json_decref(body);
    if (rc != AREAL_OK)
        fail_msg("%s", err.msg);
}

/* A server that was unreachable comes back at another weight version (it restarted from
 * older weights): it gets no requests until a weight update reaches it. */
static void restarted_server_at_old_version_waits_for_weights(void **st) {
    (void)st;
    fake a;
    fake_start(&a);
    a.fail = 1;
    source src;
    areal_rollout_ctl *ctl;
    start_behind(&a, &src, &ctl);
    areal_group g;
    areal_error err;
    assert_int_equal(areal_rollout_ctl_wait(ctl, &g, 1, 0.5, &err), AREAL_ERANGE);
    pthread_mutex_lock(&a.mu);
    a.fail = 0; /* "restarted": answers again, with version 0 */
    int before = a.n_generate;
    pthread_mutex_unlock(&a.mu);
    assert_int_equal(areal_rollout_ctl_wait(ctl, &g, 1, 1.0, &err), AREAL_ERANGE);
    assert_int_equal(count(&a), before); /* nothing generated at the wrong version */
    pthread_mutex_lock(&src.mu);
    int found = 0;
    for (int i = 0; i < src.n_log; i++)
        found +=
            strstr(src.log[i], "answers again at weight version 0, the policy is at 2") != NULL;
    pthread_mutex_unlock(&src.mu);
    assert_int_equal(found, 1);
    sync_from_disk(ctl);
    assert_int_equal(areal_rollout_ctl_wait(ctl, &g, 1, 10, &err), AREAL_OK);
    for (int i = 0; i < g.s[0].n; i++)
        assert_true(g.s[0].versions[i] == -1 || g.s[0].versions[i] == 2);
    areal_group_free(&g);
    areal_rollout_ctl_stop(ctl);
    fake_stop(&a);
}

/* Whether f serves a /generate past its first base within secs. */
static bool served_past(fake *f, int base, double secs) {
    for (int i = 0; i < (int)(secs * 100); i++) {
        pthread_mutex_lock(&f->mu);
        int n = f->n_served;
        pthread_mutex_unlock(&f->mu);
        if (n > base)
            return true;
        usleep(10000);
    }
    return false;
}

/* A trainer killed between its /pause_generation and /continue_generation leaves its
 * server paused; the next trainer catches it up outside any pause of its own, so it must
 * continue it too, or every request to it waits forever (e2e w_rl_world once timed out so).
 * Both ways to catch up count: an update the controller posts (disk) and one the trainer
 * reports (xccl). Inside the trainer's own pause the caught-up server waits for its resume. */
static void server_left_paused_is_continued_once_caught_up(void **st) {
    (void)st;
    fake a;
    fake_start(&a);
    a.paused = 1;
    source src;
    areal_rollout_ctl *ctl;
    start_behind(&a, &src, &ctl);
    areal_group g;
    areal_error err;
    assert_int_equal(areal_rollout_ctl_wait(ctl, &g, 1, 0.5, &err), AREAL_ERANGE);
    sync_from_disk(ctl);
    pthread_mutex_lock(&a.mu);
    assert_int_equal(a.n_continue, 1);
    pthread_mutex_unlock(&a.mu);
    assert_int_equal(areal_rollout_ctl_wait(ctl, &g, 1, 10, &err), AREAL_OK);
    areal_group_free(&g);

    /* the xccl way: the trainer reports the server missed an update, then caught up (the
     * version moves on so that more groups are admitted; none is served while paused) */
    areal_rollout_ctl_mark_synced(ctl, a.addr, false, "test");
    pthread_mutex_lock(&a.mu);
    a.paused = 1;
    snprintf(a.version, sizeof a.version, "10"); /* the update it caught up with */
    int base = a.n_served;
    pthread_mutex_unlock(&a.mu);
    areal_rollout_ctl_set_version(ctl, 10);
    areal_rollout_ctl_mark_synced(ctl, a.addr, true, NULL);
    pthread_mutex_lock(&a.mu);
    assert_int_equal(a.n_continue, 2);
    pthread_mutex_unlock(&a.mu);
    assert_true(served_past(&a, base, 10));

    /* inside the trainer's own pause, catching up continues nothing: its resume does */
    assert_int_equal(areal_rollout_ctl_pause(ctl, &err), AREAL_OK);
    areal_rollout_ctl_mark_synced(ctl, a.addr, false, "test");
    areal_rollout_ctl_mark_synced(ctl, a.addr, true, NULL);
    pthread_mutex_lock(&a.mu);
    assert_int_equal(a.n_continue, 2);
    assert_int_equal(a.paused, 1);
    snprintf(a.version, sizeof a.version, "20");
    base = a.n_served;
    pthread_mutex_unlock(&a.mu);
    areal_rollout_ctl_set_version(ctl, 20);
    assert_int_equal(areal_rollout_ctl_resume(ctl, &err), AREAL_OK);
    pthread_mutex_lock(&a.mu);
    assert_int_equal(a.n_continue, 3);
    pthread_mutex_unlock(&a.mu);
    assert_true(served_past(&a, base, 10));
    areal_rollout_ctl_stop(ctl);
    fake_stop(&a);
}

/* A server answers with weights other than the policy's (it joined between an update and
 * its listing; its /get_model_info cannot tell): each such answer is dropped and sent again,
 * the server is kept out, and every kept token carries the version that made it. */
static void answer_behind_the_policy_is_dropped(void **st) {
    (void)st;
    fake a, b;
    fake_start(&a);
    fake_start(&b);
    snprintf(a.gen_version, sizeof a.gen_version, "0");
    snprintf(b.gen_version, sizeof b.gen_version, "2");
    const char *addrs[] = {a.addr, b.addr};
    areal_rollout_cfg cfg = base_cfg();
    cfg.batch_size = 1;
    cfg.start_version = 2;
    cfg.eta = 1; /* room for the second group at the same version */
    source src;
    areal_rollout_ctl *ctl;
    start(&src, 100, &cfg, addrs, 2, &ctl);
    areal_group g;
    areal_error err;
    assert_int_equal(areal_rollout_ctl_wait(ctl, &g, 1, 10, &err), AREAL_OK);
    for (int k = 0; k < g.G; k++) {
        assert_int_equal(g.s[k].n, 8);
        for (int i = 3; i < g.s[k].n; i++)
            assert_int_equal(g.s[k].versions[i], 2);
    }
    areal_group_free(&g);
    /* With eta 1 a second group may be in flight, and under load that group's requests to a
     * can be the ones answered after this group completed from b: wait (bounded) for a's
     * first answer to be seen and dropped rather than assume it came first. */
    long stale = 0;
    for (int i = 0; i < 2000 && (stale = areal_rollout_ctl_stale_answers(ctl)) < 1; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_true(stale >= 1);
    /* a request already on its way to a when a was seen behind can still reach it (CI
     * rehearsal: 2 against 1): read a's count once it has been still for 300 ms (bounded) */
    int from_a = count(&a);
    for (int still = 0, i = 0; still < 30 && i < 1000; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        int now = count(&a);
        still = now == from_a ? still + 1 : 0;
        from_a = now;
    }
    assert_int_equal(areal_rollout_ctl_wait(ctl, &g, 1, 10, &err), AREAL_OK);
    areal_group_free(&g);
    assert_int_equal(count(&a), from_a); /* kept out once it was seen behind */
    /* a's answers still in flight when it was first seen may be dropped since, never more
     * than the requests it got */
    long stale2 = areal_rollout_ctl_stale_answers(ctl);
    assert_true(stale2 >= stale && stale2 <= from_a);
    pthread_mutex_lock(&src.mu);
    int found = 0;
    for (int i = 0; i < src.n_log; i++)
        found += strstr(src.log[i], "answered with weight version 0, the policy is at 2") != NULL;
    pthread_mutex_unlock(&src.mu);
    assert_int_equal(found, 1);
    areal_rollout_ctl_stop(ctl);
    fake_stop(&a);
    fake_stop(&b);
}

static void eval_runs_outside_the_bound(void **st) {
    (void)st;
    fake a;
    fake_start(&a);
    const char *addrs[] = {a.addr};
    areal_rollout_cfg cfg = base_cfg();
    source src;
    areal_rollout_ctl *ctl;
    start(&src, 0, &cfg, addrs, 1, &ctl); /* no training prompts at all */
    int32_t ids[4][3];
    areal_rollout_prompt p[4];
    for (int i = 0; i < 4; i++) {
        ids[i][0] = 1;
        ids[i][1] = 2;
        ids[i][2] = (int32_t)(10 * i);
        p[i].ids = ids[i];
        p[i].n_ids = 3;
        p[i].index = i == 3 ? 7 : i; /* index 7 expects 71: wrong */
    }
    areal_sgl_sampling s = cfg.sampling;
    s.temperature = 0;
    float r[4];
    areal_error err;
    assert_int_equal(areal_rollout_ctl_eval(ctl, p, 4, &s, r, &err), AREAL_OK);
    assert_true(r[0] == 1 && r[1] == 1 && r[2] == 1 && r[3] == 0);
    areal_rollout_ctl_stop(ctl);
    fake_stop(&a);
}

static void bad_config_is_named(void **st) {
    (void)st;
    areal_rollout_cfg cfg = base_cfg();
    cfg.eta = -1;
    source src = {0};
    areal_rollout_callbacks cb = {next_prompt, reward, NULL, NULL, &src};
    areal_rollout_ctl *ctl;
    areal_error err;
    assert_int_equal(areal_rollout_ctl_start(&cfg, NULL, 0, &cb, &ctl, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "max_head_offpolicyness"));
    cfg = base_cfg();
    cfg.group_size = 0;
    assert_int_equal(areal_rollout_ctl_start(&cfg, NULL, 0, &cb, &ctl, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "n_samples"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(eta0_admits_batch_per_version_round_robin),
        cmocka_unit_test(abort_resubmits_partial_and_pins_versions),
        cmocka_unit_test(failing_server_is_retried_elsewhere),
        cmocka_unit_test(no_server_waits_then_continues),
        cmocka_unit_test(restarted_server_at_old_version_waits_for_weights),
        cmocka_unit_test(server_left_paused_is_continued_once_caught_up),
        cmocka_unit_test(answer_behind_the_policy_is_dropped),
        cmocka_unit_test(eval_runs_outside_the_bound),
        cmocka_unit_test(bad_config_is_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
