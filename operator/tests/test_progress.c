/* test_progress.c - RL progress in status (areal/operator/progress.h): a
 * recorded trainer /status response (operator/tests/data/trainer_status.json,
 * the example of the trainer<->operator contract) parsed and mapped to
 * status.progress; bad answers named; the bounded GET against a one-shot
 * loopback server (200, 404, a truncated body, silence); and one poller round
 * against the fake API server: status.progress patched, a TrainerPhase Event,
 * the areal_job_* gauges; a terminated trainer pod's termination message (its
 * final /status, operator/tests/data/pod_trainer_succeeded.json) as a target
 * and written into status.progress once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "areal/kube/config.h"
#include "areal/operator/cached.h"
#include "areal/operator/progress.h"
#include "areal/operator/progress_targets.h"
#include "util/fake_api.h"

#ifndef TEST_DATA_DIR
#define TEST_DATA_DIR "operator/tests/data"
#endif

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[8192];
    *len = fread(buf, 1, sizeof buf - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static void parses_the_recorded_status(void **state) {
    (void)state;
    size_t len;
    char *body = slurp(TEST_DATA_DIR "/trainer_status.json", &len);
    trainer_status st;
    areal_error e;
    assert_int_equal(progress_parse(body, len, &st, &e), AREAL_OK);
    assert_string_equal(st.phase, "training");
    assert_true(st.has_step && st.step == 12);
    assert_true(st.has_total && st.total_steps == 500);
    assert_true(st.has_version && st.policy_version == 12);
    assert_true(st.has_reward);
    assert_float_equal(st.reward_mean, 0.41, 1e-12);
    assert_true(st.has_staleness);
    assert_float_equal(st.staleness_max, 1.0, 1e-12); /* staleness.max, not the mean */
    assert_float_equal(st.samples_per_second, 35.2, 1e-12);
    assert_float_equal(st.last_weight_sync_seconds, 0.21, 1e-12);
    assert_true(st.has_servers && st.servers == 2);
    assert_false(st.waiting_for_samples);
    assert_true(st.running_ahead);

    json_t *p = progress_json(&st, "2026-12-01T14:00:00Z");
    assert_non_null(p);
    json_t *want = json_pack("{s:s,s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:i,s:s}", "trainerPhase",
                             "training", "step", (json_int_t)12, "totalSteps", (json_int_t)500,
                             "policyVersion", (json_int_t)12, "rewardMean", 0.41, "staleness", 1.0,
                             "samplesPerSecond", 35.2, "lastWeightSyncSeconds", 0.21, "servers", 2,
                             "updateTime", "2026-12-01T14:00:00Z");
    assert_true(json_equal(p, want));
    json_decref(want);
    json_decref(p);

    /* nulls: the field is left out, not written as 0 */
    const char *early = "{\"phase\":\"waiting_for_servers\",\"step\":null,\"reward_mean\":null,"
                        "\"staleness\":null,\"servers\":0}";
    assert_int_equal(progress_parse(early, strlen(early), &st, &e), AREAL_OK);
    assert_false(st.has_step || st.has_reward || st.has_staleness);
    p = progress_json(&st, NULL);
    assert_null(json_object_get(p, "step"));
    assert_null(json_object_get(p, "rewardMean"));
    assert_int_equal(json_integer_value(json_object_get(p, "servers")), 0);
    json_decref(p);
}

