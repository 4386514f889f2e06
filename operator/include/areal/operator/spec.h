/*
 * spec.h - an AReaLJob's spec parsed, validated and defaulted once into a
 * typed struct; every reconcile step reads this, never the JSON spec.
 *
 * Parsing never fails on a bad spec: it records the first problem (the field
 * path, what is wrong and how to fix it) in `error` with a condition reason
 * (InvalidAllocation or InvalidSpec) and leaves `valid` false; the caller
 * turns that into a Failed phase with the message. Only running out of
 * memory is an error of the call itself.
 *
 * The role split: when spec.allocation has one inference component that
 * shares GPUs with nothing (no colocation either way), its data-parallel
 * replicas are rollout servers, each a small gang of its own placed one at a
 * time (`split`); the trainer gang is every other component. Otherwise (no
 * inference component, several, or a colocated one) the whole allocation is
 * one gang, as before the split. Rejected: splitting colocated rollouts too
 * - a colocated server runs on its anchor's GPUs and cannot come or go alone.
 */
#ifndef AREAL_OPERATOR_SPEC_H
#define AREAL_OPERATOR_SPEC_H

#include <stdbool.h>

#include <jansson.h>

#include "areal/alloc.h"
#include "areal/cluster.h"
#include "areal/error.h"
#include "areal/placement.h"

/* Defaults the operator applies (and shows in status.defaults). */
#define SPEC_DEFAULT_MAX_RESTARTS  3
#define SPEC_DEFAULT_BACKOFF_S     10
#define SPEC_DEFAULT_BACKOFF_MAX_S 300
/* A node NotReady this long loses its pods. Kubernetes evicts after 300 s
 * (tolerationSeconds of node.kubernetes.io/not-ready); a gang with a lost
 * member makes no progress at all, so it is replanned much sooner. */
#define SPEC_DEFAULT_NODE_LOST_S 30
/* How long a pod may sit in ErrImagePull / ImagePullBackOff /
 * CreateContainerConfigError before the job is Failed: long enough for a
 * registry hiccup or a Secret created just after the job, short enough that a
 * typo in the image does not hold GPUs for hours. */
#define SPEC_DEFAULT_CONTAINER_ERROR_S 300

typedef enum spec_restart_scope {
    SPEC_RESTART_ROLE, /* a rollout server's failure replaces that server only (default) */
    SPEC_RESTART_GANG, /* any pod's failure restarts the trainer gang and every server */
} spec_restart_scope;

typedef struct job_spec {
    const char *name, *ns; /* borrowed from the job object */
    long long generation;
    bool deleting, suspend;
    /* spec.ttlSecondsAfterFinished: seconds a Succeeded or Failed job is kept
     * (from status.completionTime) before the operator deletes it; -1: kept */
    long long ttl_s;
    int priority; /* spec.priority (default 0): order among jobs waiting for GPUs */

    bool valid;
    char reason[32];  /* when !valid: InvalidAllocation or InvalidSpec */
    char error[1200]; /* when !valid: names the field and the fix */

    areal_alloc alloc; /* spec.allocation; in the unsplit form with spec.rollout.replicas applied */
    char role_names[AREAL_ALLOC_MAX_COMPONENTS][AREAL_ALLOC_NAME_MAX]; /* of alloc */
    /* The allocation every pod is told (AREAL_ALLOCATION, annotation
     * areal.io/allocation): split, the rollout component at d1 (one server),
     * so scaling changes no pod; unsplit, alloc itself. */
    areal_alloc shape;
    char canonical[4096]; /* areal_alloc_format(shape) */

    bool split;
    int rollout_comp; /* split: index in alloc of the rollout component; else -1 */
    char rollout_role[AREAL_ALLOC_NAME_MAX];
    areal_alloc trainer;  /* the trainer gang's components (names written out) */
    areal_alloc server;   /* split: one rollout server (the rollout component at d1) */
    int rollout_replicas; /* desired servers (split: spec.rollout.replicas, else the d of
                           * the string); unsplit: the rollout dp inside the gang */
    bool replicas_given;  /* spec.rollout.replicas was set */
    char master_pod[320]; /* the trainer's rank-0 pod name */

    areal_topology topology;
    int n_rules;
    areal_locality_rule rules[AREAL_MAX_RULES];
    int rule_level_index[AREAL_MAX_RULES]; /* spec.topology.levels[i] of each rule */

    int max_restarts;
    int backoff_initial_s, backoff_max_s;
    int node_lost_s;
    int container_error_s; /* spec.failurePolicy.containerErrorSeconds */
    spec_restart_scope restart_scope;
} job_spec;

/*
 * Fills `out` from AReaLJob object `job` (borrowed; `out` points into it, so
 * it must outlive `out`). Returns AREAL_OK whether or not the spec is valid
 * (see `valid`); AREAL_EINVAL only when the job has no metadata.name.
 */
int job_spec_parse(const json_t *job, job_spec *out, areal_error *err);

/*
 * The placement request for `alloc` (spec->trainer or spec->server): the
 * spec's topology and Required rules, each role's node selectors and
 * tolerations from spec.roles. AREAL_EINVAL naming spec.roles[...] when an
 * override is malformed.
 */
int job_spec_placement(const job_spec *spec, const json_t *job, const areal_alloc *alloc,
                       areal_job *out, areal_error *err);

/*
 * Checks the spec against the nodes: a Required topology level whose label
 * no node carries would make every placement fail for a reason the planner
 * cannot name. AREAL_ENOFIT with a message naming
 * spec.topology.levels[i].label and the fix.
 */
int job_spec_check_cluster(const job_spec *spec, const areal_cluster *c, areal_error *err);

/* The effective values of the defaulted fields, for status.defaults (new reference). */
json_t *job_spec_defaults_json(const job_spec *spec);

/* Backoff before restart number `restarts` (1-based), in ms: initial * 2^(n-1), capped. */
long job_spec_backoff_ms(const job_spec *spec, long long restarts);

#endif
