/*
 * step_status.c - the last reconcile step (see steps.h): what is observed
 * from the pods this pass - ready pods, ready rollout servers (the scale
 * subresource's status.rolloutReplicas), GPUs held, the placement entries of
 * servers that still exist - and the spec's effective defaults
 * (status.defaults), so a user sees the values the operator applies.
 */
#include <string.h>

#include "areal/cluster_kube.h"
#include "areal/operator/desired.h"
#include "steps.h"

static int pod_gpus(const json_t *pod) {
    int gpus = 0;
    long long cpu, mem;
    return areal_kube_pod_requests(pod, "pod", &gpus, &cpu, &mem, NULL) == AREAL_OK ? gpus : 0;
}

/* True when this pass has an action of `kind` on pod `name`. */
static bool acted_on(const step_ctx *c, reconcile_action_kind kind, const char *name) {
    for (int i = 0; name != NULL && i < c->out->n_actions; i++) {
        const reconcile_action *a = &c->out->actions[i];
        if (a->kind == kind && strcmp(a->resource, "pods") == 0 && strcmp(a->name, name) == 0)
            return true;
    }
    return false;
}

/* True when pod `name` stays after this pass: it exists, is not going and
 * is not deleted now, or this pass creates it. */
static bool pod_present(const step_ctx *c, const char *name) {
    if (acted_on(c, RECONCILE_CREATE, name))
        return true;
    if (acted_on(c, RECONCILE_DELETE, name))
        return false;
    for (int i = 0; i < c->in->n_pods; i++) {
        const char *n = step_str(c->in->pods[i], "metadata", "name");
        if (n != NULL && strcmp(n, name) == 0)
            return !step_pod_going(c->in->pods[i]);
    }
    return false;
}

void step_status(step_ctx *c) {
    const job_spec *s = c->spec;
    int ready = 0, gpus = 0;
    for (int i = 0; i < c->in->n_pods; i++) {
        const json_t *pod = c->in->pods[i];
        ready += step_pod_ready(pod);
        if (!step_pod_terminated(pod))
            gpus += pod_gpus(pod);
    }
    for (int i = 0; i < c->out->n_actions; i++) {
        const reconcile_action *a = &c->out->actions[i];
        if (a->kind == RECONCILE_CREATE && strcmp(a->resource, "pods") == 0)
            gpus += pod_gpus(a->obj);
    }
    json_object_set_new(c->status, "readyPods", json_integer(ready));
    /* pods the job has or is making: the trainer gang's planned size and the servers' pods */
    long long n_pods = json_integer_value(json_object_get(c->status, "trainerPods"));
    for (int i = 0; i < c->n_server_pods; i++)
        n_pods += !step_pod_going(c->server_pods[i]) &&
                  !acted_on(c, RECONCILE_DELETE, step_str(c->server_pods[i], "metadata", "name"));
    for (int i = 0; s->split && i < c->out->n_actions; i++) {
        const reconcile_action *a = &c->out->actions[i];
        const char *kind = a->obj ? step_label(a->obj, AREAL_LABEL_ROLE_KIND) : NULL;
        n_pods += a->kind == RECONCILE_CREATE && kind && strcmp(kind, "rollout") == 0;
    }
    if (n_pods > 0 || json_object_get(c->old_status, "pods") != NULL)
        json_object_set_new(c->status, "pods", json_integer(n_pods));
    if (gpus > 0)
        json_object_set_new(c->status, "gpus", json_integer(gpus));
    if (s->split) {
        int servers = 0;
        for (int i = 0; i < c->n_servers; i++)
            servers += c->servers[i].ready;
        json_object_set_new(c->status, "rolloutReplicas", json_integer(servers));
        /* a server that is gone leaves the placement */
        json_t *pods = json_object_get(json_object_get(c->status, "placement"), "pods");
        for (size_t i = json_array_size(pods); i-- > 0;) {
            const json_t *e = json_array_get(pods, i);
            const char *role = step_str(e, "role", NULL), *pod = step_str(e, "pod", NULL);
            if (role && pod && strcmp(role, s->rollout_role) == 0 && !pod_present(c, pod))
                json_array_remove(pods, i);
        }
    } else if (s->valid) {
        json_object_set_new(c->status, "rolloutReplicas", json_integer(s->rollout_replicas));
    }
    if (s->valid) {
        json_t *d = job_spec_defaults_json(s);
        if (d != NULL)
            json_object_set_new(c->status, "defaults", d);
    }
}