static void bad_answers_name_the_field(void **state) {
    (void)state;
    static const struct {
        const char *body, *want;
    } cases[] = {
        {"[1,2]", "not a JSON object"},
        {"not json", "not a JSON object"},
        {"{\"step\":1}", "phase is missing"},
        {"{\"phase\":\"dancing\"}", "'dancing'"},
        {"{\"phase\":\"training\",\"step\":\"12\"}", "step must be a whole number"},
        {"{\"phase\":\"training\",\"reward_mean\":\"high\"}", "reward_mean must be a number"},
        {"{\"phase\":\"training\",\"staleness\":3}", "staleness must be an object"},
        {"{\"phase\":\"training\",\"staleness\":{\"max\":\"x\"}}", "staleness.max"},
        {"{\"phase\":\"training\",\"servers\":-1}", "servers"},
        {"{\"phase\":\"training\",\"running_ahead\":1}", "running_ahead must be true"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        trainer_status st;
        areal_error e;
        assert_int_equal(progress_parse(cases[i].body, strlen(cases[i].body), &st, &e),
                         AREAL_EINVAL);
        if (strstr(e.msg, cases[i].want) == NULL)
            fail_msg("%s: message '%s' lacks '%s'", cases[i].body, e.msg, cases[i].want);
        assert_string_equal(st.phase, ""); /* nothing half-filled */
    }
}

/* ---- a one-shot loopback HTTP server ----------------------------------- */

typedef struct oneshot {
    int fd, port;
    const char *answer; /* NULL: accept, read, say nothing */
    int hold_ms;
    char request[1024];
    pthread_t th;
} oneshot;

static void *serve(void *arg) {
    oneshot *s = arg;
    for (;;) {
        int c = accept(s->fd, NULL, NULL);
        if (c < 0)
            return NULL;
        ssize_t n = recv(c, s->request, sizeof s->request - 1, 0);
        s->request[n > 0 ? n : 0] = '\0';
        if (s->answer != NULL) {
            ssize_t w = send(c, s->answer, strlen(s->answer), MSG_NOSIGNAL);
            (void)w;
        }
        if (s->hold_ms > 0)
            usleep((useconds_t)s->hold_ms * 1000);
        close(c);
        if (s->answer == NULL || strstr(s->answer, "ONCE") != NULL)
            return NULL;
    }
}

static void oneshot_start(oneshot *s, const char *answer, int hold_ms) {
    memset(s, 0, sizeof *s);
    s->answer = answer;
    s->hold_ms = hold_ms;
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s->fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(s->fd, 8), 0);
    socklen_t al = sizeof a;
    getsockname(s->fd, (struct sockaddr *)&a, &al);
    s->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&s->th, NULL, serve, s), 0);
}

static void oneshot_stop(oneshot *s) {
    shutdown(s->fd, SHUT_RDWR);
    close(s->fd);
    pthread_join(s->th, NULL);
}

