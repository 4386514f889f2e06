/*
 * test_controller_rejected.c - issue 11's third acceptance line: every spec
 * whose children the API server refuses (422 on create: a bad env name, a bad
 * volume name, a mount of no volume) or that cannot name its children (a job
 * name too long for a DNS label, a dot in it) ends with a condition naming the
 * field within one reconcile, and afterwards the operator makes no API call
 * for the job at all until its spec changes; then it tries again.
 *
 * The whole controller runs against the in-memory API server with the real
 * server's validation rules for pods and Services switched on
 * (fake_api_validate), and its request counters are the measure: quiet means
 * not one create, bind, patch, delete, get or Event over two seconds.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "areal/kube/client.h"
#include "areal/log.h"
#include "areal/operator/controller.h"
#include "util/fake_api.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

typedef struct harness {
    fake_api *f;
    kube_client *kc;
    controller *ctl;
    pthread_t th;
} harness;

static void *run_ctl(void *arg) {
    controller_run(arg);
    return NULL;
}

static void harness_start(harness *h) {
    kube_config cfg;
    kube_config_init(&cfg);
    cfg.server = strdup(fake_api_url(h->f));
    cfg.allow_insecure = 1;
    cfg.qps = 0;
    cfg.backoff_base_ms = 5;
    cfg.backoff_max_ms = 50;
    h->kc = kube_client_new(&cfg, NULL);
    kube_config_free(&cfg);
    assert_non_null(h->kc);
    controller_config cc = {.workers = 4};
    areal_error err;
    assert_int_equal(controller_new(h->kc, &cc, NULL, &h->ctl, &err), AREAL_OK);
    assert_int_equal(pthread_create(&h->th, NULL, run_ctl, h->ctl), 0);
}

static void harness_stop(harness *h) {
    controller_stop(h->ctl);
    pthread_join(h->th, NULL);
    controller_free(h->ctl);
    kube_client_free(h->kc);
}

static void put_node(fake_api *f, int i) {
    char name[16];
    snprintf(name, sizeof name, "n%d", i);
    json_t *n = json_pack("{s:{s:s,s:{s:s}},s:{s:{s:s,s:s,s:s},s:[{s:s,s:s}]}}", "metadata", "name",
                          name, "labels", "kubernetes.io/hostname", name, "status", "allocatable",
                          "nvidia.com/gpu", "8", "cpu", "96", "memory", "512Gi", "conditions",
                          "type", "Ready", "status", "True");
    fake_api_put(f, "nodes", n);
    json_decref(n);
}

/* A job of 3 pods (two rollout servers, a trainer) with `trainer` as the
 * trainer's role override (stolen; NULL: none). */
static void put_job(fake_api *f, const char *name, json_t *trainer, int generation) {
    json_t *roles = json_array();
    if (trainer != NULL)
        json_array_append_new(roles, trainer);
    json_t *j = json_pack("{s:s,s:s,s:{s:s,s:s,s:i},s:{s:s,s:s,s:o}}", "apiVersion",
                          "areal.io/v1alpha1", "kind", "AReaLJob", "metadata", "name", name,
                          "namespace", "team", "generation", generation, "spec", "allocation",
                          "sglang:d2+megatron:d1t2", "image", "img", "roles", roles);
    fake_api_put(f, "arealjobs", j);
    json_decref(j);
}

/* Every request that acts on a job or its children. */
static long job_requests(fake_api *f) {
    static const char *const kinds[] = {"create", "bind",   "patch",   "delete",       "event",
                                        "get",    "failed", "invalid", "force-delete", NULL};
    long n = 0;
    for (int i = 0; kinds[i]; i++)
        n += fake_api_count(f, kinds[i]);
    return n;
}

typedef struct refusal {
    const char *job;
    const char
        *reason; /* ChildRejected (the API server's 422) or InvalidSpec (the operator's check) */
    const char *field; /* what the condition's message must name */
} refusal;

/* The Scheduled condition of job `name`: its reason and message, copied. */
static void scheduled(fake_api *f, const char *name, char *reason, size_t rcap, char *msg,
                      size_t mcap, char *phase, size_t pcap) {
    char key[128];
    snprintf(key, sizeof key, "team/%s", name);
    json_t *j = fake_api_get(f, "arealjobs", key);
    json_t *st = json_object_get(j, "status");
    reason[0] = msg[0] = phase[0] = '\0';
    const char *ph = json_string_value(json_object_get(st, "phase"));
    snprintf(phase, pcap, "%s", ph ? ph : "");
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && strcmp(t, "Scheduled") == 0) {
            const char *r = json_string_value(json_object_get(c, "reason"));
            const char *m = json_string_value(json_object_get(c, "message"));
            snprintf(reason, rcap, "%s", r ? r : "");
            snprintf(msg, mcap, "%s", m ? m : "");
        }
    }
    json_decref(j);
}

