/*
 * fuzz_cached.c - libFuzzer target for the compact cache entries: any JSON
 * value, read as a Pod and as a Node, into a cache and back out.
 *
 * Invariants checked: (1) conversion never crashes or leaks, whatever the
 * shape (wrong types, huge numbers, missing fields); (2) a pod entry and its
 * JSON view agree: converting the view again gives the same fields; (3) a
 * node entry that is valid goes into an inventory with the same name, GPUs
 * and labels; an invalid one is refused with AREAL_EINVAL; (4) the cache
 * holds the object under its key until it is deleted.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "areal/operator/cache.h"
#include "areal/operator/cached.h"

static int same(const char *a, const char *b) {
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

static void check_pod(const json_t *obj) {
    cached_pod *p = cached_pod_new(obj);
    if (p == NULL)
        return;
    json_t *view = cached_pod_to_json(p);
    if (view == NULL)
        abort();
    cached_pod *q = cached_pod_new(view);
    if (q == NULL || !same(p->name, q->name) || !same(p->ns, q->ns) || !same(p->uid, q->uid) ||
        !same(p->node_name, q->node_name) || !same(p->job, q->job) ||
        !same(p->planned_node, q->planned_node) ||
        !same(p->deletion_timestamp, q->deletion_timestamp) || p->master != q->master ||
        p->ready != q->ready || (p->exit_code >= 0 && p->exit_code != q->exit_code) ||
        (p->phase != CACHED_PHASE_UNKNOWN && p->phase != q->phase))
        abort();
    cached_pod_release(q);
    json_decref(view);
    cached_pod_release(p);
}

static void check_node(const json_t *obj) {
    cached_node *n = cached_node_new(obj);
    if (n == NULL)
        return;
    areal_cluster c;
    areal_cluster_init(&c);
    int at = cached_node_add_to(n, &c, NULL);
    if (n->valid) {
        if (at != 0 || strcmp(c.nodes[0].name, n->name) != 0 || c.nodes[0].gpus != n->gpus ||
            c.nodes[0].n_labels != n->n_labels)
            abort();
        for (int i = 0; i < n->n_labels; i++)
            if (!same(areal_node_label(&c.nodes[0], n->labels[2 * i]), n->labels[2 * i + 1]))
                abort();
    } else if (at != AREAL_EINVAL) {
        abort();
    }
    areal_cluster_free(&c);
    cached_node_release(n);
}

static void check_cache(const cache_ops *ops, const json_t *obj) {
    obj_cache *c = cache_new(ops);
    char key[512];
    if (c == NULL)
        return;
    int rc = cache_apply(c, obj, false);
    bool named = cache_key(obj, key, sizeof key);
    if (rc == 0) {
        void *e = cache_get(c, key);
        if (!named || e == NULL || cache_len(c) != 1)
            abort();
        cache_release(c, e);
        cache_apply(c, obj, true);
        if (cache_len(c) != 0)
            abort();
    }
    cache_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *obj = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (obj == NULL)
        return 0;
    check_pod(obj);
    check_node(obj);
    check_cache(&cache_ops_pod, obj);
    check_cache(&cache_ops_node, obj);
    json_decref(obj);
    return 0;
}
