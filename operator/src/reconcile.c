/*
 * reconcile.c - one AReaLJob's decision (see areal/operator/reconcile.h).
 *
 * The function reads the job, its pods and the cluster and never talks to the
 * API server; the controller applies the actions. Status is rebuilt from the
 * observed pods every pass, keeping only what cannot be observed (restart
 * count and times, the planned pod count) from the previous status.
 * Condition timestamps move only when a condition's status changes, and
 * Events are recorded only on transitions, so an idle job writes nothing.
 */
#include "areal/operator/reconcile.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/operator/desired.h"
#include "areal/placement.h"

#define DEFAULT_MAX_RESTARTS  3
#define DEFAULT_BACKOFF_S     10
#define DEFAULT_BACKOFF_MAX_S 300
/* A node NotReady this long loses its pods. Kubernetes evicts after 300 s
 * (tolerationSeconds of node.kubernetes.io/not-ready); a gang with a lost
 * member makes no progress at all, so it is replanned much sooner. */
#define DEFAULT_NODE_LOST_S 30

void reconcile_format_time(long long ms, char buf[32]) {
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Parses RFC 3339 "YYYY-MM-DDTHH:MM:SSZ" (as written above); -1 when it cannot. */
static long long parse_time(const char *s) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (s == NULL || strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm) == NULL)
        return -1;
    return (long long)timegm(&tm) * 1000;
}

void reconcile_result_free(reconcile_result *r) {
    for (int i = 0; i < r->n_actions; i++)
        json_decref(r->actions[i].obj);
    free(r->actions);
    json_decref(r->status);
    memset(r, 0, sizeof *r);
}

