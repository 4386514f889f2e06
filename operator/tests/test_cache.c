/*
 * test_cache.c - the informer store and its compact entries: replace (whole
 * and paged, committed and aborted), apply, get, delete with slot reuse;
 * pods and nodes keep exactly what reconcile and placement read; an entry a
 * reader holds survives its replacement. (The memory of a large cache is
 * measured by bench/bench_operator_cache.c.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "areal/operator/cache.h"
#include "areal/operator/cached.h"

static json_t *pod(const char *ns, const char *name, const char *node, int gpus) {
    return json_pack("{s:{s:s,s:s,s:s,s:s,s:{s:s,s:s,s:s,s:s,s:s},s:{s:s,s:s},s:{s:s}},"
                     "s:{s:s,s:s,s:[{s:s,s:s,s:[{s:s,s:s}],s:{s:{s:i,s:s},s:{s:s}}}]},"
                     "s:{s:s,s:[{s:s,s:s},{s:s,s:s}],s:[{s:s,s:{s:{s:i}}}]}}",
                     "metadata", "name", name, "namespace", ns, "uid", "u", "resourceVersion", "17",
                     "labels", "areal.io/job", "j", "areal.io/role", "trainer",
                     "areal.io/pod-index", "1", "areal.io/master", "true", "other", "x",
                     "annotations", "areal.io/planned-node", "n9", "a", "b", "managedFields", "x",
                     "y", "spec", "nodeName", node, "schedulerName", "areal-operator", "containers",
                     "name", "worker", "image", "img", "env", "name", "K", "value", "V",
                     "resources", "limits", "nvidia.com/gpu", gpus, "memory", "2Gi", "requests",
                     "cpu", "1500m", "status", "phase", "Failed", "conditions", "type",
                     "PodScheduled", "status", "False", "type", "Ready", "status", "True",
                     "containerStatuses", "name", "worker", "state", "terminated", "exitCode", 3);
}

static void pods_keep_what_reconcile_reads(void **state) {
    (void)state;
    obj_cache *c = cache_new(&cache_ops_pod);
    json_t *p = pod("ns", "a", "n1", 4);
    assert_int_equal(cache_apply(c, p, false), 0);
    cached_pod *got = cache_get(c, "ns/a");
    assert_non_null(got);
    assert_string_equal(got->ns, "ns");
    assert_string_equal(got->name, "a");
    assert_string_equal(got->uid, "u");
    assert_string_equal(got->resource_version, "17");
    assert_string_equal(got->job, "j");
    assert_string_equal(got->role, "trainer");
    assert_string_equal(got->pod_index, "1");
    assert_null(got->role_kind);
    assert_null(got->deletion_timestamp);
    assert_true(got->master);
    assert_string_equal(got->planned_node, "n9");
    assert_string_equal(got->node_name, "n1");
    assert_int_equal(got->phase, CACHED_PHASE_FAILED);
    assert_true(got->ready); /* the Ready condition, not the first one */
    assert_int_equal(got->exit_code, 3);
    assert_true(got->requests_ok);
    assert_int_equal(got->gpus, 4);
    assert_int_equal(got->cpu_milli, 1500);
    assert_int_equal(got->mem_bytes, 2LL << 30); /* request defaults to the limit */

    /* the JSON view has the shape and values reconcile reads, nothing else */
    json_t *view = cached_pod_to_json(got);
    assert_non_null(view);
    json_t *meta = json_object_get(view, "metadata");
    assert_string_equal(json_string_value(json_object_get(meta, "uid")), "u");
    json_t *labels = json_object_get(meta, "labels");
    assert_string_equal(json_string_value(json_object_get(labels, "areal.io/master")), "true");
    assert_null(json_object_get(labels, "other"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(meta, "annotations"),
                                                          "areal.io/planned-node")),
                        "n9");
    assert_null(json_object_get(meta, "managedFields"));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(view, "spec"), "nodeName")), "n1");
    json_t *st = json_object_get(view, "status");
    assert_string_equal(json_string_value(json_object_get(st, "phase")), "Failed");
    json_t *cond = json_array_get(json_object_get(st, "conditions"), 0);
    assert_string_equal(json_string_value(json_object_get(cond, "status")), "True");
    json_t *term = json_object_get(
        json_object_get(json_array_get(json_object_get(st, "containerStatuses"), 0), "state"),
        "terminated");
    assert_int_equal(json_integer_value(json_object_get(term, "exitCode")), 3);
    json_decref(view);

    /* an update replaces the entry; the reader's old one stays intact */
    json_object_set_new(json_object_get(p, "spec"), "nodeName", json_string("n2"));
    json_object_set_new(json_object_get(p, "metadata"), "deletionTimestamp",
                        json_string("2026-11-29T20:00:00Z"));
    assert_int_equal(cache_apply(c, p, false), 0);
    assert_string_equal(got->node_name, "n1");
    cache_release(c, got);
    got = cache_get(c, "ns/a");
    assert_string_equal(got->node_name, "n2");
    assert_string_equal(got->deletion_timestamp, "2026-11-29T20:00:00Z");
    cache_release(c, got);
    assert_int_equal(cache_len(c), 1);
    assert_int_equal(cache_apply(c, p, true), 0);
    assert_null(cache_get(c, "ns/a"));
    assert_int_equal(cache_len(c), 0);
    json_decref(p);

    /* a bare pod: absent fields are NULL, no exit code, phase none */
    json_t *bare = json_pack("{s:{s:s}}", "metadata", "name", "bare");
    assert_int_equal(cache_apply(c, bare, false), 0);
    got = cache_get(c, "bare");
    assert_null(got->ns);
    assert_null(got->node_name);
    assert_int_equal(got->phase, CACHED_PHASE_NONE);
    assert_int_equal(got->exit_code, -1);
    assert_false(got->ready);
    assert_int_equal(got->gpus, 0);
    view = cached_pod_to_json(got);
    assert_null(json_object_get(json_object_get(view, "status"), "phase"));
    assert_null(json_object_get(json_object_get(view, "status"), "containerStatuses"));
    json_decref(view);
    cache_release(c, got);
    json_decref(bare);

    /* a pod that cannot start its container: the reason, message and creation time survive */
    json_t *stuck = json_pack("{s:{s:s,s:s},s:{s:[{s:s,s:{s:{s:s,s:s}}}]}}", "metadata", "name",
                              "stuck", "creationTimestamp", "2026-11-29T20:00:00Z", "status",
                              "containerStatuses", "name", "worker", "state", "waiting", "reason",
                              "ImagePullBackOff", "message", "Back-off pulling image \"nope:1\"");
    assert_int_equal(cache_apply(c, stuck, false), 0);
    got = cache_get(c, "stuck");
    assert_string_equal(got->waiting_reason, "ImagePullBackOff");
    assert_string_equal(got->creation_timestamp, "2026-11-29T20:00:00Z");
    view = cached_pod_to_json(got);
    const json_t *w = json_object_get(
        json_object_get(
            json_array_get(json_object_get(json_object_get(view, "status"), "containerStatuses"),
                           0),
            "state"),
        "waiting");
    assert_string_equal(json_string_value(json_object_get(w, "reason")), "ImagePullBackOff");
    assert_non_null(strstr(json_string_value(json_object_get(w, "message")), "nope:1"));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(view, "metadata"), "creationTimestamp")),
        "2026-11-29T20:00:00Z");
    json_decref(view);
    cache_release(c, got);
    json_decref(stuck);

    json_t *nameless = json_pack("{s:{}}", "metadata");
    assert_int_equal(cache_apply(c, nameless, false), -1);
    json_decref(nameless);
    cache_free(c);
}

