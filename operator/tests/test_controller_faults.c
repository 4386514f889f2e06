/*
 * test_controller_faults.c - the whole controller against the in-memory API
 * server (operator/tests/util/fake_api.h) where issue 11 found it breaking:
 * many jobs reconciled at once by several workers must never put more GPUs
 * on a node than it has (the reservation ledger); a gang cut short mid-create
 * is completed before any of it is bound, after the operator restarts; no
 * reconcile runs before the caches have listed; a child the API server
 * rejects for good (422) fails the job with the API's message and stops the
 * retries until the spec changes, while transient errors (503, a 409 on the
 * status write) are retried until they pass; a node that stops under a
 * running gang has its pods deleted with grace 0 and the gang replanned on
 * the healthy nodes.
 *
 * The invariant is checked from the API server's side (the pods it stores
 * and their spec.nodeName), not from the operator's caches, while the
 * operator works and after it settles.
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
#include "areal/operator/cached.h"
#include "areal/operator/controller.h"
#include "util/fake_api.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap(void) {
    struct timespec ts = {0, 5 * 1000000L};
    nanosleep(&ts, NULL);
}

#define LIMIT_S 30.0

#define WAIT_FOR(cond, what)                                                                       \
    do {                                                                                           \
        double t0_ = now_s();                                                                      \
        while (!(cond) && now_s() - t0_ < LIMIT_S)                                                 \
            nap();                                                                                 \
        if (!(cond))                                                                               \
            fail_msg("timed out waiting for %s", what);                                            \
    } while (0)

static void put_node(fake_api *f, int i, int gpus) {
    char name[16], g[8];
    snprintf(name, sizeof name, "n%d", i);
    snprintf(g, sizeof g, "%d", gpus);
    json_t *n = json_pack("{s:{s:s,s:{s:s}},s:{s:{s:s,s:s,s:s},s:[{s:s,s:s}]}}", "metadata", "name",
                          name, "labels", "kubernetes.io/hostname", name, "status", "allocatable",
                          "nvidia.com/gpu", g, "cpu", "96", "memory", "512Gi", "conditions", "type",
                          "Ready", "status", "True");
    fake_api_put(f, "nodes", n);
    json_decref(n);
}

static void put_job(fake_api *f, const char *name, const char *alloc) {
    json_t *j =
        json_pack("{s:s,s:s,s:{s:s,s:s,s:i},s:{s:s,s:s}}", "apiVersion", "areal.io/v1alpha1",
                  "kind", "AReaLJob", "metadata", "name", name, "namespace", "team", "generation",
                  1, "spec", "allocation", alloc, "image", "img");
    fake_api_put(f, "arealjobs", j);
    json_decref(j);
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

static void harness_start(harness *h, int workers) {
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
    controller_config cc = {.workers = workers};
    areal_error err;
    assert_int_equal(controller_new(h->kc, &cc, NULL, &h->ctl, &err), AREAL_OK);
    assert_int_equal(pthread_create(&h->th, NULL, run_ctl, h->ctl), 0);
}

static void harness_stop(harness *h) {
    controller_stop(h->ctl);
    pthread_join(h->th, NULL);
    controller_free(h->ctl);
    kube_client_free(h->kc);
    h->ctl = NULL;
    h->kc = NULL;
}

/* GPUs of bound, unfinished pods per node (nodes n0..n_nodes-1), from the API
 * server's own objects; returns the number of bound pods. */
static int bound_gpus(fake_api *f, int n_nodes, int *gpus) {
    memset(gpus, 0, (size_t)n_nodes * sizeof *gpus);
    json_t *pods = fake_api_list(f, "pods");
    const char *key;
    json_t *pod;
    int bound = 0;
    json_object_foreach(pods, key, pod) {
        cached_pod *p = cached_pod_new(pod);
        assert_non_null(p);
        int node = -1;
        if (p->node_name && sscanf(p->node_name, "n%d", &node) == 1 && node >= 0 &&
            node < n_nodes && p->phase != CACHED_PHASE_SUCCEEDED &&
            p->phase != CACHED_PHASE_FAILED) {
            gpus[node] += p->gpus;
            bound++;
        }
        cached_pod_release(p);
    }
    json_decref(pods);
    return bound;
}

