/*
 * test_controller_forbidden.c - a bind refused Forbidden (403: the
 * operator's RBAC lacks pods/binding) through the whole controller against
 * the in-memory API server: the job gets condition Scheduled=False reason
 * Forbidden naming the refusal and the retry, a Warning Event, and stays
 * Pending; it is tried again on the slow backoff only (here 300 ms doubling
 * to 1.2 s: a handful of rounds in 3.5 s, never a loop); once the API server
 * allows the bind again - the job's spec untouched - the next retry binds the
 * gang.
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

static void *run_ctl(void *arg) {
    controller_run(arg);
    return NULL;
}

/* The job's phase and its Scheduled condition (copies). */
static void job_state(fake_api *f, char *phase, char *reason, char *msg, size_t mcap) {
    json_t *j = fake_api_get(f, "arealjobs", "team/rbac");
    json_t *st = json_object_get(j, "status");
    const char *ph = json_string_value(json_object_get(st, "phase"));
    snprintf(phase, 32, "%s", ph ? ph : "");
    reason[0] = msg[0] = '\0';
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && strcmp(t, "Scheduled") == 0) {
            const char *r = json_string_value(json_object_get(c, "reason"));
            const char *m = json_string_value(json_object_get(c, "message"));
            snprintf(reason, 64, "%s", r ? r : "");
            snprintf(msg, mcap, "%s", m ? m : "");
        }
    }
    json_decref(j);
}

static int bound_pods(fake_api *f) {
    json_t *pods = fake_api_list(f, "pods");
    int n = 0;
    const char *k;
    json_t *p;
    json_object_foreach(pods, k, p) {
        if (json_string_value(json_object_get(json_object_get(p, "spec"), "nodeName")))
            n++;
    }
    json_decref(pods);
    return n;
}

static void forbidden_bind_is_retried_slowly_then_heals(void **state) {
    (void)state;
    areal_log_configure(NULL, AREAL_LOG_TEXT, AREAL_LOG_ERROR);
    fake_api *f = fake_api_start();
    assert_non_null(f);
    for (int i = 0; i < 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        json_t *n = json_pack("{s:{s:s,s:{s:s}},s:{s:{s:s,s:s,s:s},s:[{s:s,s:s}]}}", "metadata",
                              "name", name, "labels", "kubernetes.io/hostname", name, "status",
                              "allocatable", "nvidia.com/gpu", "8", "cpu", "96", "memory", "512Gi",
                              "conditions", "type", "Ready", "status", "True");
        fake_api_put(f, "nodes", n);
        json_decref(n);
    }
    fake_api_fail(f, "bind", "pods", 403, "Forbidden",
                  "pods \"rbac-trainer-0\" is forbidden: User "
                  "\"system:serviceaccount:areal-system:areal-operator\" cannot create resource "
                  "\"pods/binding\" in API group \"\" in the namespace \"team\"",
                  -1);
    kube_config cfg;
    kube_config_init(&cfg);
    cfg.server = strdup(fake_api_url(f));
    cfg.allow_insecure = 1;
    cfg.qps = 0;
    cfg.backoff_base_ms = 5;
    cfg.backoff_max_ms = 50;
    kube_client *kc = kube_client_new(&cfg, NULL);
    kube_config_free(&cfg);
    assert_non_null(kc);
    controller_config cc = {
        .workers = 2, .forbidden_retry_ms = 300, .forbidden_retry_max_ms = 1200};
    controller *ctl;
    areal_error err;
    assert_int_equal(controller_new(kc, &cc, NULL, &ctl, &err), AREAL_OK);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, run_ctl, ctl), 0);
    json_t *j =
        json_pack("{s:s,s:s,s:{s:s,s:s,s:i},s:{s:s,s:s}}", "apiVersion", "areal.io/v1alpha1",
                  "kind", "AReaLJob", "metadata", "name", "rbac", "namespace", "team", "generation",
                  1, "spec", "allocation", "sglang:d2+megatron:d1t2", "image", "img");
    fake_api_put(f, "arealjobs", j);
    json_decref(j);

    char phase[32], reason[64], msg[2048];
    double t0 = now_s();
    do {
        nap_ms(5);
        job_state(f, phase, reason, msg, sizeof msg);
    } while (strcmp(reason, "Forbidden") != 0 && now_s() - t0 < 20);
    fprintf(stderr, "%s %s: %s\n", phase, reason, msg);
    assert_string_equal(reason, "Forbidden");
    assert_string_equal(phase, "Pending"); /* not Failed: a fixed rule heals it */
    assert_non_null(strstr(msg, "pods/binding"));
    assert_non_null(strstr(msg, "retried in 0.3 s (attempt 1;"));
    assert_non_null(strstr(msg, "doubling to 1.2 s"));
    assert_true(fake_api_count(f, "event") >= 1);

    /* rounds of refused binds: a round is the binds of one pass (within 100 ms) */
    double last = now_s(), start = last;
    long seen = fake_api_count(f, "failed");
    int rounds = 1;
    double gaps[16];
    int n_gaps = 0;
    while (now_s() - start < 3.5) {
        nap_ms(10);
        long c = fake_api_count(f, "failed");
        if (c != seen) {
            double t = now_s();
            if (t - last > 0.1) {
                if (n_gaps < 16)
                    gaps[n_gaps++] = t - last;
                rounds++;
            }
            last = t;
            seen = c;
        }
    }
    fprintf(stderr, "%d rounds of refused binds in 3.5 s; gaps:", rounds);
    for (int i = 0; i < n_gaps; i++)
        fprintf(stderr, " %.2f", gaps[i]);
    fprintf(stderr, " s; %ld refused binds\n", seen);
    /* at 0, 0.3, 0.9, 2.1, 3.3 s: 5 rounds (a loop would make hundreds) */
    assert_true(rounds >= 3 && rounds <= 6);
    for (int i = 0; i < n_gaps; i++)
        assert_true(gaps[i] >= 0.25); /* never before its delay */
    if (n_gaps >= 2)
        assert_true(gaps[1] > gaps[0] * 1.4); /* doubling */
    job_state(f, phase, reason, msg, sizeof msg);
    assert_string_equal(reason, "Forbidden");
    assert_null(strstr(msg, "attempt 1;")); /* the condition follows the attempts */
    assert_int_equal(bound_pods(f), 0);

    /* the admin fixes RBAC: the next retry (at most 1.2 s away) binds the gang */
    fake_api_fail(f, "bind", "pods", 403, "Forbidden", "", 0);
    t0 = now_s();
    do {
        nap_ms(10);
        job_state(f, phase, reason, msg, sizeof msg);
    } while ((bound_pods(f) < 3 || strcmp(reason, "Forbidden") == 0) && now_s() - t0 < 20);
    fprintf(stderr, "healed %.2f s after the fix: %d pods bound, Scheduled %s\n", now_s() - t0,
            bound_pods(f), reason);
    assert_int_equal(bound_pods(f), 3);
    assert_string_not_equal(reason, "Forbidden");
    controller_stop(ctl);
    pthread_join(th, NULL);
    controller_free(ctl);
    kube_client_free(kc);
    fake_api_stop(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forbidden_bind_is_retried_slowly_then_heals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
