/*
 * test_cache.c - the informer store: replace, apply, get, delete with slot
 * reuse, and pruning that keeps exactly what the operator reads. (The memory
 * of a large cache is measured by bench/bench_operator_cache.c.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "areal/cluster_kube.h"
#include "areal/operator/cache.h"

static json_t *pod(const char *ns, const char *name, const char *node, int gpus) {
    return json_pack("{s:{s:s,s:s,s:s,s:{s:s},s:{s:s},s:{s:s}},"
                     "s:{s:s,s:s,s:[{s:s,s:s,s:[{s:s,s:s}],s:{s:{s:i}}}]},"
                     "s:{s:s,s:[{s:s,s:s},{s:s,s:s}],s:[{s:s,s:{s:{s:i}}}]}}",
                     "metadata", "name", name, "namespace", ns, "uid", "u", "labels",
                     "areal.io/job", "j", "annotations", "a", "b", "managedFields", "x", "y",
                     "spec", "nodeName", node, "schedulerName", "areal-operator", "containers",
                     "name", "worker", "image", "img", "env", "name", "K", "value", "V",
                     "resources", "limits", "nvidia.com/gpu", gpus, "status", "phase", "Running",
                     "conditions", "type", "Ready", "status", "True", "type", "PodScheduled",
                     "status", "True", "containerStatuses", "name", "worker", "state", "terminated",
                     "exitCode", 3);
}

static void stores_and_prunes_pods(void **state) {
    (void)state;
    obj_cache *c = cache_new(cache_prune_pod);
    json_t *p = pod("ns", "a", "n1", 4);
    assert_int_equal(cache_apply(c, p, false), 0);
    json_t *got = cache_get(c, "ns/a");
    assert_non_null(got);
    /* kept: identity, labels, node, requests, phase, Ready, exit code */
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(got, "metadata"), "labels"), "areal.io/job")),
        "j");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(got, "spec"), "nodeName")), "n1");
    int gpus;
    long long cpu, mem;
    assert_int_equal(areal_kube_pod_requests(got, "p", &gpus, &cpu, &mem, NULL), AREAL_OK);
    assert_int_equal(gpus, 4);
    json_t *st = json_object_get(got, "status");
    assert_int_equal(json_array_size(json_object_get(st, "conditions")), 1);
    /* dropped: env, image, managedFields, other conditions */
    json_t *ctr = json_array_get(json_object_get(json_object_get(got, "spec"), "containers"), 0);
    assert_null(json_object_get(ctr, "env"));
    assert_null(json_object_get(ctr, "image"));
    assert_null(json_object_get(json_object_get(got, "metadata"), "managedFields"));
    json_decref(got);
    /* update, delete, slot reuse */
    json_object_set_new(json_object_get(p, "spec"), "nodeName", json_string("n2"));
    assert_int_equal(cache_apply(c, p, false), 0);
    got = cache_get(c, "ns/a");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(got, "spec"), "nodeName")), "n2");
    json_decref(got);
    assert_int_equal(cache_len(c), 1);
    assert_int_equal(cache_apply(c, p, true), 0);
    assert_null(cache_get(c, "ns/a"));
    assert_int_equal(cache_len(c), 0);
    json_decref(p);
    assert_false(cache_synced(c));
    json_t *list =
        json_pack("{s:[o,o]}", "items", pod("ns", "x", "n1", 1), pod("ns", "y", "n1", 1));
    assert_int_equal(cache_replace(c, list), 0);
    assert_true(cache_synced(c));
    assert_int_equal(cache_len(c), 2);
    json_decref(list);
    json_t *nameless = json_pack("{s:{}}", "metadata");
    assert_int_equal(cache_apply(c, nameless, false), -1);
    json_decref(nameless);
    cache_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stores_and_prunes_pods),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