static reconcile_action *push(reconcile_result *r, reconcile_action_kind kind, const char *resource,
                              const char *name) {
    if (r->n_actions == r->cap_actions) {
        int cap = r->cap_actions ? 2 * r->cap_actions : 16;
        reconcile_action *grown = realloc(r->actions, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return NULL;
        r->actions = grown;
        r->cap_actions = cap;
    }
    reconcile_action *a = &r->actions[r->n_actions++];
    memset(a, 0, sizeof *a);
    a->kind = kind;
    a->resource = resource;
    snprintf(a->name, sizeof a->name, "%s", name ? name : "");
    return a;
}

static const char *str_at(const json_t *obj, const char *a, const char *b) {
    const json_t *v = json_object_get(obj, a);
    if (b != NULL)
        v = json_object_get(v, b);
    return json_string_value(v);
}

static long long int_at(const json_t *obj, const char *a, const char *b, long long dflt) {
    const json_t *v = json_object_get(obj, a);
    if (b != NULL)
        v = json_object_get(v, b);
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

typedef struct pass {
    const reconcile_input *in;
    reconcile_result *out;
    const json_t *old_status;
    json_t *status;
    const char *name;
    char now[32];
    bool oom;
} pass;

static void event(pass *p, bool warning, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void event(pass *p, bool warning, const char *reason, const char *fmt, ...) {
    reconcile_action *a = push(p->out, RECONCILE_EVENT, "events", p->name);
    if (a == NULL) {
        p->oom = true;
        return;
    }
    a->warning = warning;
    snprintf(a->reason, sizeof a->reason, "%s", reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->message, sizeof a->message, fmt, ap);
    va_end(ap);
}

static const json_t *old_condition(const pass *p, const char *type) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(p->old_status, "conditions"), i, c) {
        const char *t = str_at(c, "type", NULL);
        if (t != NULL && strcmp(t, type) == 0)
            return c;
    }
    return NULL;
}

/*
 * Sets condition `type`; true when its status or reason changed (a transition).
 * A NULL `message` keeps the old message (or says `reason`).
 */
static bool set_condition(pass *p, const char *type, bool ok, const char *reason,
                          const char *message) {
    const json_t *old = old_condition(p, type);
    if (message == NULL)
        message = old && str_at(old, "message", NULL) ? str_at(old, "message", NULL) : reason;
    const char *st = ok ? "True" : "False";
    bool same_status =
        old && str_at(old, "status", NULL) && strcmp(str_at(old, "status", NULL), st) == 0;
    bool same_reason =
        old && str_at(old, "reason", NULL) && strcmp(str_at(old, "reason", NULL), reason) == 0;
    const char *since = same_status && str_at(old, "lastTransitionTime", NULL)
                            ? str_at(old, "lastTransitionTime", NULL)
                            : p->now;
    json_t *conds = json_object_get(p->status, "conditions");
    if (conds == NULL) {
        conds = json_array();
        json_object_set_new(p->status, "conditions", conds);
    }
    json_array_append_new(conds,
                          json_pack("{s:s,s:s,s:s,s:s,s:I,s:s}", "type", type, "status", st,
                                    "reason", reason, "message", message, "observedGeneration",
                                    (json_int_t)int_at(p->in->job, "metadata", "generation", 0),
                                    "lastTransitionTime", since));
    return !(same_status && same_reason);
}

static void set_phase(pass *p, const char *phase) {
    json_object_set_new(p->status, "phase", json_string(phase));
}

static const char *old_phase(const pass *p) {
    const char *ph = str_at(p->old_status, "phase", NULL);
    return ph ? ph : "";
}

static bool pod_terminated(const json_t *pod) {
    const char *ph = str_at(pod, "status", "phase");
    return ph && (strcmp(ph, "Succeeded") == 0 || strcmp(ph, "Failed") == 0);
}

/* How long the node of `pod` has not been Ready (ms), or -1 when it is (or
 * the pod is not bound). */
static long long down_for_ms(const pass *p, const json_t *pod) {
    const char *node = str_at(pod, "spec", "nodeName");
    for (int i = 0; node != NULL && i < p->in->n_down; i++)
        if (strcmp(p->in->down[i].name, node) == 0) {
            long long d = p->in->now_ms - p->in->down[i].since_ms;
            return d < 0 ? 0 : d;
        }
    return -1;
}

static long long node_lost_ms(const pass *p) {
    const json_t *fp = json_object_get(json_object_get(p->in->job, "spec"), "failurePolicy");
    return int_at(fp, "nodeLostSeconds", NULL, DEFAULT_NODE_LOST_S) * 1000;
}

/* A pod on a node that has not been Ready for the job's grace: it will not
 * run again, and no kubelet will confirm its deletion. */
/*
 * True when the job is Restarting and every pod it still sees was created no
 * later than lastRestartTime: those are the old gang's. The new gang's pods
 * are created at least one backoff (>= 1 s, the CRD's minimum) after the
 * restart, so at second resolution they are always later. A pod without a
 * creation time is never taken for an old one.
 */
static bool old_gang_going(const pass *p, const reconcile_input *in, const char *phase) {
    if (strcmp(phase, "Restarting") != 0 || in->n_pods == 0)
        return false;
    long long last = parse_time(str_at(p->old_status, "lastRestartTime", NULL));
    if (last < 0)
        return false;
    for (int i = 0; i < in->n_pods; i++) {
        long long made = parse_time(str_at(in->pods[i], "metadata", "creationTimestamp"));
        if (made < 0 || made > last)
            return false;
    }
    return true;
}

static bool pod_lost(const pass *p, const json_t *pod) {
    long long d = down_for_ms(p, pod);
    return d >= 0 && d >= node_lost_ms(p);
}

static void delete_pods(pass *p, bool keep_finished) {
    for (int i = 0; i < p->in->n_pods; i++) {
        const json_t *pod = p->in->pods[i];
        if (keep_finished && pod_terminated(pod))
            continue;
        bool lost = pod_lost(p, pod);
        if (str_at(pod, "metadata", "deletionTimestamp") != NULL && !lost)
            continue; /* already going (a lost one would stay Terminating forever) */
        reconcile_action *a =
            push(p->out, RECONCILE_DELETE, "pods", str_at(pod, "metadata", "name"));
        if (a == NULL) {
            p->oom = true;
            return;
        }
        const char *uid = str_at(pod, "metadata", "uid");
        snprintf(a->uid, sizeof a->uid, "%s", uid ? uid : "");
        a->force = lost;
    }
}

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
static void patch_finalizers(pass *p, bool add) {
    json_t *list = json_array();
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(json_object_get(p->in->job, "metadata"), "finalizers"), i,
                       f) {
        if (!(json_is_string(f) && strcmp(json_string_value(f), AREAL_FINALIZER) == 0))
            json_array_append(list, f);
    }
    if (add)
        json_array_append_new(list, json_string(AREAL_FINALIZER));
    reconcile_action *a = push(p->out, RECONCILE_PATCH_JOB, "arealjobs", p->name);
    if (a == NULL) {
        json_decref(list);
        p->oom = true;
        return;
    }
    a->obj = json_pack("{s:{s:o}}", "metadata", "finalizers", list);
}