/* Jobs whose status says what became of them (placed or waiting with a reason). */
static int jobs_decided(fake_api *f) {
    json_t *jobs = fake_api_list(f, "arealjobs");
    const char *key;
    json_t *job;
    int n = 0;
    json_object_foreach(jobs, key, job) {
        json_t *conds = json_object_get(json_object_get(job, "status"), "conditions");
        n += json_array_size(conds) > 0;
    }
    json_decref(jobs);
    return n;
}

#define NODES    6
#define NODE_GPU 4
#define JOBS     10

/* Issue 11, item 1: 10 jobs of 4 GPUs at once on 24 free GPUs, 8 workers:
 * no node ever carries more than its 4 GPUs, and the 6 gangs that fit are all
 * bound. */
static void concurrent_jobs_never_overcommit(void **state) {
    (void)state;
    harness h = {.f = fake_api_start()};
    assert_non_null(h.f);
    for (int i = 0; i < NODES; i++)
        put_node(h.f, i, NODE_GPU);
    harness_start(&h, 8);
    WAIT_FOR(controller_synced(h.ctl), "the first lists");
    for (int j = 0; j < JOBS; j++) {
        char name[16];
        snprintf(name, sizeof name, "j%d", j);
        /* two one-GPU rollout servers and a two-GPU trainer: 4 GPUs */
        put_job(h.f, name, "sglang:d2+megatron:d1t2");
    }
    int gpus[NODES], worst = 0, bound = 0;
    double t0 = now_s();
    while (now_s() - t0 < LIMIT_S && (jobs_decided(h.f) < JOBS || bound < 3 * NODES / 2 * 2)) {
        bound = bound_gpus(h.f, NODES, gpus);
        for (int i = 0; i < NODES; i++)
            worst = gpus[i] > worst ? gpus[i] : worst;
        if (worst > NODE_GPU)
            break;
        nap();
    }
    /* settle: late binds would show now */
    for (int k = 0; k < 40; k++) {
        bound = bound_gpus(h.f, NODES, gpus);
        for (int i = 0; i < NODES; i++)
            worst = gpus[i] > worst ? gpus[i] : worst;
        nap();
    }
    for (int i = 0; i < NODES; i++)
        fprintf(stderr, "n%d: %d of %d GPUs bound\n", i, gpus[i], NODE_GPU);
    assert_true(worst <= NODE_GPU);
    /* 24 GPUs hold 6 gangs of 3 pods: all bound, nothing more */
    assert_int_equal(bound, 6 * 3);
    assert_int_equal(jobs_decided(h.f), JOBS);
    harness_stop(&h);
    fake_api_stop(h.f);
}

/* The job's pods as the API server has them: count, how many bound. */
static int job_pods(fake_api *f, const char *job, int *bound) {
    json_t *pods = fake_api_list(f, "pods");
    const char *key;
    json_t *pod;
    int n = 0;
    *bound = 0;
    json_object_foreach(pods, key, pod) {
        cached_pod *p = cached_pod_new(pod);
        assert_non_null(p);
        if (p->job && strcmp(p->job, job) == 0 && p->deletion_timestamp == NULL) {
            n++;
            *bound += p->node_name != NULL;
        }
        cached_pod_release(p);
    }
    json_decref(pods);
    return n;
}

static json_t *job_status(fake_api *f, const char *name) {
    char key[128];
    snprintf(key, sizeof key, "team/%s", name);
    json_t *j = fake_api_get(f, "arealjobs", key);
    json_t *st = json_incref(json_object_get(j, "status"));
    json_decref(j);
    return st;
}

static bool all_bound(fake_api *f, const char *job, int want) {
    int bound, n = job_pods(f, job, &bound);
    return n == want && bound == want;
}

/* Issue 11, item 2: binds fail while the gang is created (3 pods, none bound);
 * the operator stops; the API server has lost one pod. A new operator creates
 * the missing pod first and then binds all three, keeping the two that were
 * there (same uids), with no gang restart. */
