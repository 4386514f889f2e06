/*
 * test_reconcile.c - the reconcile decision over a job's whole life, applied
 * to a small in-memory world (pods, the job's finalizers and status) with a
 * pretend kubelet in between: gang creation and binding exactly where the
 * planner says, idempotence, Running, gang restart with backoff, the restart
 * limit, success, unschedulable jobs, bad allocations, suspension, deletion
 * and recovery from a crash between create and bind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "areal/operator/reconcile.h"
#include "areal/placement.h"

#define MAX_PODS 64
#define T0       1795000000000LL /* a fixed "now" (ms since the epoch) */

typedef struct world {
    json_t *job;
    json_t *pods[MAX_PODS];
    int n_pods;
    bool service, configmap;
    areal_cluster cluster;
    long long now;
    int events;
    char last_event[64];
    bool job_deleted;       /* a RECONCILE_DELETE of the job itself */
    char deleted_uid[64];   /* its uid precondition */
    int force_deletes;      /* pod deletes with grace 0 */
    char events_seen[1024]; /* every Event reason, space-separated */
    reconcile_down_node down[4];
    int n_down;
} world;

static const char *JOB = "{\"apiVersion\":\"areal.io/v1alpha1\",\"kind\":\"AReaLJob\","
                         "\"metadata\":{\"name\":\"j\",\"namespace\":\"ns\",\"uid\":\"u1\","
                         "\"generation\":1},"
                         "\"spec\":{\"allocation\":\"sglang:d2t2+megatron:d2p2t2\","
                         "\"failurePolicy\":{\"maxRestarts\":2,\"backoff\":{\"initialSeconds\":"
                         "10,\"maxSeconds\":60}}}}";

static void world_init(world *w, int nodes) {
    memset(w, 0, sizeof *w);
    w->job = json_loads(JOB, 0, NULL);
    assert_non_null(w->job);
    areal_cluster_init(&w->cluster);
    for (int i = 0; i < nodes; i++) {
        char name[32];
        snprintf(name, sizeof name, "node-%d", i);
        assert_true(areal_cluster_add_node(&w->cluster, name, 8, 0, NULL) >= 0);
    }
    w->now = T0;
}

/* A trainer gang of two 8-GPU pods (d4p2t2) beside the two rollout servers. */
static void big_trainer(world *w) {
    json_object_set_new(json_object_get(w->job, "spec"), "allocation",
                        json_string("sglang:d2t2+megatron:d4p2t2"));
}

static void world_free(world *w) {
    json_decref(w->job);
    for (int i = 0; i < w->n_pods; i++)
        json_decref(w->pods[i]);
    areal_cluster_free(&w->cluster);
}

static int find_pod(world *w, const char *name) {
    for (int i = 0; i < w->n_pods; i++)
        if (strcmp(
                json_string_value(json_object_get(json_object_get(w->pods[i], "metadata"), "name")),
                name) == 0)
            return i;
    return -1;
}

/* One reconcile, its actions applied to the world. Returns the result (caller frees). */
static reconcile_result step_behind(world *w, const char *queued_behind);

static reconcile_result step(world *w) {
    return step_behind(w, NULL);
}

/* One reconcile with in.queued_behind set (spec.priority: a job ranked first waits). */
static reconcile_result step_behind(world *w, const char *queued_behind) {
    reconcile_input in = {.queued_behind = queued_behind,
                          .job = w->job,
                          .pods = (const json_t *const *)w->pods,
                          .n_pods = w->n_pods,
                          .has_service = w->service,
                          .has_configmap = w->configmap,
                          .cluster = &w->cluster,
                          .down = w->down,
                          .n_down = w->n_down,
                          .now_ms = w->now};
    reconcile_result r;
    areal_error e;
    int rc = reconcile_job(&in, &r, &e);
    if (rc != AREAL_OK)
        fail_msg("reconcile_job: %s", e.msg);
    for (int i = 0; i < r.n_actions; i++) {
        reconcile_action *a = &r.actions[i];
        switch (a->kind) {
        case RECONCILE_CREATE:
            if (strcmp(a->resource, "services") == 0) {
                w->service = true;
            } else if (strcmp(a->resource, "configmaps") == 0) {
                w->configmap = true;
            } else {
                assert_int_equal(find_pod(w, a->name), -1); /* never created twice */
                assert_true(w->n_pods < MAX_PODS);
                json_t *pod = json_deep_copy(a->obj);
                json_object_set_new(pod, "status", json_pack("{s:s}", "phase", "Pending"));
                w->pods[w->n_pods++] = pod;
            }
            break;
        case RECONCILE_BIND: {
            int k = find_pod(w, a->name);
            assert_true(k >= 0);
            json_t *spec = json_object_get(w->pods[k], "spec");
            assert_null(json_object_get(spec, "nodeName")); /* bound once */
            json_object_set_new(spec, "nodeName", json_string(a->node));
            break;
        }
        case RECONCILE_DELETE: {
            if (strcmp(a->resource, "arealjobs") == 0) {
                w->job_deleted = true;
                snprintf(w->deleted_uid, sizeof w->deleted_uid, "%s", a->uid);
                break;
            }
            w->force_deletes += a->force;
            int k = find_pod(w, a->name);
            assert_true(k >= 0);
            json_decref(w->pods[k]);
            w->pods[k] = w->pods[--w->n_pods];
            break;
        }
        case RECONCILE_PATCH_JOB:
            json_object_update_recursive(w->job, a->obj);
            break;
        case RECONCILE_EVENT:
            w->events++;
            snprintf(w->last_event, sizeof w->last_event, "%s", a->reason);
            if (strlen(w->events_seen) + strlen(a->reason) + 2 < sizeof w->events_seen) {
                strcat(w->events_seen, a->reason);
                strcat(w->events_seen, " ");
            }
            break;
        }
    }
    if (r.status != NULL)
        json_object_set(w->job, "status", r.status);
    return r;
}

static const char *phase(const world *w) {
    return json_string_value(json_object_get(json_object_get(w->job, "status"), "phase"));
}

static void kubelet_sets(world *w, const char *ph, bool ready) {
    for (int i = 0; i < w->n_pods; i++) {
        json_object_set_new(w->pods[i], "status",
                            json_pack("{s:s,s:[{s:s,s:s}]}", "phase", ph, "conditions", "type",
                                      "Ready", "status", ready ? "True" : "False"));
    }
}

static int count_kind(const reconcile_result *r, reconcile_action_kind k) {
    int n = 0;
    for (int i = 0; i < r->n_actions; i++)
        n += r->actions[i].kind == k;
    return n;
}

/* Passes until one creates, binds and deletes nothing (the rollout servers
 * come one per pass once the trainer gang is bound). Returns the passes. */
static int settle(world *w) {
    for (int n = 1; n <= 16; n++) {
        reconcile_result r = step(w);
        int acts = count_kind(&r, RECONCILE_CREATE) + count_kind(&r, RECONCILE_BIND) +
                   count_kind(&r, RECONCILE_DELETE);
        reconcile_result_free(&r);
        if (acts == 0)
            return n;
    }
    fail_msg("the job does not settle");
    return -1;
}

/* The job placed, the kubelet running every pod, the status caught up: a Running job. */
static void bring_up(world *w) {
    settle(w);
    kubelet_sets(w, "Running", true);
    settle(w);
}

static const char *role_kind(const json_t *pod) {
    return json_string_value(json_object_get(
        json_object_get(json_object_get(pod, "metadata"), "labels"), "areal.io/role-kind"));
}

static int rollout_pods(const world *w) {
    int n = 0;
    for (int i = 0; i < w->n_pods; i++)
        n += role_kind(w->pods[i]) && strcmp(role_kind(w->pods[i]), "rollout") == 0;
    return n;
}

static const char *node_of(const json_t *pod) {
    return json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
}

static const json_t *status_of(const world *w) {
    return json_object_get(w->job, "status");
}

static const json_t *condition(const world *w, const char *type) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(status_of(w), "conditions"), i, c) {
        if (strcmp(json_string_value(json_object_get(c, "type")), type) == 0)
            return c;
    }
    return NULL;
}

static const char *reason_of(const world *w, const char *type) {
    return json_string_value(json_object_get(condition(w, type), "reason"));
}

/* The value of env var `name` of a pod's container, or NULL. */
static const char *env_of(const json_t *pod, const char *name) {
    const json_t *c =
        json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(c, "env"), i, e) {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
            return json_string_value(json_object_get(e, "value"));
    }
    return NULL;
}

