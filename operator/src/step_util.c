/*
 * step_util.c - what the reconcile steps share (see steps.h): reading pod
 * views, conditions and Events, deleting pods, the cluster with the job's own
 * pods counted, placement in status, and creating then binding a gang.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/cluster_kube.h"
#include "areal/operator/desired.h"
#include "steps.h"

const char *step_str(const json_t *obj, const char *a, const char *b) {
    const json_t *v = json_object_get(obj, a);
    if (b != NULL)
        v = json_object_get(v, b);
    return json_string_value(v);
}

long long step_int(const json_t *obj, const char *a, const char *b, long long dflt) {
    const json_t *v = json_object_get(obj, a);
    if (b != NULL)
        v = json_object_get(v, b);
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

const char *step_annotation(const json_t *pod, const char *key) {
    return json_string_value(
        json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"), key));
}

const char *step_label(const json_t *pod, const char *key) {
    return json_string_value(
        json_object_get(json_object_get(json_object_get(pod, "metadata"), "labels"), key));
}

/* Parses RFC 3339 "YYYY-MM-DDTHH:MM:SSZ"; -1 when it cannot. */
long long step_parse_time(const char *s) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (s == NULL || strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm) == NULL)
        return -1;
    return (long long)timegm(&tm) * 1000;
}

