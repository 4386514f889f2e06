/*
 * sim_status.c - the pod status a kubelet writes (see areal/simpod.h).
 *
 * What: one merge patch of pods/status per change: phase, pod and host IPs,
 * the five conditions, and the container's status (waiting with a reason,
 * running since, terminated with exit code, reason Completed|Error, signal).
 * How: a merge patch replaces arrays whole, so every patch carries the full
 * conditions and containerStatuses lists - no read-modify-write.
 * Rejected: strategic merge by condition type (the API server supports it for
 * pods, but the whole list is as short and cannot leave stale entries).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "areal/simpod.h"

void sim_rfc3339(int64_t t, char *buf, size_t cap) {
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_t *condition(const char *type, bool ok, const char *reason, const char *now) {
    json_t *c = json_pack("{s:s,s:s,s:s}", "type", type, "status", ok ? "True" : "False",
                          "lastTransitionTime", now);
    if (c != NULL && !ok && reason != NULL)
        json_object_set_new(c, "reason", json_string(reason));
    return c;
}

static json_t *ip_list(const char *ip) {
    return json_pack("[{s:s}]", "ip", ip);
}

json_t *sim_status_patch(const sim_report *r, const char *now) {
    bool running = r->state == SIM_CSTATE_RUNNING;
    bool done = r->state == SIM_CSTATE_TERMINATED;
    const char *not_ready = done ? "PodCompleted" : "ContainersNotReady";
    json_t *conds = json_array();
    json_array_append_new(conds, condition("PodScheduled", true, NULL, now));
    json_array_append_new(
        conds, condition("PodReadyToStartContainers", r->pod_ip != NULL && !done, NULL, now));
    json_array_append_new(conds, condition("Initialized", true, NULL, now));
    json_array_append_new(conds, condition("ContainersReady", running, not_ready, now));
    json_array_append_new(conds, condition("Ready", running, not_ready, now));

    json_t *state = NULL;
    if (r->state == SIM_CSTATE_WAITING) {
        state = json_pack("{s:{s:s}}", "waiting", "reason",
                          r->reason ? r->reason : "ContainerCreating");
        if (r->message != NULL)
            json_object_set_new(json_object_get(state, "waiting"), "message",
                                json_string(r->message));
    } else if (running) {
        state = json_pack("{s:{s:s}}", "running", "startedAt", r->started_at ? r->started_at : now);
    } else {
        json_t *t = json_pack("{s:i,s:s,s:s,s:s}", "exitCode", r->exit_code, "reason",
                              r->reason ? r->reason : (r->exit_code == 0 ? "Completed" : "Error"),
                              "startedAt", r->started_at ? r->started_at : now, "finishedAt",
                              r->finished_at ? r->finished_at : now);
        if (t != NULL && r->signal > 0)
            json_object_set_new(t, "signal", json_integer(r->signal));
        if (t != NULL && r->message != NULL)
            json_object_set_new(t, "message", json_string(r->message));
        if (t != NULL && r->container_id != NULL)
            json_object_set_new(t, "containerID", json_string(r->container_id));
        state = json_pack("{s:o}", "terminated", t);
    }
    json_t *cs =
        json_pack("{s:s,s:s,s:s,s:b,s:b,s:i,s:o}", "name", r->container ? r->container : "",
                  "image", r->image ? r->image : "", "imageID", "", "ready", running, "started",
                  running, "restartCount", 0, "state", state);
    if (cs != NULL && r->container_id != NULL)
        json_object_set_new(cs, "containerID", json_string(r->container_id));
    json_t *st = json_pack("{s:s,s:o,s:[o]}", "phase", r->phase ? r->phase : "Pending",
                           "conditions", conds, "containerStatuses", cs);
    if (st == NULL)
        return NULL;
    if (r->start_time != NULL)
        json_object_set_new(st, "startTime", json_string(r->start_time));
    if (r->pod_ip != NULL) {
        json_object_set_new(st, "podIP", json_string(r->pod_ip));
        json_object_set_new(st, "podIPs", ip_list(r->pod_ip));
    }
    if (r->host_ip != NULL) {
        json_object_set_new(st, "hostIP", json_string(r->host_ip));
        json_object_set_new(st, "hostIPs", ip_list(r->host_ip));
    }
    return json_pack("{s:o}", "status", st);
}
