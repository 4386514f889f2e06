/*
 * step_containers.c - pods that cannot start their containers (see steps.h):
 * an image that cannot be pulled (ErrImagePull, ImagePullBackOff,
 * InvalidImageName, ErrImageNeverPull) or a container the kubelet cannot
 * create (CreateContainerConfigError: a missing Secret or ConfigMap key,
 * CreateContainerError). The pod stays Pending forever and the gang waits
 * on it, so the job says so at once (condition ContainerError=True, with the
 * kubelet's reason and message and the deadline) and is Failed once the
 * condition has held spec.failurePolicy.containerErrorSeconds; a spec change
 * (a new image) retries it, as for any spec failure.
 * The clock starts when the operator first sees the error (the condition's
 * lastTransitionTime), not at the pod's creation: a registry that fails for
 * a minute after an hour of running pods gets its full grace.
 * Rejected: failing at once - a registry hiccup or a Secret created just
 * after the job would then need a resubmission.
 */
#include <stdio.h>
#include <string.h>

#include "steps.h"

static bool blocking(const char *reason) {
    static const char *const known[] = {"ErrImagePull",
                                        "ImagePullBackOff",
                                        "InvalidImageName",
                                        "ErrImageNeverPull",
                                        "CreateContainerConfigError",
                                        "CreateContainerError",
                                        NULL};
    for (int i = 0; reason != NULL && known[i]; i++)
        if (strcmp(reason, known[i]) == 0)
            return true;
    return false;
}

/* The waiting state of the first container of `pod` that waits for a blocking reason. */
static const json_t *stuck(const json_t *pod) {
    static const char *const lists[] = {"initContainerStatuses", "containerStatuses"};
    for (int l = 0; l < 2; l++) {
        size_t i;
        json_t *cs;
        json_array_foreach(json_object_get(json_object_get(pod, "status"), lists[l]), i, cs) {
            const json_t *w = json_object_get(json_object_get(cs, "state"), "waiting");
            if (blocking(step_str(w, "reason", NULL)))
                return w;
        }
    }
    return NULL;
}

void step_containers(step_ctx *c) {
    if (c->phase != NULL && strcmp(c->phase, "Failed") == 0)
        return;
    const json_t *pod = NULL, *w = NULL;
    for (int i = 0; i < c->in->n_pods && w == NULL; i++)
        if (!step_pod_going(c->in->pods[i]) && (w = stuck(c->in->pods[i])) != NULL)
            pod = c->in->pods[i];
    const json_t *old = step_old_condition(c, "ContainerError");
    bool was =
        old && step_str(old, "status", NULL) && strcmp(step_str(old, "status", NULL), "True") == 0;
    if (w == NULL) {
        if (was)
            step_condition(c, "ContainerError", false, "Started", "every container started");
        return;
    }
    long long since = was ? step_parse_time(step_str(old, "lastTransitionTime", NULL)) : -1;
    if (since < 0)
        since = c->in->now_ms;
    long long deadline = since + (long long)c->spec->container_error_s * 1000;
    const char *name = step_str(pod, "metadata", "name");
    const char *reason = step_str(w, "reason", NULL), *msg = step_str(w, "message", NULL);
    char text[900], at[32];
    reconcile_format_time(deadline, at);
    if (c->in->now_ms >= deadline) {
        snprintf(text, sizeof text,
                 "pod %s could not start its container for %ds (spec.failurePolicy."
                 "containerErrorSeconds): %s: %s; fix the image or its configuration (a spec "
                 "change retries the job)",
                 name, c->spec->container_error_s, reason, msg ? msg : "");
        step_phase(c, "Failed");
        step_condition(c, "ContainerError", true, reason, text);
        if (step_condition(c, "Scheduled", false, "ContainerError", text))
            step_event(c, true, "ContainerError", "%s", text);
        step_delete_pods(c, c->in->pods, c->in->n_pods, true);
        return;
    }
    snprintf(text, sizeof text,
             "pod %s cannot start its container: %s: %s; the job fails at %s unless it starts "
             "(spec.failurePolicy.containerErrorSeconds)",
             name, reason, msg ? msg : "", at);
    if (step_condition(c, "ContainerError", true, reason, text))
        step_event(c, true, reason, "%s", text);
    long wait = (long)(deadline - c->in->now_ms) + 100;
    if (c->out->requeue_after_ms <= 0 || wait < c->out->requeue_after_ms)
        c->out->requeue_after_ms = wait;
}