static json_t *node(const char *name, const char *gpus) {
    return json_pack("{s:{s:s,s:s,s:{s:s,s:s}},s:{s:b,s:[{s:s,s:s,s:s}]},"
                     "s:{s:{s:s,s:s,s:s},s:[{s:s,s:s},{s:s,s:s}],s:[{s:s}]}}",
                     "metadata", "name", name, "resourceVersion", "5", "labels",
                     "network.topology.nvidia.com/leaf", "leaf-1", "kubernetes.io/hostname", name,
                     "spec", "unschedulable", 1, "taints", "key", "gpu", "value", "yes", "effect",
                     "NoSchedule", "status", "allocatable", "nvidia.com/gpu", gpus, "cpu", "96",
                     "memory", "1Gi", "conditions", "type", "MemoryPressure", "status", "False",
                     "type", "Ready", "status", "False", "images", "names", "big");
}

static void nodes_keep_what_placement_reads(void **state) {
    (void)state;
    obj_cache *c = cache_new(&cache_ops_node);
    json_t *n = node("n1", "8");
    assert_int_equal(cache_apply(c, n, false), 0);
    json_decref(n);
    cached_node *got = cache_get(c, "n1");
    assert_non_null(got);
    assert_true(got->valid);
    assert_string_equal(got->resource_version, "5");
    assert_int_equal(got->gpus, 8);
    assert_int_equal(got->cpu_milli, 96000);
    assert_int_equal(got->mem_bytes, 1LL << 30);
    assert_true(got->unschedulable);
    assert_false(got->ready);
    assert_int_equal(got->n_labels, 2);
    assert_string_equal(cached_node_label(got, "network.topology.nvidia.com/leaf"), "leaf-1");
    assert_null(cached_node_label(got, "zone"));
    assert_int_equal(got->n_taints, 1);
    assert_string_equal(got->taints[2], "NoSchedule");

    /* back into an inventory, as placement sees it */
    areal_cluster cl;
    areal_cluster_init(&cl);
    assert_int_equal(cached_node_add_to(got, &cl, NULL), 0);
    assert_int_equal(cl.n_nodes, 1);
    assert_string_equal(cl.nodes[0].name, "n1");
    assert_int_equal(cl.nodes[0].gpus, 8);
    assert_int_equal(cl.nodes[0].gpus_used, 0);
    assert_int_equal(cl.nodes[0].cpu_milli, 96000);
    assert_true(cl.nodes[0].unschedulable);
    assert_false(cl.nodes[0].ready);
    assert_string_equal(areal_node_label(&cl.nodes[0], "kubernetes.io/hostname"), "n1");
    assert_int_equal(cl.nodes[0].n_taints, 1);
    assert_string_equal(cl.nodes[0].taints[0].value, "yes");
    cache_release(c, got);

    /* a node whose GPUs cannot be read is kept but not offered to placement */
    n = node("bad", "eight");
    assert_int_equal(cache_apply(c, n, false), 0);
    json_decref(n);
    got = cache_get(c, "bad");
    assert_false(got->valid);
    areal_error err;
    assert_int_equal(cached_node_add_to(got, &cl, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "bad"));
    assert_int_equal(cl.n_nodes, 1);
    cache_release(c, got);
    areal_cluster_free(&cl);
    cache_free(c);
}

