/*
 * cluster.c - the in-memory inventory: nodes, labels and taints, each string
 * owned by the cluster (see areal/cluster.h). Nodes live in one growable array
 * so placement can index them; labels and taints are small per-node arrays.
 */
#include "areal/cluster.h"

#include <stdlib.h>
#include <string.h>

void areal_cluster_init(areal_cluster *c) {
    c->nodes = NULL;
    c->n_nodes = 0;
    c->cap_nodes = 0;
}

static void node_free(areal_node *n) {
    free(n->name);
    for (int i = 0; i < n->n_labels; i++) {
        free(n->labels[i].key);
        free(n->labels[i].value);
    }
    free(n->labels);
    for (int i = 0; i < n->n_taints; i++) {
        free(n->taints[i].key);
        free(n->taints[i].value);
        free(n->taints[i].effect);
    }
    free(n->taints);
}

void areal_cluster_truncate(areal_cluster *c, int n) {
    if (n < 0)
        n = 0;
    while (c->n_nodes > n)
        node_free(&c->nodes[--c->n_nodes]);
}

void areal_cluster_free(areal_cluster *c) {
    for (int i = 0; i < c->n_nodes; i++)
        node_free(&c->nodes[i]);
    free(c->nodes);
    areal_cluster_init(c);
}

int areal_cluster_add_node(areal_cluster *c, const char *name, int gpus, int gpus_used,
                           areal_error *err) {
    if (name == NULL || name[0] == '\0')
        return areal_error_set(err, AREAL_EINVAL, -1, "a node needs a non-empty name");
    if (gpus < 0 || gpus_used < 0 || gpus_used > gpus)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "node %s: GPU counts must satisfy 0 <= used (%d) <= gpus (%d)", name,
                               gpus_used, gpus);
    if (c->n_nodes == c->cap_nodes) {
        int cap = c->cap_nodes ? 2 * c->cap_nodes : 16;
        areal_node *grown = realloc(c->nodes, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory adding node %s", name);
        c->nodes = grown;
        c->cap_nodes = cap;
    }
    areal_node *n = &c->nodes[c->n_nodes];
    memset(n, 0, sizeof *n);
    n->name = strdup(name);
    if (n->name == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory adding node %s", name);
    n->gpus = gpus;
    n->gpus_used = gpus_used;
    n->ready = true;
    return c->n_nodes++;
}

static int check_index(const areal_cluster *c, int i, areal_error *err) {
    if (i < 0 || i >= c->n_nodes)
        return areal_error_set(err, AREAL_EINVAL, -1, "node index %d out of range", i);
    return AREAL_OK;
}

int areal_cluster_set_label(areal_cluster *c, int i, const char *key, const char *value,
                            areal_error *err) {
    int rc = check_index(c, i, err);
    if (rc != AREAL_OK)
        return rc;
    areal_node *n = &c->nodes[i];
    char *v = strdup(value);
    if (v == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    for (int j = 0; j < n->n_labels; j++) {
        if (strcmp(n->labels[j].key, key) == 0) {
            free(n->labels[j].value);
            n->labels[j].value = v;
            return AREAL_OK;
        }
    }
    char *k = strdup(key);
    areal_label *grown = realloc(n->labels, (size_t)(n->n_labels + 1) * sizeof *grown);
    if (k == NULL || grown == NULL) {
        free(k);
        free(v);
        if (grown != NULL)
            n->labels = grown;
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    }
    n->labels = grown;
    n->labels[n->n_labels].key = k;
    n->labels[n->n_labels].value = v;
    n->n_labels++;
    return AREAL_OK;
}

int areal_cluster_add_taint(areal_cluster *c, int i, const char *key, const char *value,
                            const char *effect, areal_error *err) {
    int rc = check_index(c, i, err);
    if (rc != AREAL_OK)
        return rc;
    areal_node *n = &c->nodes[i];
    areal_taint *grown = realloc(n->taints, (size_t)(n->n_taints + 1) * sizeof *grown);
    if (grown == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    n->taints = grown;
    areal_taint *t = &n->taints[n->n_taints];
    t->key = strdup(key);
    t->value = strdup(value ? value : "");
    t->effect = strdup(effect);
    if (t->key == NULL || t->value == NULL || t->effect == NULL) {
        free(t->key);
        free(t->value);
        free(t->effect);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    }
    n->n_taints++;
    return AREAL_OK;
}

const char *areal_node_label(const areal_node *n, const char *key) {
    for (int j = 0; j < n->n_labels; j++)
        if (strcmp(n->labels[j].key, key) == 0)
            return n->labels[j].value;
    return NULL;
}
