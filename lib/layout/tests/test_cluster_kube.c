/*
 * test_cluster_kube.c - single Node and Pod objects into the inventory, as the
 * operator's caches use them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "areal/cluster_kube.h"

static json_t *load(const char *text) {
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    return j;
}

static void adds_a_node_object(void **state) {
    (void)state;
    areal_cluster c;
    areal_cluster_init(&c);
    json_t *n = load("{\"metadata\":{\"name\":\"gpu-1\",\"labels\":{\"nvidia.com/gpu.clique\":"
                     "\"c0\"}},\"spec\":{\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]},"
                     "\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"8\",\"cpu\":\"63500m\","
                     "\"memory\":\"512Gi\"},\"conditions\":[{\"type\":\"Ready\",\"status\":"
                     "\"False\"}]}}");
    areal_error e;
    assert_int_equal(areal_cluster_add_kube_node(&c, n, "nodes/gpu-1", &e), 0);
    assert_int_equal(areal_cluster_add_kube_node(&c, n, "nodes/gpu-1", &e), 1);
    assert_string_equal(c.nodes[0].name, "gpu-1");
    assert_int_equal(c.nodes[0].gpus, 8);
    assert_int_equal(c.nodes[0].cpu_milli, 63500);
    assert_int_equal(c.nodes[0].mem_bytes, 512LL << 30);
    assert_false(c.nodes[0].ready);
    assert_int_equal(c.nodes[0].n_taints, 1);
    assert_string_equal(areal_node_label(&c.nodes[0], "nvidia.com/gpu.clique"), "c0");
    json_decref(n);
    /* a bad taint effect fails after the node was begun: the inventory is unchanged */
    n = load("{\"metadata\":{\"name\":\"bad\"},\"spec\":{\"taints\":[{\"key\":\"k\","
             "\"effect\":\"Sometimes\"}]},\"status\":{\"allocatable\":{\"nvidia.com/gpu\":1}}}");
    assert_int_equal(areal_cluster_add_kube_node(&c, n, "nodes/bad", &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "nodes/bad"));
    assert_int_equal(c.n_nodes, 2);
    json_decref(n);
    n = load("{\"metadata\":{},\"status\":{}}");
    assert_int_equal(areal_cluster_add_kube_node(&c, n, "nodes/x", &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "metadata.name"));
    json_decref(n);
    areal_cluster_truncate(&c, 1);
    assert_int_equal(c.n_nodes, 1);
    areal_cluster_free(&c);
}

static void sums_pod_requests(void **state) {
    (void)state;
    json_t *p = load("{\"spec\":{\"containers\":[{\"resources\":{\"limits\":{\"nvidia.com/gpu\":"
                     "4},\"requests\":{\"cpu\":\"2\",\"memory\":\"1Gi\"}}},{\"resources\":{"
                     "\"requests\":{\"cpu\":\"500m\",\"nvidia.com/gpu\":\"2\"}}}]}}");
    int gpus;
    long long cpu, mem;
    areal_error e;
    assert_int_equal(areal_kube_pod_requests(p, "pods/a", &gpus, &cpu, &mem, &e), AREAL_OK);
    assert_int_equal(gpus, 6);
    assert_int_equal(cpu, 2500);
    assert_int_equal(mem, 1LL << 30);
    json_decref(p);
    p = load("{\"spec\":{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"lots\"}}}]}}");
    assert_int_equal(areal_kube_pod_requests(p, "pods/b", &gpus, &cpu, &mem, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "pods/b"));
    assert_non_null(strstr(e.msg, "containers[0].resources.requests.cpu"));
    json_decref(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(adds_a_node_object),
        cmocka_unit_test(sums_pod_requests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
