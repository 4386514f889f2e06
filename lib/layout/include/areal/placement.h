/*
 * placement.h - gang placement of a whole job by parallel-group topology.
 *
 * Input: a parsed allocation (its components are the job's roles), the
 * topology levels (node labels, innermost first), locality rules, per-role
 * resources and a cluster inventory. Output: the pods of every role, each a
 * slice of consecutive ranks on one node, and the node of every pod - or a
 * precise reason the job cannot be placed, naming the role, the group kind and
 * the topology level. Gang semantics: every pod of every role is placed, or the
 * plan is empty.
 *
 * Rank order inside a role: training roles use Megatron's "tp-cp-ep-dp-pp"
 * (areal/groups.h); inference roles number ranks server by server
 * (rank = server * t*p + stage * t + tp_rank), so one server is a run of
 * consecutive ranks and can be one pod.
 *
 * Objective, in order: TP (and where it fits, TP x CP) groups inside a node -
 * guaranteed by the pod size; EP groups, then PP groups, inside the lowest
 * shared topology level; DP outward; best fit to limit fragmentation of partly
 * used nodes and domains. The same input always gives the same plan.
 */
#ifndef AREAL_PLACEMENT_H
#define AREAL_PLACEMENT_H

#include <stdbool.h>

#include "areal/alloc.h"
#include "areal/cluster.h"
#include "areal/error.h"
#include "areal/groups.h"

#define AREAL_TOPO_MAX_LEVELS 6
#define AREAL_TOPO_KEY_MAX    128
#define AREAL_TOPO_NAME_MAX   32
#define AREAL_MAX_RULES       8
#define AREAL_MAX_SELECTORS   8
#define AREAL_MAX_TOLERATIONS 8

/*
 * Topology levels above the node, innermost first; each is a node label. Level
 * index 0 in plans and reports is the node itself; level i (1..n_levels) is
 * level_key[i-1]. A node without the label forms a domain of its own at that
 * level (unknown locality is never assumed to be shared).
 */
typedef struct areal_topology {
    int n_levels;
    char key[AREAL_TOPO_MAX_LEVELS][AREAL_TOPO_KEY_MAX];
    char name[AREAL_TOPO_MAX_LEVELS][AREAL_TOPO_NAME_MAX];
} areal_topology;

/* clique (nvidia.com/gpu.clique), leaf, spine (network.topology.nvidia.com/...), zone. */
void areal_topology_default(areal_topology *t);

/* Level index (0 = node) of a level given by short name or label key, or -1. */
int areal_topology_level(const areal_topology *t, const char *name_or_key);

/* Short name of level i (0 = "node"). */
const char *areal_topology_level_name(const areal_topology *t, int level);

typedef enum areal_topo_mode {
    AREAL_TOPO_PREFERRED, /* best effort, reported in quality */
    AREAL_TOPO_REQUIRED,  /* the job is not placed unless every group of the kind complies */
} areal_topo_mode;

/* "every group of `kind` lies within one domain of `level`". */
typedef struct areal_locality_rule {
    areal_group_kind kind;
    int level;
    areal_topo_mode mode;
} areal_locality_rule;

typedef struct areal_selector {
    char key[AREAL_TOPO_KEY_MAX];
    char value[AREAL_TOPO_KEY_MAX];
} areal_selector;

typedef struct areal_toleration {
    char key[AREAL_TOPO_KEY_MAX]; /* "" with exists = all taints */
    char value[AREAL_TOPO_KEY_MAX];
    char effect[24]; /* "" = every effect */
    bool exists;     /* operator Exists (value ignored) */
} areal_toleration;

/* Per-role resources and constraints; zero values mean "not constrained". */
typedef struct areal_role_resources {
    long cpu_milli_per_gpu;
    long long mem_bytes_per_gpu;
    int n_selectors;
    areal_selector selectors[AREAL_MAX_SELECTORS];
    int n_tolerations;
    areal_toleration tolerations[AREAL_MAX_TOLERATIONS];
} areal_role_resources;

