/*
 * step_cleanup.c - the first reconcile step (see steps.h): the ends of a
 * job's life, where every pod goes whatever its role - deletion (the pods,
 * then the finalizer), a terminal phase, a spec that cannot run, suspension,
 * and the trainer's success. Returns true when the pass ends here.
 */
#include <stdio.h>
#include <string.h>

#include "areal/operator/desired.h"
#include "steps.h"

static bool has_finalizer(const json_t *job) {
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(json_object_get(job, "metadata"), "finalizers"), i, f) {
        if (json_is_string(f) && strcmp(json_string_value(f), AREAL_FINALIZER) == 0)
            return true;
    }
    return false;
}

/* metadata.finalizers without ours (remove) or with it (add), as a merge patch. */
static void patch_finalizers(step_ctx *c, bool add) {
    json_t *list = json_array();
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(json_object_get(c->in->job, "metadata"), "finalizers"), i,
                       f) {
        if (!(json_is_string(f) && strcmp(json_string_value(f), AREAL_FINALIZER) == 0))
            json_array_append(list, f);
    }
    if (add)
        json_array_append_new(list, json_string(AREAL_FINALIZER));
    reconcile_action *a = step_push(c, RECONCILE_PATCH_JOB, "arealjobs", c->spec->name);
    if (a == NULL) {
        json_decref(list);
        return;
    }
    a->obj = json_pack("{s:{s:o}}", "metadata", "finalizers", list);
}

static void delete_all(step_ctx *c, bool keep_finished) {
    step_delete_pods(c, c->in->pods, c->in->n_pods, keep_finished);
}

/* A failure of the spec itself is retried once the spec changes. */
static bool spec_failure_retried(const step_ctx *c) {
    const json_t *sched = step_old_condition(c, "Scheduled");
    const char *reason = step_str(sched, "reason", NULL);
    bool spec_failure =
        reason &&
        (strcmp(reason, "ChildRejected") == 0 || strcmp(reason, "InvalidSpec") == 0 ||
         strcmp(reason, "InvalidAllocation") == 0 || strcmp(reason, "ContainerError") == 0);
    return spec_failure && step_int(sched, "observedGeneration", NULL, -1) != c->spec->generation;
}

/*
 * spec.ttlSecondsAfterFinished: the finished job is deleted (with its
 * children, by their ownerReferences) that long after status.completionTime,
 * else looked at again then. From the stored status, not a timer, so an
 * operator restart (whose first list enqueues every job) loses nothing.
 */
static void expire(step_ctx *c) {
    if (c->spec->ttl_s < 0)
        return;
    long long done = step_parse_time(step_str(c->status, "completionTime", NULL));
    if (done < 0)
        return; /* step_phase has just set it: never the case */
    long long left = done + c->spec->ttl_s * 1000 - c->in->now_ms;
    if (left > 0) {
        /* + 100 ms: completionTime has second resolution, and waking early would
         * only schedule the same wait again */
        long wait = (long)(left + 100);
        if (c->out->requeue_after_ms <= 0 || wait < c->out->requeue_after_ms)
            c->out->requeue_after_ms = wait;
        return;
    }
    reconcile_action *a = step_push(c, RECONCILE_DELETE, "arealjobs", c->spec->name);
    if (a == NULL)
        return;
    const char *uid = step_str(c->in->job, "metadata", "uid");
    snprintf(a->uid, sizeof a->uid, "%s",
             uid ? uid : ""); /* never a job made again under the name */
    step_event(c, false, "Expired",
               "deleting the job %lld s after it finished (spec.ttlSecondsAfterFinished)",
               c->spec->ttl_s);
    json_decref(c->status);
    c->status = NULL; /* the job goes: nothing to write */
}

/*
 * spec.suspend: every pod goes with its grace period (the trainer saves a
 * checkpoint into its job directory on SIGTERM), the job stays with its
 * progress. The room it held is free for others at once: a decision without
 * binds drops the job's ledger claims, and the pods' GPUs count until the
 * pods are gone. Nothing of the old plan is kept: resuming plans again (the
 * allocation or topology may have changed meanwhile).
 */
static void suspend(step_ctx *c) {
    step_phase(c, "Suspended");
    step_condition(c, "Scheduled", false, "Suspended", "spec.suspend is true");
    if (step_condition(c, "Suspended", true, "Suspended", "spec.suspend is true"))
        step_event(c, false, "Suspended",
                   "the job is suspended: its %d pods are deleted (the trainer checkpoints on "
                   "SIGTERM); it resumes when spec.suspend is false",
                   c->in->n_pods);
    delete_all(c, false);
    json_object_set_new(c->status, "trainerPods", json_integer(0));
    json_object_del(c->status, "placement");
    json_object_set_new(c->status, "gpus", json_integer(0)); /* step_status: the pods still going */
}

bool step_cleanup(step_ctx *c) {
    const job_spec *s = c->spec;
    if (s->deleting) {
        delete_all(c, false);
        if (has_finalizer(c->in->job))
            patch_finalizers(c, false);
        json_decref(c->status);
        c->status = NULL; /* the job goes: nothing to write */
        return true;
    }
    if (!has_finalizer(c->in->job))
        patch_finalizers(c, true);
    const char *phase = step_old_phase(c);
    bool terminal = strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0;
    if (terminal && !(strcmp(phase, "Failed") == 0 && spec_failure_retried(c))) {
        step_phase(c, phase); /* only clean up what still runs */
        delete_all(c, true);
        expire(c);
        return true;
    }
    if (!s->valid) {
        step_phase(c, "Failed");
        if (step_condition(c, "Scheduled", false, s->reason, s->error))
            step_event(c, true, s->reason, "%s", s->error);
        delete_all(c, false);
        return true;
    }
    if (s->suspend) {
        suspend(c);
        return true;
    }
    if (strcmp(phase, "Suspended") == 0 &&
        step_condition(c, "Suspended", false, "Resumed", "spec.suspend is false"))
        step_event(c, false, "Resumed",
                   "the job is resumed: its gang is planned again and the trainer continues "
                   "from its latest checkpoint");
    for (int i = 0; i < c->n_trainer; i++) {
        const char *master = step_label(c->trainer_pods[i], AREAL_LABEL_MASTER);
        const char *ph = step_str(c->trainer_pods[i], "status", "phase");
        /* A pod the operator deleted (suspend, a restart) stops on SIGTERM after
         * its checkpoint and may exit 0: that is not the end of the training. */
        if (master && strcmp(master, "true") == 0 && ph && strcmp(ph, "Succeeded") == 0 &&
            !step_pod_going(c->trainer_pods[i])) {
            step_phase(c, "Succeeded");
            step_condition(c, "Scheduled", true, "Completed", "the trainer finished");
            step_event(c, false, "Succeeded",
                       "the trainer's rank-0 pod succeeded; removing the others");
            delete_all(c, true);
            return true;
        }
    }
    return false;
}