static void count(void *ud, const void *entry) {
    (void)entry;
    (*(int *)ud)++;
}

static void paged_replace_swaps_at_the_end(void **state) {
    (void)state;
    obj_cache *c = cache_new(&cache_ops_pod);
    json_t *old = pod("ns", "old", "n1", 1);
    assert_int_equal(cache_apply(c, old, false), 0);
    json_decref(old);
    assert_false(cache_synced(c));

    /* aborted: the old contents stay */
    cache_replace_begin(c);
    json_t *page = json_pack("[o]", pod("ns", "x", "n1", 1));
    assert_int_equal(cache_replace_items(c, page), 0);
    json_decref(page);
    cache_replace_end(c, false);
    assert_int_equal(cache_len(c), 1);
    assert_false(cache_synced(c));

    /* committed: readers see the old contents until the end */
    cache_replace_begin(c);
    for (int p = 0; p < 3; p++) {
        char a[16], b[16];
        snprintf(a, sizeof a, "p%da", p);
        snprintf(b, sizeof b, "p%db", p);
        page = json_pack("[o,o]", pod("ns", a, "n1", 1), pod("ns", b, "n1", 1));
        assert_int_equal(cache_replace_items(c, page), 0);
        json_decref(page);
        assert_int_equal(cache_len(c), 1);
    }
    cached_pod *held = cache_get(c, "ns/old");
    cache_replace_end(c, true);
    assert_true(cache_synced(c));
    assert_int_equal(cache_len(c), 6);
    assert_null(cache_get(c, "ns/old"));
    assert_string_equal(held->name, "old"); /* still valid for its holder */
    cache_release(c, held);
    int n = 0;
    cache_each(c, count, &n);
    assert_int_equal(n, 6);

    /* a whole list, with one nameless item: the rest is stored, -1 says so */
    json_t *list = json_pack("{s:[o,o,{s:{}}]}", "items", pod("ns", "x", "n1", 1),
                             pod("ns", "y", "n1", 1), "metadata");
    assert_int_equal(cache_replace(c, list), -1);
    assert_int_equal(cache_len(c), 2);
    json_decref(list);
    cache_free(c);
}

