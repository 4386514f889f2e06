/*
 * reconcile.h - the operator's decision for one AReaLJob, as a pure function.
 *
 * Input: the job, its pods, whether its Service and ConfigMap exist, and the
 * cluster (nodes, with the GPUs used by every pod that is not the job's).
 * Output: the actions to take (create, bind, delete, patch the job, record an
 * event), the status to write, and when to look again. Level-triggered: the
 * same input always gives the same actions, and applying them moves the
 * world to a state whose reconcile asks for nothing more, so a crash between
 * two actions is repaired by the next pass; nothing is done twice.
 *
 * Lifecycle: no pods -> plan the gang (AREAL_ENOFIT: Pending with the
 * planner's reason, retried when nodes or pods change) -> create Service,
 * ConfigMap and every pod, then bind every pod to its planned node ->
 * Running. A failed or vanished pod, or one on a node that has not been
 * Ready for spec.failurePolicy.nodeLostSeconds, restarts the whole gang (delete, then
 * recreate the same ranks) after an exponential backoff, up to
 * spec.failurePolicy.maxRestarts, then Failed. The trainer's rank-0 pod
 * Succeeded -> Succeeded, and the remaining pods are removed. Deletion removes
 * the pods, then the finalizer. spec.suspend: every pod is deleted with its
 * grace period (the trainer checkpoints on SIGTERM), phase Suspended, the job
 * kept with status.progress; suspend false plans the gang again from the
 * spec as it is then (the trainer resumes from its checkpoint: recover.mode
 * auto, desired.h). spec.ttlSecondsAfterFinished: a Succeeded or Failed job
 * is deleted that long after status.completionTime (requeued for then, so an
 * operator restart loses nothing).
 */
#ifndef AREAL_OPERATOR_RECONCILE_H
#define AREAL_OPERATOR_RECONCILE_H

#include <stdbool.h>

#include <jansson.h>

#include "areal/cluster.h"
#include "areal/error.h"
#include "areal/operator/desired.h"

#define AREAL_FINALIZER "areal.io/cleanup"

typedef enum reconcile_action_kind {
    RECONCILE_CREATE,    /* create `obj` in `resource` */
    RECONCILE_DELETE,    /* delete `name` of `resource` (precondition `uid` when set;
                          * `force`: grace period 0, for a pod no kubelet will confirm) */
    RECONCILE_BIND,      /* bind pod `name` to `node` (pods/binding) */
    RECONCILE_PATCH_JOB, /* merge-patch the job with `obj` */
    RECONCILE_EVENT,     /* record an Event on the job: `reason`, `message`, `warning` */
} reconcile_action_kind;

typedef struct reconcile_action {
    reconcile_action_kind kind;
    const char *resource; /* "pods", "services", "configmaps", "arealjobs" */
    char name[256];
    char node[256];
    char uid[64];
    json_t *obj; /* owned */
    char reason[64];
    char message[512];
    bool warning;
    bool force;
    /* a create that finds the object (409) takes it over (merge patch) instead of taking it as
     * done: the job's Service and ConfigMap at its first placement (controller.c adopt_child) */
    bool adopt;
} reconcile_action;

/* A node that is not Ready, or that a pod names but the cluster lacks. */
typedef struct reconcile_down_node {
    const char *name;
    long long since_ms; /* not ready since (ms since the epoch; 0: unknown, long ago) */
} reconcile_down_node;

typedef struct reconcile_result {
    reconcile_action *actions; /* owned, in the order to apply them */
    int n_actions;
    int cap_actions;
    json_t *status;        /* the status to write; NULL when it is unchanged */
    long requeue_after_ms; /* > 0: reconcile again after this long */
    /* The pass wanted GPUs and did not take them: in->queued_behind ranks
     * first (the controller looks again when that job changes) */
    bool queued;
} reconcile_result;

typedef struct reconcile_input {
    const json_t *job;
    const json_t *const *pods; /* the job's pods (label areal.io/job=<name>) */
    int n_pods;
    bool has_service;
    bool has_configmap;
    const areal_cluster *cluster; /* GPUs used by pods other than the job's */
    /* Nodes not Ready (or gone): a pod on one for longer than
     * spec.failurePolicy.nodeLostSeconds (default 30) is lost - failed, and
     * deleted with grace 0 since no kubelet will confirm. */
    const reconcile_down_node *down;
    int n_down;
    long long now_ms; /* wall clock (ms since the epoch) */
    desired_config cfg;
    /* "namespace/name (priority P)" of a job of higher spec.priority waiting
     * for GPUs (areal/operator/priority.h), or NULL. Set, this job takes no
     * GPUs it does not hold: no trainer gang is planned, no rollout server
     * added or replaced; it waits with Scheduled=False reason Queued. */
    const char *queued_behind;
} reconcile_input;

/* Decides; `out` is filled (free with reconcile_result_free) unless it fails. */
int reconcile_job(const reconcile_input *in, reconcile_result *out, areal_error *err);

void reconcile_result_free(reconcile_result *r);

/*
 * The decision when the API server refused a child of the job for good (HTTP
 * 400 or 422 on a create or bind: an invalid name, env var or volume): phase
 * Failed, condition Scheduled=False with reason
 * ChildRejected and `message` (the API's own words, which name the field),
 * and a warning Event. Nothing is retried until the job's spec changes
 * (metadata.generation moves past the condition's observedGeneration); the
 * next reconcile meanwhile only removes the pods the gang left. `out` is
 * filled as by reconcile_job (free with reconcile_result_free).
 */
int reconcile_rejected(const reconcile_input *in, const char *message, reconcile_result *out,
                       areal_error *err);

/*
 * The decision when the API server refused a create or bind as Forbidden
 * (HTTP 403: the operator's RBAC, not the spec): condition Scheduled=False
 * with reason Forbidden and `message` (the API's words and the retry), and a
 * warning Event, as reconcile_rejected; but the phase stays what it was
 * (Pending for a new job), because the controller tries again on a slow
 * backoff (areal/operator/forbidden.h) and a fixed rule heals the job.
 */
int reconcile_forbidden(const reconcile_input *in, const char *message, reconcile_result *out,
                        areal_error *err);

/* True when a failed API write of HTTP `http_status` will not succeed on a
 * retry of the same request (400, 403, 422); others (409, 429, 5xx, no
 * answer) are transient. */
bool reconcile_error_is_permanent(int http_status);

/* RFC 3339 UTC text of `ms` since the epoch ("2026-11-29T19:53:53Z"). */
void reconcile_format_time(long long ms, char buf[32]);

#endif
