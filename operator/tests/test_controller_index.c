/*
 * test_controller_index.c - issue 11's "no step scans the whole cluster per
 * job": the whole controller against the in-memory API server with 1,000
 * other jobs' pods (16,000 pods, served by fake_api_generate) and one job of
 * our own. The job is placed, bound and Running through many reconciles, and
 * the controller's pod cache hands out fewer entries over all of them than
 * one walk of the cluster's pods would (before the cache's job and node
 * indexes, every reconcile walked all 16,000).
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

#include "areal/clock.h"
#include "areal/kube/client.h"
#include "areal/http/metrics.h"
#include "areal/operator/controller.h"
#include "util/fake_api.h"

#define OTHER_JOBS 1000
#define OTHER_PODS (16 * OTHER_JOBS) /* fake_api_generate: 16 pods a job */
#define GEN_NODES  2000              /* full: 8 pods of 8 GPUs on each 8-GPU node */
#define GANG       3                 /* sglang:d2+megatron:d2t4: two servers, one trainer pod */

#if defined(__SANITIZE_ADDRESS__)
#define LIMIT_S 120.0
#else
#define LIMIT_S 40.0
#endif

static void nap(void) {
    struct timespec ts = {0, 5 * 1000000L};
    nanosleep(&ts, NULL);
}

static void put_node(fake_api *f, int i) {
    char name[24];
    snprintf(name, sizeof name, "free-%d", i);
    json_t *n = json_pack("{s:{s:s,s:{s:s}},s:{s:{s:s,s:s,s:s},s:[{s:s,s:s}]}}", "metadata", "name",
                          name, "labels", "kubernetes.io/hostname", name, "status", "allocatable",
                          "nvidia.com/gpu", "8", "cpu", "96", "memory", "512Gi", "conditions",
                          "type", "Ready", "status", "True");
    fake_api_put(f, "nodes", n);
    json_decref(n);
}

static void pod_key(int i, char *key, size_t cap) {
    if (i < GANG - 1)
        snprintf(key, cap, "team/mine-rollout-%d", i);
    else
        snprintf(key, cap, "team/mine-trainer-0");
}

static bool gang_bound(fake_api *f) {
    for (int i = 0; i < GANG; i++) {
        char key[64];
        pod_key(i, key, sizeof key);
        json_t *p = fake_api_get(f, "pods", key);
        const char *node =
            json_string_value(json_object_get(json_object_get(p, "spec"), "nodeName"));
        bool free_node = node && strncmp(node, "free-", 5) == 0;
        json_decref(p);
        if (!free_node)
            return false;
    }
    return true;
}

static void run_pods(fake_api *f) {
    for (int i = 0; i < GANG; i++) {
        char key[64];
        pod_key(i, key, sizeof key);
        json_t *p = fake_api_get(f, "pods", key);
        assert_non_null(p);
        json_object_set_new(p, "status",
                            json_pack("{s:s,s:[{s:s,s:s}]}", "phase", "Running", "conditions",
                                      "type", "Ready", "status", "True"));
        fake_api_put(f, "pods", p);
        json_decref(p);
    }
}

static bool running(fake_api *f) {
    json_t *j = fake_api_get(f, "arealjobs", "team/mine");
    const char *ph = json_string_value(json_object_get(json_object_get(j, "status"), "phase"));
    bool yes = ph && strcmp(ph, "Running") == 0;
    json_decref(j);
    return yes;
}

#define WAIT_FOR(cond, what)                                                                       \
    do {                                                                                           \
        double t0_ = areal_mono_s();                                                               \
        while (!(cond) && areal_mono_s() - t0_ < LIMIT_S)                                          \
            nap();                                                                                 \
        if (!(cond))                                                                               \
            fail_msg("timed out waiting for %s", what);                                            \
    } while (0)

static void *run_ctl(void *arg) {
    controller_run(arg);
    return NULL;
}

static void a_job_among_a_thousand_visits_only_its_own_pods(void **state) {
    (void)state;
    fake_api *f = fake_api_start();
    assert_non_null(f);
    fake_api_generate(f, OTHER_PODS, GEN_NODES);
    for (int i = 0; i < 2; i++)
        put_node(f, i);
    kube_config cfg;
    kube_config_init(&cfg);
    cfg.server = strdup(fake_api_url(f));
    cfg.allow_insecure = 1;
    cfg.qps = 0;
    kube_client *kc = kube_client_new(&cfg, NULL);
    kube_config_free(&cfg);
    assert_non_null(kc);
    metrics_registry *m = metrics_registry_new();
    assert_non_null(m);
    controller_config cc = {.workers = 2};
    controller *ctl;
    areal_error err;
    assert_int_equal(controller_new(kc, &cc, m, &ctl, &err), AREAL_OK);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, run_ctl, ctl), 0);
    WAIT_FOR(controller_synced(ctl), "the first lists");
    size_t pods = 0;
    controller_cache_sizes(ctl, NULL, &pods, NULL);
    assert_int_equal(pods, OTHER_PODS);
    size_t before = controller_pod_visits(ctl);

    json_t *j =
        json_pack("{s:s,s:s,s:{s:s,s:s,s:i},s:{s:s,s:s}}", "apiVersion", "areal.io/v1alpha1",
                  "kind", "AReaLJob", "metadata", "name", "mine", "namespace", "team", "generation",
                  1, "spec", "allocation", "sglang:d2+megatron:d2t4", "image", "img");
    fake_api_put(f, "arealjobs", j);
    json_decref(j);
    WAIT_FOR(gang_bound(f), "the job's gang to be bound on the free nodes");
    run_pods(f);
    WAIT_FOR(running(f), "the job Running");

    controller_stop(ctl);
    pthread_join(th, NULL);
    size_t visits = controller_pod_visits(ctl) - before;
    char *text = metrics_render(m, NULL);
    assert_non_null(text);
    /* areal_reconciles_total{result="ok"} N: the passes these visits served */
    const char *at = strstr(text, "areal_reconciles_total{result=\"ok\"}");
    assert_non_null(at);
    long passes = strtol(at + strlen("areal_reconciles_total{result=\"ok\"}"), NULL, 10);
    free(text);
    print_message("%ld reconciles visited %zu pod cache entries (the cache holds %d)\n", passes,
                  visits, OTHER_PODS + GANG);
    assert_true(passes >= 3);
    /* each pass reads its own pods and a few by key (claims, expectations) */
    assert_true(visits <= (size_t)passes * 4 * GANG);
    assert_true(visits < OTHER_PODS);
    controller_free(ctl);
    metrics_registry_free(m);
    kube_client_free(kc);
    fake_api_stop(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_job_among_a_thousand_visits_only_its_own_pods),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
