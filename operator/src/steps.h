/*
 * steps.h - the reconcile steps (private to the operator library).
 *
 * A pass (reconcile.c) parses the spec once (areal/operator/spec.h), sorts
 * the job's pods into the trainer gang and the rollout servers, then runs the
 * steps in order, each appending actions to the pass's list:
 *   step_cleanup  - deletion, terminal phases, a bad spec, suspension, success
 *                   (true: the pass ends there);
 *   step_trainer  - the trainer gang: plan, create, bind whole; restart it
 *                   (alone) when one of its pods fails or is lost;
 *   step_rollout  - the rollout replica set: one server added, removed or
 *                   replaced at a time, each a small gang of its own;
 *   step_containers - pods that cannot start (image pull, container config):
 *                   a condition, then Failed after spec.failurePolicy.containerErrorSeconds;
 *   step_status   - what is observed (counts, placement, defaults).
 * A step reads the typed spec, the job's pods (already selected by the job
 * label: no step looks at another job's pods) and the cluster the controller
 * built from its node cache; it never talks to the API server.
 * Rejected: one function over phase strings (it could only restart whole
 * gangs: a rollout server could never come or go alone).
 */
#ifndef AREAL_OPERATOR_STEPS_H
#define AREAL_OPERATOR_STEPS_H

#include <stdbool.h>

#include <jansson.h>

#include "areal/operator/reconcile.h"
#include "areal/operator/spec.h"

/* One rollout server: the pods of one index (pod index / pods per server). */
typedef struct step_server {
    int index;
    int n_pods, gang; /* pods seen; pods it should have (annotation areal.io/gang-size) */
    int first;        /* its pods: ctx->server_pods[first .. first + n_pods - 1] */
    bool failed, lost, going, lost_going, bound, running, ready;
} step_server;

typedef struct step_ctx {
    const job_spec *spec;
    const reconcile_input *in;
    reconcile_result *out;
    const json_t *old_status;
    json_t *status; /* being built; NULL once a step decides nothing is written */
    char now[32];
    bool oom;
    areal_error *err;

    /* the job's pods, sorted (borrowed from in->pods) */
    const json_t **trainer_pods;
    int n_trainer;
    const json_t **server_pods; /* grouped by server, servers by index */
    int n_server_pods;
    step_server *servers;
    int n_servers;

    /* what the trainer step found, for the rollout step */
    bool trainer_bound; /* the gang is whole and bound, nothing of it planned this pass */
    bool server_failed; /* a server failed or was lost (restartScope Gang restarts the gang) */
    int servers_placed; /* servers the trainer step placed with its gang this pass */
    bool gang_restart;  /* restartScope Gang: the trainer step deleted every server too */
    const char *phase;  /* the phase this pass writes */
} step_ctx;

bool step_cleanup(step_ctx *c);
void step_trainer(step_ctx *c);
void step_rollout(step_ctx *c);
void step_containers(step_ctx *c);
void step_status(step_ctx *c);

/* ---- helpers shared by the steps (step_util.c) ---------------------------- */

const char *step_str(const json_t *obj, const char *a, const char *b);
long long step_int(const json_t *obj, const char *a, const char *b, long long dflt);
const char *step_annotation(const json_t *pod, const char *key);
const char *step_label(const json_t *pod, const char *key);
long long step_parse_time(const char *s);

reconcile_action *step_push(step_ctx *c, reconcile_action_kind kind, const char *resource,
                            const char *name);
void step_event(step_ctx *c, bool warning, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const json_t *step_old_condition(const step_ctx *c, const char *type);
/* Sets condition `type`; true on a transition (status or reason changed).
 * A NULL message keeps the old one (or says `reason`). */
bool step_condition(step_ctx *c, const char *type, bool ok, const char *reason,
                    const char *message);
void step_phase(step_ctx *c, const char *phase);
const char *step_old_phase(const step_ctx *c);

bool step_pod_terminated(const json_t *pod);
bool step_pod_going(const json_t *pod);
bool step_pod_ready(const json_t *pod);
int step_pod_exit_code(const json_t *pod);
/* ms the pod's node has not been Ready, or -1 (Ready, or not bound). */
long long step_down_for_ms(const step_ctx *c, const json_t *pod);
bool step_pod_lost(const step_ctx *c, const json_t *pod);
/* Deletes pods (a lost one with grace 0; one already going is left, unless lost). */
void step_delete_pods(step_ctx *c, const json_t *const *pods, int n, bool keep_finished);

/* A shallow copy of in->cluster (strings shared; free with step_cluster_free)
 * with the room of the job's own unfinished pods counted: the trainer's when
 * `trainer`, the servers' when `servers` (the controller counts only other
 * jobs' pods, so that a gang replans over its own). */
bool step_cluster_with_own(const step_ctx *c, bool trainer, bool servers, areal_cluster *out);
void step_cluster_free(areal_cluster *c);

/* Appends plan entries (pod, node, role, ranks) to status.placement.pods and
 * the plan's quality (keys "<role>/<kind>") to status.placement.quality. */
void step_write_placement(step_ctx *c, const areal_plan *plan, const areal_cluster *cluster);

/* Creates every pod of `plan` not in `exists` (NULL: none); `dcfg` is the
 * desired config for these pods. False when out of memory (c->oom set). */
bool step_create_pods(step_ctx *c, const areal_alloc *shape, const areal_plan *plan,
                      const areal_cluster *cluster, const bool *exists, const desired_config *dcfg);
/* Binds every pod of `plan` to its node. Callers bind only after every create
 * of the pass (the controller applies runs in order): a gang is bound whole
 * or not at all. */
bool step_bind_pods(step_ctx *c, const areal_plan *plan, const areal_cluster *cluster);
/* Counts the GPUs, CPU and memory the pods of `plan` will request as used
 * in `cl` (a copy made by step_cluster_with_own); c->oom when out of memory. */
void step_cluster_take(step_ctx *c, areal_cluster *cl, const areal_plan *plan);
/* Counts unfinished pod `pod` (bound, or created with its planned node) as using room in `cl`. */
void step_cluster_count(areal_cluster *cl, const json_t *pod);
/* The unbound pods of `pods` (n) with a planned node, checked against the
 * room `cl` says is free there (GPUs, CPU, memory) before they are bound:
 * true and their room taken when every one fits; false and `cl` unchanged
 * when one does not, has no planned node, or the planned node is not in `cl`
 * (or when out of memory: not binding is the safe answer). */
bool step_cluster_claim(areal_cluster *cl, const json_t *const *pods, int n);

/* ---- the rollout servers placed with the trainer gang (step_rollout.c) ---- */

/* Plans rollout server `index` on `cluster` (pods renamed to the server's
 * indices). AREAL_OK, AREAL_ENOFIT (message in err, naming the server),
 * AREAL_EINVAL (a bad override or name), AREAL_ENOMEM. */
int step_rollout_plan(step_ctx *c, int index, const areal_cluster *cluster, areal_plan *plan,
                      areal_error *err);
/* Creates the pods of server plan `plan` (binds are the caller's, after every create). */
bool step_rollout_create(step_ctx *c, const areal_plan *plan, const areal_cluster *cluster);

#endif