static bool refused(fake_api *f, const refusal *r) {
    char reason[64], msg[2048], phase[32];
    scheduled(f, r->job, reason, sizeof reason, msg, sizeof msg, phase, sizeof phase);
    return strcmp(reason, r->reason) == 0;
}

#define LONG_NAME "a-job-name-of-sixty-four-characters-which-no-dns-label-can-hold1"

static void every_refused_spec_is_reported_once_and_then_quiet(void **state) {
    (void)state;
    areal_log_configure(NULL, AREAL_LOG_TEXT, AREAL_LOG_ERROR);
    harness h = {.f = fake_api_start()};
    assert_non_null(h.f);
    fake_api_validate(h.f, true);
    for (int i = 0; i < 4; i++)
        put_node(h.f, i);
    harness_start(&h);
    put_job(h.f, "env",
            json_pack("{s:s,s:[{s:s,s:s}]}", "name", "trainer", "env", "name", "BAD=NAME", "value",
                      "x"),
            1);
    put_job(h.f, "vol",
            json_pack("{s:s,s:[{s:s,s:{}}]}", "name", "trainer", "volumes", "name", "Bad_Volume",
                      "emptyDir"),
            1);
    put_job(h.f, "mount",
            json_pack("{s:s,s:[{s:s,s:s}]}", "name", "trainer", "volumeMounts", "name", "nowhere",
                      "mountPath", "/data"),
            1);
    put_job(h.f, LONG_NAME, NULL, 1);
    put_job(h.f, "my.job", NULL, 1);
    const refusal want[] = {
        {"env", "ChildRejected", "spec.containers[0].env[0].name"},
        {"vol", "ChildRejected", "spec.volumes[1].name"},
        {"mount", "ChildRejected", "spec.containers[0].volumeMounts[1].name"},
        {LONG_NAME, "InvalidSpec", "metadata.name"},
        {"my.job", "InvalidSpec", "metadata.name"},
    };
    const int n = (int)(sizeof want / sizeof want[0]);
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        while (!refused(h.f, &want[i]) && now_s() - t0 < 20)
            nap_ms(5);
        char reason[64], msg[2048], phase[32];
        scheduled(h.f, want[i].job, reason, sizeof reason, msg, sizeof msg, phase, sizeof phase);
        fprintf(stderr, "%s: %s %s: %s\n", want[i].job, phase, reason, msg);
        assert_string_equal(reason, want[i].reason);
        assert_string_equal(phase, "Failed");
        if (strstr(msg, want[i].field) == NULL)
            fail_msg("%s: the condition does not name %s: %s", want[i].job, want[i].field, msg);
    }
    /* within one reconcile: one run of creates per rejected gang (3 pods,
     * sent at most APPLY_PARALLEL at a time), not a retry loop */
    long invalid = fake_api_count(h.f, "invalid");
    fprintf(stderr, "422s answered: %ld for 3 rejected gangs of 3 pods\n", invalid);
    assert_true(invalid >= 3 && invalid <= 9);
    assert_int_equal(fake_api_count(h.f, "bind"), 0);

    /* quiet: not one request for two seconds */
    nap_ms(300);
    long before = job_requests(h.f);
    nap_ms(2000);
    long after = job_requests(h.f);
    fprintf(stderr, "requests in 2 s after the refusals: %ld\n", after - before);
    assert_int_equal(after, before);
    assert_int_equal(fake_api_count(h.f, "invalid"), invalid);

    /* a new spec the API server takes: tried again, placed */
    put_job(
        h.f, "env",
        json_pack("{s:s,s:[{s:s,s:s}]}", "name", "trainer", "env", "name", "GOOD", "value", "x"),
        2);
    t0 = now_s();
    char reason[64] = "", msg[2048], phase[32];
    while (strcmp(reason, "GangBound") != 0 && now_s() - t0 < 20) {
        nap_ms(5);
        scheduled(h.f, "env", reason, sizeof reason, msg, sizeof msg, phase, sizeof phase);
    }
    assert_string_equal(reason, "GangBound");
    assert_true(fake_api_count(h.f, "bind") >= 3);
    harness_stop(&h);
    fake_api_stop(h.f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_refused_spec_is_reported_once_and_then_quiet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