static char *http_200(const char *body) {
    static char buf[8192];
    snprintf(buf, sizeof buf,
             "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    return buf;
}

static void get_is_bounded_and_checked(void **state) {
    (void)state;
    size_t len;
    char *recorded = slurp(TEST_DATA_DIR "/trainer_status.json", &len);
    oneshot s;
    char *body = NULL;
    size_t blen = 0;
    areal_error e;
    /* 200 with a body; the server holds the connection open after it (keep-alive) */
    oneshot_start(&s, http_200(recorded), 3000);
    assert_int_equal(progress_http_get("127.0.0.1", s.port, "/status", 2000, &body, &blen, &e),
                     AREAL_OK);
    assert_int_equal(blen, len);
    assert_memory_equal(body, recorded, len);
    assert_non_null(strstr(s.request, "GET /status HTTP/1.1\r\n"));
    free(body);
    oneshot_stop(&s);

    oneshot_start(&s, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", 0);
    assert_int_equal(progress_http_get("127.0.0.1", s.port, "/status", 2000, &body, &blen, &e),
                     AREAL_EIO);
    assert_non_null(strstr(e.msg, "HTTP 404"));
    assert_null(body);
    oneshot_stop(&s);

    /* a body cut short of its Content-Length */
    oneshot_start(&s, "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"phase\":", 0);
    assert_int_equal(progress_http_get("127.0.0.1", s.port, "/status", 2000, &body, &blen, &e),
                     AREAL_EIO);
    assert_non_null(strstr(e.msg, "Content-Length says 50"));
    oneshot_stop(&s);

    /* a server that never answers: the deadline holds */
    oneshot_start(&s, NULL, 1000);
    assert_int_equal(progress_http_get("127.0.0.1", s.port, "/status", 200, &body, &blen, &e),
                     AREAL_EIO);
    assert_non_null(strstr(e.msg, "in time"));
    oneshot_stop(&s);

    /* nobody listens */
    assert_int_equal(progress_http_get("127.0.0.1", s.port, "/status", 500, &body, &blen, &e),
                     AREAL_EIO);
    assert_non_null(strstr(e.msg, "connect"));
    assert_int_equal(progress_http_get("no-ip", 80, "/status", 500, &body, &blen, &e),
                     AREAL_EINVAL);
}

/* ---- one poller round against the fake API server -------------------------- */

/* Puts `job` (the reference is taken) into the fake API server and returns a
 * client of it: the setup every poller test shares. */
static kube_client *client_with_job(fake_api *f, json_t *job) {
    assert_non_null(f);
    fake_api_put(f, "arealjobs", job);
    json_decref(job);
    kube_config cfg;
    kube_config_init(&cfg);
    cfg.server = strdup(fake_api_url(f));
    cfg.allow_insecure = 1;
    cfg.qps = 0;
    kube_client *kc = kube_client_new(&cfg, NULL);
    kube_config_free(&cfg);
    assert_non_null(kc);
    return kc;
}

static size_t one_target(void *ud, progress_target *out, size_t cap) {
    (void)cap;
    snprintf(out[0].ns, sizeof out[0].ns, "rl");
    snprintf(out[0].job, sizeof out[0].job, "demo");
    snprintf(out[0].pod_ip, sizeof out[0].pod_ip, "%s", (const char *)ud);
    return 1;
}

static void a_round_writes_progress_events_and_metrics(void **state) {
    (void)state;
    fake_api *f = fake_api_start();
    assert_non_null(f);
    json_t *job = json_pack("{s:s,s:s,s:{s:s,s:s,s:s},s:{s:s},s:{s:s}}", "apiVersion",
                            "areal.io/v1alpha1", "kind", "AReaLJob", "metadata", "name", "demo",
                            "namespace", "rl", "uid", "uid-demo", "spec", "allocation",
                            "sglang:d1t1+megatron:d1t1", "status", "phase", "Running");
    kube_client *kc = client_with_job(f, job);

    size_t len;
    char *recorded = slurp(TEST_DATA_DIR "/trainer_status.json", &len);
    oneshot s;
    oneshot_start(&s, http_200(recorded), 0);
    metrics_registry *m = metrics_registry_new();
    progress_config pc = {.port = s.port, .interval_ms = 3600 * 1000, .timeout_ms = 2000};
    progress_poller *p = NULL;
    areal_error e;
    assert_int_equal(progress_poller_start(kc, &pc, one_target, (void *)"127.0.0.1", m, &p, &e),
                     AREAL_OK);
    /* the same families twice is refused */
    progress_poller *p2 = NULL;
    assert_int_equal(progress_poller_start(kc, &pc, one_target, (void *)"127.0.0.1", m, &p2, &e),
                     AREAL_EINVAL);
    progress_poller_round(p);
    progress_poller_round(p); /* the same phase again: no second Event */

    json_t *got = fake_api_get(f, "arealjobs", "rl/demo");
    json_t *prog = json_object_get(json_object_get(got, "status"), "progress");
    assert_int_equal(json_integer_value(json_object_get(prog, "step")), 12);
    assert_int_equal(json_integer_value(json_object_get(prog, "policyVersion")), 12);
    assert_float_equal(json_number_value(json_object_get(prog, "rewardMean")), 0.41, 1e-12);
    assert_float_equal(json_number_value(json_object_get(prog, "staleness")), 1.0, 1e-12);
    assert_string_equal(json_string_value(json_object_get(json_object_get(got, "status"), "phase")),
                        "Running");
    json_decref(got);
    /* the fake API counts Events (it keeps none): one for the phase, not two */
    assert_int_equal(fake_api_count(f, "event"), 1);
    size_t ml;
    char *text = metrics_render(m, &ml);
    assert_non_null(strstr(text, "areal_job_step{namespace=\"rl\",job=\"demo\"} 12"));
    assert_non_null(strstr(text, "areal_job_reward_mean{namespace=\"rl\",job=\"demo\"} 0.41"));
    assert_non_null(strstr(text, "areal_job_policy_version{namespace=\"rl\",job=\"demo\"} 12"));
    free(text);

    /* the trainer goes away: an error counted, the progress left as it was */
    oneshot_stop(&s);
    progress_poller_round(p);
    text = metrics_render(m, &ml);
    assert_non_null(strstr(text, "areal_job_status_errors_total{namespace=\"rl\",job=\"demo\"} 1"));
    assert_null(strstr(text, "areal_job_step{")); /* a snapshot: no stale gauge */
    free(text);
    got = fake_api_get(f, "arealjobs", "rl/demo");
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_object_get(got, "status"), "progress"), "step")),
                     12);
    json_decref(got);

    progress_poller_stop(p);
    metrics_registry_free(m);
    kube_client_free(kc);
    fake_api_stop(f);
}

