/*
 * step_rollout.c - the rollout replica set (see steps.h), when the spec
 * splits (areal/operator/spec.h): spec->rollout_replicas servers, each one
 * data-parallel replica of the rollout component as a small gang of its own
 * (usually one pod), placed by topology over the room the trainer and the
 * other servers leave, and recorded in the controller's ledger like any plan.
 *
 * One change per pass, in this order: a failed or lost server is replaced
 * (its pods deleted; the next pass places it again - the trainer keeps
 * running); while a server's pods are stopping nothing else happens; a
 * server above the desired count goes, the highest index first (its worker
 * drains on SIGTERM); a half-made server is completed or remade; then the
 * lowest missing index is placed. A job's first placement is its trainer gang
 * and every desired server together, all or nothing (step_trainer.c: a
 * trainer bound without room for its servers would hold GPUs and wait);
 * after that, servers wait for the trainer gang to be bound. Scaling never touches the trainer and
 * never fails the job; zero means no servers, and the trainer waits for them. Rejected: a backoff
 * per server - a server that fails at once is replaced at the rate of its pod events; the Events
 * and status.rolloutReplacements make such a loop visible.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/operator/desired.h"
#include "areal/placement.h"
#include "steps.h"

static void server_delete(step_ctx *c, const step_server *sv) {
    step_delete_pods(c, &c->server_pods[sv->first], sv->n_pods, false);
}

static void set_ready(step_ctx *c, bool ok, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void set_ready(step_ctx *c, bool ok, const char *reason, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (step_condition(c, "RolloutReady", ok, reason, msg) && !ok &&
        strcmp(reason, "Unschedulable") == 0)
        step_event(c, true, "RolloutUnschedulable", "%s", msg);
}

int step_rollout_plan(step_ctx *c, int index, const areal_cluster *cluster, areal_plan *plan,
                      areal_error *err) {
    const job_spec *s = c->spec;
    areal_job job;
    if (job_spec_placement(s, c->in->job, &s->server, &job, err) != AREAL_OK)
        return AREAL_EINVAL;
    areal_error perr;
    int rc = areal_place(&job, cluster, plan, &perr);
    if (rc == AREAL_OK && (rc = desired_plan_fits(c->in->job, &s->shape, plan, cluster, &c->in->cfg,
                                                  &perr)) != AREAL_OK)
        areal_plan_free(plan); /* per-pod CPU/memory the planner does not count */
    if (rc != AREAL_OK)
        return areal_error_set(err, rc, -1, "rollout server %d: %s", index, perr.msg);
    /* the planner names the pods of a one-server plan 0..k-1: server i has i*k..i*k+k-1 */
    for (int i = 0; i < plan->n_pods; i++) {
        areal_pod_plan *p = &plan->pods[i];
        p->index = index * plan->n_pods + i;
        snprintf(p->name, sizeof p->name, "%s-%s-%d", s->name, s->rollout_role, p->index);
        if (desired_check_name(p->name, "pod", s->name, err) != AREAL_OK) {
            areal_plan_free(plan);
            return AREAL_EINVAL;
        }
    }
    return AREAL_OK;
}

bool step_rollout_create(step_ctx *c, const areal_plan *plan, const areal_cluster *cluster) {
    desired_config dcfg = c->in->cfg;
    dcfg.master_pod = c->spec->master_pod; /* MASTER_ADDR: the trainer's rank 0 */
    char server[16];
    snprintf(server, sizeof server, "%d", plan->n_pods ? plan->pods[0].index / plan->n_pods : 0);
    dcfg.server_index = server;
    if (!step_create_pods(c, &c->spec->shape, plan, cluster, NULL, &dcfg))
        return false;
    step_write_placement(c, plan, cluster);
    return true;
}

/* Places server `index` and creates then binds its pods. */
static void add_server(step_ctx *c, int index) {
    if (c->in->queued_behind != NULL) {
        /* spec.priority: no new GPUs while a job ranked first waits for them */
        set_ready(c, false, "Queued",
                  "rollout server %d waits: job %s ranks first for GPUs (spec.priority)", index,
                  c->in->queued_behind);
        c->out->queued = true;
        return;
    }
    areal_cluster cluster;
    if (!step_cluster_with_own(c, true, true, &cluster)) {
        c->oom = true;
        return;
    }
    areal_plan plan;
    areal_error perr;
    int rc = step_rollout_plan(c, index, &cluster, &plan, &perr);
    if (rc == AREAL_ENOMEM)
        c->oom = true;
    else if (rc != AREAL_OK)
        set_ready(c, false, rc == AREAL_ENOFIT ? "Unschedulable" : "InvalidSpec", "%s", perr.msg);
    else if (step_rollout_create(c, &plan, &cluster) && step_bind_pods(c, &plan, &cluster))
        step_event(c, false, "RolloutServerAdded", "rollout server %d placed on %s (%ld GPUs)",
                   index, cluster.nodes[plan.pods[0].node].name, plan.gpus);
    if (rc == AREAL_OK)
        areal_plan_free(&plan);
    step_cluster_free(&cluster);
}

/* A server whose pods all exist, some unbound, each with its planned node:
 * binds the rest. False when it cannot (a pod without a plan, or missing, or
 * its planned node no longer has the room: `room` is the cluster with this
 * job's bound pods and the servers bound before it this pass counted). Its
 * plan was made by an earlier pass - maybe by an operator before a restart,
 * whose ledger claims are gone - and other jobs may have been placed there
 * since (chaos seed 690: 8 GPUs bound on a node of 4); so the bind is checked
 * against the room free now, and a server that no longer fits is deleted and
 * planned again. Rejected: trusting the planned node (only a ledger claim
 * would make that safe, and claims do not outlive the operator). */
