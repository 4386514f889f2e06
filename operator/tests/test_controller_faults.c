/*
 * test_controller_faults.c - the whole controller against the in-memory API
 * server (operator/tests/util/fake_api.h) where issue 11 found it breaking:
 * many jobs reconciled at once by several workers must never put more GPUs
 * on a node than it has (the reservation ledger).
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(concurrent_jobs_never_overcommit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
