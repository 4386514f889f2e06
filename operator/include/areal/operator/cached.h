/*
 * cached.h - the compact forms in which the operator's informer caches keep
 * Pods and Nodes: only the fields that reconcile and placement read, as one
 * allocation per object (a fixed struct followed by its strings).
 *
 * Why: 10,000 pods and 4,000 nodes kept as pruned jansson trees cost about
 * 80 MB (one hash table and one allocation per key and per value); the same
 * facts as flat structs take a few MB. Decoding of requests, quantities,
 * labels, taints and readiness is the layout library's (areal/cluster_kube.h),
 * so the caches and `arealctl plan` read objects the same way.
 * Rejected: one interning table of strings shared by all objects (label keys
 * repeat across nodes) - a shared mutable table with its own lock and
 * reference counts, for a saving of a few MB at this scale.
 *
 * Lifetime: an entry is immutable once built and reference counted (atomic),
 * so a reader that took a reference keeps a consistent object while the
 * cache replaces it. Every `const char *` points into the entry itself and is
 * NULL when the object does not have the field.
 */
#ifndef AREAL_OPERATOR_CACHED_H
#define AREAL_OPERATOR_CACHED_H

#include <stdatomic.h>
#include <stdbool.h>

#include <jansson.h>

#include "areal/cluster.h"
#include "areal/error.h"

typedef enum cached_pod_phase {
    CACHED_PHASE_NONE, /* status.phase absent */
    CACHED_PHASE_PENDING,
    CACHED_PHASE_RUNNING,
    CACHED_PHASE_SUCCEEDED,
    CACHED_PHASE_FAILED,
    CACHED_PHASE_UNKNOWN, /* "Unknown" or any other text */
} cached_pod_phase;

/* A kubelet keeps at most 4096 bytes of a termination message. */
#define CACHED_TERMINATION_MESSAGE_MAX 4096

typedef struct cached_pod {
    atomic_int refs;
    const char *ns, *name, *uid, *resource_version;
    const char *deletion_timestamp;                 /* set while the pod is being deleted */
    const char *node_name;                          /* spec.nodeName: bound */
    const char *job, *role, *pod_index, *role_kind; /* areal.io/ labels */
    const char *planned_node;                       /* annotation areal.io/planned-node */
    const char *gang_size;                          /* annotation areal.io/gang-size */
    const char *allocation;                         /* annotation areal.io/allocation */
    const char *pod_ip;                             /* status.podIP (NULL: none yet) */
    const char *creation_timestamp;                 /* metadata.creationTimestamp */
    /* The first container waiting with a reason (ErrImagePull, ImagePullBackOff,
     * CreateContainerConfigError, ...) and its message: a pod that cannot start. */
    const char *waiting_reason, *waiting_message;
    /* The master pod's first terminated container's state.terminated.message (the
     * trainer's final /status, CONTRACTS.md) when at most CACHED_TERMINATION_MESSAGE_MAX
     * bytes; NULL otherwise and on every other pod (the cache stays small). */
    const char *termination_message;
    cached_pod_phase phase;
    bool master;      /* label areal.io/master=true */
    bool ready;       /* condition Ready=True */
    int exit_code;    /* the first terminated container's exit code, or -1 */
    bool requests_ok; /* false: a request could not be read (the pod is not counted) */
    int gpus;         /* requests summed over containers (limits when not given) */
    long long cpu_milli, mem_bytes;
    /* the strings follow the struct in the same allocation */
} cached_pod;

typedef struct cached_node {
    atomic_int refs;
    const char *name, *resource_version;
    bool valid; /* false: the node could not be read; it is not offered to placement */
    bool unschedulable, ready;
    /* When not ready: ms since the epoch of the Ready condition's last
     * transition (0 when the node says nothing: not ready since long ago). */
    long long not_ready_since_ms;
    int gpus; /* allocatable */
    long cpu_milli;
    long long mem_bytes;
    int n_labels, n_taints;
    const char **labels; /* key, value pairs (2 * n_labels) */
    const char **taints; /* key, value, effect triples (3 * n_taints) */
    /* the pointer arrays, then the strings, follow in the same allocation */
} cached_node;

/* A new entry (one reference) for Pod object `pod`, or NULL when out of
 * memory or when it has no metadata.name. */
cached_pod *cached_pod_new(const json_t *pod);
cached_pod *cached_pod_retain(cached_pod *p);
void cached_pod_release(cached_pod *p); /* NULL is allowed */

/*
 * The pod as the JSON shape reconcile reads (metadata: name, namespace, uid,
 * the areal.io labels, the planned-node, gang-size and allocation annotations, deletionTimestamp;
 * creationTimestamp; spec: nodeName, one container with the requests; status: phase, the Ready
 * condition, the exit code), a new reference, or NULL when out of memory.
 */
json_t *cached_pod_to_json(const cached_pod *p);

/* A new entry for Node object `node`, or NULL when out of memory or nameless.
 * A node whose fields cannot be read is kept with valid = false. */
cached_node *cached_node_new(const json_t *node);
cached_node *cached_node_retain(cached_node *n);
void cached_node_release(cached_node *n); /* NULL is allowed */

/*
 * Appends node `n` to inventory `c` (nothing used yet). Returns its index,
 * AREAL_EINVAL for a node with valid = false, or AREAL_ENOMEM.
 */
int cached_node_add_to(const cached_node *n, areal_cluster *c, areal_error *err);

/* The value of label `key`, or NULL. */
const char *cached_node_label(const cached_node *n, const char *key);

#endif
