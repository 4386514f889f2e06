/*
 * step_trainer.c - the trainer gang (see steps.h): planned, created and bound
 * as one unit; a failed, vanished or lost pod of it restarts the gang alone
 * (same ranks, after an exponential backoff, up to maxRestarts; the worker
 * resumes from its checkpoint) while the rollout servers keep running. The
 * gang's size is observed from its pods (annotation areal.io/gang-size), so a
 * lost status write never makes a partial gang look whole. Writes the job's
 * phase: Pending, Running (every planned pod bound and running), Restarting,
 * Failed (the restart limit).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/operator/desired.h"
#include "areal/placement.h"
#include "steps.h"

/* The index in `plan` of the pod named `name`, or -1. */
static int plan_pod(const areal_plan *plan, const char *name) {
    for (int i = 0; name != NULL && i < plan->n_pods; i++)
        if (strcmp(plan->pods[i].name, name) == 0)
            return i;
    return -1;
}

static void delete_gang(step_ctx *c) {
    step_delete_pods(c, c->trainer_pods, c->n_trainer, false);
}

static void spec_failed(step_ctx *c, const char *msg) {
    step_phase(c, "Failed");
    if (step_condition(c, "Scheduled", false, "InvalidSpec", msg))
        step_event(c, true, "InvalidSpec", "%s", msg);
    delete_gang(c);
}

/*
 * Plans the gang, creates what is missing of it, then binds every pod. The
 * gang may have unbound pods already: an earlier pass created part of it and
 * was cut short (the API server or the operator restarted). They are kept
 * when the new plan has them on the nodes they were planned for (the missing
 * ones are created first, then the whole gang is bound); otherwise they are
 * deleted and the gang is planned afresh once they are gone. The plan counts
 * the rollout servers' room (they keep running across a trainer restart).
 */