static void a_partial_gang_is_completed_after_a_restart(void **state) {
    (void)state;
    harness h = {.f = fake_api_start()};
    assert_non_null(h.f);
    for (int i = 0; i < 2; i++)
        put_node(h.f, i, 4);
    fake_api_fail(h.f, "bind", "pods", 503, "ServiceUnavailable", "fake_api: binds are down", -1);
    harness_start(&h, 2);
    put_job(h.f, "p", "sglang:d2+megatron:d1t2");
    int bound;
    WAIT_FOR(job_pods(h.f, "p", &bound) == 3, "the gang's pods to be created");
    harness_stop(&h);
    assert_int_equal(job_pods(h.f, "p", &bound), 3);
    assert_int_equal(bound, 0);

    json_t *pods = fake_api_list(h.f, "pods");
    const char *key, *lost = NULL;
    json_t *pod;
    json_object_foreach(pods, key, pod) lost = key; /* any one of them */
    char lost_key[128];
    snprintf(lost_key, sizeof lost_key, "%s", lost);
    fake_api_delete(h.f, "pods", lost_key);
    fake_api_fail(h.f, "bind", "pods", 0, "", "", 0); /* binds work again */
    long missing_before = fake_api_count(h.f, "bind-missing");

    harness_start(&h, 2);
    WAIT_FOR(all_bound(h.f, "p", 3), "the whole gang to be bound");
    json_object_foreach(pods, key, pod) {
        if (strcmp(key, lost_key) == 0)
            continue;
        json_t *now = fake_api_get(h.f, "pods", key);
        assert_non_null(now); /* kept, not deleted and recreated */
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(now, "metadata"), "uid")),
            json_string_value(json_object_get(json_object_get(pod, "metadata"), "uid")));
        json_decref(now);
    }
    json_t *recreated = fake_api_get(h.f, "pods", lost_key);
    assert_non_null(recreated);
    json_decref(recreated);
    assert_int_equal(fake_api_count(h.f, "bind-missing"), missing_before);
    json_t *st = job_status(h.f, "p");
    WAIT_FOR((json_decref(st), st = job_status(h.f, "p"),
              json_integer_value(json_object_get(st, "pods")) == 3),
             "status.pods to say 3");
    assert_int_equal(json_integer_value(json_object_get(st, "restarts")), 0);
    json_decref(st);
    json_decref(pods);
    harness_stop(&h);
    fake_api_stop(h.f);
}

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Issue 11, item 2: while the node list fails the operator does nothing (a
 * reconcile on an empty node cache would report "the cluster has no nodes");
 * once it succeeds, the job is placed. */
static void nothing_is_done_before_the_caches_sync(void **state) {
    (void)state;
    harness h = {.f = fake_api_start()};
    assert_non_null(h.f);
    for (int i = 0; i < 2; i++)
        put_node(h.f, i, 4);
    put_job(h.f, "s", "sglang:d2+megatron:d1t2");
    fake_api_fail(h.f, "list", "nodes", 503, "ServiceUnavailable", "fake_api: nodes are down", -1);
    harness_start(&h, 2);
    nap_ms(600);
    assert_false(controller_synced(h.ctl));
    assert_true(fake_api_count(h.f, "failed") > 0);
    assert_int_equal(fake_api_count(h.f, "patch"), 0);
    assert_int_equal(fake_api_count(h.f, "create"), 0);
    json_t *st = job_status(h.f, "s");
    assert_null(st);
    fake_api_fail(h.f, "list", "nodes", 0, "", "", 0);
    WAIT_FOR(all_bound(h.f, "s", 3), "the gang to be bound once the nodes are listed");
    harness_stop(&h);
    fake_api_stop(h.f);
}

static const char *status_str(const json_t *st, const char *key) {
    return json_string_value(json_object_get(st, key));
}

/* The Scheduled condition's reason (or ""), copied. */
static void scheduled(fake_api *f, const char *job, char *reason, size_t cap, char *msg,
                      size_t mcap) {
    json_t *st = job_status(f, job);
    size_t i;
    json_t *c;
    reason[0] = '\0';
    if (msg)
        msg[0] = '\0';
    json_array_foreach(json_object_get(st, "conditions"), i, c) {
        if (strcmp(status_str(c, "type"), "Scheduled") == 0) {
            snprintf(reason, cap, "%s", status_str(c, "reason"));
            if (msg)
                snprintf(msg, mcap, "%s", status_str(c, "message"));
        }
    }
    json_decref(st);
}

static bool reason_is(fake_api *f, const char *job, const char *want) {
    char reason[64];
    scheduled(f, job, reason, sizeof reason, NULL, 0);
    return strcmp(reason, want) == 0;
}

#define INVALID_ENV                                                                                \
    "Pod \"r-trainer-0\" is invalid: spec.containers[0].env[3].name: Invalid value: \"1BAD\": a "  \
    "valid environment variable name must consist of alphabetic characters"

