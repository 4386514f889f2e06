/*
 * test_oom_operator.c - `make test-oom` over the operator's pieces that run
 * on every event: the informer caches (pods, nodes, AReaLJobs: apply, update,
 * delete, a paged relist) and one reconcile of a new job (the gang's pods,
 * Service, ConfigMap, status). Each fails every allocation once (oom.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "areal/cluster.h"
#include "areal/operator/cache.h"
#include "areal/operator/cached.h"
#include "areal/operator/reconcile.h"
#include "oom.h"

static const char *POD =
    "{\"metadata\":{\"name\":\"j-trainer-0\",\"namespace\":\"ns\",\"uid\":\"u1\","
    "\"resourceVersion\":\"17\",\"labels\":{\"areal.io/job\":\"j\",\"areal.io/role\":\"trainer\","
    "\"areal.io/pod-index\":\"0\"},\"annotations\":{\"areal.io/planned-node\":\"n1\"}},"
    "\"spec\":{\"nodeName\":\"n1\",\"schedulerName\":\"areal-operator\",\"containers\":[{\"name\":"
    "\"worker\",\"image\":\"img\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":4}}}]},"
    "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],"
    "\"containerStatuses\":[{\"name\":\"worker\",\"state\":{\"running\":{}}}]}}";
static const char *NODE =
    "{\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"5\",\"labels\":{"
    "\"network.topology.nvidia.com/leaf\":\"leaf-1\"}},\"spec\":{\"taints\":[{\"key\":\"gpu\","
    "\"value\":\"yes\",\"effect\":\"NoSchedule\"}]},\"status\":{\"allocatable\":{"
    "\"nvidia.com/gpu\":8,\"cpu\":\"96\",\"memory\":\"1Gi\"},\"conditions\":[{\"type\":\"Ready\","
    "\"status\":\"True\"}]}}";
static const char *JOB = "{\"apiVersion\":\"areal.io/v1alpha1\",\"kind\":\"AReaLJob\","
                         "\"metadata\":{\"name\":\"j\",\"namespace\":\"ns\",\"uid\":\"u1\","
                         "\"generation\":1,\"finalizers\":[\"areal.io/cleanup\"]},"
                         "\"spec\":{\"allocation\":\"sglang:d2t2+megatron:d2p2t2\"}}";

typedef struct objs {
    json_t *pod, *pod2, *node, *job, *list;
} objs;

/* Map the caches' -1 (out of memory: every input here has a name) to the code. */
static int cache_rc(int rc) {
    return rc == 0 ? 0 : AREAL_ENOMEM;
}

static int caches(void *ud) {
    const objs *o = ud;
    obj_cache *pods = cache_new(&cache_ops_pod), *nodes = cache_new(&cache_ops_node),
              *jobs = cache_new(&cache_ops_json);
    int rc = pods && nodes && jobs ? 0 : AREAL_ENOMEM;
    if (rc == 0)
        rc = cache_rc(cache_apply(pods, o->pod, false));
    if (rc == 0)
        rc = cache_rc(cache_apply(pods, o->pod2, false)); /* an update */
    if (rc == 0)
        rc = cache_rc(cache_apply(nodes, o->node, false));
    if (rc == 0)
        rc = cache_rc(cache_apply(jobs, o->job, false));
    if (rc == 0) {
        cached_pod *p = cache_get(pods, "ns/j-trainer-0");
        cache_release(pods, p);
        rc = cache_rc(cache_apply(pods, o->pod, true)); /* a delete */
    }
    if (rc == 0) { /* a relist in pages */
        cache_replace_begin(nodes);
        rc = cache_rc(cache_replace_items(nodes, json_object_get(o->list, "items")));
        cache_replace_end(nodes, rc == 0);
    }
    if (rc == 0)
        rc = cache_rc(cache_replace(pods, o->list));
    cache_free(pods);
    cache_free(nodes);
    cache_free(jobs);
    return rc;
}

static int reconcile_new_job(void *ud) {
    const objs *o = ud;
    areal_cluster c;
    areal_cluster_init(&c);
    int rc = AREAL_OK;
    for (int i = 0; i < 4 && rc >= 0; i++) {
        char name[32];
        snprintf(name, sizeof name, "node-%d", i);
        rc = areal_cluster_add_node(&c, name, 8, 0, NULL);
    }
    if (rc >= 0) {
        reconcile_input in = {.job = o->job, .cluster = &c, .now_ms = 1795000000000LL};
        reconcile_result r;
        areal_error err;
        rc = reconcile_job(&in, &r, &err);
        if (rc == AREAL_OK)
            reconcile_result_free(&r);
    }
    areal_cluster_free(&c);
    return rc < 0 ? rc : 0;
}

static int setup(void **state) {
    static objs o;
    o.pod = json_loads(POD, 0, NULL);
    o.pod2 = json_deep_copy(o.pod);
    json_object_set_new(json_object_get(o.pod2, "metadata"), "resourceVersion", json_string("18"));
    o.node = json_loads(NODE, 0, NULL);
    o.job = json_loads(JOB, 0, NULL);
    o.list = json_pack("{s:[O,O]}", "items", o.node, o.pod);
    assert_true(o.pod && o.pod2 && o.node && o.job && o.list);
    *state = &o;
    return 0;
}

static int teardown(void **state) {
    objs *o = *state;
    json_decref(o->pod);
    json_decref(o->pod2);
    json_decref(o->node);
    json_decref(o->job);
    json_decref(o->list);
    return 0;
}

static void informer_caches(void **state) {
    oom_torture("operator caches", caches, *state, AREAL_ENOMEM);
}

static void reconcile(void **state) {
    oom_torture("reconcile a new job", reconcile_new_job, *state, AREAL_ENOMEM);
}

int main(void) {
    oom_setup();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(informer_caches),
        cmocka_unit_test(reconcile),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