static void start_gang(step_ctx *c) {
    const job_spec *s = c->spec;
    const reconcile_input *in = c->in;
    if (in->queued_behind != NULL) {
        /* spec.priority: a job ranked first waits for GPUs; this one takes none
         * (areal/operator/priority.h). A partial gang of an earlier plan goes:
         * its planned nodes would hold room the other job may need. */
        char msg[600];
        snprintf(msg, sizeof msg,
                 "waiting behind job %s, which ranks first for GPUs (spec.priority %d here)",
                 in->queued_behind, s->priority);
        step_phase(c, strcmp(step_old_phase(c), "Restarting") == 0 ? "Restarting" : "Pending");
        if (step_condition(c, "Scheduled", false, "Queued", msg))
            step_event(c, false, "Queued", "%s", msg);
        delete_gang(c);
        c->out->queued = true;
        return;
    }
    areal_error perr;
    areal_job job;
    if (job_spec_placement(s, in->job, &s->trainer, &job, &perr) != AREAL_OK) {
        spec_failed(c, perr.msg);
        return;
    }
    if (job_spec_check_cluster(s, in->cluster, &perr) != AREAL_OK) {
        step_phase(c, "Pending"); /* nodes may be labelled later: node events bring it back */
        if (step_condition(c, "Scheduled", false, "TopologyLabelMissing", perr.msg))
            step_event(c, true, "TopologyLabelMissing", "%s", perr.msg);
        return;
    }
    areal_cluster cluster;
    if (!step_cluster_with_own(c, false, true, &cluster)) {
        c->oom = true;
        return;
    }
    areal_plan plan;
    int rc = areal_place(&job, &cluster, &plan, &perr);
    if (rc == AREAL_OK &&
        (rc = desired_plan_fits(in->job, &s->shape, &plan, &cluster, &in->cfg, &perr)) != AREAL_OK)
        areal_plan_free(&plan); /* per-pod CPU/memory the planner does not count (chaos seed 387) */
    if (rc != AREAL_OK) {
        step_cluster_free(&cluster);
        if (rc == AREAL_ENOMEM) {
            c->oom = true;
            return;
        }
        /* Pending; node and pod changes enqueue the job again. */
        step_phase(c, "Pending");
        if (step_condition(c, "Scheduled", false, "Unschedulable", perr.msg))
            step_event(c, true, "Unschedulable", "%s", perr.msg);
        delete_gang(c); /* a partial gang of an earlier plan holds nothing */
        return;
    }
    for (int i = 0; i < plan.n_pods; i++)
        if (desired_check_name(plan.pods[i].name, "pod", s->name, &perr) != AREAL_OK) {
            areal_plan_free(&plan);
            step_cluster_free(&cluster);
            spec_failed(c, perr.msg);
            return;
        }
    bool *exists = calloc((size_t)plan.n_pods + 1, sizeof *exists);
    if (exists == NULL) {
        areal_plan_free(&plan);
        step_cluster_free(&cluster);
        c->oom = true;
        return;
    }
    bool consistent = true;
    for (int i = 0; i < c->n_trainer; i++) {
        const json_t *pod = c->trainer_pods[i];
        int k = plan_pod(&plan, step_str(pod, "metadata", "name"));
        const char *node = step_annotation(pod, AREAL_ANNOTATION_NODE);
        if (k < 0 || node == NULL || step_str(pod, "spec", "nodeName") != NULL ||
            strcmp(node, cluster.nodes[plan.pods[k].node].name) != 0)
            consistent = false;
        else
            exists[k] = true;
    }
    if (!consistent) {
        free(exists);
        areal_plan_free(&plan);
        step_cluster_free(&cluster);
        delete_gang(c);
        step_phase(c, "Pending");
        if (step_condition(c, "Scheduled", false, "Replanning",
                           "pods of an earlier plan do not match a new one; they are deleted and "
                           "the gang is planned again"))
            step_event(c, false, "Replanning", "deleting %d pods of an unfinished earlier plan",
                       c->n_trainer);
        return;
    }
    /* A job never placed nor restarted: a Service or ConfigMap of its name is a deleted
     * namesake's, to be taken over (controller.c adopt_child). At a gang restart they are
     * this job's, kept as they are (the restart's pass writes nothing more). */
    bool first = json_object_get(c->old_status, "placement") == NULL &&
                 json_object_get(c->old_status, "lastRestartTime") == NULL &&
                 step_int(c->old_status, "restarts", NULL, 0) == 0;
    if (!in->has_service) {
        reconcile_action *a = step_push(c, RECONCILE_CREATE, "services", s->name);
        if (a != NULL) {
            a->obj = desired_service(in->job, &in->cfg);
            a->adopt = first;
        }
    }
    if (!in->has_configmap) {
        char cm[300];
        snprintf(cm, sizeof cm, "%s-config", s->name);
        reconcile_action *a = step_push(c, RECONCILE_CREATE, "configmaps", cm);
        if (a != NULL) {
            a->obj = desired_configmap(in->job, &s->alloc, &plan, &cluster, &in->cfg);
            a->adopt = first;
        }
    }
    /* A first placement takes the desired servers along, all or nothing. */
    int n_servers = s->split && c->n_servers == 0 ? s->rollout_replicas : 0;
    areal_plan *servers = n_servers ? calloc((size_t)n_servers, sizeof *servers) : NULL;
    int planned_servers = 0;
    if (n_servers > 0 && servers == NULL)
        c->oom = true;
    step_cluster_take(c, &cluster, &plan);
    for (; planned_servers < n_servers && !c->oom; planned_servers++) {
        int src = step_rollout_plan(c, planned_servers, &cluster, &servers[planned_servers], &perr);
        if (src == AREAL_ENOMEM)
            c->oom = true;
        if (src != AREAL_OK)
            break;
        step_cluster_take(c, &cluster, &servers[planned_servers]);
    }
    if (!c->oom && planned_servers < n_servers) {
        char msg[1400];
        snprintf(
            msg, sizeof msg,
            "the trainer gang fits but not with its %d rollout servers (spec.rollout.replicas): "
            "%s",
            n_servers, perr.msg);
        for (int i = 0; i < planned_servers; i++)
            areal_plan_free(&servers[i]);
        free(servers);
        free(exists);
        areal_plan_free(&plan);
        step_cluster_free(&cluster);
        step_phase(c, "Pending");
        if (step_condition(c, "Scheduled", false, "Unschedulable", msg))
            step_event(c, true, "Unschedulable", "%s", msg);
        delete_gang(c);
        return;
    }
    /* this plan replaces the trainer's entries; the servers' stay */
    json_t *placement = json_object_get(c->status, "placement");
    json_t *old_pods = json_object_get(placement, "pods");
    json_t *kept = json_array();
    size_t ei;
    json_t *e;
    json_array_foreach(old_pods, ei, e) {
        const char *role = step_str(e, "role", NULL);
        if (s->split && role != NULL && strcmp(role, s->rollout_role) == 0)
            json_array_append(kept, e);
    }
    json_object_set_new(c->status, "placement",
                        json_pack("{s:o,s:o}", "pods", kept, "quality", json_object()));
    step_write_placement(c, &plan, &cluster);
    step_create_pods(c, &s->shape, &plan, &cluster, exists, &in->cfg);
    for (int i = 0; i < planned_servers; i++)
        step_rollout_create(c, &servers[i], &cluster);
    step_bind_pods(c, &plan, &cluster); /* every bind after every create */
    for (int i = 0; i < planned_servers; i++) {
        step_bind_pods(c, &servers[i], &cluster);
        areal_plan_free(&servers[i]);
    }
    free(servers);
    c->servers_placed = planned_servers;
    step_phase(c, "Pending");
    json_object_set_new(c->status, "trainerPods", json_integer(plan.n_pods));
    char msg[256];
    if (planned_servers > 0)
        snprintf(msg, sizeof msg,
                 "%d pods of the trainer gang bound as one gang on %ld GPUs, with %d rollout "
                 "servers",
                 plan.n_pods, plan.gpus, planned_servers);
    else
        snprintf(msg, sizeof msg, "%d pods of the trainer gang bound as one gang on %ld GPUs",
                 plan.n_pods, plan.gpus);
    if (step_condition(c, "Scheduled", true, "GangBound", msg))
        step_event(c, false, "GangBound", "%s", msg);
    free(exists);
    areal_plan_free(&plan);
    step_cluster_free(&cluster);
}