static void creates_and_binds_the_gang_where_the_planner_says(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    reconcile_result r = step(&w);
    assert_int_equal(count_kind(&r, RECONCILE_PATCH_JOB), 1); /* the finalizer */
    /* the first placement: svc, cm, the trainer's pod of 8 GPUs and the two
     * rollout servers of 2, all or nothing */
    assert_int_equal(count_kind(&r, RECONCILE_CREATE), 2 + 1 + 2);
    assert_int_equal(count_kind(&r, RECONCILE_BIND), 3);
    /* every create comes before every bind */
    int last_create = -1, first_bind = 1000;
    for (int i = 0; i < r.n_actions; i++) {
        if (r.actions[i].kind == RECONCILE_CREATE)
            last_create = i;
        if (r.actions[i].kind == RECONCILE_BIND && i < first_bind)
            first_bind = i;
    }
    assert_true(last_create < first_bind);
    /* the same nodes as areal_place on the same inventory (what arealctl plan prints) */
    areal_alloc a;
    assert_int_equal(areal_alloc_parse("megatron:d2p2t2", &a, NULL), AREAL_OK);
    areal_job pj;
    areal_job_init(&pj, "j", &a);
    areal_plan plan;
    assert_int_equal(areal_place(&pj, &w.cluster, &plan, NULL), AREAL_OK);
    for (int i = 0; i < plan.n_pods; i++) {
        int k = find_pod(&w, plan.pods[i].name);
        assert_true(k >= 0);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(w.pods[k], "spec"), "nodeName")),
            w.cluster.nodes[plan.pods[i].node].name);
    }
    areal_plan_free(&plan);
    assert_string_equal(phase(&w), "Pending");
    assert_string_equal(w.last_event, "GangBound");
    reconcile_result_free(&r);
    assert_int_equal(rollout_pods(&w), 2); /* one 2-GPU pod per server */
    assert_true(find_pod(&w, "j-rollout-0") >= 0 && find_pod(&w, "j-rollout-1") >= 0);
    /* a server's pods meet the trainer's rank 0 and carry their server's index */
    const json_t *server = w.pods[find_pod(&w, "j-rollout-1")];
    assert_string_equal(env_of(server, "MASTER_ADDR"), "j-trainer-0.j");
    assert_string_equal(env_of(server, "AREAL_SERVER_INDEX"), "1");
    assert_string_equal(env_of(server, "WORLD_SIZE"), "2");
    assert_string_equal(env_of(server, "AREAL_ALLOCATION"), "sglang:d1t2+megatron:d2p2t2");
    assert_null(env_of(w.pods[find_pod(&w, "j-trainer-0")], "AREAL_SERVER_INDEX"));
    assert_null(json_object_get(json_object_get(json_object_get(server, "metadata"), "labels"),
                                "areal.io/master"));
    assert_non_null(json_object_get(
        json_object_get(json_object_get(status_of(&w), "placement"), "quality"), "trainer/tp"));

    /* idempotent: nothing more to do, and nothing to write */
    r = step(&w);
    assert_int_equal(r.n_actions, 0);
    assert_null(r.status);
    reconcile_result_free(&r);

    /* running */
    kubelet_sets(&w, "Running", true);
    r = step(&w);
    assert_string_equal(phase(&w), "Running");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(w.job, "status"), "readyPods")), 3);
    assert_int_equal(json_integer_value(json_object_get(status_of(&w), "rolloutReplicas")), 2);
    assert_string_equal(reason_of(&w, "RolloutReady"), "ServersReady");
    reconcile_result_free(&r);
    int events = w.events;
    r = step(&w);
    assert_int_equal(w.events, events); /* no repeated event */
    assert_null(r.status);
    reconcile_result_free(&r);
    world_free(&w);
}

static void failed_pod_restarts_the_gang_with_backoff_then_fails(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    char first_names[MAX_PODS][64];
    int n0 = w.n_pods;
    for (int i = 0; i < n0; i++)
        snprintf(
            first_names[i], 64, "%s",
            json_string_value(json_object_get(json_object_get(w.pods[i], "metadata"), "name")));
    for (int attempt = 1; attempt <= 3; attempt++) {
        kubelet_sets(&w, "Running", true);
        json_object_set_new(w.pods[find_pod(&w, "j-trainer-0")], "status",
                            json_pack("{s:s,s:[{s:{s:{s:i}}}]}", "phase", "Failed",
                                      "containerStatuses", "state", "terminated", "exitCode", 137));
        r = step(&w);
        if (attempt == 3) {
            assert_int_equal(w.n_pods, 0); /* failed: everything goes */
            assert_string_equal(phase(&w), "Failed");
            assert_string_equal(w.last_event, "BackoffLimitExceeded");
            reconcile_result_free(&r);
            break;
        }
        assert_int_equal(w.n_pods, rollout_pods(&w)); /* the trainer gang goes, the servers stay */
        assert_int_equal(rollout_pods(&w), 2);
        assert_string_equal(phase(&w), "Restarting");
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(w.job, "status"), "restarts")),
            attempt);
        long expect = attempt == 1 ? 10000 : 20000;
        assert_int_equal(r.requeue_after_ms, expect);
        reconcile_result_free(&r);
        /* before the backoff ends: wait, create nothing */
        w.now += expect / 2;
        r = step(&w);
        assert_int_equal(count_kind(&r, RECONCILE_CREATE), 0);
        assert_true(r.requeue_after_ms > 0 && r.requeue_after_ms <= expect / 2);
        reconcile_result_free(&r);
        /* after it: the same pods (names, hence ranks) again */
        w.now += expect;
        r = step(&w);
        assert_int_equal(w.n_pods, n0);
        for (int i = 0; i < n0; i++)
            assert_true(find_pod(&w, first_names[i]) >= 0);
        reconcile_result_free(&r);
    }
    /* terminal: nothing is recreated */
    r = step(&w);
    assert_int_equal(count_kind(&r, RECONCILE_CREATE), 0);
    reconcile_result_free(&r);
    world_free(&w);
}

/* After a restart the old gang's pods stop one by one (SIGTERM, grace period)
 * and may report Failed while they go: that is not a new failure. */
static void stopping_pods_are_not_a_new_failure(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    kubelet_sets(&w, "Running", true);
    json_t *old[MAX_PODS];
    int n0 = w.n_pods;
    for (int i = 0; i < n0; i++)
        old[i] = json_deep_copy(w.pods[i]);
    json_object_set_new(w.pods[0], "status",
                        json_pack("{s:s,s:[{s:{s:{s:i}}}]}", "phase", "Failed", "containerStatuses",
                                  "state", "terminated", "exitCode", 137));
    r = step(&w);
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Restarting");
    /* the world deleted them at once; a kubelet takes its time: put them back,
     * terminating, the SIGTERMed ones Failed with 143 */
    for (int i = 1; i < n0; i++) {
        json_object_set_new(json_object_get(old[i], "metadata"), "deletionTimestamp",
                            json_string("2026-01-01T00:00:00Z"));
        json_object_set_new(old[i], "status",
                            json_pack("{s:s,s:[{s:{s:{s:i}}}]}", "phase", "Failed",
                                      "containerStatuses", "state", "terminated", "exitCode", 143));
        w.pods[w.n_pods++] = old[i];
    }
    json_decref(old[0]);
    r = step(&w);
    assert_int_equal(count_kind(&r, RECONCILE_CREATE), 0);
    assert_int_equal(count_kind(&r, RECONCILE_DELETE), 0);
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Restarting");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(w.job, "status"), "restarts")), 1);
    /* once they are gone and the backoff is over, one new gang */
    while (w.n_pods > 0)
        json_decref(w.pods[--w.n_pods]);
    w.now += 60000;
    r = step(&w);
    assert_int_equal(w.n_pods, n0);
    reconcile_result_free(&r);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(w.job, "status"), "restarts")), 1);
    world_free(&w);
}

static void trainer_success_finishes_the_job(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    kubelet_sets(&w, "Running", true);
    int k = find_pod(&w, "j-trainer-0");
    assert_true(k >= 0);
    json_object_set_new(w.pods[k], "status", json_pack("{s:s}", "phase", "Succeeded"));
    r = step(&w);
    assert_string_equal(phase(&w), "Succeeded");
    assert_int_equal(w.n_pods, 1); /* only the finished trainer pod stays */
    assert_true(find_pod(&w, "j-trainer-0") >= 0);
    reconcile_result_free(&r);
    world_free(&w);
}

