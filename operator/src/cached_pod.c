/*
 * cached_pod.c - a Pod in the compact form of areal/operator/cached.h.
 *
 * How: one function reads the object and "packs" every kept string; it runs
 * twice, first only adding up the bytes the strings need, then copying them
 * behind the struct of a single allocation, so an entry is one malloc and
 * never holds a pointer out of itself. Requests are decoded once here by the
 * layout library (areal_kube_pod_requests) instead of on every reconcile.
 * Rejected: keeping the requests as text and decoding them per reconcile
 * (10,000 quantity parses per pass for the other tenants' pods).
 */
#include "areal/operator/cached.h"

#include <stdlib.h>
#include <string.h>

#include "areal/cluster_kube.h"
#include "areal/operator/desired.h"
#include "cached_pack.h"

static const char *str2(const json_t *o, const char *a, const char *b) {
    return json_string_value(json_object_get(json_object_get(o, a), b));
}

static cached_pod_phase phase_of(const char *s) {
    static const struct {
        const char *text;
        cached_pod_phase phase;
    } known[] = {{"Pending", CACHED_PHASE_PENDING},
                 {"Running", CACHED_PHASE_RUNNING},
                 {"Succeeded", CACHED_PHASE_SUCCEEDED},
                 {"Failed", CACHED_PHASE_FAILED}};
    if (s == NULL)
        return CACHED_PHASE_NONE;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(s, known[i].text) == 0)
            return known[i].phase;
    return CACHED_PHASE_UNKNOWN;
}

static const char *const phase_text[] = {NULL,        "Pending", "Running",
                                         "Succeeded", "Failed",  "Unknown"};

/* The state.waiting of the first container (init containers first) that waits with a reason. */
static const json_t *first_waiting(const json_t *pod) {
    static const char *const lists[] = {"initContainerStatuses", "containerStatuses"};
    for (int l = 0; l < 2; l++) {
        size_t i;
        json_t *cs;
        json_array_foreach(json_object_get(json_object_get(pod, "status"), lists[l]), i, cs) {
            const json_t *w = json_object_get(json_object_get(cs, "state"), "waiting");
            if (json_string_value(json_object_get(w, "reason")) != NULL)
                return w;
        }
    }
    return NULL;
}

/* The message of the first terminated container of a master pod, if bounded. */
static const char *termination_message(const json_t *pod) {
    const char *master = str2(json_object_get(pod, "metadata"), "labels", AREAL_LABEL_MASTER);
    if (master == NULL || strcmp(master, "true") != 0)
        return NULL;
    size_t i;
    json_t *cs;
    json_array_foreach(json_object_get(json_object_get(pod, "status"), "containerStatuses"), i,
                       cs) {
        const json_t *term = json_object_get(json_object_get(cs, "state"), "terminated");
        if (term == NULL)
            continue;
        const json_t *m = json_object_get(term, "message");
        /* over the kubelet's bound it is not ours: dropped rather than cut mid-object */
        if (json_is_string(m) && json_string_length(m) > 0 &&
            json_string_length(m) <= CACHED_TERMINATION_MESSAGE_MAX)
            return json_string_value(m);
        return NULL;
    }
    return NULL;
}

/* The strings of the pod, packed (or only counted while k->at is NULL). */
static void pack_strings(cached_pod *p, const json_t *pod, cached_packer *k) {
    const json_t *meta = json_object_get(pod, "metadata");
    const json_t *labels = json_object_get(meta, "labels");
    p->ns = cached_pack(k, str2(pod, "metadata", "namespace"));
    p->name = cached_pack(k, str2(pod, "metadata", "name"));
    p->uid = cached_pack(k, str2(pod, "metadata", "uid"));
    p->resource_version = cached_pack(k, str2(pod, "metadata", "resourceVersion"));
    p->deletion_timestamp = cached_pack(k, str2(pod, "metadata", "deletionTimestamp"));
    p->node_name = cached_pack(k, str2(pod, "spec", "nodeName"));
    p->job = cached_pack(k, json_string_value(json_object_get(labels, AREAL_LABEL_JOB)));
    p->role = cached_pack(k, json_string_value(json_object_get(labels, AREAL_LABEL_ROLE)));
    p->pod_index =
        cached_pack(k, json_string_value(json_object_get(labels, AREAL_LABEL_POD_INDEX)));
    p->role_kind =
        cached_pack(k, json_string_value(json_object_get(labels, AREAL_LABEL_ROLE_KIND)));
    p->planned_node = cached_pack(k, str2(meta, "annotations", AREAL_ANNOTATION_NODE));
    p->pod_ip = cached_pack(k, str2(pod, "status", "podIP"));
    p->gang_size = cached_pack(k, str2(meta, "annotations", AREAL_ANNOTATION_GANG));
    p->allocation = cached_pack(k, str2(meta, "annotations", AREAL_ANNOTATION_ALLOC));
    p->creation_timestamp = cached_pack(k, str2(pod, "metadata", "creationTimestamp"));
    const json_t *waiting = first_waiting(pod);
    p->waiting_reason = cached_pack(k, json_string_value(json_object_get(waiting, "reason")));
    p->waiting_message = cached_pack(k, json_string_value(json_object_get(waiting, "message")));
    p->termination_message = cached_pack(k, termination_message(pod));
}