/*
 * Which generation a pod of this job belongs to, by its creation time against
 * lastRestartTime: the rule the two lagging-cache checks below share.
 * Creation times, not deletion expectations kept in the operator, because
 * they are in every pod and survive an operator restart. At second
 * resolution a pod made in the restart's own second is ambiguous: the new
 * gang's pods come at least one backoff (>= 1 s) later, so a trainer pod
 * there is the old gang's, but a server may be recreated with backoff 0, so
 * a server failure there is taken for a new one (a missed failure would
 * never restart).
 */
typedef enum {
    GEN_UNKNOWN,        /* no lastRestartTime, or the pod has no creation time */
    GEN_PREVIOUS,       /* created strictly before the last restart */
    GEN_RESTART_SECOND, /* created in the last restart's own second */
    GEN_CURRENT,        /* created after it */
} pod_gen;

static pod_gen pod_generation(const step_ctx *c, const json_t *pod) {
    long long last = step_parse_time(step_str(c->old_status, "lastRestartTime", NULL));
    long long made = step_parse_time(step_str(pod, "metadata", "creationTimestamp"));
    if (last < 0 || made < 0)
        return GEN_UNKNOWN;
    return made < last ? GEN_PREVIOUS : made == last ? GEN_RESTART_SECOND : GEN_CURRENT;
}

/*
 * True when the gang is Restarting and every pod it still sees was created no
 * later than lastRestartTime (pod_generation): those are the old gang's, seen
 * by a lagging cache. A pod without a creation time is never taken for an old
 * one.
 */
static bool old_gang_going(const step_ctx *c, const char *phase) {
    if (strcmp(phase, "Restarting") != 0 || c->n_trainer == 0)
        return false;
    for (int i = 0; i < c->n_trainer; i++) {
        pod_gen g = pod_generation(c, c->trainer_pods[i]);
        if (g != GEN_PREVIOUS && g != GEN_RESTART_SECOND)
            return false;
    }
    return true;
}

