/*
 * cached_node.c - a Node in the compact form of areal/operator/cached.h.
 *
 * How: the layout library decodes the Node object into a one-node scratch
 * inventory (areal_cluster_add_kube_node: allocatable GPUs/CPU/memory,
 * labels, taints, unschedulable, Ready), and that node is packed into one
 * allocation: the struct, then the label and taint pointer arrays, then the
 * strings. Turning it back into an inventory node (per reconcile) copies it
 * into the areal_cluster, which owns its strings.
 * Rejected: caching areal_node values themselves (one malloc per label key
 * and value, about four times the bytes for a labelled node).
 */
#include "areal/operator/cached.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/cluster_kube.h"
#include "cached_pack.h"

/* Packs the strings of `src` into `n` (or counts them while k->at is NULL). */
static void pack_node(cached_node *n, const areal_node *src, const char *name, const char *rv,
                      cached_packer *k) {
    n->name = cached_pack(k, name);
    n->resource_version = cached_pack(k, rv);
    if (src == NULL)
        return;
    for (int i = 0; i < src->n_labels; i++) {
        const char *key = cached_pack(k, src->labels[i].key);
        const char *value = cached_pack(k, src->labels[i].value);
        if (k->at != NULL) {
            n->labels[2 * i] = key;
            n->labels[2 * i + 1] = value;
        }
    }
    for (int i = 0; i < src->n_taints; i++) {
        const char *key = cached_pack(k, src->taints[i].key);
        const char *value = cached_pack(k, src->taints[i].value);
        const char *effect = cached_pack(k, src->taints[i].effect);
        if (k->at != NULL) {
            n->taints[3 * i] = key;
            n->taints[3 * i + 1] = value;
            n->taints[3 * i + 2] = effect;
        }
    }
}

/* The Ready condition's lastTransitionTime (RFC 3339, UTC) in ms, or 0. */
static long long ready_since_ms(const json_t *node) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(node, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        const char *at = json_string_value(json_object_get(c, "lastTransitionTime"));
        if (t == NULL || strcmp(t, "Ready") != 0 || at == NULL)
            continue;
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        if (strptime(at, "%Y-%m-%dT%H:%M:%S", &tm) == NULL)
            return 0;
        return (long long)timegm(&tm) * 1000;
    }
    return 0;
}

cached_node *cached_node_new(const json_t *node) {
    const json_t *meta = json_object_get(node, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
    if (name == NULL || name[0] == '\0')
        return NULL;
    areal_cluster scratch;
    areal_cluster_init(&scratch);
    areal_error err;
    int at = areal_cluster_add_kube_node(&scratch, node, "node", &err);
    if (at == AREAL_ENOMEM) {
        areal_cluster_free(&scratch); /* the node may be in it, half decoded */
        return NULL;
    }
    const areal_node *src = at >= 0 ? &scratch.nodes[at] : NULL;
    int n_labels = src ? src->n_labels : 0, n_taints = src ? src->n_taints : 0;
    cached_node probe;
    cached_packer k = {0};
    pack_node(&probe, src, name, rv, &k);
    size_t ptrs = (size_t)(2 * n_labels + 3 * n_taints) * sizeof(const char *);
    cached_node *n = malloc(sizeof *n + ptrs + k.bytes);
    if (n == NULL) {
        areal_cluster_free(&scratch);
        return NULL;
    }
    memset(n, 0, sizeof *n);
    n->labels = (const char **)(n + 1);
    n->taints = n->labels + 2 * n_labels;
    n->n_labels = n_labels;
    n->n_taints = n_taints;
    k.at = (char *)(n->taints + 3 * n_taints);
    pack_node(n, src, name, rv, &k);
    if (src != NULL) {
        n->valid = true;
        n->gpus = src->gpus;
        n->cpu_milli = src->cpu_milli;
        n->mem_bytes = src->mem_bytes;
        n->unschedulable = src->unschedulable;
        n->ready = src->ready;
    }
    n->not_ready_since_ms = n->ready ? 0 : ready_since_ms(node);
    atomic_init(&n->refs, 1);
    areal_cluster_free(&scratch);
    return n;
}

cached_node *cached_node_retain(cached_node *n) {
    atomic_fetch_add(&n->refs, 1);
    return n;
}

void cached_node_release(cached_node *n) {
    if (n != NULL && atomic_fetch_sub(&n->refs, 1) == 1)
        free(n);
}

const char *cached_node_label(const cached_node *n, const char *key) {
    for (int i = 0; i < n->n_labels; i++)
        if (strcmp(n->labels[2 * i], key) == 0)
            return n->labels[2 * i + 1];
    return NULL;
}

int cached_node_add_to(const cached_node *n, areal_cluster *c, areal_error *err) {
    if (!n->valid)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "node %s: its allocatable resources, labels or taints cannot be "
                               "read; fix the Node object",
                               n->name);
    int at = areal_cluster_add_node(c, n->name, n->gpus, 0, err);
    if (at < 0)
        return at;
    areal_node *dst = &c->nodes[at];
    dst->cpu_milli = n->cpu_milli;
    dst->mem_bytes = n->mem_bytes;
    dst->unschedulable = n->unschedulable;
    dst->ready = n->ready;
    /* Labels are unique already: build the array at once rather than label by label. */
    if (n->n_labels > 0) {
        dst->labels = calloc((size_t)n->n_labels, sizeof *dst->labels);
        if (dst->labels == NULL)
            goto oom;
        for (int i = 0; i < n->n_labels; i++, dst->n_labels++) {
            dst->labels[i].key = strdup(n->labels[2 * i]);
            dst->labels[i].value = strdup(n->labels[2 * i + 1]);
            if (dst->labels[i].key == NULL || dst->labels[i].value == NULL) {
                dst->n_labels++; /* so the truncate below frees this pair */
                goto oom;
            }
        }
    }
    for (int i = 0; i < n->n_taints; i++) {
        int rc = areal_cluster_add_taint(c, at, n->taints[3 * i], n->taints[3 * i + 1],
                                         n->taints[3 * i + 2], err);
        if (rc != AREAL_OK) {
            areal_cluster_truncate(c, at);
            return rc;
        }
    }
    return at;
oom:
    areal_cluster_truncate(c, at);
    return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory copying node %s", n->name);
}