static void unschedulable_job_waits_with_the_reason(void **state) {
    (void)state;
    world w;
    world_init(&w, 1);
    w.cluster.nodes[0].gpus = 4; /* the trainer gang needs 8 */
    reconcile_result r = step(&w);
    assert_int_equal(count_kind(&r, RECONCILE_CREATE), 0);
    assert_string_equal(phase(&w), "Pending");
    const json_t *cond =
        json_array_get(json_object_get(json_object_get(w.job, "status"), "conditions"), 0);
    assert_string_equal(json_string_value(json_object_get(cond, "reason")), "Unschedulable");
    assert_non_null(strstr(json_string_value(json_object_get(cond, "message")), "needs 8 GPUs"));
    assert_string_equal(w.last_event, "Unschedulable");
    reconcile_result_free(&r);
    int events = w.events;
    r = step(&w); /* no busy loop: no event, no requeue, no write */
    assert_int_equal(w.events, events);
    assert_int_equal(r.requeue_after_ms, 0);
    assert_null(r.status);
    reconcile_result_free(&r);
    /* nodes are added: placed */
    assert_true(areal_cluster_add_node(&w.cluster, "node-new", 8, 0, NULL) >= 0);
    r = step(&w);
    assert_int_equal(count_kind(&r, RECONCILE_BIND), 1 + 2); /* the trainer and its servers */
    reconcile_result_free(&r);
    world_free(&w);
}

static void invalid_allocation_fails_with_the_parser_message(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    json_object_set_new(json_object_get(w.job, "spec"), "allocation", json_string("fsdp:d4p2"));
    reconcile_result r = step(&w);
    assert_string_equal(phase(&w), "Failed");
    const json_t *cond =
        json_array_get(json_object_get(json_object_get(w.job, "status"), "conditions"), 0);
    assert_string_equal(json_string_value(json_object_get(cond, "reason")), "InvalidAllocation");
    assert_non_null(strstr(json_string_value(json_object_get(cond, "message")), "FSDP"));
    reconcile_result_free(&r);
    world_free(&w);
}

static void suspend_and_delete_remove_the_pods(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    json_object_set_new(json_object_get(w.job, "spec"), "suspend", json_true());
    r = step(&w);
    assert_int_equal(w.n_pods, 0);
    assert_string_equal(phase(&w), "Suspended");
    reconcile_result_free(&r);
    json_object_set_new(json_object_get(w.job, "spec"), "suspend", json_false());
    settle(&w);
    assert_int_equal(w.n_pods, 3);
    /* deletion: pods go, then the finalizer */
    json_object_set_new(json_object_get(w.job, "metadata"), "deletionTimestamp",
                        json_string("2026-11-29T20:00:00Z"));
    r = step(&w);
    assert_int_equal(w.n_pods, 0);
    assert_int_equal(
        json_array_size(json_object_get(json_object_get(w.job, "metadata"), "finalizers")), 0);
    assert_null(r.status);
    reconcile_result_free(&r);
    world_free(&w);
}

/* The trainer's progress as the operator's poller writes it. */
static void set_progress(world *w, long long step) {
    json_object_set_new(json_object_get(w->job, "status"), "progress",
                        json_pack("{s:I,s:I,s:f}", "step", (json_int_t)step, "policyVersion",
                                  (json_int_t)step, "rewardMean", 0.5));
}

static const char *status_str(const world *w, const char *key) {
    return json_string_value(json_object_get(status_of(w), key));
}

/* spec.suspend: pods deleted with their grace period (no force: the trainer
 * checkpoints on SIGTERM), phase Suspended with a condition and an Event,
 * progress kept, nothing of the old plan held; resumed with a new allocation
 * (allowed only while suspended), the gang is planned from the new one and
 * the progress is still there until the trainer reports again. */
static void suspend_keeps_the_job_and_resume_plans_anew(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    settle(&w);
    kubelet_sets(&w, "Running", true);
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Running");
    set_progress(&w, 7);
    json_object_set_new(json_object_get(w.job, "spec"), "suspend", json_true());
    w.events_seen[0] = '\0';
    r = step(&w);
    assert_int_equal(count_kind(&r, RECONCILE_DELETE), 3);
    assert_int_equal(count_kind(&r, RECONCILE_BIND) + count_kind(&r, RECONCILE_CREATE), 0);
    assert_int_equal(w.force_deletes, 0); /* their grace period: the trainer checkpoints */
    reconcile_result_free(&r);
    assert_int_equal(w.n_pods, 0);
    assert_string_equal(phase(&w), "Suspended");
    assert_string_equal(reason_of(&w, "Suspended"), "Suspended");
    assert_string_equal(json_string_value(json_object_get(condition(&w, "Suspended"), "status")),
                        "True");
    assert_string_equal(reason_of(&w, "Scheduled"), "Suspended");
    assert_non_null(strstr(w.events_seen, "Suspended"));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(status_of(&w), "progress"), "step")), 7);
    assert_int_equal(json_integer_value(json_object_get(status_of(&w), "trainerPods")), 0);
    assert_null(json_object_get(status_of(&w), "placement"));
    assert_null(status_str(&w, "completionTime"));
    /* at rest while suspended: nothing to do, nothing to write, no new Event */
    r = step(&w); /* the pods are gone: their counts go to 0 */
    assert_int_equal(json_integer_value(json_object_get(status_of(&w), "gpus")), 0);
    reconcile_result_free(&r);
    int events = w.events;
    r = step(&w);
    assert_int_equal(r.n_actions, 0);
    assert_null(r.status);
    assert_int_equal(w.events, events);
    reconcile_result_free(&r);

    /* the allocation changed while suspended: resumed, the new one is planned */
    json_object_set_new(json_object_get(w.job, "spec"), "allocation",
                        json_string("sglang:d1t2+megatron:d2p2t2"));
    json_object_set_new(json_object_get(w.job, "spec"), "suspend", json_false());
    w.events_seen[0] = '\0';
    settle(&w);
    assert_non_null(strstr(w.events_seen, "Resumed"));
    assert_non_null(strstr(w.events_seen, "GangBound"));
    assert_int_equal(rollout_pods(&w), 1);
    assert_int_equal(w.n_pods, 2);
    assert_string_equal(phase(&w), "Pending");
    kubelet_sets(&w, "Running", true);
    r = step(&w);
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Running");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(status_of(&w), "progress"), "step")), 7);
    world_free(&w);
}

/* The trainer stops on SIGTERM after its checkpoint and may exit 0: a master
 * pod that Succeeded while being deleted (suspend, restart) is not the end of
 * the training. */
static void a_deleted_trainer_that_exits_0_is_not_success(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    settle(&w);
    kubelet_sets(&w, "Running", true);
    int k = find_pod(&w, "j-trainer-0");
    json_object_set_new(json_object_get(w.pods[k], "metadata"), "deletionTimestamp",
                        json_string("2026-11-29T20:00:00Z"));
    json_object_set_new(w.pods[k], "status", json_pack("{s:s}", "phase", "Succeeded"));
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    assert_string_not_equal(phase(&w), "Succeeded");
    /* not going: it is the end */
    json_object_del(json_object_get(w.pods[k], "metadata"), "deletionTimestamp");
    r = step(&w);
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Succeeded");
    world_free(&w);
}

/* Succeeds at `at` (ms): the trainer's rank 0 exits 0. */
static void succeed_at(world *w, long long at) {
    settle(w);
    kubelet_sets(w, "Running", true);
    reconcile_result r = step(w);
    reconcile_result_free(&r);
    json_object_set_new(w->pods[find_pod(w, "j-trainer-0")], "status",
                        json_pack("{s:s}", "phase", "Succeeded"));
    w->now = at;
    r = step(w);
    reconcile_result_free(&r);
    assert_string_equal(phase(w), "Succeeded");
    r = step(w); /* the other pods are gone: the counts follow */
    reconcile_result_free(&r);
}

/* spec.ttlSecondsAfterFinished: counted from status.completionTime (so a pass
 * of a restarted operator, which only has the stored job, decides the same),
 * requeued for the moment it expires (no polling), then the job is deleted
 * with its uid as precondition and nothing more is written. */