/* Issue 11, item 3: every pod create answered 422. The job ends Failed with
 * a ChildRejected condition carrying the API's message (which names the
 * field), the operator stops creating, and a new spec (generation 2) that
 * the API accepts is placed. */
static void a_rejected_child_fails_the_job_until_the_spec_changes(void **state) {
    (void)state;
    harness h = {.f = fake_api_start()};
    assert_non_null(h.f);
    for (int i = 0; i < 2; i++)
        put_node(h.f, i, 4);
    fake_api_fail(h.f, "create", "pods", 422, "Invalid", INVALID_ENV, -1);
    harness_start(&h, 2);
    put_job(h.f, "r", "sglang:d2+megatron:d1t2");
    WAIT_FOR(reason_is(h.f, "r", "ChildRejected"), "the ChildRejected condition");
    char reason[64], msg[1024];
    scheduled(h.f, "r", reason, sizeof reason, msg, sizeof msg);
    assert_non_null(strstr(msg, "spec.containers[0].env[3].name"));
    assert_non_null(strstr(msg, "422"));
    json_t *st = job_status(h.f, "r");
    assert_string_equal(status_str(st, "phase"), "Failed");
    json_decref(st);
    assert_true(fake_api_count(h.f, "event") >= 1);

    /* idle: no more creates, no more writes */
    nap_ms(300);
    long failed = fake_api_count(h.f, "failed"), patches = fake_api_count(h.f, "patch");
    nap_ms(700);
    assert_int_equal(fake_api_count(h.f, "failed"), failed);
    assert_int_equal(fake_api_count(h.f, "patch"), patches);
    int bound;
    assert_int_equal(job_pods(h.f, "r", &bound), 0);

    /* a new spec the API accepts */
    fake_api_fail(h.f, "create", "pods", 0, "", "", 0);
    json_t *job = fake_api_get(h.f, "arealjobs", "team/r");
    json_object_set_new(json_object_get(job, "metadata"), "generation", json_integer(2));
    json_object_set_new(json_object_get(job, "spec"), "image", json_string("img:2"));
    fake_api_put(h.f, "arealjobs", job);
    json_decref(job);
    WAIT_FOR(all_bound(h.f, "r", 3), "the new spec to be placed");
    WAIT_FOR(reason_is(h.f, "r", "GangBound"), "the GangBound condition");
    harness_stop(&h);
    fake_api_stop(h.f);
}

/* Issue 11, item 3: transient failures (503 on three pod creates, 409 on
 * three job patches) are retried; the gang is bound and its status written. */
static void transient_errors_are_retried(void **state) {
    (void)state;
    harness h = {.f = fake_api_start()};
    assert_non_null(h.f);
    for (int i = 0; i < 2; i++)
        put_node(h.f, i, 4);
    fake_api_fail(h.f, "create", "pods", 503, "ServiceUnavailable", "fake_api: try again", 3);
    fake_api_fail(h.f, "patch", "arealjobs", 409, "Conflict", "fake_api: the object changed", 3);
    harness_start(&h, 2);
    put_job(h.f, "t", "sglang:d2+megatron:d1t2");
    WAIT_FOR(all_bound(h.f, "t", 3), "the gang to be bound");
    WAIT_FOR(reason_is(h.f, "t", "GangBound"), "the status to be written");
    json_t *st = job_status(h.f, "t");
    assert_int_equal(json_integer_value(json_object_get(st, "pods")), 3);
    assert_int_equal(json_integer_value(json_object_get(st, "gpus")), 4);
    json_decref(st);
    assert_int_equal(fake_api_count(h.f, "failed"), 6);
    harness_stop(&h);
    fake_api_stop(h.f);
}

static void put_dead_node(fake_api *f, int i, int gpus) {
    char name[16], g[8], since[32];
    snprintf(name, sizeof name, "n%d", i);
    snprintf(g, sizeof g, "%d", gpus);
    time_t t = time(NULL) - 120; /* NotReady for two minutes */
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *n =
        json_pack("{s:{s:s,s:{s:s}},s:{s:{s:s,s:s,s:s},s:[{s:s,s:s,s:s}]}}", "metadata", "name",
                  name, "labels", "kubernetes.io/hostname", name, "status", "allocatable",
                  "nvidia.com/gpu", g, "cpu", "96", "memory", "512Gi", "conditions", "type",
                  "Ready", "status", "Unknown", "lastTransitionTime", since);
    fake_api_put(f, "nodes", n);
    json_decref(n);
}

