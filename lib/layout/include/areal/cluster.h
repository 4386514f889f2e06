/*
 * cluster.h - a cluster inventory: the nodes a job may be placed on.
 *
 * An inventory is read from a file in either of two shapes, JSON or YAML:
 *
 *   1. The project's own small form:
 *        gpusPerNode: 8                 # default GPUs of a node that gives none
 *        nodes:
 *          - name: node-0
 *            gpus: 8                    # allocatable nvidia.com/gpu
 *            gpusUsed: 2                # already requested by other pods
 *            cpu: "64"    cpuUsed: "8"  # Kubernetes quantities
 *            memory: 512Gi memoryUsed: 64Gi
 *            labels: {network.topology.nvidia.com/leaf: rack-0}
 *            taints: [{key: k, value: v, effect: NoSchedule}]
 *            unschedulable: false
 *            ready: true
 *   2. What `kubectl get nodes -o json` prints (a NodeList), or a `List` mixing
 *      Nodes and Pods (`kubectl get nodes,pods -A -o json`): GPUs, CPU and memory
 *      requested by the non-terminated Pods bound to a node count as used.
 *
 * Ownership: an areal_cluster owns every node and string in it; release it
 * with areal_cluster_free(). The loaders leave `*c` empty on failure.
 */
#ifndef AREAL_CLUSTER_H
#define AREAL_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>

#include "areal/error.h"

typedef struct areal_label {
    char *key;
    char *value;
} areal_label;

typedef struct areal_taint {
    char *key;
    char *value;  /* "" when absent */
    char *effect; /* NoSchedule, PreferNoSchedule or NoExecute */
} areal_taint;

typedef struct areal_node {
    char *name;
    int gpus;            /* allocatable GPUs */
    int gpus_used;       /* GPUs requested by pods already on the node */
    long cpu_milli;      /* allocatable CPU in millicores; 0 = not tracked */
    long cpu_used_milli; /* CPU requested by pods already on the node */
    long long mem_bytes; /* allocatable memory; 0 = not tracked */
    long long mem_used_bytes;
    areal_label *labels;
    int n_labels;
    areal_taint *taints;
    int n_taints;
    bool unschedulable;
    bool ready;
} areal_node;

typedef struct areal_cluster {
    areal_node *nodes;
    int n_nodes;
    int cap_nodes;
} areal_cluster;

/* An empty inventory. */
void areal_cluster_init(areal_cluster *c);

/* Frees every node and string; leaves `c` empty and reusable. */
void areal_cluster_free(areal_cluster *c);

/*
 * Appends a ready, schedulable node with `gpus` GPUs of which `gpus_used` are
 * taken. Returns its index, or AREAL_ENOMEM / AREAL_EINVAL (negative counts,
 * used > gpus, empty name). Duplicate names are not checked here.
 */
int areal_cluster_add_node(areal_cluster *c, const char *name, int gpus, int gpus_used,
                           areal_error *err);

/* Sets label `key` of node `i` to `value` (replacing an earlier value). */
int areal_cluster_set_label(areal_cluster *c, int i, const char *key, const char *value,
                            areal_error *err);

/* Adds a taint to node `i`. */
int areal_cluster_add_taint(areal_cluster *c, int i, const char *key, const char *value,
                            const char *effect, areal_error *err);

/* Frees the nodes from index `n` on, keeping the first `n`. */
void areal_cluster_truncate(areal_cluster *c, int n);

/* The value of label `key` on `n`, or NULL. */
const char *areal_node_label(const areal_node *n, const char *key);

/*
 * Reads an inventory from `text` (`len` bytes, JSON or YAML; the shape is
 * detected: text that opens with '[', or '{' and a quoted key, is JSON; YAML
 * in flow style, {nodes: [...]}, is YAML). `default_gpus` (> 0) is the GPU
 * count of nodes that give none, unless the file's gpusPerNode says otherwise.
 * `source` names the input in messages (a file name). On failure `*c` is left
 * empty.
 */
int areal_cluster_parse(const char *text, size_t len, const char *source, int default_gpus,
                        areal_cluster *c, areal_error *err);

/* Reads the file at `path` and parses it as above; AREAL_EIO when unreadable. */
int areal_cluster_load_file(const char *path, int default_gpus, areal_cluster *c, areal_error *err);

/*
 * Parses a Kubernetes quantity ("8", "500m", "64Gi", "1.5", "2e3") into units
 * scaled by `scale` (1000 for CPU millicores, 1 for bytes and counts), rounding
 * up like Kubernetes does. AREAL_EINVAL for malformed or negative quantities,
 * AREAL_ERANGE past 2^62.
 */
int areal_quantity_parse(const char *s, long long scale, long long *out);

#endif