/* Job topology from spec.topology.levels (innermost first); Required levels hold pp groups. */
static void job_topology(const json_t *spec, areal_job *job) {
    const json_t *levels = json_object_get(json_object_get(spec, "topology"), "levels");
    if (!json_is_array(levels) || json_array_size(levels) == 0)
        return;
    job->topology.n_levels = 0;
    job->n_rules = 0;
    size_t i;
    json_t *lv;
    json_array_foreach((json_t *)levels, i, lv) {
        const char *label = str_at(lv, "label", NULL);
        if (label == NULL || job->topology.n_levels == AREAL_TOPO_MAX_LEVELS)
            continue;
        int l = job->topology.n_levels++;
        snprintf(job->topology.key[l], AREAL_TOPO_KEY_MAX, "%s", label);
        const char *slash = strrchr(label, '/');
        snprintf(job->topology.name[l], AREAL_TOPO_NAME_MAX, "%s", slash ? slash + 1 : label);
        const char *policy = str_at(lv, "policy", NULL);
        if (policy && strcmp(policy, "Required") == 0 && job->n_rules < AREAL_MAX_RULES)
            job->rules[job->n_rules++] = (areal_locality_rule){
                .kind = AREAL_GROUP_PP, .level = l + 1, .mode = AREAL_TOPO_REQUIRED};
    }
}

static void write_placement(pass *p, const areal_plan *plan) {
    json_t *pods = json_array();
    for (int i = 0; i < plan->n_pods; i++)
        json_array_append_new(pods, json_pack("{s:s,s:s}", "pod", plan->pods[i].name, "node",
                                              p->in->cluster->nodes[plan->pods[i].node].name));
    json_t *quality = json_object();
    for (int r = 0; r < plan->n_roles; r++) {
        const areal_role_plan *role = &plan->roles[r];
        for (int q = 0; q < role->n_quality; q++) {
            const areal_kind_quality *kq = &role->quality[q];
            if (kq->kind != AREAL_GROUP_TP && kq->kind != AREAL_GROUP_PP &&
                kq->kind != AREAL_GROUP_EP)
                continue;
            char key[AREAL_ALLOC_NAME_MAX + 16];
            snprintf(key, sizeof key, "%s/%s", role->name, areal_group_kind_name(kq->kind));
            json_object_set_new(
                quality, key,
                json_pack("{s:i,s:i}", "groups", kq->n_groups, "withinNode", kq->within[0]));
        }
    }
    json_object_set_new(p->status, "placement",
                        json_pack("{s:o,s:o}", "pods", pods, "quality", quality));
}