static void json_cache_keeps_whole_objects(void **state) {
    (void)state;
    obj_cache *c = cache_new(&cache_ops_json);
    json_t *job = json_pack("{s:{s:s,s:s},s:{s:s}}", "metadata", "name", "j", "namespace", "ns",
                            "spec", "allocation", "megatron:d2");
    assert_int_equal(cache_apply(c, job, false), 0);
    json_object_set_new(json_object_get(job, "spec"), "allocation", json_string("changed"));
    json_t *got = cache_get(c, "ns/j");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(got, "spec"), "allocation")),
        "megatron:d2"); /* a copy, not the caller's object */
    cache_release(c, got);
    json_decref(job);
    cache_free(c);
}

/* A pod of job `job` on node `node` (NULL: unbound, planned for `planned`). */
static json_t *job_pod(const char *name, const char *job, const char *node, const char *planned,
                       int gpus, const char *phase) {
    json_t *p = json_pack("{s:{s:s,s:s,s:{s:s},s:{}},s:{s:[{s:s,s:{s:{s:i,s:s}}}]},s:{s:s}}",
                          "metadata", "name", name, "namespace", "ns", "labels", "areal.io/job",
                          job, "annotations", "spec", "containers", "name", "w", "resources",
                          "requests", "nvidia.com/gpu", gpus, "cpu", "1", "status", "phase", phase);
    if (node != NULL)
        json_object_set_new(json_object_get(p, "spec"), "nodeName", json_string(node));
    if (planned != NULL)
        json_object_set_new(json_object_get(json_object_get(p, "metadata"), "annotations"),
                            "areal.io/planned-node", json_string(planned));
    return p;
}

static void put(obj_cache *c, json_t *p) {
    assert_int_equal(cache_apply(c, p, false), 0);
    json_decref(p);
}

typedef struct sums_of {
    const char *node;
    long long s[CACHE_SUMS];
} sums_of;

static void read_sums(void *ud, cache_view *v) {
    sums_of *q = ud;
    cache_view_sums(v, CACHE_POD_BY_NODE, q->node, q->s);
}

static long long gpus_on(obj_cache *c, const char *node) {
    sums_of q = {.node = node};
    cache_read(c, read_sums, &q);
    return q.s[0];
}

static int in_index(obj_cache *c, int which, const char *key) {
    int n = 0;
    size_t before = cache_visits(c);
    cache_each_in(c, which, key, count, &n);
    assert_int_equal(cache_visits(c) - before, (size_t)n); /* only those were visited */
    return n;
}

/* Issue 11: the pod cache's indexes by job and by node (with the room the
 * pods hold there) follow every add, update, delete and relist. */