static bool bind_rest(step_ctx *c, const step_server *sv, areal_cluster *room) {
    if (sv->n_pods < sv->gang || !step_cluster_claim(room, &c->server_pods[sv->first], sv->n_pods))
        return false;
    int first = c->out->n_actions;
    for (int i = 0; i < sv->n_pods; i++) {
        const json_t *pod = c->server_pods[sv->first + i];
        if (step_str(pod, "spec", "nodeName") != NULL)
            continue;
        const char *node = step_annotation(pod, AREAL_ANNOTATION_NODE);
        if (node == NULL) {
            c->out->n_actions = first;
            return false;
        }
        reconcile_action *a =
            step_push(c, RECONCILE_BIND, "pods", step_str(pod, "metadata", "name"));
        if (a != NULL)
            snprintf(a->node, sizeof a->node, "%s", node);
    }
    return true;
}

void step_rollout(step_ctx *c) {
    const job_spec *s = c->spec;
    if (!s->split)
        return;
    if (c->phase != NULL && strcmp(c->phase, "Failed") == 0) {
        /* the trainer gang ran out of restarts: the job is over */
        step_delete_pods(c, c->server_pods, c->n_server_pods, false);
        return;
    }
    if (c->gang_restart)
        return; /* the servers went with the gang; they come back with it */
    int want = s->rollout_replicas, ready = 0;
    for (int i = 0; i < c->n_servers; i++)
        ready += c->servers[i].ready;
    /* 1. failures: that server only */
    for (int i = 0; i < c->n_servers; i++) {
        const step_server *sv = &c->servers[i];
        if (sv->lost_going)
            server_delete(c, sv); /* no kubelet will confirm: grace 0 */
        if (!(sv->failed || sv->lost) || sv->going)
            continue;
        server_delete(c, sv);
        if (s->restart_scope == SPEC_RESTART_GANG) {
            /* step_trainer restarts the gang for a server of this generation;
             * one it let pass is the last restart's, still in a lagging cache
             * (a Failed pod is deleted at once, without a Terminating state):
             * deleting it again is idempotent, and it is no replacement (CI's
             * f_kill_worker showed rolloutReplacements 1 under restartScope Gang) */
            continue;
        }
        long long n = json_integer_value(json_object_get(c->status, "rolloutReplacements")) + 1;
        json_object_set_new(c->status, "rolloutReplacements", json_integer(n));
        step_event(c, true, "RolloutServerFailed",
                   "rollout server %d %s; it is replaced (the trainer continues)", sv->index,
                   sv->lost ? "is lost (its node is not Ready)" : "failed");
        set_ready(c, false, "Replacing", "rollout server %d is being replaced; %d of %d ready",
                  sv->index, ready, want);
        return;
    }
    /* 2. one change at a time: wait for a stopping server to be gone */
    for (int i = 0; i < c->n_servers; i++)
        if (c->servers[i].going) {
            set_ready(c, ready == want, ready == want ? "ServersReady" : "Scaling",
                      "rollout server %d is stopping; %d of %d ready", c->servers[i].index, ready,
                      want);
            return;
        }
    /* 3. scale down: the highest index first */
    if (c->n_servers > 0 && c->servers[c->n_servers - 1].index >= want) {
        const step_server *sv = &c->servers[c->n_servers - 1];
        server_delete(c, sv);
        step_event(c, false, "RolloutServerRemoved", "rollout server %d removed (replicas %d)",
                   sv->index, want);
        set_ready(c, false, "Scaling", "removing rollout server %d; %d wanted", sv->index, want);
        return;
    }
    /* 4. half-made servers (the operator or the API server restarted mid-gang):
     * each bound whole to its planned nodes, or remade from scratch next pass
     * (a server is small) */
    int half = 0;
    areal_cluster room;
    if (!step_cluster_with_own(c, true, false, &room)) {
        c->oom = true;
        return;
    }
    for (int i = 0; i < c->n_server_pods; i++) /* only what is bound: the rest is checked */
        if (step_str(c->server_pods[i], "spec", "nodeName") != NULL)
            step_cluster_count(&room, c->server_pods[i]);
    for (int i = 0; i < c->n_servers; i++) {
        const step_server *sv = &c->servers[i];
        if (sv->bound && sv->n_pods >= sv->gang)
            continue;
        if (!bind_rest(c, sv, &room))
            server_delete(c, sv);
        half++;
    }
    step_cluster_free(&room);
    if (half > 0) {
        set_ready(c, false, "Scaling", "completing %d rollout servers", half);
        return;
    }
    /* 5. scale up: the lowest missing index, once the trainer gang is bound */
    if (c->servers_placed > 0) {
        set_ready(c, false, "Starting", "%d of %d rollout servers ready", ready, want);
        return;
    }
    if (c->n_servers < want) {
        if (!c->trainer_bound) {
            set_ready(c, false, "WaitingForTrainer",
                      "rollout servers are placed once the trainer gang is bound; %d of %d ready",
                      ready, want);
            return;
        }
        int index = 0;
        for (int i = 0; i < c->n_servers && c->servers[i].index == index; i++)
            index++;
        set_ready(c, false, "Scaling", "adding rollout server %d; %d of %d ready", index, ready,
                  want);
        add_server(c, index);
        return;
    }
    if (want == 0)
        set_ready(c, true, "ScaledToZero",
                  "spec.rollout.replicas is 0: no rollout servers; the trainer waits for them");
    else if (ready == want)
        set_ready(c, true, "ServersReady", "%d of %d rollout servers ready", ready, want);
    else
        set_ready(c, false, "Starting", "%d of %d rollout servers ready", ready, want);
}