static const char *annotation(const json_t *pod, const char *key) {
    return json_string_value(
        json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"), key));
}

/* The index in `plan` of the pod named `name`, or -1. */
static int plan_pod(const areal_plan *plan, const char *name) {
    for (int i = 0; name != NULL && i < plan->n_pods; i++)
        if (strcmp(plan->pods[i].name, name) == 0)
            return i;
    return -1;
}

/*
 * Plans the gang, creates what is missing of it, then binds every pod. The
 * job may have unbound pods already: an earlier pass created part of the gang
 * and was cut short (the API server or the operator restarted). They are kept
 * when the new plan has them on the nodes they were planned for (the missing
 * ones are created first, then the whole gang is bound); otherwise they are
 * deleted and the gang is planned afresh once they are gone. Never binds a
 * part of a gang: every bind follows every create of the same pass.
 */
static void start_gang(pass *p, const areal_alloc *alloc, areal_error *err) {
    const reconcile_input *in = p->in;
    const json_t *spec = json_object_get(in->job, "spec");
    areal_job job;
    areal_job_init(&job, p->name, alloc);
    job_topology(spec, &job);
    areal_error perr;
    if (desired_job_constraints(in->job, alloc, &job, &perr) != AREAL_OK) {
        set_phase(p, "Failed");
        if (set_condition(p, "Scheduled", false, "InvalidSpec", perr.msg))
            event(p, true, "InvalidSpec", "%s", perr.msg);
        return;
    }
    areal_plan plan;
    int rc = areal_place(&job, in->cluster, &plan, &perr);
    if (rc == AREAL_OK &&
        (rc = desired_plan_fits(in->job, alloc, &plan, in->cluster, &in->cfg, &perr)) != AREAL_OK)
        areal_plan_free(&plan); /* per-pod CPU/memory the planner does not count (chaos seed 387) */
    if (rc != AREAL_OK) {
        if (rc == AREAL_ENOMEM) {
            areal_error_set(err, AREAL_ENOMEM, -1, "%s", perr.msg);
            p->oom = true;
            return;
        }
        /* Pending; node and pod changes enqueue the job again. */
        set_phase(p, "Pending");
        if (set_condition(p, "Scheduled", false, "Unschedulable", perr.msg))
            event(p, true, "Unschedulable", "%s", perr.msg);
        if (in->n_pods > 0)
            delete_pods(p, false); /* a partial gang of an earlier plan holds nothing */
        return;
    }
    for (int i = 0; i < plan.n_pods; i++) {
        if (desired_check_name(plan.pods[i].name, "pod", p->name, &perr) != AREAL_OK) {
            areal_plan_free(&plan);
            set_phase(p, "Failed");
            if (set_condition(p, "Scheduled", false, "InvalidSpec", perr.msg))
                event(p, true, "InvalidSpec", "%s", perr.msg);
            delete_pods(p, false);
            return;
        }
    }
    bool *exists = calloc((size_t)plan.n_pods + 1, sizeof *exists);
    if (exists == NULL) {
        areal_plan_free(&plan);
        p->oom = true;
        return;
    }
    bool consistent = true;
    for (int i = 0; i < in->n_pods; i++) {
        const json_t *pod = in->pods[i];
        int k = plan_pod(&plan, str_at(pod, "metadata", "name"));
        const char *node = annotation(pod, AREAL_ANNOTATION_NODE);
        if (k < 0 || node == NULL || str_at(pod, "spec", "nodeName") != NULL ||
            strcmp(node, in->cluster->nodes[plan.pods[k].node].name) != 0)
            consistent = false;
        else
            exists[k] = true;
    }
    if (!consistent) {
        free(exists);
        areal_plan_free(&plan);
        delete_pods(p, false);
        set_phase(p, "Pending");
        if (set_condition(p, "Scheduled", false, "Replanning",
                          "pods of an earlier plan do not match a new one; they are deleted and "
                          "the gang is planned again"))
            event(p, false, "Replanning", "deleting %d pods of an unfinished earlier plan",
                  in->n_pods);
        return;
    }
    if (!in->has_service) {
        reconcile_action *a = push(p->out, RECONCILE_CREATE, "services", p->name);
        if (a != NULL)
            a->obj = desired_service(in->job, &in->cfg);
    }
    if (!in->has_configmap) {
        char cm[300];
        snprintf(cm, sizeof cm, "%s-config", p->name);
        reconcile_action *a = push(p->out, RECONCILE_CREATE, "configmaps", cm);
        if (a != NULL)
            a->obj = desired_configmap(in->job, alloc, &plan, in->cluster, &in->cfg);
    }
    for (int i = 0; i < plan.n_pods && !p->oom; i++) {
        if (exists[i])
            continue; /* created by an earlier pass of the same plan */
        reconcile_action *a = push(p->out, RECONCILE_CREATE, "pods", plan.pods[i].name);
        if (a == NULL ||
            (a->obj = desired_pod(in->job, alloc, &plan, in->cluster, i, &in->cfg, NULL)) == NULL)
            p->oom = true;
    }
    /* Binds only after every create: the gang is bound whole or not at all. */
    for (int i = 0; i < plan.n_pods && !p->oom; i++) {
        reconcile_action *a = push(p->out, RECONCILE_BIND, "pods", plan.pods[i].name);
        if (a == NULL)
            p->oom = true;
        else
            snprintf(a->node, sizeof a->node, "%s", in->cluster->nodes[plan.pods[i].node].name);
    }
    set_phase(p, "Pending");
    json_object_set_new(p->status, "pods", json_integer(plan.n_pods));
    json_object_set_new(p->status, "gpus", json_integer(plan.gpus));
    write_placement(p, &plan);
    char msg[256];
    snprintf(msg, sizeof msg, "%d pods bound as one gang on %ld GPUs", plan.n_pods, plan.gpus);
    if (set_condition(p, "Scheduled", true, "GangBound", msg))
        event(p, false, "GangBound", "%s", msg);
    free(exists);
    areal_plan_free(&plan);
}

/* The Ready condition of a pod. */
static bool pod_ready(const json_t *pod) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "status"), "conditions"), i, c) {
        const char *t = str_at(c, "type", NULL), *s = str_at(c, "status", NULL);
        if (t && s && strcmp(t, "Ready") == 0)
            return strcmp(s, "True") == 0;
    }
    return false;
}