/* Ready condition, first terminated exit code, phase, requests. */
static void read_status(cached_pod *p, const json_t *pod) {
    const json_t *status = json_object_get(pod, "status");
    p->phase = phase_of(json_string_value(json_object_get(status, "phase")));
    const char *master = str2(json_object_get(pod, "metadata"), "labels", AREAL_LABEL_MASTER);
    p->master = master != NULL && strcmp(master, "true") == 0;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(status, "conditions"), i, e) {
        const char *t = json_string_value(json_object_get(e, "type"));
        const char *s = json_string_value(json_object_get(e, "status"));
        if (t && s && strcmp(t, "Ready") == 0) {
            p->ready = strcmp(s, "True") == 0;
            break;
        }
    }
    p->exit_code = -1;
    json_array_foreach(json_object_get(status, "containerStatuses"), i, e) {
        const json_t *term = json_object_get(json_object_get(e, "state"), "terminated");
        if (term != NULL) {
            const json_t *code = json_object_get(term, "exitCode");
            p->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : -1;
            break;
        }
    }
    p->requests_ok = areal_kube_pod_requests(pod, "pod", &p->gpus, &p->cpu_milli, &p->mem_bytes,
                                             NULL) == AREAL_OK;
}

cached_pod *cached_pod_new(const json_t *pod) {
    const char *name = str2(pod, "metadata", "name");
    if (name == NULL || name[0] == '\0')
        return NULL;
    cached_pod probe;
    cached_packer k = {0};
    pack_strings(&probe, pod, &k);
    cached_pod *p = malloc(sizeof *p + k.bytes);
    if (p == NULL)
        return NULL;
    memset(p, 0, sizeof *p);
    k.at = (char *)(p + 1);
    pack_strings(p, pod, &k);
    read_status(p, pod);
    atomic_init(&p->refs, 1);
    return p;
}

cached_pod *cached_pod_retain(cached_pod *p) {
    atomic_fetch_add(&p->refs, 1);
    return p;
}

void cached_pod_release(cached_pod *p) {
    if (p != NULL && atomic_fetch_sub(&p->refs, 1) == 1)
        free(p);
}

/* Sets key to a string when it is there; false when out of memory. */
static bool put(json_t *o, const char *key, const char *value) {
    return value == NULL || json_object_set_new(o, key, json_string(value)) == 0;
}

json_t *cached_pod_to_json(const cached_pod *p) {
    json_t *labels = json_object(), *annotations = json_object(), *meta = json_object();
    json_t *spec = json_object(), *status = json_object(), *pod = json_object();
    bool ok = labels && annotations && meta && spec && status && pod;
    ok = ok && put(labels, AREAL_LABEL_JOB, p->job) && put(labels, AREAL_LABEL_ROLE, p->role) &&
         put(labels, AREAL_LABEL_POD_INDEX, p->pod_index) &&
         put(labels, AREAL_LABEL_ROLE_KIND, p->role_kind) &&
         put(labels, AREAL_LABEL_MASTER, p->master ? "true" : NULL) &&
         put(annotations, AREAL_ANNOTATION_NODE, p->planned_node) &&
         put(annotations, AREAL_ANNOTATION_GANG, p->gang_size) &&
         put(annotations, AREAL_ANNOTATION_ALLOC, p->allocation);
    ok = ok && put(meta, "name", p->name) && put(meta, "namespace", p->ns) &&
         put(meta, "creationTimestamp", p->creation_timestamp) && put(meta, "uid", p->uid) &&
         put(meta, "resourceVersion", p->resource_version) &&
         put(meta, "deletionTimestamp", p->deletion_timestamp) &&
         json_object_set(meta, "labels", labels) == 0 &&
         json_object_set(meta, "annotations", annotations) == 0;
    ok = ok && put(spec, "nodeName", p->node_name) && put(status, "phase", phase_text[p->phase]) &&
         put(status, "podIP", p->pod_ip);
    if (ok && p->requests_ok) {
        /* the room it holds, for the job's own plans (a server placed beside the trainer) */
        char gpus[24], cpu[32], mem[32];
        snprintf(gpus, sizeof gpus, "%d", p->gpus);
        snprintf(cpu, sizeof cpu, "%lldm", p->cpu_milli);
        snprintf(mem, sizeof mem, "%lld", p->mem_bytes);
        json_t *containers =
            json_pack("[{s:s,s:{s:{s:s,s:s,s:s}}}]", "name", "worker", "resources", "requests",
                      "nvidia.com/gpu", gpus, "cpu", cpu, "memory", mem);
        ok = containers && json_object_set_new(spec, "containers", containers) == 0;
    }
    if (ok) {
        json_t *conds =
            json_pack("[{s:s,s:s}]", "type", "Ready", "status", p->ready ? "True" : "False");
        ok = conds && json_object_set_new(status, "conditions", conds) == 0;
    }
    json_t *statuses = ok && (p->exit_code >= 0 || p->waiting_reason) ? json_array() : NULL;
    if (statuses != NULL)
        ok = json_object_set_new(status, "containerStatuses", statuses) == 0;
    if (ok && statuses && p->exit_code >= 0)
        ok = json_array_append_new(statuses, p->termination_message
                                                 ? json_pack("{s:{s:{s:i,s:s}}}", "state",
                                                             "terminated", "exitCode", p->exit_code,
                                                             "message", p->termination_message)
                                                 : json_pack("{s:{s:{s:i}}}", "state", "terminated",
                                                             "exitCode", p->exit_code)) == 0;
    if (ok && statuses && p->waiting_reason != NULL)
        ok = json_array_append_new(statuses,
                                   json_pack("{s:{s:{s:s,s:s}}}", "state", "waiting", "reason",
                                             p->waiting_reason, "message",
                                             p->waiting_message ? p->waiting_message : "")) == 0;
    ok = ok && json_object_set(pod, "metadata", meta) == 0 &&
         json_object_set(pod, "spec", spec) == 0 && json_object_set(pod, "status", status) == 0;
    json_decref(labels);
    json_decref(annotations);
    json_decref(meta);
    json_decref(spec);
    json_decref(status);
    if (!ok) {
        json_decref(pod);
        return NULL;
    }
    return pod;
}
