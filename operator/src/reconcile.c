/*
 * reconcile.c - one AReaLJob's decision (see areal/operator/reconcile.h): the
 * driver of the steps of steps.h.
 *
 * The pass reads the job, its pods and the cluster and never talks to the
 * API server; the controller applies the actions. The spec is parsed once
 * into a job_spec; the pods are sorted into the trainer gang and the rollout
 * servers; then cleanup, trainer, rollout, containers and status run in that order, each
 * appending actions. Status is rebuilt from the observed pods every pass,
 * keeping only what cannot be observed (restart counts and times, the planned
 * gang size, placement) from the previous status. Condition timestamps move
 * only when a condition's status changes, and Events are recorded only on
 * transitions, so an idle job writes nothing.
 */
#include "areal/operator/reconcile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/operator/desired.h"
#include "areal/operator/spec.h"
#include "steps.h"

void reconcile_format_time(long long ms, char buf[32]) {
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void reconcile_result_free(reconcile_result *r) {
    for (int i = 0; i < r->n_actions; i++)
        json_decref(r->actions[i].obj);
    free(r->actions);
    json_decref(r->status);
    memset(r, 0, sizeof *r);
}

bool reconcile_error_is_permanent(int http_status) {
    return http_status == 400 || http_status == 403 || http_status == 422;
}

/* True when `pod` is a rollout server of the split spec: a rollout pod of the
 * current shape (one of an older shape belongs to a gang being replaced). */
static bool is_server(const job_spec *s, const json_t *pod) {
    if (!s->split)
        return false;
    const char *kind = step_label(pod, AREAL_LABEL_ROLE_KIND);
    const char *alloc = step_annotation(pod, AREAL_ANNOTATION_ALLOC);
    return kind && strcmp(kind, "rollout") == 0 && alloc && strcmp(alloc, s->canonical) == 0;
}

static long server_index(const json_t *pod) {
    const char *ix = step_label(pod, AREAL_LABEL_POD_INDEX);
    const char *g = step_annotation(pod, AREAL_ANNOTATION_GANG);
    long i = ix ? strtol(ix, NULL, 10) : 0, k = g ? strtol(g, NULL, 10) : 1;
    return k > 0 ? i / k : i;
}

static int by_server(const void *a, const void *b) {
    long x = server_index(*(const json_t *const *)a), y = server_index(*(const json_t *const *)b);
    return x < y ? -1 : x > y;
}

/* Sorts the job's pods into the trainer gang and the servers (grouped by index). */
static bool sort_pods(step_ctx *c) {
    const reconcile_input *in = c->in;
    int n = in->n_pods;
    c->trainer_pods = calloc((size_t)n + 1, sizeof *c->trainer_pods);
    c->server_pods = calloc((size_t)n + 1, sizeof *c->server_pods);
    c->servers = calloc((size_t)n + 1, sizeof *c->servers);
    if (!c->trainer_pods || !c->server_pods || !c->servers)
        return false;
    for (int i = 0; i < n; i++) {
        if (is_server(c->spec, in->pods[i]))
            c->server_pods[c->n_server_pods++] = in->pods[i];
        else
            c->trainer_pods[c->n_trainer++] = in->pods[i];
    }
    qsort(c->server_pods, (size_t)c->n_server_pods, sizeof *c->server_pods, by_server);
    for (int i = 0; i < c->n_server_pods; i++) {
        const json_t *pod = c->server_pods[i];
        long ix = server_index(pod);
        step_server *sv = c->n_servers ? &c->servers[c->n_servers - 1] : NULL;
        if (sv == NULL || sv->index != ix) {
            sv = &c->servers[c->n_servers++];
            const char *g = step_annotation(pod, AREAL_ANNOTATION_GANG);
            *sv = (step_server){.index = (int)ix,
                                .first = i,
                                .gang = g ? (int)strtol(g, NULL, 10) : 1,
                                .bound = true,
                                .running = true,
                                .ready = true};
        }
        sv->n_pods++;
        const char *ph = step_str(pod, "status", "phase");
        bool going = step_pod_going(pod), on_lost = step_pod_lost(c, pod);
        sv->failed = sv->failed || (ph && strcmp(ph, "Failed") == 0);
        sv->lost = sv->lost || (on_lost && !going && !step_pod_terminated(pod));
        /* whatever its phase: no kubelet will confirm it (see step_trainer.c) */
        sv->lost_going = sv->lost_going || (on_lost && going);
        sv->going = sv->going || going;
        sv->bound = sv->bound && step_str(pod, "spec", "nodeName") != NULL;
        sv->running = sv->running && ph && strcmp(ph, "Running") == 0;
        sv->ready = sv->ready && step_pod_ready(pod);
    }
    for (int i = 0; i < c->n_servers; i++) {
        step_server *sv = &c->servers[i];
        sv->ready = sv->ready && sv->running && sv->bound && sv->n_pods >= sv->gang && !sv->going;
        c->server_failed = c->server_failed || sv->failed || sv->lost;
    }
    return true;
}

static void free_sorted(step_ctx *c) {
    free(c->trainer_pods);
    free(c->server_pods);
    free(c->servers);
}

/* The status fields a pass cannot observe again, from the previous status. */
static void carry_status(step_ctx *c) {
    json_object_set_new(c->status, "restarts",
                        json_integer(step_int(c->old_status, "restarts", NULL, 0)));
    static const char *const carried[] = {
        "lastRestartTime", "startTime",   "completionTime",      "placement", "gpus",
        "progress",        "trainerPods", "rolloutReplacements", NULL};
    for (int i = 0; carried[i]; i++) {
        json_t *v = json_object_get(c->old_status, carried[i]);
        if (v != NULL)
            json_object_set_new(c->status, carried[i], json_deep_copy(v));
    }
    json_object_set_new(c->status, "observedGeneration", json_integer(c->spec->generation));
    if (json_object_get(c->status, "startTime") == NULL)
        json_object_set_new(c->status, "startTime", json_string(c->now));
    char selector[400];
    snprintf(selector, sizeof selector, "%s=%s,%s=rollout", AREAL_LABEL_JOB, c->spec->name,
             AREAL_LABEL_ROLE_KIND);
    json_object_set_new(c->status, "rolloutSelector", json_string(selector));
}

/* Every condition of the previous status, in its order: a step sets (or
 * replaces) the ones it decides; the others say what they said. Found by the
 * chaos test (seeds 174, 339): a pass that set only RolloutReady dropped
 * Scheduled, and a Restarting job showed no reason at all. Rejected: copying
 * the old conditions only when no step set any (the earlier rule). A
 * RolloutReady of a spec that no longer splits has nothing to say and goes. */
static void carry_conditions(step_ctx *c) {
    json_t *conds = json_array();
    size_t i;
    json_t *cond;
    json_array_foreach(json_object_get(c->old_status, "conditions"), i, cond) {
        const char *t = step_str(cond, "type", NULL);
        if (t != NULL && !(strcmp(t, "RolloutReady") == 0 && !c->spec->split))
            json_array_append(conds, cond);
    }
    if (conds == NULL || json_object_set_new(c->status, "conditions", conds) != 0)
        c->oom = true;
}

/* The ms until the first pod on a down node is lost, or -1. */
static long long next_loss_ms(const step_ctx *c) {
    long long first = -1, grace = (long long)c->spec->node_lost_s * 1000;
    for (int i = 0; i < c->in->n_pods; i++) {
        long long d = step_down_for_ms(c, c->in->pods[i]);
        const json_t *pod = c->in->pods[i];
        if (d >= 0 && d < grace && (!step_pod_terminated(pod) || step_pod_going(pod)) &&
            (first < 0 || grace - d < first))
            first = grace - d;
    }
    return first;
}

int reconcile_job(const reconcile_input *in, reconcile_result *out, areal_error *err) {
    memset(out, 0, sizeof *out);
    job_spec *spec = malloc(sizeof *spec); /* large (allocations): not on a worker's stack */
    if (spec == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    if (job_spec_parse(in->job, spec, err) != AREAL_OK) {
        free(spec);
        return AREAL_EINVAL;
    }
    step_ctx c = {.spec = spec,
                  .in = in,
                  .out = out,
                  .old_status = json_object_get(in->job, "status"),
                  .status = json_object(),
                  .err = err};
    reconcile_format_time(in->now_ms, c.now);
    if (c.status == NULL || !sort_pods(&c)) {
        c.oom = true;
    } else {
        carry_status(&c);
        carry_conditions(&c);
        if (!step_cleanup(&c)) {
            step_trainer(&c);
            step_rollout(&c);
            step_containers(&c);
        }
        if (c.status != NULL)
            step_status(&c);
    }
    long long loss = c.status != NULL ? next_loss_ms(&c) : -1;
    /* a pod on a node that went down is lost when the grace ends: look again then */
    if (loss >= 0 && (out->requeue_after_ms <= 0 || loss + 100 < out->requeue_after_ms))
        out->requeue_after_ms = (long)loss + 100;
    free_sorted(&c);
    char name[256];
    snprintf(name, sizeof name, "%s", spec->name);
    free(spec);
    if (c.oom) {
        reconcile_result_free(out);
        json_decref(c.status);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory reconciling %s", name);
    }
    if (c.status != NULL && c.old_status != NULL && json_equal(c.old_status, c.status)) {
        json_decref(c.status); /* nothing to write */
        c.status = NULL;
    }
    out->status = c.status;
    return AREAL_OK;
}

int reconcile_rejected(const reconcile_input *in, const char *message, reconcile_result *out,
                       areal_error *err) {
    memset(out, 0, sizeof *out);
    job_spec spec = {.name = step_str(in->job, "metadata", "name"),
                     .generation = step_int(in->job, "metadata", "generation", 0)};
    if (spec.name == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "the job has no metadata.name");
    const json_t *old = json_object_get(in->job, "status");
    step_ctx c = {.spec = &spec, .in = in, .out = out, .old_status = old, .err = err};
    reconcile_format_time(in->now_ms, c.now);
    c.status = json_is_object(old) ? json_deep_copy(old) : json_object();
    if (c.status == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    /* every other condition stays; Scheduled is set anew */
    json_t *conds = json_array();
    size_t i;
    json_t *cond;
    json_array_foreach(json_object_get(old, "conditions"), i, cond) {
        const char *t = step_str(cond, "type", NULL);
        if (t == NULL || strcmp(t, "Scheduled") != 0)
            json_array_append(conds, cond);
    }
    json_object_set_new(c.status, "conditions", conds);
    step_phase(&c, "Failed");
    json_object_set_new(c.status, "observedGeneration", json_integer(spec.generation));
    if (step_condition(&c, "Scheduled", false, "ChildRejected", message))
        step_event(&c, true, "ChildRejected", "%s", message);
    if (c.oom) {
        reconcile_result_free(out);
        json_decref(c.status);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    }
    out->status = c.status;
    return AREAL_OK;
}