/* The kubelets of live nodes: pods Running; a deleted pod on a live node is
 * confirmed gone. Pods on node `dead` get nothing. */
static void kubelets(fake_api *f, const char *dead) {
    json_t *pods = fake_api_list(f, "pods");
    const char *key;
    json_t *pod;
    json_object_foreach(pods, key, pod) {
        const char *node =
            json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
        if (node == NULL || (dead && strcmp(node, dead) == 0))
            continue;
        if (json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp")) {
            fake_api_delete(f, "pods", key);
        } else if (!json_object_get(pod, "status")) {
            json_object_set_new(pod, "status",
                                json_pack("{s:s,s:[{s:s,s:s}]}", "phase", "Running", "conditions",
                                          "type", "Ready", "status", "True"));
            fake_api_put(f, "pods", pod);
        }
    }
    json_decref(pods);
}

/* Pods of `job` bound to node `node`. */
static int pods_on(fake_api *f, const char *job, const char *node) {
    json_t *pods = fake_api_list(f, "pods");
    const char *key;
    json_t *pod;
    int n = 0;
    json_object_foreach(pods, key, pod) {
        cached_pod *p = cached_pod_new(pod);
        n += p->job && strcmp(p->job, job) == 0 && p->node_name && strcmp(p->node_name, node) == 0;
        cached_pod_release(p);
    }
    json_decref(pods);
    return n;
}

static bool job_phase_is(fake_api *f, const char *job, const char *want) {
    json_t *st = job_status(f, job);
    const char *ph = status_str(st, "phase");
    bool same = ph && strcmp(ph, want) == 0;
    json_decref(st);
    return same;
}

/* Issue 11, item 5: the node under a running gang stops (no kubelet confirms
 * anything there). The gang restarts: the pod there is deleted with grace 0,
 * the others normally, and the new gang runs on the healthy nodes. */
static void a_dead_node_is_replanned_around(void **state) {
    (void)state;
    harness h = {.f = fake_api_start()};
    assert_non_null(h.f);
    fake_api_graceful_pods(h.f, true);
    for (int i = 0; i < 3; i++)
        put_node(h.f, i, 4);
    harness_start(&h, 2);
    json_t *j =
        json_pack("{s:s,s:s,s:{s:s,s:s,s:i},s:{s:s,s:s,s:{s:{s:i,s:i}}}}", "apiVersion",
                  "areal.io/v1alpha1", "kind", "AReaLJob", "metadata", "name", "d", "namespace",
                  "team", "generation", 1, "spec", "allocation", "sglang:d2+megatron:d1t2", "image",
                  "img", "failurePolicy", "backoff", "initialSeconds", 1, "maxSeconds", 1);
    fake_api_put(h.f, "arealjobs", j);
    json_decref(j);
    WAIT_FOR((kubelets(h.f, NULL), job_phase_is(h.f, "d", "Running")), "the job to run");
    char dead[16] = "";
    for (int i = 0; i < 3 && !dead[0]; i++) {
        char n[16];
        snprintf(n, sizeof n, "n%d", i);
        if (pods_on(h.f, "d", n) > 0)
            snprintf(dead, sizeof dead, "%s", n);
    }
    int i_dead = dead[1] - '0';
    put_dead_node(h.f, i_dead, 4);
    WAIT_FOR((kubelets(h.f, dead), pods_on(h.f, "d", dead) == 0 && all_bound(h.f, "d", 3) &&
                                       job_phase_is(h.f, "d", "Running")),
             "the gang to run again without the dead node");
    json_t *st = job_status(h.f, "d");
    assert_true(fake_api_count(h.f, "force-delete") >= 1);
    assert_int_equal(json_integer_value(json_object_get(st, "restarts")), 1);
    json_decref(st);
    harness_stop(&h);
    fake_api_stop(h.f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_dead_node_is_replanned_around),
        cmocka_unit_test(a_rejected_child_fails_the_job_until_the_spec_changes),
        cmocka_unit_test(transient_errors_are_retried),
        cmocka_unit_test(a_partial_gang_is_completed_after_a_restart),
        cmocka_unit_test(nothing_is_done_before_the_caches_sync),
        cmocka_unit_test(concurrent_jobs_never_overcommit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