/* spec.rollout.target: the trainer waits for samples through the (1 s)
 * window, so the poller writes one more rollout replica, once. */
static void a_waiting_trainer_gets_one_more_server(void **state) {
    (void)state;
    fake_api *f = fake_api_start();
    json_t *job = json_pack(
        "{s:s,s:s,s:{s:s,s:s,s:s},s:{s:s,s:{s:i,s:i,s:i,s:{s:s,s:f,s:f,s:f}}},s:{s:s}}",
        "apiVersion", "areal.io/v1alpha1", "kind", "AReaLJob", "metadata", "name", "demo",
        "namespace", "rl", "uid", "uid-demo", "spec", "allocation", "sglang:d1t1+megatron:d1t1",
        "rollout", "replicas", 2, "minReplicas", 1, "maxReplicas", 4, "target", "metric",
        "Staleness", "value", 1.0, "scaleUpWindowSeconds", 1.0, "cooldownSeconds", 60.0, "status",
        "phase", "Running");
    kube_client *kc = client_with_job(f, job);
    oneshot s;
    oneshot_start(&s,
                  http_200("{\"phase\":\"training\",\"step\":3,\"servers\":2,"
                           "\"waiting_for_samples\":true,\"running_ahead\":false}"),
                  0);
    progress_config pc = {.port = s.port, .interval_ms = 3600 * 1000, .timeout_ms = 2000};
    progress_poller *p = NULL;
    areal_error e;
    assert_int_equal(progress_poller_start(kc, &pc, one_target, (void *)"127.0.0.1", NULL, &p, &e),
                     AREAL_OK);
    progress_poller_round(p); /* the run of waiting begins */
    json_t *got = fake_api_get(f, "arealjobs", "rl/demo");
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_object_get(got, "spec"), "rollout"), "replicas")),
                     2);
    json_decref(got);
    usleep(1100 * 1000);
    progress_poller_round(p); /* a full window: +1 */
    progress_poller_round(p); /* cooldown: nothing more */
    got = fake_api_get(f, "arealjobs", "rl/demo");
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_object_get(got, "spec"), "rollout"), "replicas")),
                     3);
    json_decref(got);
    /* TrainerPhase once, Autoscaled once */
    assert_int_equal(fake_api_count(f, "event"), 2);
    progress_poller_stop(p);
    oneshot_stop(&s);
    kube_client_free(kc);
    fake_api_stop(f);
}

/* ---- a terminated trainer's last words ------------------------------------ */

static json_t *load_pod(void) {
    json_error_t je;
    json_t *pod = json_load_file(TEST_DATA_DIR "/pod_trainer_succeeded.json", 0, &je);
    if (pod == NULL)
        fail_msg("pod_trainer_succeeded.json: %s", je.text);
    return pod;
}

static json_t *term_of(json_t *pod) {
    return json_object_get(
        json_object_get(
            json_array_get(json_object_get(json_object_get(pod, "status"), "containerStatuses"), 0),
            "state"),
        "terminated");
}