/*
 * A rollout server pod of this generation failed or was lost (restartScope
 * Gang restarts the gang for it). A failed server pod created strictly before
 * the last restart (pod_generation) is the failure that restart answered,
 * still in a lagging cache after its deletion was asked for (seen in e2e
 * f_kill_worker: one killed server counted as two restarts, the second on the
 * new gang's first pass). One created in the restart's own second and failed
 * while being deleted is the restart's doing too: the restart deleted every
 * server, and a deleted worker exits 143 (on an idle machine f_kill_worker's
 * gang was made, killed and restarted within one second, and the other
 * server's exit counted as a second restart). A server of the new generation
 * made in that second that fails on its own is not being deleted, so it still
 * counts.
 */
static bool new_server_failure(const step_ctx *c) {
    if (!c->server_failed)
        return false;
    for (int i = 0; i < c->n_server_pods; i++) {
        const json_t *pod = c->server_pods[i];
        const char *ph = step_str(pod, "status", "phase");
        bool failed = (ph && strcmp(ph, "Failed") == 0) ||
                      (step_pod_lost(c, pod) && !step_pod_going(pod) && !step_pod_terminated(pod));
        pod_gen g = pod_generation(c, pod);
        if (failed && g != GEN_PREVIOUS && !(g == GEN_RESTART_SECOND && step_pod_going(pod)))
            return true;
    }
    return false;
}

/* Why a server failed, for a restartScope Gang restart (the first failed or lost pod). */
static void server_failure(const step_ctx *c, char *why, size_t cap) {
    snprintf(why, cap, "a rollout server failed (restartScope Gang)");
    for (int i = 0; i < c->n_server_pods; i++) {
        const json_t *pod = c->server_pods[i];
        const char *ph = step_str(pod, "status", "phase");
        if (ph && strcmp(ph, "Failed") == 0) {
            snprintf(why, cap, "pod %s failed (exit code %d)", step_str(pod, "metadata", "name"),
                     step_pod_exit_code(pod));
            return;
        }
        if (!step_pod_terminated(pod) && step_pod_lost(c, pod)) {
            snprintf(why, cap, "pod %s is lost: node %s has not been Ready for %llds",
                     step_str(pod, "metadata", "name"), step_str(pod, "spec", "nodeName"),
                     step_down_for_ms(c, pod) / 1000);
            return;
        }
    }
}

/* Binds the unbound pods to their planned nodes; false when one has no plan
 * or its planned node no longer has its room. The plan is an earlier pass's
 * (maybe an operator's before a restart, whose ledger claims are gone), and
 * other jobs may have been placed there since: the binds are checked against
 * the room free now (the cluster with this job's servers and bound trainer
 * pods counted), as step_rollout.c's bind_rest does for a server (chaos seed
 * 690). Rejected: binding on trust (only a claim would make that safe). */
static bool bind_rest(step_ctx *c) {
    areal_cluster room;
    if (!step_cluster_with_own(c, false, true, &room)) {
        c->oom = true;
        return true; /* the pass is dropped (out of memory): nothing is deleted */
    }
    for (int i = 0; i < c->n_trainer; i++)
        if (step_str(c->trainer_pods[i], "spec", "nodeName") != NULL)
            step_cluster_count(&room, c->trainer_pods[i]);
    bool fits = step_cluster_claim(&room, c->trainer_pods, c->n_trainer);
    step_cluster_free(&room);
    if (!fits)
        return false;
    int first = c->out->n_actions;
    for (int i = 0; i < c->n_trainer; i++) {
        const json_t *pod = c->trainer_pods[i];
        if (step_str(pod, "spec", "nodeName") != NULL)
            continue;
        const char *node = step_annotation(pod, AREAL_ANNOTATION_NODE);
        if (node == NULL) {
            c->out->n_actions = first; /* none of them */
            return false;
        }
        reconcile_action *a =
            step_push(c, RECONCILE_BIND, "pods", step_str(pod, "metadata", "name"));
        if (a != NULL)
            snprintf(a->node, sizeof a->node, "%s", node);
    }
    return true;
}