static void ttl_deletes_the_finished_job_on_time(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    json_object_set_new(json_object_get(w.job, "spec"), "ttlSecondsAfterFinished",
                        json_integer(30));
    succeed_at(&w, T0 + 5000);
    char want[32];
    reconcile_format_time(T0 + 5000, want);
    assert_string_equal(status_str(&w, "completionTime"), want);
    for (long long after = 0; after < 30000; after += 7000) {
        w.now = T0 + 5000 + after;
        reconcile_result r = step(&w);
        assert_false(w.job_deleted);
        assert_int_equal(r.requeue_after_ms, 30000 - after + 100);
        assert_null(r.status); /* waiting writes nothing */
        reconcile_result_free(&r);
    }
    w.now = T0 + 5000 + 30000;
    reconcile_result r = step(&w);
    assert_true(w.job_deleted);
    assert_string_equal(w.deleted_uid, "u1");
    assert_string_equal(w.last_event, "Expired");
    assert_null(r.status);
    reconcile_result_free(&r);
    world_free(&w);

    /* no TTL: kept, and nothing is scheduled */
    world_init(&w, 3);
    succeed_at(&w, T0);
    w.now = T0 + 86400000LL;
    r = step(&w);
    assert_false(w.job_deleted);
    assert_int_equal(r.requeue_after_ms, 0);
    reconcile_result_free(&r);
    world_free(&w);
}

/* Failed counts too: completionTime is set on entering Failed (here the
 * restart limit), and TTL 0 deletes at once. */
static void ttl_deletes_a_failed_job(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    json_object_set_new(json_object_get(w.job, "spec"), "ttlSecondsAfterFinished", json_integer(0));
    json_object_set_new(json_object_get(w.job, "spec"), "allocation", json_string("fsdp:d4p2"));
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Failed");
    assert_non_null(status_str(&w, "completionTime"));
    assert_false(w.job_deleted); /* the pass that fails it writes the status first */
    r = step(&w);
    assert_true(w.job_deleted);
    reconcile_result_free(&r);
    world_free(&w);
}

/* spec.priority: a job ranked behind a waiting one takes no GPUs - no gang is
 * planned, no rollout server added - and says whom it waits for; once nobody
 * ranks first it is placed as usual. */
static void a_queued_job_takes_no_gpus(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    reconcile_result r = step_behind(&w, "ns/big (priority 5)");
    assert_int_equal(count_kind(&r, RECONCILE_CREATE) + count_kind(&r, RECONCILE_BIND), 0);
    assert_true(r.queued);
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Pending");
    assert_string_equal(reason_of(&w, "Scheduled"), "Queued");
    assert_non_null(
        strstr(json_string_value(json_object_get(condition(&w, "Scheduled"), "message")),
               "ns/big (priority 5)"));
    assert_string_equal(w.last_event, "Queued");
    int events = w.events;
    r = step_behind(&w, "ns/big (priority 5)"); /* at rest while it waits */
    assert_null(r.status);
    assert_int_equal(w.events, events);
    reconcile_result_free(&r);
    r = step(&w);
    assert_false(r.queued);
    assert_int_equal(count_kind(&r, RECONCILE_BIND), 3);
    reconcile_result_free(&r);
    /* running: a server to add waits as well, the trainer is untouched */
    kubelet_sets(&w, "Running", true);
    r = step(&w);
    reconcile_result_free(&r);
    json_object_set_new(json_object_get(w.job, "spec"), "rollout",
                        json_pack("{s:i,s:i}", "replicas", 3, "maxReplicas", 4));
    r = step_behind(&w, "ns/big (priority 5)");
    assert_true(r.queued);
    assert_int_equal(count_kind(&r, RECONCILE_CREATE) + count_kind(&r, RECONCILE_DELETE), 0);
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Running");
    assert_string_equal(reason_of(&w, "RolloutReady"), "Queued");
    r = step(&w);
    assert_int_equal(count_kind(&r, RECONCILE_CREATE), 1);
    reconcile_result_free(&r);
    world_free(&w);
}

static void a_crash_between_create_and_bind_is_repaired(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    /* undo the binds, as if the operator died after creating the pods */
    for (int i = 0; i < w.n_pods; i++)
        json_object_del(json_object_get(w.pods[i], "spec"), "nodeName");
    r = step(&w);
    assert_int_equal(count_kind(&r, RECONCILE_CREATE), 0);
    assert_int_equal(count_kind(&r, RECONCILE_BIND), 3);
    reconcile_result_free(&r);
    world_free(&w);
}

/* Chaos seed 690: pods created by an earlier pass (an operator before a
 * restart: its ledger claims are gone) and not bound yet; other jobs were
 * placed on their planned nodes since. Their binds are checked against the
 * room free now: none is sent, and the pods are deleted to be planned again. */
static void a_planned_node_taken_since_is_not_bound(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    assert_int_equal(w.n_pods, 3);
    for (int i = 0; i < w.n_pods; i++)
        json_object_del(json_object_get(w.pods[i], "spec"), "nodeName");
    for (int i = 0; i < w.cluster.n_nodes; i++)
        w.cluster.nodes[i].gpus_used = w.cluster.nodes[i].gpus - 1; /* another job's */
    r = step(&w);
    assert_int_equal(count_kind(&r, RECONCILE_BIND), 0);
    assert_int_equal(count_kind(&r, RECONCILE_DELETE), 3);
    reconcile_result_free(&r);
    world_free(&w);
}

/* Issue 11: the API server restarted mid-create and kept only part of the gang;
 * none of it is bound. The missing pod is created first, then the whole gang
 * is bound; the pods that exist are kept (no restart). */
static void a_partial_gang_is_completed_before_any_bind(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    big_trainer(&w);
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    assert_int_equal(w.n_pods, 4);
    for (int i = 0; i < w.n_pods; i++)
        json_object_del(json_object_get(w.pods[i], "spec"), "nodeName");
    char lost[128];
    snprintf(lost, sizeof lost, "%s",
             json_string_value(json_object_get(json_object_get(w.pods[1], "metadata"), "name")));
    json_decref(w.pods[1]);
    w.pods[1] = w.pods[--w.n_pods];
    r = step(&w); /* the world asserts no pod is created twice, none bound twice */
    assert_int_equal(count_kind(&r, RECONCILE_DELETE), 0);
    assert_int_equal(count_kind(&r, RECONCILE_CREATE), 1);
    assert_int_equal(count_kind(&r, RECONCILE_BIND), 2 + 2);
    int create = -1, first_bind = -1;
    for (int i = 0; i < r.n_actions; i++) {
        if (r.actions[i].kind == RECONCILE_CREATE) {
            assert_string_equal(r.actions[i].name, lost);
            create = i;
        }
        if (r.actions[i].kind == RECONCILE_BIND && first_bind < 0)
            first_bind = i;
    }
    assert_true(create >= 0 && create < first_bind);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(w.job, "status"), "restarts")), 0);
    reconcile_result_free(&r);
    world_free(&w);
}

/* Issue 11: a gang whose pods are not all there is never Running, even when
 * the status that counted them was lost: the pods carry the gang's size. */
static void running_needs_every_planned_pod(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    big_trainer(&w);
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    json_object_del(json_object_get(w.job, "status"), "pods"); /* a lost status write */
    json_decref(w.pods[0]);
    w.pods[0] = w.pods[--w.n_pods];
    kubelet_sets(&w, "Running", true);
    r = step(&w);
    assert_string_not_equal(phase(&w), "Running");
    assert_string_equal(phase(&w), "Restarting");
    assert_int_equal(count_kind(&r, RECONCILE_DELETE), 1);
    reconcile_result_free(&r);
    world_free(&w);
}

/* Issue 11: a child rejected for good fails the job with the API's message;
 * reconciles then only clean up, until the spec (generation) changes. */
static void a_rejected_child_waits_for_a_new_spec(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    reconcile_result r = step(&w); /* the gang is created */
    reconcile_result_free(&r);
    reconcile_input in = {.job = w.job, .cluster = &w.cluster, .now_ms = w.now};
    areal_error e;
    assert_int_equal(
        reconcile_rejected(&in, "spec.containers[0].env[0].name: Invalid value", &r, &e), AREAL_OK);
    assert_int_equal(count_kind(&r, RECONCILE_EVENT), 1);
    assert_non_null(r.status);
    json_object_set(w.job, "status", r.status);
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Failed");

    r = step(&w); /* the rejected gang's pods go; nothing is created */
    assert_int_equal(count_kind(&r, RECONCILE_CREATE), 0);
    assert_int_equal(count_kind(&r, RECONCILE_DELETE), 3);
    reconcile_result_free(&r);
    assert_int_equal(w.n_pods, 0);
    r = step(&w);
    assert_int_equal(r.n_actions, 0);
    assert_null(r.status); /* idle */
    reconcile_result_free(&r);
    const json_t *c = condition(&w, "Scheduled");
    assert_string_equal(json_string_value(json_object_get(c, "reason")), "ChildRejected");
    assert_non_null(strstr(json_string_value(json_object_get(c, "message")), "env[0].name"));

    json_object_set_new(json_object_get(w.job, "metadata"), "generation", json_integer(2));
    r = step(&w); /* a new spec: planned again */
    assert_int_equal(count_kind(&r, RECONCILE_BIND), 3);
    assert_string_equal(phase(&w), "Pending");
    reconcile_result_free(&r);
    world_free(&w);
}