/* Which pods are targets, and of which kind: the cache keeps the message bounded. */
static void a_terminated_master_pod_is_a_final_target(void **state) {
    (void)state;
    json_t *pod = load_pod();
    char *msg = strdup(json_string_value(json_object_get(term_of(pod), "message")));
    assert_non_null(msg);
    cached_pod *cp = cached_pod_new(pod);
    assert_non_null(cp);
    assert_string_equal(cp->termination_message, msg);
    progress_target t;
    assert_true(progress_target_of_pod(cp, &t));
    assert_string_equal(t.ns, "rl");
    assert_string_equal(t.job, "rl-tiny");
    assert_string_equal(t.uid, "3f9a2c1e-pod-uid");
    assert_string_equal(t.final_message, msg);
    assert_string_equal(t.pod_ip, ""); /* nothing to ask */
    free(t.final_message);
    /* the cache's pod view keeps it (what reconcile passes see of the pod) */
    json_t *view = cached_pod_to_json(cp);
    assert_string_equal(json_string_value(json_object_get(term_of(view), "message")), msg);
    json_decref(view);
    cached_pod_release(cp);

    /* running: a live target, asked over HTTP */
    json_object_set_new(json_object_get(pod, "status"), "phase", json_string("Running"));
    cp = cached_pod_new(pod);
    assert_true(progress_target_of_pod(cp, &t));
    assert_null(t.final_message);
    assert_string_equal(t.pod_ip, "10.244.0.7");
    cached_pod_release(cp);
    /* Failed is final too */
    json_object_set_new(json_object_get(pod, "status"), "phase", json_string("Failed"));
    cp = cached_pod_new(pod);
    assert_true(progress_target_of_pod(cp, &t));
    assert_non_null(t.final_message);
    free(t.final_message);
    cached_pod_release(cp);

    /* over the kubelet's 4096 bytes: not kept, no target */
    char *big = malloc(CACHED_TERMINATION_MESSAGE_MAX + 2);
    memset(big, ' ', CACHED_TERMINATION_MESSAGE_MAX + 1);
    big[CACHED_TERMINATION_MESSAGE_MAX + 1] = '\0';
    json_object_set_new(term_of(pod), "message", json_string(big));
    free(big);
    cp = cached_pod_new(pod);
    assert_null(cp->termination_message);
    assert_false(progress_target_of_pod(cp, &t));
    cached_pod_release(cp);

    /* not the master: no message cached, no target */
    json_object_set_new(term_of(pod), "message", json_string(msg));
    json_object_del(json_object_get(json_object_get(pod, "metadata"), "labels"), "areal.io/master");
    cp = cached_pod_new(pod);
    assert_null(cp->termination_message);
    assert_false(progress_target_of_pod(cp, &t));
    cached_pod_release(cp);
    /* being deleted: none either */
    json_object_set_new(json_object_get(json_object_get(pod, "metadata"), "labels"),
                        "areal.io/master", json_string("true"));
    json_object_set_new(json_object_get(pod, "metadata"), "deletionTimestamp",
                        json_string("2026-12-01T16:01:00Z"));
    cp = cached_pod_new(pod);
    assert_false(progress_target_of_pod(cp, &t));
    cached_pod_release(cp);
    free(msg);
    json_decref(pod);
}

/* The rounds' targets: a live trainer first, then the same pod terminated. */
typedef struct script {
    const char *ip;
    const char *final; /* NULL: the live target */
} script;

static size_t scripted_target(void *ud, progress_target *out, size_t cap) {
    (void)cap;
    const script *sc = ud;
    memset(&out[0], 0, sizeof out[0]);
    snprintf(out[0].ns, sizeof out[0].ns, "rl");
    snprintf(out[0].job, sizeof out[0].job, "demo");
    snprintf(out[0].uid, sizeof out[0].uid, "uid-pod-1");
    if (sc->final != NULL)
        out[0].final_message = strdup(sc->final);
    else
        snprintf(out[0].pod_ip, sizeof out[0].pod_ip, "%s", sc->ip);
    return 1;
}