typedef struct areal_job {
    const char *name;         /* pod names are NAME-ROLE-INDEX */
    const areal_alloc *alloc; /* the roles, one per component */
    areal_topology topology;
    int n_rules;
    areal_locality_rule rules[AREAL_MAX_RULES];
    int max_pod_gpus; /* cap on GPUs in one pod; 0 = the largest node */
    areal_role_resources resources[AREAL_ALLOC_MAX_COMPONENTS]; /* by component index */
} areal_job;

/* A job with default topology, no rules, no limits. */
void areal_job_init(areal_job *job, const char *name, const areal_alloc *alloc);

/* Quality of one group kind of one role: how local its groups landed. */
typedef struct areal_kind_quality {
    areal_group_kind kind;
    int n_groups;
    int within[AREAL_TOPO_MAX_LEVELS + 1]; /* groups inside one domain of level l (0 = node) */
    long cross_links[AREAL_TOPO_MAX_LEVELS + 1]; /* member pairs j, j+1 crossing level l */
} areal_kind_quality;

typedef struct areal_pod_plan {
    char name[160];
    int role;       /* index into areal_plan.roles */
    int index;      /* pod index inside its role */
    int first_rank; /* the pod holds ranks first_rank .. first_rank + n_ranks - 1 */
    int n_ranks;    /* = GPUs of the pod */
    int node;       /* index into the cluster's nodes */
} areal_pod_plan;

typedef struct areal_role_plan {
    char name[AREAL_ALLOC_NAME_MAX];
    areal_backend backend;
    areal_strategy strategy;
    int world;
    bool inference;
    int colocated_with; /* role whose pods it shares, or -1 */
    int first_pod;      /* its pods: plan.pods[first_pod .. first_pod + n_pods - 1] */
    int n_pods;         /* for a colocated role: those of its anchor */
    int gpus_per_pod;
    int n_quality;
    areal_kind_quality quality[AREAL_GROUP_KIND_COUNT];
} areal_role_plan;

typedef struct areal_plan {
    int n_roles;
    areal_role_plan roles[AREAL_ALLOC_MAX_COMPONENTS];
    int n_pods;
    areal_pod_plan *pods; /* owned */
    long gpus;            /* GPUs the plan takes */
    int n_levels;         /* topology levels reported (besides the node) */
    char level_name[AREAL_TOPO_MAX_LEVELS + 1][AREAL_TOPO_NAME_MAX];
} areal_plan;

/*
 * Places `job` on `cluster`. On success fills `plan` (release with
 * areal_plan_free). Returns AREAL_ENOFIT with a reason naming the role, group
 * kind and level when the cluster cannot hold the gang, AREAL_EINVAL for a
 * job that no cluster could hold (e.g. a bad rule), AREAL_ENOMEM. On failure
 * `plan` is empty (and safe to free).
 */
int areal_place(const areal_job *job, const areal_cluster *cluster, areal_plan *plan,
                areal_error *err);

void areal_plan_free(areal_plan *plan);

/*
 * The role names areal_place gives the components of `a`, in order: the
 * component's own name, else "rollout" / "trainer" (then "rollout2", ...),
 * never one another component already uses.
 */
void areal_role_names(const areal_alloc *a, char names[][AREAL_ALLOC_NAME_MAX]);

/*
 * Rank layout of a role for group queries: fills `l` for a training role. For
 * an inference role, fills the server-major groups (tp, pp, dp) through
 * areal_role_group_ranks below.
 */
int areal_role_group_count(const areal_role_plan *r, areal_group_kind k);
int areal_role_group_size(const areal_role_plan *r, areal_group_kind k);
/* Writes group g of kind k to out; returns its size, or -1 if the kind does not apply. */
int areal_role_group_ranks(const areal_role_plan *r, areal_group_kind k, int g, int *out);
/* Kinds that apply to the role (all for training; tp, pp, dp for inference). */
bool areal_role_has_kind(const areal_role_plan *r, areal_group_kind k);

#endif