static long long restarts_of(const world *w) {
    return json_integer_value(json_object_get(json_object_get(w->job, "status"), "restarts"));
}

/* A cache that lags the restart's deletes still shows the old gang (less the
 * failed pod, already gone) with no deletion timestamps: the same failure,
 * not a new restart. Their creation times, before lastRestartTime, say so. A
 * failure of the new gang afterwards is counted again. */
static void a_lagging_cache_is_not_a_second_restart(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    big_trainer(&w);
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    kubelet_sets(&w, "Running", true);
    json_t *old[MAX_PODS];
    int n0 = 0, all = w.n_pods; /* the trainer gang's pods, trainer-0 first */
    old[n0++] = json_deep_copy(w.pods[find_pod(&w, "j-trainer-0")]);
    for (int i = 0; i < w.n_pods; i++)
        if (strcmp(role_kind(w.pods[i]), "trainer") == 0 && i != find_pod(&w, "j-trainer-0"))
            old[n0++] = json_deep_copy(w.pods[i]);
    assert_int_equal(n0, 2);
    for (int i = 0; i < n0; i++)
        json_object_set_new(json_object_get(old[i], "metadata"), "creationTimestamp",
                            json_string("2000-01-01T00:00:00Z"));
    json_object_set_new(w.pods[find_pod(&w, "j-trainer-0")], "status",
                        json_pack("{s:s,s:[{s:{s:{s:i}}}]}", "phase", "Failed", "containerStatuses",
                                  "state", "terminated", "exitCode", 137));
    r = step(&w);
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Restarting");
    assert_int_equal(restarts_of(&w), 1);
    for (int i = 1; i < n0; i++) /* the stale view: still running, not terminating */
        w.pods[w.n_pods++] = old[i];
    json_decref(old[0]);
    r = step(&w);
    assert_int_equal(count_kind(&r, RECONCILE_CREATE), 0);
    assert_int_equal(count_kind(&r, RECONCILE_DELETE), n0 - 1); /* deleted again, idempotent */
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Restarting");
    assert_int_equal(restarts_of(&w), 1);
    w.now += 60000; /* the backoff is over: one new gang, and its failure counts */
    r = step(&w);
    reconcile_result_free(&r);
    assert_int_equal(w.n_pods, all);
    kubelet_sets(&w, "Running", true);
    json_object_set_new(w.pods[find_pod(&w, "j-trainer-1")], "status",
                        json_pack("{s:s,s:[{s:{s:{s:i}}}]}", "phase", "Failed", "containerStatuses",
                                  "state", "terminated", "exitCode", 1));
    r = step(&w);
    reconcile_result_free(&r);
    assert_int_equal(restarts_of(&w), 2);
    world_free(&w);
}

static void set_replicas(world *w, int n) {
    json_t *spec = json_object_get(w->job, "spec");
    json_object_set_new(spec, "rollout", json_pack("{s:i}", "replicas", n));
}

/* The pod names of the world, sorted into one string (a fingerprint of who exists). */
static void trainer_uids(const world *w, char *out, size_t cap) {
    out[0] = '\0';
    for (int i = 0; i < w->n_pods; i++)
        if (strcmp(role_kind(w->pods[i]), "trainer") == 0) {
            strncat(
                out,
                json_string_value(json_object_get(json_object_get(w->pods[i], "metadata"), "name")),
                cap - strlen(out) - 2);
            strncat(out, ",", cap - strlen(out) - 1);
        }
}

static bool has_pod(world *w, const char *name) {
    return find_pod(w, name) >= 0;
}

/* Scale-down is one server at a time: while the removed server's pods stop
 * (a worker drains on SIGTERM), the next one is left alone. */
static void scale_down_waits_for_each_server_to_stop(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    set_replicas(&w, 3);
    bring_up(&w);
    assert_int_equal(rollout_pods(&w), 3);
    set_replicas(&w, 1);
    json_t *going = json_deep_copy(w.pods[find_pod(&w, "j-rollout-2")]);
    reconcile_result r = step(&w);
    assert_int_equal(count_kind(&r, RECONCILE_DELETE), 1);
    reconcile_result_free(&r);
    assert_false(has_pod(&w, "j-rollout-2"));
    /* the kubelet takes its time: the pod is still there, terminating */
    json_object_set_new(json_object_get(going, "metadata"), "deletionTimestamp",
                        json_string("2026-11-29T21:00:00Z"));
    w.pods[w.n_pods++] = going;
    r = step(&w);
    assert_int_equal(count_kind(&r, RECONCILE_DELETE), 0); /* server 1 waits its turn */
    reconcile_result_free(&r);
    assert_true(has_pod(&w, "j-rollout-1"));
    int k = find_pod(&w, "j-rollout-2"); /* now gone */
    assert_true(k >= 0);
    json_decref(w.pods[k]);
    w.pods[k] = w.pods[--w.n_pods];
    settle(&w);
    assert_int_equal(rollout_pods(&w), 1);
    assert_true(has_pod(&w, "j-rollout-0"));
    assert_int_equal(restarts_of(&w), 0);
    world_free(&w);
}

/* Issues 11 and 16: scaling 2 -> 0 -> 3 -> 1 never fails, restarts or touches
 * the trainer: servers come one per pass (lowest index first) and go one per
 * pass (highest index first); status.rolloutReplicas counts ready servers. */
static void scaling_moves_servers_one_at_a_time_and_never_the_trainer(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    bring_up(&w);
    assert_string_equal(phase(&w), "Running");
    assert_int_equal(rollout_pods(&w), 2);
    assert_int_equal(json_integer_value(json_object_get(status_of(&w), "rolloutReplicas")), 2);
    char trainer[512], now[512];
    trainer_uids(&w, trainer, sizeof trainer);

    set_replicas(&w, 0);
    reconcile_result r = step(&w); /* the highest index first */
    assert_int_equal(count_kind(&r, RECONCILE_DELETE), 1);
    reconcile_result_free(&r);
    assert_true(has_pod(&w, "j-rollout-0") && !has_pod(&w, "j-rollout-1"));
    assert_string_equal(w.last_event, "RolloutServerRemoved");
    settle(&w);
    assert_int_equal(rollout_pods(&w), 0);
    assert_string_equal(phase(&w), "Running"); /* the trainer waits, it is not failed */
    assert_int_equal(json_integer_value(json_object_get(status_of(&w), "rolloutReplicas")), 0);
    assert_string_equal(reason_of(&w, "RolloutReady"), "ScaledToZero");

    set_replicas(&w, 3);
    for (int want = 1; want <= 3; want++) {
        r = step(&w); /* one server per pass */
        assert_int_equal(count_kind(&r, RECONCILE_BIND), 1);
        reconcile_result_free(&r);
        assert_int_equal(rollout_pods(&w), want);
        kubelet_sets(&w, "Running", true);
    }
    assert_true(has_pod(&w, "j-rollout-2"));
    settle(&w);
    assert_int_equal(json_integer_value(json_object_get(status_of(&w), "rolloutReplicas")), 3);
    assert_string_equal(reason_of(&w, "RolloutReady"), "ServersReady");

    set_replicas(&w, 1);
    settle(&w);
    assert_int_equal(rollout_pods(&w), 1);
    assert_true(has_pod(&w, "j-rollout-0"));
    trainer_uids(&w, now, sizeof now);
    assert_string_equal(trainer, now); /* the same trainer pods throughout */
    assert_int_equal(restarts_of(&w), 0);
    assert_string_equal(phase(&w), "Running");
    world_free(&w);
}

/* Issue 16: a rollout pod's failure replaces that server only; a trainer pod's
 * failure restarts the trainer gang only (the servers keep running). */