reconcile_action *step_push(step_ctx *c, reconcile_action_kind kind, const char *resource,
                            const char *name) {
    reconcile_result *r = c->out;
    if (r->n_actions == r->cap_actions) {
        int cap = r->cap_actions ? 2 * r->cap_actions : 16;
        reconcile_action *grown = realloc(r->actions, (size_t)cap * sizeof *grown);
        if (grown == NULL) {
            c->oom = true;
            return NULL;
        }
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

void step_event(step_ctx *c, bool warning, const char *reason, const char *fmt, ...) {
    reconcile_action *a = step_push(c, RECONCILE_EVENT, "events", c->spec->name);
    if (a == NULL)
        return;
    a->warning = warning;
    snprintf(a->reason, sizeof a->reason, "%s", reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->message, sizeof a->message, fmt, ap);
    va_end(ap);
}

const json_t *step_old_condition(const step_ctx *c, const char *type) {
    size_t i;
    json_t *cond;
    json_array_foreach(json_object_get(c->old_status, "conditions"), i, cond) {
        const char *t = step_str(cond, "type", NULL);
        if (t != NULL && strcmp(t, type) == 0)
            return cond;
    }
    return NULL;
}

bool step_condition(step_ctx *c, const char *type, bool ok, const char *reason,
                    const char *message) {
    const json_t *old = step_old_condition(c, type);
    const char *old_msg = step_str(old, "message", NULL);
    if (message == NULL)
        message = old_msg ? old_msg : reason;
    const char *st = ok ? "True" : "False";
    const char *old_st = step_str(old, "status", NULL), *old_reason = step_str(old, "reason", NULL);
    bool same_status = old_st && strcmp(old_st, st) == 0;
    bool same_reason = old_reason && strcmp(old_reason, reason) == 0;
    const char *since = same_status && step_str(old, "lastTransitionTime", NULL)
                            ? step_str(old, "lastTransitionTime", NULL)
                            : c->now;
    json_t *conds = json_object_get(c->status, "conditions");
    if (conds == NULL) {
        conds = json_array();
        json_object_set_new(c->status, "conditions", conds);
    }
    json_t *cond = json_pack("{s:s,s:s,s:s,s:s,s:I,s:s}", "type", type, "status", st, "reason",
                             reason, "message", message, "observedGeneration",
                             (json_int_t)c->spec->generation, "lastTransitionTime", since);
    /* one entry per type, replaced in place (the previous status's, carried
     * by reconcile.c, or an earlier step's of this pass), so the order stays
     * and an unchanged condition writes nothing */
    size_t at = json_array_size(conds);
    for (size_t i = 0; i < json_array_size(conds) && at == json_array_size(conds); i++) {
        const char *t = step_str(json_array_get(conds, i), "type", NULL);
        if (t != NULL && strcmp(t, type) == 0)
            at = i;
    }
    if (cond == NULL || (at < json_array_size(conds) ? json_array_set_new(conds, at, cond)
                                                     : json_array_append_new(conds, cond)) != 0)
        c->oom = true;
    return !(same_status && same_reason);
}

static bool terminal(const char *phase) {
    return phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0);
}

void step_phase(step_ctx *c, const char *phase) {
    c->phase = phase;
    json_object_set_new(c->status, "phase", json_string(phase));
    /* status.completionTime: when the job finished (ttlSecondsAfterFinished
     * counts from it), so only on entering a terminal phase; a job that runs
     * again (a refused spec fixed) has none */
    if (!terminal(phase)) {
        /* null: the status write is a merge patch, where a missing key keeps the old value */
        if (json_object_get(c->old_status, "completionTime") != NULL)
            json_object_set_new(c->status, "completionTime", json_null());
        else
            json_object_del(c->status, "completionTime");
    } else if (!terminal(step_old_phase(c)) ||
               !json_is_string(json_object_get(c->status, "completionTime"))) {
        json_object_set_new(c->status, "completionTime", json_string(c->now));
    }
}

const char *step_old_phase(const step_ctx *c) {
    const char *ph = step_str(c->old_status, "phase", NULL);
    return ph ? ph : "";
}

bool step_pod_terminated(const json_t *pod) {
    const char *ph = step_str(pod, "status", "phase");
    return ph && (strcmp(ph, "Succeeded") == 0 || strcmp(ph, "Failed") == 0);
}

bool step_pod_going(const json_t *pod) {
    return step_str(pod, "metadata", "deletionTimestamp") != NULL;
}

bool step_pod_ready(const json_t *pod) {
    size_t i;
    json_t *cond;
    json_array_foreach(json_object_get(json_object_get(pod, "status"), "conditions"), i, cond) {
        const char *t = step_str(cond, "type", NULL), *s = step_str(cond, "status", NULL);
        if (t && s && strcmp(t, "Ready") == 0)
            return strcmp(s, "True") == 0;
    }
    return false;
}

int step_pod_exit_code(const json_t *pod) {
    size_t i;
    json_t *cs;
    json_array_foreach(json_object_get(json_object_get(pod, "status"), "containerStatuses"), i,
                       cs) {
        const json_t *term = json_object_get(json_object_get(cs, "state"), "terminated");
        if (term != NULL)
            return (int)step_int(term, "exitCode", NULL, -1);
    }
    return -1;
}

long long step_down_for_ms(const step_ctx *c, const json_t *pod) {
    const char *node = step_str(pod, "spec", "nodeName");
    for (int i = 0; node != NULL && i < c->in->n_down; i++)
        if (strcmp(c->in->down[i].name, node) == 0) {
            long long d = c->in->now_ms - c->in->down[i].since_ms;
            return d < 0 ? 0 : d;
        }
    return -1;
}

/* A pod on a node that has not been Ready for the job's grace: it will not
 * run again, and no kubelet will confirm its deletion. */
bool step_pod_lost(const step_ctx *c, const json_t *pod) {
    long long d = step_down_for_ms(c, pod);
    return d >= 0 && d >= (long long)c->spec->node_lost_s * 1000;
}

void step_delete_pods(step_ctx *c, const json_t *const *pods, int n, bool keep_finished) {
    for (int i = 0; i < n && !c->oom; i++) {
        const json_t *pod = pods[i];
        if (keep_finished && step_pod_terminated(pod))
            continue;
        bool lost = step_pod_lost(c, pod);
        if (step_pod_going(pod) && !lost)
            continue; /* already going (a lost one would stay Terminating forever) */
        reconcile_action *a =
            step_push(c, RECONCILE_DELETE, "pods", step_str(pod, "metadata", "name"));
        if (a == NULL)
            return;
        const char *uid = step_str(pod, "metadata", "uid");
        snprintf(a->uid, sizeof a->uid, "%s", uid ? uid : "");
        a->force = lost;
    }
}

void step_cluster_count(areal_cluster *cl, const json_t *pod) {
    if (step_pod_terminated(pod))
        return;
    const char *node = step_str(pod, "spec", "nodeName");
    if (node == NULL)
        node = step_annotation(pod, AREAL_ANNOTATION_NODE); /* created, bound next */
    int gpus = 0;
    long long cpu = 0, mem = 0;
    if (node == NULL || areal_kube_pod_requests(pod, "pod", &gpus, &cpu, &mem, NULL) != AREAL_OK)
        return;
    for (int i = 0; i < cl->n_nodes; i++) {
        areal_node *n = &cl->nodes[i];
        if (strcmp(n->name, node) != 0)
            continue;
        n->gpus_used = n->gpus_used + gpus > n->gpus ? n->gpus : n->gpus_used + gpus;
        n->cpu_used_milli += (long)cpu;
        n->mem_used_bytes += mem;
        return;
    }
}

bool step_cluster_with_own(const step_ctx *c, bool trainer, bool servers, areal_cluster *out) {
    const areal_cluster *in = c->in->cluster;
    areal_cluster_init(out);
    if (in->n_nodes == 0)
        return true;
    out->nodes = malloc((size_t)in->n_nodes * sizeof *out->nodes);
    if (out->nodes == NULL)
        return false;
    memcpy(out->nodes, in->nodes, (size_t)in->n_nodes * sizeof *out->nodes);
    out->n_nodes = out->cap_nodes = in->n_nodes;
    for (int i = 0; trainer && i < c->n_trainer; i++)
        step_cluster_count(out, c->trainer_pods[i]);
    for (int i = 0; servers && i < c->n_server_pods; i++)
        step_cluster_count(out, c->server_pods[i]);
    return true;
}

void step_cluster_free(areal_cluster *c) {
    free(c->nodes); /* the strings are the original cluster's */
    areal_cluster_init(c);
}

void step_write_placement(step_ctx *c, const areal_plan *plan, const areal_cluster *cluster) {
    json_t *placement = json_object_get(c->status, "placement");
    if (!json_is_object(placement)) {
        placement = json_object();
        json_object_set_new(c->status, "placement", placement);
    }
    json_t *pods = json_object_get(placement, "pods");
    if (!json_is_array(pods)) {
        pods = json_array();
        json_object_set_new(placement, "pods", pods);
    }
    json_t *quality = json_object_get(placement, "quality");
    if (!json_is_object(quality)) {
        quality = json_object();
        json_object_set_new(placement, "quality", quality);
    }
    for (int i = 0; i < plan->n_pods; i++) {
        const areal_pod_plan *p = &plan->pods[i];
        char ranks[48];
        if (p->n_ranks > 1)
            snprintf(ranks, sizeof ranks, "%d-%d", p->first_rank, p->first_rank + p->n_ranks - 1);
        else
            snprintf(ranks, sizeof ranks, "%d", p->first_rank);
        /* a pod's entry replaces the one of an earlier plan with its name (a
         * resumed or restarted gang re-plans servers whose entries were kept):
         * the schema makes pod a list-map key, so a duplicate fails the whole
         * status write with 422 */
        for (size_t k = json_array_size(pods); k-- > 0;) {
            const char *had = step_str(json_array_get(pods, k), "pod", NULL);
            if (had != NULL && strcmp(had, p->name) == 0)
                json_array_remove(pods, k);
        }
        json_array_append_new(pods, json_pack("{s:s,s:s,s:s,s:s}", "pod", p->name, "node",
                                              cluster->nodes[p->node].name, "role",
                                              plan->roles[p->role].name, "ranks", ranks));
    }
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
}

bool step_create_pods(step_ctx *c, const areal_alloc *shape, const areal_plan *plan,
                      const areal_cluster *cluster, const bool *exists,
                      const desired_config *dcfg) {
    for (int i = 0; i < plan->n_pods && !c->oom; i++) {
        if (exists != NULL && exists[i])
            continue; /* created by an earlier pass of the same plan */
        reconcile_action *a = step_push(c, RECONCILE_CREATE, "pods", plan->pods[i].name);
        if (a != NULL &&
            (a->obj = desired_pod(c->in->job, shape, plan, cluster, i, dcfg, NULL)) == NULL)
            c->oom = true;
    }
    return !c->oom;
}

bool step_bind_pods(step_ctx *c, const areal_plan *plan, const areal_cluster *cluster) {
    for (int i = 0; i < plan->n_pods && !c->oom; i++) {
        reconcile_action *a = step_push(c, RECONCILE_BIND, "pods", plan->pods[i].name);
        if (a != NULL)
            snprintf(a->node, sizeof a->node, "%s", cluster->nodes[plan->pods[i].node].name);
    }
    return !c->oom;
}

/* Adds `gpus`, `cpu`, `mem` to node `n`: false (nothing added) when that
 * would pass what the node has (CPU/memory: only where tracked). */
static bool node_take(areal_node *n, int gpus, long long cpu, long long mem) {
    if (n->gpus_used + gpus > n->gpus ||
        (n->cpu_milli > 0 && n->cpu_used_milli + cpu > n->cpu_milli) ||
        (n->mem_bytes > 0 && n->mem_used_bytes + mem > n->mem_bytes))
        return false;
    n->gpus_used += gpus;
    n->cpu_used_milli += (long)cpu;
    n->mem_used_bytes += mem;
    return true;
}

void step_cluster_take(step_ctx *c, areal_cluster *cl, const areal_plan *plan) {
    for (int i = 0; i < plan->n_pods && !c->oom; i++) {
        areal_node *n = &cl->nodes[plan->pods[i].node];
        /* CPU and memory as the pod will ask (chaos seed 30: servers planned
         * in one pass saw only each other's GPUs) */
        int gpus = 0;
        long long cpu = 0, mem = 0;
        json_t *pod = desired_pod(c->in->job, &c->spec->shape, plan, cl, i, &c->in->cfg, NULL);
        if (pod == NULL) {
            c->oom = true;
            return;
        }
        if (areal_kube_pod_requests(pod, "pod", &gpus, &cpu, &mem, NULL) != AREAL_OK)
            gpus = plan->pods[i].n_ranks, cpu = mem = 0;
        json_decref(pod);
        if (!node_take(n, plan->pods[i].n_ranks > gpus ? plan->pods[i].n_ranks : gpus, cpu, mem)) {
            /* over what is free: nothing else fits there */
            n->gpus_used = n->gpus;
            n->cpu_used_milli = n->cpu_milli;
            n->mem_used_bytes = n->mem_bytes;
        }
    }
}

bool step_cluster_claim(areal_cluster *cl, const json_t *const *pods, int n) {
    areal_cluster before = *cl;
    areal_node *saved = malloc((size_t)(cl->n_nodes + 1) * sizeof *saved);
    if (saved == NULL)
        return false;
    memcpy(saved, cl->nodes, (size_t)cl->n_nodes * sizeof *saved);
    bool ok = true;
    for (int i = 0; ok && i < n; i++) {
        const json_t *pod = pods[i];
        if (step_str(pod, "spec", "nodeName") != NULL || step_pod_terminated(pod))
            continue; /* counted already, or holds nothing */
        const char *node = step_annotation(pod, AREAL_ANNOTATION_NODE);
        int gpus = 0;
        long long cpu = 0, mem = 0;
        if (node == NULL ||
            areal_kube_pod_requests(pod, "pod", &gpus, &cpu, &mem, NULL) != AREAL_OK) {
            ok = false;
            break;
        }
        int at = -1;
        for (int k = 0; k < cl->n_nodes && at < 0; k++)
            if (strcmp(cl->nodes[k].name, node) == 0)
                at = k;
        ok = at >= 0 && node_take(&cl->nodes[at], gpus, cpu, mem);
    }
    if (!ok)
        memcpy(cl->nodes, saved, (size_t)before.n_nodes * sizeof *saved);
    free(saved);
    return ok;
}