static void a_final_message_is_written_once(void **state) {
    (void)state;
    fake_api *f = fake_api_start();
    assert_non_null(f);
    json_t *job = json_pack("{s:s,s:s,s:{s:s,s:s,s:s},s:{s:s},s:{s:s}}", "apiVersion",
                            "areal.io/v1alpha1", "kind", "AReaLJob", "metadata", "name", "demo",
                            "namespace", "rl", "uid", "uid-demo", "spec", "allocation",
                            "sglang:d1t1+megatron:d1t1", "status", "phase", "Running");
    kube_client *kc = client_with_job(f, job);
    /* the last live read: step 20 of 60 */
    oneshot s;
    oneshot_start(&s,
                  http_200("{\"phase\":\"training\",\"step\":20,\"total_steps\":60,"
                           "\"policy_version\":20}"),
                  0);
    script sc = {"127.0.0.1", NULL};
    metrics_registry *m = metrics_registry_new();
    progress_config pc = {.port = s.port, .interval_ms = 3600 * 1000, .timeout_ms = 2000};
    progress_poller *p = NULL;
    areal_error e;
    assert_int_equal(progress_poller_start(kc, &pc, scripted_target, &sc, m, &p, &e), AREAL_OK);
    progress_poller_round(p);
    oneshot_stop(&s);
    json_t *got = fake_api_get(f, "arealjobs", "rl/demo");
    json_t *prog = json_object_get(json_object_get(got, "status"), "progress");
    assert_int_equal(json_integer_value(json_object_get(prog, "step")), 20);
    json_decref(got);
    long patches = fake_api_count(f, "patch");

    /* the trainer ran its last 40 steps and exited within the period: its last words */
    json_t *pod = load_pod();
    sc.final = json_string_value(json_object_get(term_of(pod), "message"));
    progress_poller_round(p);
    got = fake_api_get(f, "arealjobs", "rl/demo");
    prog = json_object_get(json_object_get(got, "status"), "progress");
    assert_int_equal(json_integer_value(json_object_get(prog, "step")), 60);
    assert_int_equal(json_integer_value(json_object_get(prog, "totalSteps")), 60);
    assert_int_equal(json_integer_value(json_object_get(prog, "policyVersion")), 60);
    assert_float_equal(json_number_value(json_object_get(prog, "rewardMean")), 0.875, 1e-12);
    assert_string_equal(json_string_value(json_object_get(prog, "trainerPhase")), "done");
    assert_string_equal(json_string_value(json_object_get(json_object_get(got, "status"), "phase")),
                        "Running"); /* only progress is patched */
    json_decref(got);
    assert_int_equal(fake_api_count(f, "patch"), patches + 1);
    /* TrainerPhase training, then done */
    assert_int_equal(fake_api_count(f, "event"), 2);
    size_t ml;
    char *text = metrics_render(m, &ml);
    assert_non_null(strstr(text, "areal_job_step{namespace=\"rl\",job=\"demo\"} 60"));
    free(text);

    /* later rounds: the same pod, nothing written again, the gauges stay */
    progress_poller_round(p);
    progress_poller_round(p);
    assert_int_equal(fake_api_count(f, "patch"), patches + 1);
    assert_int_equal(fake_api_count(f, "event"), 2);
    text = metrics_render(m, &ml);
    assert_non_null(strstr(text, "areal_job_step{namespace=\"rl\",job=\"demo\"} 60"));
    free(text);

    /* a uid's message never changes: another text under it is not read again */
    sc.final = "exec: areal-worker: not found";
    progress_poller_round(p); /* the same uid: already handled */
    assert_int_equal(fake_api_count(f, "patch"), patches + 1);
    json_decref(pod);
    progress_poller_stop(p);
    metrics_registry_free(m);
    kube_client_free(kc);
    fake_api_stop(f);
}

/* A message that does not parse is logged and counted once, not patched. */
static void a_foreign_termination_message_is_left_alone(void **state) {
    (void)state;
    fake_api *f = fake_api_start();
    json_t *job = json_pack("{s:s,s:s,s:{s:s,s:s,s:s},s:{s:s}}", "apiVersion", "areal.io/v1alpha1",
                            "kind", "AReaLJob", "metadata", "name", "demo", "namespace", "rl",
                            "uid", "uid-demo", "status", "phase", "Running");
    kube_client *kc = client_with_job(f, job);
    script sc = {"127.0.0.1", "panic: out of memory"};
    metrics_registry *m = metrics_registry_new();
    progress_config pc = {.port = 1, .interval_ms = 3600 * 1000, .timeout_ms = 500};
    progress_poller *p = NULL;
    areal_error e;
    assert_int_equal(progress_poller_start(kc, &pc, scripted_target, &sc, m, &p, &e), AREAL_OK);
    progress_poller_round(p);
    progress_poller_round(p);
    assert_int_equal(fake_api_count(f, "patch"), 0);
    assert_int_equal(fake_api_count(f, "event"), 0);
    size_t ml;
    char *text = metrics_render(m, &ml);
    assert_non_null(strstr(text, "areal_job_status_errors_total{namespace=\"rl\",job=\"demo\"} 1"));
    free(text);
    progress_poller_stop(p);
    metrics_registry_free(m);
    kube_client_free(kc);
    fake_api_stop(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_the_recorded_status),
        cmocka_unit_test(bad_answers_name_the_field),
        cmocka_unit_test(get_is_bounded_and_checked),
        cmocka_unit_test(a_round_writes_progress_events_and_metrics),
        cmocka_unit_test(a_waiting_trainer_gets_one_more_server),
        cmocka_unit_test(a_terminated_master_pod_is_a_final_target),
        cmocka_unit_test(a_final_message_is_written_once),
        cmocka_unit_test(a_foreign_termination_message_is_left_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