static void failures_are_handled_per_role(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    bring_up(&w);
    char trainer[512], now[512];
    trainer_uids(&w, trainer, sizeof trainer);
    int k = find_pod(&w, "j-rollout-1");
    assert_true(k >= 0);
    json_object_set_new(w.pods[k], "status",
                        json_pack("{s:s,s:[{s:{s:{s:i}}}]}", "phase", "Failed", "containerStatuses",
                                  "state", "terminated", "exitCode", 1));
    reconcile_result r = step(&w);
    assert_int_equal(count_kind(&r, RECONCILE_DELETE), 1);
    reconcile_result_free(&r);
    assert_string_equal(w.last_event, "RolloutServerFailed");
    assert_false(has_pod(&w, "j-rollout-1"));
    /* Running is the trainer gang's; RolloutReady says a server is missing, and why */
    assert_string_equal(phase(&w), "Running");
    assert_string_equal(json_string_value(json_object_get(condition(&w, "RolloutReady"), "status")),
                        "False");
    assert_string_equal(reason_of(&w, "RolloutReady"), "Replacing");
    r = step(&w); /* replaced at the same index */
    assert_int_equal(count_kind(&r, RECONCILE_CREATE), 1);
    reconcile_result_free(&r);
    assert_true(has_pod(&w, "j-rollout-1"));
    assert_string_equal(json_string_value(json_object_get(condition(&w, "RolloutReady"), "status")),
                        "False");
    assert_non_null(reason_of(&w, "RolloutReady"));
    kubelet_sets(&w, "Running", true);
    settle(&w);
    assert_string_equal(json_string_value(json_object_get(condition(&w, "RolloutReady"), "status")),
                        "True");
    assert_string_equal(reason_of(&w, "RolloutReady"), "ServersReady");
    trainer_uids(&w, now, sizeof now);
    assert_string_equal(trainer, now);
    assert_int_equal(restarts_of(&w), 0);
    assert_int_equal(json_integer_value(json_object_get(status_of(&w), "rolloutReplacements")), 1);
    assert_string_equal(phase(&w), "Running");

    kubelet_sets(&w, "Running", true);
    k = find_pod(&w, "j-trainer-0");
    json_object_set_new(w.pods[k], "status",
                        json_pack("{s:s,s:[{s:{s:{s:i}}}]}", "phase", "Failed", "containerStatuses",
                                  "state", "terminated", "exitCode", 137));
    r = step(&w);
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Restarting");
    assert_int_equal(restarts_of(&w), 1);
    assert_int_equal(rollout_pods(&w), 2); /* the servers stay */
    assert_false(has_pod(&w, "j-trainer-0"));
    w.now += 60000;
    settle(&w);
    assert_true(has_pod(&w, "j-trainer-0"));
    assert_int_equal(rollout_pods(&w), 2);
    world_free(&w);
}

/* Issue 16: a node lost under rollout servers only is the failure of those
 * servers: they are deleted with grace 0 and placed again on ready nodes; the
 * trainer keeps running, no restart is counted. */
static void a_lost_node_under_servers_replaces_them_only(void **state) {
    (void)state;
    world w;
    world_init(&w, 4);
    bring_up(&w);
    const char *tnode = node_of(w.pods[find_pod(&w, "j-trainer-0")]);
    static char dead[64];
    snprintf(dead, sizeof dead, "%s", node_of(w.pods[find_pod(&w, "j-rollout-0")]));
    assert_string_not_equal(tnode, dead); /* the trainer fills its own node */
    for (int i = 0; i < w.cluster.n_nodes; i++)
        if (strcmp(w.cluster.nodes[i].name, dead) == 0)
            w.cluster.nodes[i].ready = false;
    w.down[0] = (reconcile_down_node){dead, w.now - 60000};
    w.n_down = 1;
    char trainer[512], now[512];
    trainer_uids(&w, trainer, sizeof trainer);
    for (int pass = 0; pass < 8; pass++) {
        reconcile_result r = step(&w);
        for (int i = 0; i < r.n_actions; i++) {
            const reconcile_action *a = &r.actions[i];
            if (a->kind == RECONCILE_DELETE)
                assert_true(a->force); /* only pods on the dead node go, with grace 0 */
            if (a->kind == RECONCILE_BIND)
                assert_string_not_equal(a->node, dead);
        }
        reconcile_result_free(&r);
        kubelet_sets(&w, "Running", true);
    }
    assert_int_equal(rollout_pods(&w), 2);
    for (int i = 0; i < w.n_pods; i++)
        assert_string_not_equal(node_of(w.pods[i]), dead);
    trainer_uids(&w, now, sizeof now);
    assert_string_equal(trainer, now);
    assert_int_equal(restarts_of(&w), 0);
    assert_string_equal(phase(&w), "Running");
    assert_true(json_integer_value(json_object_get(status_of(&w), "rolloutReplacements")) >= 1);
    world_free(&w);
}

/* A 3-node world whose job has failurePolicy.restartScope Gang, brought up and running. */
static void gang_scope_up(world *w) {
    world_init(w, 3);
    json_object_set_new(json_object_get(json_object_get(w->job, "spec"), "failurePolicy"),
                        "restartScope", json_string("Gang"));
    bring_up(w);
}

/* restartScope Gang: a server's failure restarts the trainer gang too. */
static void restart_scope_gang_restarts_the_trainer(void **state) {
    (void)state;
    world w;
    gang_scope_up(&w);
    int k = find_pod(&w, "j-rollout-0");
    json_object_set_new(w.pods[k], "status", json_pack("{s:s}", "phase", "Failed"));
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    assert_int_equal(restarts_of(&w), 1);
    assert_string_equal(w.last_event, "GangRestarting");
    assert_int_equal(w.n_pods, 0); /* every pod of the job goes */
    assert_non_null(
        strstr(json_string_value(json_object_get(condition(&w, "Scheduled"), "message")),
               "pod j-rollout-0 failed"));
    w.now += 60000;
    settle(&w); /* and the whole job comes back, same names */
    assert_true(has_pod(&w, "j-trainer-0") && has_pod(&w, "j-rollout-0") &&
                has_pod(&w, "j-rollout-1"));
    world_free(&w);
}

/* restartScope Gang, a cache that lags the restart's deletes: the failed server
 * pod of the previous generation (made before lastRestartTime) is still seen
 * Failed when the backoff ends. The same failure, not a second restart (e2e
 * f_kill_worker once counted 2); a failure of the new generation counts. */
static void a_lagging_failed_server_is_not_a_second_restart(void **state) {
    (void)state;
    world w;
    gang_scope_up(&w);
    int k = find_pod(&w, "j-rollout-0");
    json_object_set_new(w.pods[k], "status", json_pack("{s:s}", "phase", "Failed"));
    json_t *stale = json_deep_copy(w.pods[k]);
    json_object_set_new(json_object_get(stale, "metadata"), "creationTimestamp",
                        json_string("2000-01-01T00:00:00Z"));
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    assert_int_equal(restarts_of(&w), 1);
    assert_int_equal(w.n_pods, 0);
    w.pods[w.n_pods++] = stale; /* the lagging view */
    w.now += 60000;
    r = step(&w);
    reconcile_result_free(&r);
    assert_int_equal(restarts_of(&w), 1);
    assert_true(has_pod(&w, "j-trainer-0")); /* the new gang was started */
    /* and the lagging server is deleted again, not counted as a replacement
     * (restartScope Gang replaces no single server; CI's f_kill_worker showed
     * rolloutReplacements 1) */
    assert_int_equal(json_integer_value(json_object_get(status_of(&w), "rolloutReplacements")), 0);
    assert_string_not_equal(w.last_event, "RolloutServerFailed");
    settle(&w);
    assert_int_equal(restarts_of(&w), 1);
    kubelet_sets(&w, "Running", true);
    settle(&w);
    k = find_pod(&w, "j-rollout-1"); /* a new server's failure is a new restart */
    assert_true(k >= 0);
    json_object_set_new(w.pods[k], "status", json_pack("{s:s}", "phase", "Failed"));
    r = step(&w);
    reconcile_result_free(&r);
    assert_int_equal(restarts_of(&w), 2);
    world_free(&w);
}

/* A cache that lags the restart's deletes shows the old trainer still Running,
 * not going: the gang stays Restarting (no Running again), and when the pod is
 * then seen going that is no second restart (e2e f_kill_worker counted "1 of 1
 * pods of the running gang are gone or going" as restart 2). */
