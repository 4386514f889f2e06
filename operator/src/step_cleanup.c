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
        step_phase(c, "Suspended");
        if (step_condition(c, "Scheduled", false, "Suspended", "spec.suspend is true"))
            step_event(c, false, "Suspended", "the job is suspended; its pods are deleted");
        delete_all(c, false);
        return true;
    }
    for (int i = 0; i < c->n_trainer; i++) {
        const char *master = step_label(c->trainer_pods[i], AREAL_LABEL_MASTER);
        const char *ph = step_str(c->trainer_pods[i], "status", "phase");
        if (master && strcmp(master, "true") == 0 && ph && strcmp(ph, "Succeeded") == 0) {
            step_phase(c, "Succeeded");
            json_object_set_new(c->status, "completionTime", json_string(c->now));
            step_condition(c, "Scheduled", true, "Completed", "the trainer finished");
            step_event(c, false, "Succeeded",
                       "the trainer's rank-0 pod succeeded; removing the others");
            delete_all(c, true);
            return true;
        }
    }
    return false;
}