/* The first terminated container's exit code of a pod, or -1. */
static int pod_exit_code(const json_t *pod) {
    size_t i;
    json_t *cs;
    json_array_foreach(json_object_get(json_object_get(pod, "status"), "containerStatuses"), i,
                       cs) {
        const json_t *term = json_object_get(json_object_get(cs, "state"), "terminated");
        if (term != NULL)
            return (int)int_at(term, "exitCode", NULL, -1);
    }
    return -1;
}

static long backoff_ms(const json_t *spec, long long restarts) {
    const json_t *b = json_object_get(json_object_get(spec, "failurePolicy"), "backoff");
    long long base = int_at(b, "initialSeconds", NULL, DEFAULT_BACKOFF_S);
    long long max = int_at(b, "maxSeconds", NULL, DEFAULT_BACKOFF_MAX_S);
    long long d = base;
    for (long long i = 1; i < restarts && d < max; i++)
        d *= 2;
    return (long)((d < max ? d : max) * 1000);
}

bool reconcile_error_is_permanent(int http_status) {
    return http_status == 400 || http_status == 403 || http_status == 422;
}

int reconcile_rejected(const reconcile_input *in, const char *message, reconcile_result *out,
                       areal_error *err) {
    memset(out, 0, sizeof *out);
    pass p = {.in = in,
              .out = out,
              .old_status = json_object_get(in->job, "status"),
              .name = str_at(in->job, "metadata", "name")};
    if (p.name == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "the job has no metadata.name");
    reconcile_format_time(in->now_ms, p.now);
    p.status = json_is_object(p.old_status) ? json_deep_copy(p.old_status) : json_object();
    if (p.status == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    /* every other condition stays; Scheduled is set anew */
    json_t *conds = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(p.old_status, "conditions"), i, c) {
        const char *t = str_at(c, "type", NULL);
        if (t == NULL || strcmp(t, "Scheduled") != 0)
            json_array_append(conds, c);
    }
    json_object_set_new(p.status, "conditions", conds);
    set_phase(&p, "Failed");
    json_object_set_new(p.status, "observedGeneration",
                        json_integer(int_at(in->job, "metadata", "generation", 0)));
    if (set_condition(&p, "Scheduled", false, "ChildRejected", message))
        event(&p, true, "ChildRejected", "%s", message);
    if (p.oom) {
        reconcile_result_free(out);
        json_decref(p.status);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    }
    out->status = p.status;
    return AREAL_OK;
}