static void a_lagging_running_trainer_is_not_running_again(void **state) {
    (void)state;
    world w;
    gang_scope_up(&w);
    json_t *stale = json_deep_copy(w.pods[find_pod(&w, "j-trainer-0")]);
    json_object_set_new(json_object_get(stale, "metadata"), "creationTimestamp",
                        json_string("2000-01-01T00:00:00Z")); /* made before the restart */
    int k = find_pod(&w, "j-rollout-0");
    json_object_set_new(w.pods[k], "status", json_pack("{s:s}", "phase", "Failed"));
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    assert_int_equal(restarts_of(&w), 1);
    assert_int_equal(w.n_pods, 0);
    json_t *going = json_deep_copy(stale);
    w.pods[w.n_pods++] = stale; /* the lagging view: still Running, no deletionTimestamp */
    r = step(&w);
    assert_true(count_kind(&r, RECONCILE_DELETE) >= 1); /* deleted again */
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Restarting");
    assert_string_equal(w.last_event, "GangRestarting");
    k = find_pod(&w, "j-trainer-0"); /* the test world deleted it: seen going now */
    if (k >= 0) {
        json_decref(going);
        going = w.pods[k];
    } else {
        w.pods[w.n_pods++] = going;
    }
    json_object_set_new(json_object_get(going, "metadata"), "deletionTimestamp",
                        json_string("2000-01-01T00:00:00Z"));
    r = step(&w);
    reconcile_result_free(&r);
    assert_int_equal(restarts_of(&w), 1);
    world_free(&w);
}

/* restartScope Gang on an idle machine: a server fails in the second its gang was made,
 * so the other server, which the restart deletes (SIGTERM, exit 143), was made in the
 * restart's own second too. A lagging cache then shows it Failed while being deleted:
 * the restart's own doing, not a second failure (e2e f_kill_worker counted 2 restarts
 * and its job ended before the new gang ran). */