void step_trainer(step_ctx *c) {
    const job_spec *s = c->spec;
    const char *phase = step_old_phase(c);
    if (strcmp(phase, "Failed") == 0 || strcmp(phase, "Suspended") == 0)
        phase = ""; /* a refused spec that changed since, or a resumed job: start again */
    long long restarts = step_int(c->old_status, "restarts", NULL, 0);
    long long planned = step_int(c->old_status, "trainerPods", NULL, 0);
    int bound = 0, failed = -1, terminating = 0, lost = -1, lost_terminating = 0;
    bool rescale = false;
    for (int i = 0; i < c->n_trainer; i++) {
        const json_t *pod = c->trainer_pods[i];
        const char *ph = step_str(pod, "status", "phase");
        bool going = step_pod_going(pod);
        terminating += going;
        /* A going pod on a lost node waits for a kubelet that will never
         * confirm, whatever phase it last reported: a Failed pod deleted
         * gracefully before its node died stayed Terminating forever and the
         * gang sat in Restarting (chaos seeds 174, 339). */
        bool on_lost = step_pod_lost(c, pod);
        lost_terminating += going && on_lost;
        if (on_lost && lost < 0 && !going && !step_pod_terminated(pod))
            lost = i;
        bound += step_str(pod, "spec", "nodeName") != NULL;
        if (ph && strcmp(ph, "Failed") == 0 && failed < 0)
            failed = i;
        /* a gang planned from another allocation (scaled while unsplit, or
         * changed while suspended) is replaced whole */
        const char *was = step_annotation(pod, AREAL_ANNOTATION_ALLOC);
        if (was != NULL && strcmp(was, s->canonical) != 0 && !going)
            rescale = true;
        const char *g = step_annotation(pod, AREAL_ANNOTATION_GANG);
        long long n = g ? strtoll(g, NULL, 10) : 0;
        if (n > planned && !going)
            planned = n;
    }
    if (planned > 0)
        json_object_set_new(c->status, "trainerPods", json_integer(planned));
    bool missing = planned > 0 && bound > 0 && c->n_trainer < planned;
    /* The status says Running but pods of the gang are going or all gone: a
     * failure, whoever deleted them. Found by branch op-chaos's randomized
     * test (seeds 40, 52): the restart's own status write was lost (a 409 or
     * 5xx), the next pass saw only terminating pods and waited with phase
     * Running, then found none and planned a new gang at once - the restart
     * uncounted, no backoff, and Running shown over an unbound gang. */
    bool broken_running = strcmp(phase, "Running") == 0 && (terminating > 0 || c->n_trainer == 0);
    bool gang_failed = failed >= 0 || lost >= 0 || missing || broken_running ||
                       (s->restart_scope == SPEC_RESTART_GANG && new_server_failure(c));
    c->trainer_bound = false;

    if (terminating > 0 && !broken_running) {
        /* Pods of this gang are stopping (their kubelets send SIGTERM and wait
         * out the grace period; a stopped pod may report Failed): that is the
         * end of the last restart, not a new failure. Act once they are gone;
         * their deletion events bring the job back. One on a lost node has no
         * kubelet to confirm: it is deleted with grace 0. */
        step_phase(c, phase[0] ? phase : "Pending");
        if (lost_terminating > 0)
            delete_gang(c);
    } else if (rescale) {
        /* Not a failure: no restart is counted; the new gang is planned once
         * the old one is gone (their deletion events bring the job back). */
        delete_gang(c);
        json_object_set_new(c->status, "trainerPods", json_integer(0));
        step_phase(c, "Pending");
        char msg[4200];
        snprintf(msg, sizeof msg, "the allocation is now %s; the gang is planned again",
                 s->canonical);
        if (step_condition(c, "Scheduled", false, "Rescaling", msg))
            step_event(c, false, "Rescaling", "%s", msg);
    } else if (old_gang_going(c, phase)) {
        /* The last restart's own pods, not yet seen going by a lagging cache:
         * the same failure, not a new one. Deleting again is idempotent.
         * Whether or not they look failed: a pass that saw the old trainer
         * still Running (its delete not yet in the cache) once called the
         * gang Running again, and the next pass, seeing it going, counted
         * "1 of 1 pods of the running gang are gone or going" as restart 2
         * (e2e f_kill_worker, 1 run in 8).
         * Rejected: deletion expectations kept in the controller (client-go's
         * ControllerExpectations): state outside the cache that an operator
         * restart loses, where creation times are in every pod. */
        step_phase(c, "Restarting");
        delete_gang(c);
    } else if (gang_failed) {
        /* One pod failed or vanished: the gang restarts, same ranks, after a backoff. */
        char why[300];
        if (failed >= 0)
            snprintf(why, sizeof why, "pod %s failed (exit code %d)",
                     step_str(c->trainer_pods[failed], "metadata", "name"),
                     step_pod_exit_code(c->trainer_pods[failed]));
        else if (lost >= 0)
            snprintf(why, sizeof why, "pod %s is lost: node %s has not been Ready for %llds",
                     step_str(c->trainer_pods[lost], "metadata", "name"),
                     step_str(c->trainer_pods[lost], "spec", "nodeName"),
                     step_down_for_ms(c, c->trainer_pods[lost]) / 1000);
        else if (missing)
            snprintf(why, sizeof why, "%d of %lld pods are gone", (int)planned - c->n_trainer,
                     planned);
        else if (broken_running)
            snprintf(why, sizeof why, "%d of %lld pods of the running gang are gone or going",
                     (int)planned - (c->n_trainer - terminating), planned);
        else
            server_failure(c, why, sizeof why);
        delete_gang(c);
        if (s->restart_scope == SPEC_RESTART_GANG) {
            /* the whole job restarts: every server goes too, and comes back with the gang */
            step_delete_pods(c, c->server_pods, c->n_server_pods, false);
            c->gang_restart = true;
        }
        if (restarts >= s->max_restarts) {
            step_phase(c, "Failed");
            char msg[400];
            snprintf(msg, sizeof msg, "%s; the gang already restarted %lld times (maxRestarts)",
                     why, restarts);
            if (step_condition(c, "Scheduled", false, "BackoffLimitExceeded", msg))
                step_event(c, true, "BackoffLimitExceeded", "%s", msg);
        } else {
            restarts++;
            json_object_set_new(c->status, "restarts", json_integer(restarts));
            json_object_set_new(c->status, "lastRestartTime", json_string(c->now));
            json_object_set_new(c->status, "trainerPods", json_integer(0));
            step_phase(c, "Restarting");
            step_condition(c, "Scheduled", false, "GangRestarting", why);
            step_event(c, true, "GangRestarting", "%s; restart %lld of %d", why, restarts,
                       s->max_restarts);
            c->out->requeue_after_ms = job_spec_backoff_ms(s, restarts);
        }
    } else if (c->n_trainer == 0) {
        long long last = step_parse_time(step_str(c->old_status, "lastRestartTime", NULL));
        long wait = last < 0 ? 0 : (long)(last + job_spec_backoff_ms(s, restarts) - c->in->now_ms);
        if (strcmp(phase, "Restarting") == 0 && wait > 0) {
            step_phase(c, "Restarting");
            step_condition(c, "Scheduled", false, "GangRestarting", "waiting for the backoff");
            c->out->requeue_after_ms = wait;
        } else {
            start_gang(c);
        }
    } else if (bound == 0 && (planned == 0 || c->n_trainer < planned)) {
        /* Part of a gang created, none of it bound (the API server or the operator
         * restarted mid-create): create the rest first, then bind it whole. */
        start_gang(c);
    } else if (bound < c->n_trainer) {
        /* Every planned pod exists but not all are bound (a crash between binds, or a
         * failed bind): bind the rest to their planned nodes; a pod without a plan
         * restarts the gang. */
        step_phase(c, "Pending");
        if (!bind_rest(c)) {
            delete_gang(c);
            step_condition(c, "Scheduled", false, "Replanning",
                           "pods without a planned node, or whose planned node has no room now");
        }
    } else {
        /* Running only with every planned pod bound and running. */
        bool all_running = c->n_trainer > 0 && c->n_trainer >= planned;
        for (int i = 0; i < c->n_trainer; i++) {
            const char *ph = step_str(c->trainer_pods[i], "status", "phase");
            all_running = all_running && ph && strcmp(ph, "Running") == 0;
        }
        c->trainer_bound = true;
        step_phase(c, all_running ? "Running" : "Pending");
        step_condition(c, "Scheduled", true, "GangBound", NULL);
        if (all_running && strcmp(phase, "Running") != 0)
            step_event(c, false, "Running", "all %d pods of the trainer gang are running",
                       c->n_trainer);
    }
}