static void indexes_follow_every_change(void **state) {
    (void)state;
    obj_cache *c = cache_new(&cache_ops_pod);
    put(c, job_pod("a0", "a", "n1", NULL, 4, "Running"));
    put(c, job_pod("a1", "a", NULL, "n2", 2, "Pending")); /* created, bound to n2 next */
    put(c, job_pod("b0", "b", "n1", NULL, 1, "Running"));
    put(c, job_pod("b1", "b", "n1", NULL, 8, "Failed")); /* holds nothing */
    for (int i = 0; i < 50; i++) {                       /* other tenants */
        char name[16];
        snprintf(name, sizeof name, "o%d", i);
        put(c, job_pod(name, "other", "n9", NULL, 1, "Running"));
    }
    assert_int_equal(in_index(c, CACHE_POD_BY_JOB, "ns/a"), 2);
    assert_int_equal(in_index(c, CACHE_POD_BY_JOB, "ns/b"), 2);
    assert_int_equal(in_index(c, CACHE_POD_BY_JOB, "ns/other"), 50);
    assert_int_equal(in_index(c, CACHE_POD_BY_JOB, "ns/none"), 0);
    assert_int_equal(in_index(c, CACHE_POD_BY_NODE, "n1"), 3);
    assert_int_equal(gpus_on(c, "n1"), 5);
    assert_int_equal(gpus_on(c, "n2"), 2);
    assert_int_equal(gpus_on(c, "n9"), 50);

    put(c, job_pod("a1", "a", "n3", "n2", 2, "Pending")); /* bound elsewhere than planned */
    assert_int_equal(gpus_on(c, "n2"), 0);
    assert_int_equal(gpus_on(c, "n3"), 2);
    assert_int_equal(in_index(c, CACHE_POD_BY_NODE, "n2"), 0);
    put(c, job_pod("a0", "a", "n1", NULL, 4, "Succeeded")); /* finished: still there, no room */
    assert_int_equal(gpus_on(c, "n1"), 1);
    assert_int_equal(in_index(c, CACHE_POD_BY_NODE, "n1"), 3);
    put(c, job_pod("b0", "a", "n1", NULL, 1, "Running")); /* relabelled to another job */
    assert_int_equal(in_index(c, CACHE_POD_BY_JOB, "ns/a"), 3);
    assert_int_equal(in_index(c, CACHE_POD_BY_JOB, "ns/b"), 1);

    json_t *gone = job_pod("b1", "b", "n1", NULL, 8, "Failed");
    assert_int_equal(cache_apply(c, gone, true), 0);
    json_decref(gone);
    assert_int_equal(in_index(c, CACHE_POD_BY_JOB, "ns/b"), 0);
    assert_int_equal(in_index(c, CACHE_POD_BY_NODE, "n1"), 2);

    /* a relist: the indexes are the new contents' */
    json_t *list = json_pack("{s:[o,o]}", "items", job_pod("x0", "x", "n1", NULL, 3, "Running"),
                             job_pod("x1", "x", NULL, "n4", 2, "Pending"));
    assert_int_equal(cache_replace(c, list), 0);
    json_decref(list);
    assert_int_equal(in_index(c, CACHE_POD_BY_JOB, "ns/a"), 0);
    assert_int_equal(in_index(c, CACHE_POD_BY_JOB, "ns/other"), 0);
    assert_int_equal(in_index(c, CACHE_POD_BY_JOB, "ns/x"), 2);
    assert_int_equal(gpus_on(c, "n1"), 3);
    assert_int_equal(gpus_on(c, "n4"), 2);
    assert_int_equal(gpus_on(c, "n9"), 0);
    cache_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pods_keep_what_reconcile_reads),
        cmocka_unit_test(nodes_keep_what_placement_reads),
        cmocka_unit_test(paged_replace_swaps_at_the_end),
        cmocka_unit_test(json_cache_keeps_whole_objects),
        cmocka_unit_test(indexes_follow_every_change),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