static void a_server_failed_by_the_restarts_delete_is_not_a_second_restart(void **state) {
    (void)state;
    world w;
    gang_scope_up(&w);
    json_t *deleted = json_deep_copy(w.pods[find_pod(&w, "j-rollout-1")]);
    json_object_set_new(deleted, "status",
                        json_pack("{s:s,s:[{s:s,s:{s:{s:i}}}]}", "phase", "Failed",
                                  "containerStatuses", "name", "worker", "state", "terminated",
                                  "exitCode", 143));
    /* made, and deleted, in the second the restart below happens */
    char ts[32];
    time_t sec = (time_t)(w.now / 1000);
    struct tm tm;
    gmtime_r(&sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *meta = json_object_get(deleted, "metadata");
    json_object_set_new(meta, "creationTimestamp", json_string(ts));
    json_object_set_new(meta, "deletionTimestamp", json_string(ts));
    json_object_set_new(w.pods[find_pod(&w, "j-rollout-0")], "status",
                        json_pack("{s:s}", "phase", "Failed"));
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    assert_int_equal(restarts_of(&w), 1);
    assert_int_equal(w.n_pods, 0);
    w.pods[w.n_pods++] = deleted; /* the lagging view of the server the restart deleted */
    r = step(&w);
    reconcile_result_free(&r);
    assert_int_equal(restarts_of(&w), 1);
    w.now += 60000;
    settle(&w);
    assert_int_equal(restarts_of(&w), 1);
    assert_true(has_pod(&w, "j-trainer-0")); /* the new gang was started */
    world_free(&w);
}

/* Issue 11: a role override that names no role, or a name too long for the
 * pods' hostnames, fails the job with the field named and creates nothing;
 * a fixed spec (a new generation) is placed. */
static void refused_names_fail_with_the_field(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    json_object_set_new(json_object_get(w.job, "spec"), "roles",
                        json_pack("[{s:s}]", "name", "trainr"));
    reconcile_result r = step(&w);
    assert_int_equal(count_kind(&r, RECONCILE_CREATE), 0);
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Failed");
    assert_string_equal(w.last_event, "InvalidSpec");
    const json_t *c =
        json_array_get(json_object_get(json_object_get(w.job, "status"), "conditions"), 0);
    assert_non_null(strstr(json_string_value(json_object_get(c, "message")), "spec.roles[0].name"));

    json_object_del(json_object_get(w.job, "spec"), "roles");
    json_object_set_new(json_object_get(w.job, "metadata"), "generation", json_integer(2));
    r = step(&w);
    assert_true(count_kind(&r, RECONCILE_BIND) > 0);
    reconcile_result_free(&r);
    world_free(&w);

    /* 60 characters: a valid Service name, but "<name>-rollout-0" has 70 */
    world_init(&w, 3);
    char name[61];
    memset(name, 'n', 60);
    name[60] = '\0';
    json_object_set_new(json_object_get(w.job, "metadata"), "name", json_string(name));
    r = step(&w);
    assert_int_equal(count_kind(&r, RECONCILE_CREATE), 0);
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Failed");
    c = json_array_get(json_object_get(json_object_get(w.job, "status"), "conditions"), 0);
    assert_non_null(strstr(json_string_value(json_object_get(c, "message")), "too long"));
    world_free(&w);
}

/* Issue 11: a node stops under a running gang. Within the grace nothing
 * happens (but the job looks again when it ends); past it, the gang
 * restarts: the pod on the dead node is deleted with grace 0, the others
 * normally, and the new gang avoids the node (it is not ready). */
static void a_dead_node_restarts_the_gang_elsewhere(void **state) {
    (void)state;
    world w;
    world_init(&w, 4);
    bring_up(&w);
    assert_string_equal(phase(&w), "Running");
    reconcile_result r;
    static char dead[64];
    snprintf(dead, sizeof dead, "%s", node_of(w.pods[find_pod(&w, "j-trainer-0")]));
    for (int i = 0; i < w.cluster.n_nodes; i++)
        if (strcmp(w.cluster.nodes[i].name, dead) == 0)
            w.cluster.nodes[i].ready = false;
    w.down[0] = (reconcile_down_node){dead, w.now - 10000};
    w.n_down = 1;

    r = step(&w); /* 10 s of the default 30: wait, and look again when it ends */
    assert_int_equal(count_kind(&r, RECONCILE_DELETE), 0);
    assert_true(r.requeue_after_ms >= 20000 && r.requeue_after_ms <= 21000);
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Running");

    w.now += 21000;
    int on_dead = 0, expect = 0; /* the trainer gang, and the servers that were on the node */
    for (int i = 0; i < w.n_pods; i++) {
        bool there = strcmp(node_of(w.pods[i]), dead) == 0;
        on_dead += there;
        expect += there || strcmp(role_kind(w.pods[i]), "trainer") == 0;
    }
    reconcile_input in = {.job = w.job,
                          .pods = (const json_t *const *)w.pods,
                          .n_pods = w.n_pods,
                          .has_service = true,
                          .has_configmap = true,
                          .cluster = &w.cluster,
                          .down = w.down,
                          .n_down = 1,
                          .now_ms = w.now};
    areal_error e;
    assert_int_equal(reconcile_job(&in, &r, &e), AREAL_OK);
    int forced = 0, deletes = 0;
    for (int i = 0; i < r.n_actions; i++) {
        if (r.actions[i].kind != RECONCILE_DELETE)
            continue;
        deletes++;
        int k = find_pod(&w, r.actions[i].name);
        assert_true(k >= 0);
        bool there = strcmp(node_of(w.pods[k]), dead) == 0;
        assert_int_equal(r.actions[i].force, there); /* grace 0 only where no kubelet is */
        forced += r.actions[i].force;
    }
    assert_int_equal(deletes, expect);
    assert_int_equal(forced, on_dead);
    reconcile_result_free(&r);
    reconcile_result_free((r = step(&w), &r)); /* applied */
    assert_string_equal(phase(&w), "Restarting");
    assert_int_equal(restarts_of(&w), 1);
    assert_false(has_pod(&w, "j-trainer-0"));

    w.now += 60000; /* past the backoff */
    settle(&w);
    assert_true(has_pod(&w, "j-trainer-0"));
    assert_int_equal(rollout_pods(&w), 2);
    for (int i = 0; i < w.n_pods; i++)
        assert_string_not_equal(node_of(w.pods[i]), dead);
    world_free(&w);
}

/* Issue 11: a pod already Terminating on a dead node (deleted before its node
 * died) would wait forever for a kubelet: it is deleted again with grace 0. */
static void a_terminating_pod_on_a_dead_node_is_forced(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    reconcile_result r = step(&w);
    reconcile_result_free(&r);
    json_object_set_new(json_object_get(w.pods[0], "metadata"), "deletionTimestamp",
                        json_string("2026-11-29T21:00:00Z"));
    r = step(&w); /* a live node: it is going, wait */
    assert_int_equal(count_kind(&r, RECONCILE_DELETE), 0);
    reconcile_result_free(&r);
    static char dead[64];
    snprintf(dead, sizeof dead, "%s", node_of(w.pods[0]));
    w.down[0] = (reconcile_down_node){dead, 0};
    w.n_down = 1;
    reconcile_input in = {.job = w.job,
                          .pods = (const json_t *const *)w.pods,
                          .n_pods = w.n_pods,
                          .has_service = true,
                          .has_configmap = true,
                          .cluster = &w.cluster,
                          .down = w.down,
                          .n_down = 1,
                          .now_ms = w.now};
    areal_error e;
    assert_int_equal(reconcile_job(&in, &r, &e), AREAL_OK);
    bool forced = false;
    for (int i = 0; i < r.n_actions; i++)
        if (r.actions[i].kind == RECONCILE_DELETE && r.actions[i].force)
            forced |= strcmp(r.actions[i].name,
                             json_string_value(json_object_get(
                                 json_object_get(w.pods[0], "metadata"), "name"))) == 0;
    assert_true(forced);
    reconcile_result_free(&r);
    world_free(&w);
}

/* Chaos seeds 174 and 339: a pod that reported Failed and was then deleted
 * gracefully, on a node that died before its kubelet confirmed, stays
 * Terminating forever; the gang sat in Restarting (and the server's slot in
 * "stopping") until the operator force-deletes it whatever its phase. The
 * job keeps saying why it waits (the Scheduled condition is not dropped by a
 * pass that sets only RolloutReady). */
static void a_failed_pod_terminating_on_a_dead_node_is_forced(void **state) {
    (void)state;
    static const char *const kinds[] = {"trainer", "rollout"};
    for (int k = 0; k < 2; k++) {
        world w;
        world_init(&w, 3);
        settle(&w);
        kubelet_sets(&w, "Running", true);
        settle(&w);
        assert_string_equal(phase(&w), "Running");
        int victim = -1;
        for (int i = 0; i < w.n_pods && victim < 0; i++)
            if (strcmp(role_kind(w.pods[i]), kinds[k]) == 0)
                victim = i;
        assert_true(victim >= 0);
        json_object_set_new(w.pods[victim], "status",
                            json_pack("{s:s,s:[{s:s,s:{s:{s:i}}}]}", "phase", "Failed",
                                      "containerStatuses", "name", "worker", "state", "terminated",
                                      "exitCode", 137));
        json_t *ghost = json_deep_copy(w.pods[victim]);
        char name[64]; /* a copy: step() frees the pods it deletes */
        snprintf(name, sizeof name, "%s",
                 json_string_value(json_object_get(json_object_get(ghost, "metadata"), "name")));
        reconcile_result r = step(&w); /* the failure: its deletion is asked for */
        bool asked = false;
        for (int i = 0; i < r.n_actions; i++)
            asked |= r.actions[i].kind == RECONCILE_DELETE && strcmp(r.actions[i].name, name) == 0;
        assert_true(asked);
        reconcile_result_free(&r);
        /* step() removed it at once; it is in fact Terminating, and then its node dies */
        assert_int_equal(find_pod(&w, name), -1);
        json_object_set_new(json_object_get(ghost, "metadata"), "deletionTimestamp",
                            json_string("2026-11-29T21:00:00Z"));
        w.pods[w.n_pods++] = ghost;
        static char dead[64];
        snprintf(dead, sizeof dead, "%s", node_of(ghost));
        w.down[0] = (reconcile_down_node){dead, 0};
        w.n_down = 1;
        if (k == 0)
            assert_string_equal(phase(&w), "Restarting");
        r = step(&w);
        bool forced = false;
        for (int i = 0; i < r.n_actions; i++)
            forced |= r.actions[i].kind == RECONCILE_DELETE && r.actions[i].force &&
                      strcmp(r.actions[i].name, name) == 0;
        if (!forced)
            fail_msg("%s pod %s (phase %s) not forced", kinds[k], name, phase(&w));
        reconcile_result_free(&r);
        assert_non_null(reason_of(&w, "Scheduled")); /* still says why it waits */
        if (k == 1)
            assert_non_null(reason_of(&w, "RolloutReady"));
        world_free(&w);
    }
}

/* Issue 11: an image that cannot be pulled is a condition at once (the
 * kubelet's reason and message, the deadline), Failed after
 * spec.failurePolicy.containerErrorSeconds, and retried by a spec change. */
static void an_unpullable_image_is_a_condition_then_fails(void **state) {
    (void)state;
    world w;
    world_init(&w, 3);
    json_object_set_new(json_object_get(json_object_get(w.job, "spec"), "failurePolicy"),
                        "containerErrorSeconds", json_integer(120));
    settle(&w);
    int k = find_pod(&w, "j-trainer-0");
    json_object_set_new(w.pods[k], "status",
                        json_pack("{s:s,s:[{s:s,s:{s:{s:s,s:s}}}]}", "phase", "Pending",
                                  "containerStatuses", "name", "worker", "state", "waiting",
                                  "reason", "ImagePullBackOff", "message",
                                  "Back-off pulling image \"areal-worker:typo\""));
    reconcile_result r = step(&w);
    assert_true(r.requeue_after_ms > 119000 && r.requeue_after_ms <= 120200);
    reconcile_result_free(&r);
    assert_string_equal(reason_of(&w, "ContainerError"), "ImagePullBackOff");
    const char *msg =
        json_string_value(json_object_get(condition(&w, "ContainerError"), "message"));
    assert_non_null(strstr(msg, "j-trainer-0"));
    assert_non_null(strstr(msg, "areal-worker:typo"));
    assert_non_null(strstr(msg, "containerErrorSeconds"));
    assert_string_equal(w.last_event, "ImagePullBackOff");
    r = step(&w); /* idle while it waits: nothing written */
    assert_null(r.status);
    reconcile_result_free(&r);

    w.now += 121000;
    r = step(&w);
    reconcile_result_free(&r);
    assert_string_equal(phase(&w), "Failed");
    assert_string_equal(reason_of(&w, "Scheduled"), "ContainerError");
    assert_int_equal(w.n_pods, 0);
    assert_int_equal(count_kind((r = step(&w), &r), RECONCILE_CREATE), 0); /* stays failed */
    reconcile_result_free(&r);

    json_object_set_new(json_object_get(w.job, "metadata"), "generation", json_integer(2));
    settle(&w); /* a new image: placed again */
    assert_true(has_pod(&w, "j-trainer-0"));
    assert_string_not_equal(phase(&w), "Failed");
    world_free(&w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_dead_node_restarts_the_gang_elsewhere),
        cmocka_unit_test(a_lagging_cache_is_not_a_second_restart),
        cmocka_unit_test(a_terminating_pod_on_a_dead_node_is_forced),
        cmocka_unit_test(a_failed_pod_terminating_on_a_dead_node_is_forced),
        cmocka_unit_test(scaling_moves_servers_one_at_a_time_and_never_the_trainer),
        cmocka_unit_test(failures_are_handled_per_role),
        cmocka_unit_test(scale_down_waits_for_each_server_to_stop),
        cmocka_unit_test(restart_scope_gang_restarts_the_trainer),
        cmocka_unit_test(a_lagging_failed_server_is_not_a_second_restart),
        cmocka_unit_test(a_server_failed_by_the_restarts_delete_is_not_a_second_restart),
        cmocka_unit_test(a_lagging_running_trainer_is_not_running_again),
        cmocka_unit_test(a_lost_node_under_servers_replaces_them_only),
        cmocka_unit_test(an_unpullable_image_is_a_condition_then_fails),
        cmocka_unit_test(refused_names_fail_with_the_field),
        cmocka_unit_test(a_rejected_child_waits_for_a_new_spec),
        cmocka_unit_test(a_partial_gang_is_completed_before_any_bind),
        cmocka_unit_test(running_needs_every_planned_pod),
        cmocka_unit_test(creates_and_binds_the_gang_where_the_planner_says),
        cmocka_unit_test(failed_pod_restarts_the_gang_with_backoff_then_fails),
        cmocka_unit_test(stopping_pods_are_not_a_new_failure),
        cmocka_unit_test(trainer_success_finishes_the_job),
        cmocka_unit_test(unschedulable_job_waits_with_the_reason),
        cmocka_unit_test(invalid_allocation_fails_with_the_parser_message),
        cmocka_unit_test(suspend_and_delete_remove_the_pods),
        cmocka_unit_test(suspend_keeps_the_job_and_resume_plans_anew),
        cmocka_unit_test(a_deleted_trainer_that_exits_0_is_not_success),
        cmocka_unit_test(ttl_deletes_the_finished_job_on_time),
        cmocka_unit_test(ttl_deletes_a_failed_job),
        cmocka_unit_test(a_queued_job_takes_no_gpus),
        cmocka_unit_test(a_crash_between_create_and_bind_is_repaired),
        cmocka_unit_test(a_planned_node_taken_since_is_not_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
