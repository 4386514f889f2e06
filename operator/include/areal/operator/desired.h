/*
 * desired.h - what an AReaLJob should own: its headless Service, its
 * ConfigMap and one Pod per planned pod, as Kubernetes objects (jansson).
 *
 * The reconciler compares these with what exists and creates what is
 * missing; the functions here are pure (same input, same output), so a
 * reconcile never takes an action twice. Every child carries an owner
 * reference to the job (controller: true), so garbage collection removes it
 * with the job, and the label areal.io/job, so informers can select them.
 *
 * Ownership: every json_t returned is a new reference the caller owns.
 * The job object is borrowed and never modified.
 */
#ifndef AREAL_OPERATOR_DESIRED_H
#define AREAL_OPERATOR_DESIRED_H

#include <jansson.h>

#include "areal/alloc.h"
#include "areal/error.h"
#include "areal/placement.h"

#define AREAL_LABEL_JOB        "areal.io/job"
#define AREAL_LABEL_ROLE       "areal.io/role"
#define AREAL_LABEL_POD_INDEX  "areal.io/pod-index"
#define AREAL_LABEL_ROLE_KIND  "areal.io/role-kind" /* "rollout" or "trainer" */
#define AREAL_LABEL_MASTER     "areal.io/master"    /* "true" on the trainer rank-0 pod */
#define AREAL_LABEL_MANAGED_BY "app.kubernetes.io/managed-by"
#define AREAL_ANNOTATION_NODE  "areal.io/planned-node"
/* The number of pods of the plan a pod belongs to: the gang's size is observed
 * from its pods, so a lost status write never makes a partial gang look whole. */
#define AREAL_ANNOTATION_GANG "areal.io/gang-size"
/* The allocation (canonical, after spec.rollout.replicas) a pod was planned
 * from: a gang of another allocation is replaced (scaling). */
#define AREAL_ANNOTATION_ALLOC "areal.io/allocation"

/* The memory-backed /dev/shm of a GPU pod: this many GiB per GPU (NCCL). */
#define DESIRED_SHM_GIB_PER_GPU 1

typedef struct desired_config {
    const char *scheduler_name; /* pods name it as their scheduler; default "areal-operator" */
    const char *default_image;  /* when the job gives none; default "areal-worker:latest" */
    int master_port;            /* the job store's port (MASTER_PORT); default 29500 */
    /* the port of a training role's own group (AREAL_TRAINER_PORT, areal/podenv.h);
     * default master_port + 1 */
    int trainer_port;
    /* Set for the pods of a plan without the trainer (a rollout server): the
     * trainer's rank-0 pod, for MASTER_ADDR; NULL: the plan's own rank 0. */
    const char *master_pod;
    /* Set for the pods of one rollout server: its index (AREAL_SERVER_INDEX). */
    const char *server_index;
} desired_config;

/*
 * The job's allocation: spec.allocation parsed, with the data-parallel size of
 * the (single) inference component replaced by spec.rollout.replicas when that
 * is set; replicas 0 removes the inference component (the trainer runs alone
 * and waits for rollout servers). AREAL_EINVAL with a message naming spec.allocation or
 * spec.rollout.replicas otherwise.
 */
int desired_job_alloc(const json_t *job, areal_alloc *out, areal_error *err);

/* The longest name Kubernetes takes for a Service or a pod's hostname. */
#define DESIRED_DNS_LABEL_MAX 63

/*
 * Checks what the API server would refuse only child by child, before any is
 * made: metadata.name must be a DNS label (the Service and every pod's
 * subdomain take it), and every spec.roles[i].name must be a role of
 * spec.allocation (as areal_role_names names them) or one of the kinds
 * "trainer" and "rollout". AREAL_EINVAL with a message naming the field.
 * (An allocation that does not parse is desired_job_alloc's to report.)
 */
int desired_job_validate(const json_t *job, areal_error *err);

/*
 * Checks that child name `child` (a "pod" hostname or the "Service") of job
 * `job` is a DNS label of at most DESIRED_DNS_LABEL_MAX characters; pod names
 * may start with a digit. AREAL_EINVAL with a message naming metadata.name
 * and by how much to shorten it.
 */
int desired_check_name(const char *child, const char *what, const char *job, areal_error *err);

/*
 * Fills the placement constraints of `job_out` (node selectors and
 * tolerations per role) from spec.roles; roles are matched by name, or by the
 * kinds "trainer" / "rollout" (a name match wins), with the role names of
 * areal_role_names. AREAL_EINVAL when an override is malformed.
 */
int desired_job_constraints(const json_t *job, const areal_alloc *alloc, areal_job *job_out,
                            areal_error *err);

/*
 * Checks that the pods of `plan` fit the CPU and memory their spec.roles
 * requests ask for on the planned nodes, over what `cluster` says is used
 * there. The planner counts GPUs (and per-GPU CPU/memory, which spec.roles
 * does not give): a per-pod request is checked here, after it. AREAL_ENOFIT
 * with a message naming the node, the resource and the amounts when a node
 * would be over-committed; AREAL_ENOMEM.
 * Rejected: turning per-pod requests into per-GPU ones for the planner - a
 * role's pods may differ in GPUs (a trainer split over nodes), so any
 * per-GPU figure over- or under-reserves some pod.
 */
int desired_plan_fits(const json_t *job, const areal_alloc *alloc, const areal_plan *plan,
                      const areal_cluster *cluster, const desired_config *cfg, areal_error *err);

/* The headless Service "<job>" (publishNotReadyAddresses, the rendezvous port). */
json_t *desired_service(const json_t *job, const desired_config *cfg);

/*
 * spec.config as the trainer reads it (config.json; new reference, NULL when
 * out of memory): recover.mode defaults to "auto" (AReaL's: resume from the
 * latest checkpoint under the job directory when there is one, else start
 * fresh), so a trainer gang planned again - resumed after spec.suspend, or
 * restarted after a failure - continues from its checkpoint, and a new job
 * starts at step 0. A mode the user set ("disabled") is kept. Because the
 * checkpoint is found by directory, a new job reusing an old job's directory
 * resumes that job's run: give each job its own directory.
 * Rejected: the operator passing --resume only to a gang that ran before -
 * it cannot know whether a checkpoint was written, and the trainer can.
 */
json_t *desired_trainer_config(const json_t *config);

/* The ConfigMap "<job>-config": allocation, spec.config as config.json (see
 * desired_trainer_config), the plan. */
json_t *desired_configmap(const json_t *job, const areal_alloc *alloc, const areal_plan *plan,
                          const areal_cluster *cluster, const desired_config *cfg);

/*
 * The Pod of plan.pods[pod]: name, labels, owner reference, the planned node
 * and the gang's size as annotations (binding happens separately, for the whole gang), the
 * worker container with the environment of areal/podenv.h, GPU limits, the
 * role's overrides, the config volume, and a memory-backed /dev/shm of
 * DESIRED_SHM_GIB_PER_GPU GiB per GPU unless an override mounts its own
 * there. NULL and `err` set on failure.
 */
json_t *desired_pod(const json_t *job, const areal_alloc *alloc, const areal_plan *plan,
                    const areal_cluster *cluster, int pod, const desired_config *cfg,
                    areal_error *err);

#endif