int reconcile_job(const reconcile_input *in, reconcile_result *out, areal_error *err) {
    memset(out, 0, sizeof *out);
    const json_t *job = in->job;
    pass p = {.in = in,
              .out = out,
              .old_status = json_object_get(job, "status"),
              .name = str_at(job, "metadata", "name")};
    if (p.name == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "the job has no metadata.name");
    reconcile_format_time(in->now_ms, p.now);
    p.status = json_object();
    const json_t *spec = json_object_get(job, "spec");

    /* Carry what cannot be observed again. */
    long long restarts = int_at(p.old_status, "restarts", NULL, 0);
    long long planned = int_at(p.old_status, "pods", NULL, 0);
    json_object_set_new(p.status, "restarts", json_integer(restarts));
    static const char *const carried[] = {
        "lastRestartTime", "startTime", "completionTime", "placement", "gpus", "progress", NULL};
    for (int i = 0; carried[i]; i++) {
        json_t *v = json_object_get(p.old_status, carried[i]);
        if (v != NULL)
            json_object_set(p.status, carried[i], v);
    }
    if (planned > 0)
        json_object_set_new(p.status, "pods", json_integer(planned));
    json_object_set_new(p.status, "observedGeneration",
                        json_integer(int_at(job, "metadata", "generation", 0)));
    if (json_object_get(p.status, "startTime") == NULL)
        json_object_set_new(p.status, "startTime", json_string(p.now));
    char selector[400];
    snprintf(selector, sizeof selector, "%s=%s,%s=rollout", AREAL_LABEL_JOB, p.name,
             AREAL_LABEL_ROLE_KIND);
    json_object_set_new(p.status, "rolloutSelector", json_string(selector));

    /* Deletion: remove the pods, then let the job go. */
    if (str_at(job, "metadata", "deletionTimestamp") != NULL) {
        delete_pods(&p, false);
        if (has_finalizer(job))
            patch_finalizers(&p, false);
        json_decref(p.status);
        p.status = NULL;
        return p.oom ? areal_error_set(err, AREAL_ENOMEM, -1, "out of memory") : AREAL_OK;
    }
    if (!has_finalizer(job))
        patch_finalizers(&p, true);

    const char *phase = old_phase(&p);
    const json_t *sched = old_condition(&p, "Scheduled");
    const char *sched_reason = str_at(sched, "reason", NULL);
    bool spec_failure = sched_reason && (strcmp(sched_reason, "ChildRejected") == 0 ||
                                         strcmp(sched_reason, "InvalidSpec") == 0 ||
                                         strcmp(sched_reason, "InvalidAllocation") == 0);
    if (strcmp(phase, "Failed") == 0 && spec_failure &&
        int_at(sched, "observedGeneration", NULL, -1) != int_at(job, "metadata", "generation", 0))
        phase = ""; /* the spec changed since it was refused: try again */
    areal_alloc alloc;
    areal_error perr;
    bool alloc_ok = desired_job_alloc(job, &alloc, &perr) == AREAL_OK;
    areal_error verr;
    bool spec_ok = desired_job_validate(job, &verr) == AREAL_OK;
    char canonical[4096] = "";
    if (alloc_ok)
        areal_alloc_format(&alloc, canonical, sizeof canonical);
    if (alloc_ok) {
        long rollout = 0;
        for (int i = 0; i < alloc.n_components; i++)
            if (areal_backend_is_inference(alloc.comp[i].backend))
                rollout += alloc.comp[i].strategy.dp;
        json_object_set_new(p.status, "rolloutReplicas", json_integer(rollout));
    }

    /* Count the pods. */
    int ready = 0, bound = 0, failed = -1, master_succeeded = 0, terminating = 0;
    int lost = -1, lost_terminating = 0;
    long long lost_in = -1; /* ms until the first pod on a down node is lost */
    for (int i = 0; i < in->n_pods; i++) {
        const json_t *pod = in->pods[i];
        const char *ph = str_at(pod, "status", "phase");
        bool going = str_at(pod, "metadata", "deletionTimestamp") != NULL;
        terminating += going;
        long long down = down_for_ms(&p, pod);
        if (down >= 0 && !pod_terminated(pod)) {
            if (down >= node_lost_ms(&p)) {
                lost_terminating += going;
                if (lost < 0 && !going)
                    lost = i;
            } else if (lost_in < 0 || node_lost_ms(&p) - down < lost_in) {
                lost_in = node_lost_ms(&p) - down;
            }
        }
        ready += pod_ready(pod);
        bound += str_at(pod, "spec", "nodeName") != NULL;
        if (ph && strcmp(ph, "Failed") == 0 && failed < 0)
            failed = i;
        const char *master = json_string_value(json_object_get(
            json_object_get(json_object_get(pod, "metadata"), "labels"), AREAL_LABEL_MASTER));
        if (master && strcmp(master, "true") == 0 && ph && strcmp(ph, "Succeeded") == 0)
            master_succeeded = 1;
    }
    json_object_set_new(p.status, "readyPods", json_integer(ready));
    /* A gang planned from another allocation (spec.rollout.replicas scaled, or
     * the allocation changed while suspended) is replaced whole. */
    bool rescale = false;
    for (int i = 0; alloc_ok && i < in->n_pods; i++) {
        const char *was = annotation(in->pods[i], AREAL_ANNOTATION_ALLOC);
        if (was != NULL && strcmp(was, canonical) != 0 &&
            str_at(in->pods[i], "metadata", "deletionTimestamp") == NULL)
            rescale = true;
    }
    /* The gang's size as its pods say (written into each at creation): a lost
     * status write must not make a partial gang look whole. */
    for (int i = 0; i < in->n_pods; i++) {
        const char *g = annotation(in->pods[i], AREAL_ANNOTATION_GANG);
        long long n = g ? strtoll(g, NULL, 10) : 0;
        if (n > planned && str_at(in->pods[i], "metadata", "deletionTimestamp") == NULL)
            planned = n;
    }
    if (planned > 0)
        json_object_set_new(p.status, "pods", json_integer(planned));
    /* The status says Running but pods of the gang are going or all gone: a
     * failure, whoever deleted them. Found by the chaos test (seeds 40, 52):
     * the restart's own status write was lost (a 409 or 5xx), the next pass
     * saw only terminating pods and waited with phase Running, then found
     * none and planned a new gang at once - the restart uncounted, no
     * backoff, and Running shown over an unbound gang meanwhile. */
    bool broken_running = strcmp(phase, "Running") == 0 && (terminating > 0 || in->n_pods == 0);

    if (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0) {
        set_phase(&p, phase); /* terminal: only clean up what still runs */
        delete_pods(&p, true);
    } else if (!alloc_ok) {
        set_phase(&p, "Failed");
        if (set_condition(&p, "Scheduled", false, "InvalidAllocation", perr.msg))
            event(&p, true, "InvalidAllocation", "%s", perr.msg);
        delete_pods(&p, false);
    } else if (!spec_ok) {
        set_phase(&p, "Failed");
        if (set_condition(&p, "Scheduled", false, "InvalidSpec", verr.msg))
            event(&p, true, "InvalidSpec", "%s", verr.msg);
        delete_pods(&p, false);
    } else if (json_is_true(json_object_get(spec, "suspend"))) {
        set_phase(&p, "Suspended");
        if (set_condition(&p, "Scheduled", false, "Suspended", "spec.suspend is true"))
            event(&p, false, "Suspended", "the job is suspended; its pods are deleted");
        delete_pods(&p, false);
    } else if (master_succeeded) {
        set_phase(&p, "Succeeded");
        json_object_set_new(p.status, "completionTime", json_string(p.now));
        set_condition(&p, "Scheduled", true, "Completed", "the trainer finished");
        event(&p, false, "Succeeded", "the trainer's rank-0 pod succeeded; removing the others");
        delete_pods(&p, true);
    } else if (terminating > 0 && !broken_running) {
        /* Pods of this gang are stopping (their kubelets send SIGTERM and wait
         * out the grace period; a stopped pod may report Failed): that is the
         * end of the last restart, not a new failure. Act once they are gone;
         * their deletion events bring the job back. One on a lost node has no
         * kubelet to confirm: it is deleted with grace 0. */
        set_phase(&p, phase);
        if (lost_terminating > 0)
            delete_pods(&p, false);
    } else if (rescale) {
        /* Not a failure: no restart is counted; the new gang is planned once
         * the old one is gone (their deletion events bring the job back). */
        delete_pods(&p, false);
        json_object_set_new(p.status, "pods", json_integer(0));
        set_phase(&p, "Pending");
        char msg[4200];
        snprintf(msg, sizeof msg, "the allocation is now %s; the gang is planned again", canonical);
        if (set_condition(&p, "Scheduled", false, "Rescaling", msg))
            event(&p, false, "Rescaling", "%s", msg);
    } else if (old_gang_going(&p, in, phase) &&
               (failed >= 0 || lost >= 0 || (planned > 0 && bound > 0 && in->n_pods < planned))) {
        /* The last restart's own pods, not yet seen going by a lagging cache (a
         * pod deleted with grace 0 vanishes at once; the others' deletion
         * timestamps arrive later): the same failure, not a new one. Deleting
         * again is idempotent; their events bring the job back. Rejected:
         * deletion expectations kept in the controller (client-go's
         * ControllerExpectations): right, but state outside the cache that an
         * operator restart loses, where creation times are in every pod. */
        set_phase(&p, "Restarting");
        delete_pods(&p, false);
    } else if (failed >= 0 || lost >= 0 || broken_running ||
               (planned > 0 && bound > 0 && in->n_pods < planned)) {
        /* One pod failed or vanished: the gang restarts, same ranks, after a backoff. */
        long long max_restarts = int_at(json_object_get(spec, "failurePolicy"), "maxRestarts", NULL,
                                        DEFAULT_MAX_RESTARTS);
        char why[300];
        if (failed >= 0)
            snprintf(why, sizeof why, "pod %s failed (exit code %d)",
                     str_at(in->pods[failed], "metadata", "name"), pod_exit_code(in->pods[failed]));
        else if (lost >= 0)
            snprintf(why, sizeof why, "pod %s is lost: node %s has not been Ready for %llds",
                     str_at(in->pods[lost], "metadata", "name"),
                     str_at(in->pods[lost], "spec", "nodeName"),
                     down_for_ms(&p, in->pods[lost]) / 1000);
        else if (broken_running)
            snprintf(why, sizeof why, "%d of %lld pods of the running gang are gone or going",
                     (int)planned - (in->n_pods - terminating), planned);
        else
            snprintf(why, sizeof why, "%d of %lld pods are gone", (int)planned - in->n_pods,
                     planned);
        delete_pods(&p, false);
        if (restarts >= max_restarts) {
            set_phase(&p, "Failed");
            json_object_set_new(p.status, "completionTime", json_string(p.now));
            char msg[400];
            snprintf(msg, sizeof msg, "%s; the gang already restarted %lld times (maxRestarts)",
                     why, restarts);
            if (set_condition(&p, "Scheduled", false, "BackoffLimitExceeded", msg))
                event(&p, true, "BackoffLimitExceeded", "%s", msg);
        } else {
            restarts++;
            json_object_set_new(p.status, "restarts", json_integer(restarts));
            json_object_set_new(p.status, "lastRestartTime", json_string(p.now));
            json_object_set_new(p.status, "pods", json_integer(0));
            set_phase(&p, "Restarting");
            set_condition(&p, "Scheduled", false, "GangRestarting", why);
            event(&p, true, "GangRestarting", "%s; restart %lld of %lld", why, restarts,
                  max_restarts);
            out->requeue_after_ms = backoff_ms(spec, restarts);
        }
    } else if (in->n_pods == 0) {
        long long last = parse_time(str_at(p.old_status, "lastRestartTime", NULL));
        long wait = last < 0 ? 0 : (long)(last + backoff_ms(spec, restarts) - in->now_ms);
        if (strcmp(phase, "Restarting") == 0 && wait > 0) {
            set_phase(&p, "Restarting");
            set_condition(&p, "Scheduled", false, "GangRestarting", "waiting for the backoff");
            out->requeue_after_ms = wait;
        } else {
            start_gang(&p, &alloc, err);
        }
    } else if (bound == 0 && (planned == 0 || in->n_pods < planned)) {
        /* Part of a gang created, none of it bound (the API server or the operator
         * restarted mid-create): create the rest first, then bind it whole. */
        start_gang(&p, &alloc, err);
    } else if (bound < in->n_pods) {
        /* Every planned pod exists but not all are bound (a crash between binds, or a
         * failed bind): bind the rest to their planned nodes; a pod without a plan
         * restarts the gang. */
        bool planned_all = true;
        for (int i = 0; i < in->n_pods; i++) {
            const json_t *pod = in->pods[i];
            if (str_at(pod, "spec", "nodeName") != NULL)
                continue;
            const char *node = json_string_value(
                json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"),
                                AREAL_ANNOTATION_NODE));
            if (node == NULL) {
                planned_all = false;
                break;
            }
            reconcile_action *a =
                push(out, RECONCILE_BIND, "pods", str_at(pod, "metadata", "name"));
            if (a != NULL)
                snprintf(a->node, sizeof a->node, "%s", node);
        }
        set_phase(&p, "Pending");
        if (!planned_all) {
            for (int i = out->n_actions - 1; i >= 0 && out->actions[i].kind == RECONCILE_BIND; i--)
                out->n_actions--;
            delete_pods(&p, false);
            set_condition(&p, "Scheduled", false, "Replanning", "pods without a planned node");
        }
    } else {
        /* Running only with every planned pod bound and running. */
        bool all_running = in->n_pods > 0 && in->n_pods >= planned;
        for (int i = 0; i < in->n_pods; i++) {
            const char *ph = str_at(in->pods[i], "status", "phase");
            all_running = all_running && ph && strcmp(ph, "Running") == 0;
        }
        set_phase(&p, all_running ? "Running" : "Pending");
        set_condition(&p, "Scheduled", true, "GangBound", NULL);
        if (all_running && strcmp(phase, "Running") != 0)
            event(&p, false, "Running", "all %d pods are running", in->n_pods);
    }
    /* a pod on a node that went down is lost when the grace ends: look again then */
    if (lost_in >= 0 && (out->requeue_after_ms <= 0 || lost_in + 100 < out->requeue_after_ms))
        out->requeue_after_ms = (long)lost_in + 100;
    if (json_object_get(p.status, "conditions") == NULL) {
        json_t *old = json_object_get(p.old_status, "conditions");
        if (old != NULL)
            json_object_set(p.status, "conditions", old);
    }
    if (p.oom) {
        reconcile_result_free(out);
        json_decref(p.status);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory reconciling %s", p.name);
    }
    if (p.old_status != NULL && json_equal(p.old_status, p.status)) {
        json_decref(p.status); /* nothing to write */
        p.status = NULL;
    }
    out->status = p.status;
    return AREAL_OK;
}
