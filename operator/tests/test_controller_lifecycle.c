/*
 * test_controller_lifecycle.c - the job lifecycle fields of the CRD through
 * the whole controller (informers, work queue, ledger, API writes) against
 * the in-memory API server (operator/tests/util/fake_api.h), the test playing
 * the kubelet:
 *   - spec.priority: a high-priority job waiting for a whole node is not
 *     starved by an older low-priority job that would fit the first half-node
 *     freed; the low one waits (Queued) and is placed after;
 *   - spec.suspend: the pods are deleted with their grace period (Terminating
 *     until the kubelet confirms), the GPUs go to a waiting job once they are
 *     gone, the suspended job keeps its progress, and resumed it is placed
 *     again when room comes back;
 *   - spec.ttlSecondsAfterFinished: a Succeeded job is deleted that long after
 *     it finished, by an operator started after the finish (the first one
 *     stopped meanwhile), not before;
 *   - a job deleted and applied again under its name before the garbage
 *     collector removed the first one's ConfigMap and Service: the new job
 *     takes both over, with its own spec.config.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "areal/clock.h"
#include "areal/kube/client.h"
#include "areal/operator/controller.h"
#include "areal/operator/desired.h"
#include "util/fake_api.h"

#define LIMIT_S 20.0

static void nap(void) {
    struct timespec ts = {0, 5 * 1000000L};
    nanosleep(&ts, NULL);
}

#define WAIT_FOR(cond, what)                                                                       \
    do {                                                                                           \
        double t0_ = areal_mono_s();                                                               \
        while (!(cond) && areal_mono_s() - t0_ < LIMIT_S)                                          \
            nap();                                                                                 \
        if (!(cond))                                                                               \
            fail_msg("timed out waiting for %s", what);                                            \
    } while (0)

typedef struct op {
    kube_client *kc;
    controller *ctl;
    pthread_t th;
} op;

static void *run_ctl(void *arg) {
    controller_run(arg);
    return NULL;
}

static void op_start(op *o, fake_api *f) {
    kube_config cfg;
    kube_config_init(&cfg);
    cfg.server = strdup(fake_api_url(f));
    cfg.allow_insecure = 1;
    cfg.qps = 0;
    cfg.backoff_base_ms = 5;
    cfg.backoff_max_ms = 50;
    o->kc = kube_client_new(&cfg, NULL);
    kube_config_free(&cfg);
    assert_non_null(o->kc);
    controller_config cc = {.workers = 2};
    areal_error err;
    assert_int_equal(controller_new(o->kc, &cc, NULL, &o->ctl, &err), AREAL_OK);
    assert_int_equal(pthread_create(&o->th, NULL, run_ctl, o->ctl), 0);
    WAIT_FOR(controller_synced(o->ctl), "the first lists");
}

static void op_stop(op *o) {
    controller_stop(o->ctl);
    pthread_join(o->th, NULL);
    controller_free(o->ctl);
    kube_client_free(o->kc);
    o->ctl = NULL;
    o->kc = NULL;
}

static void put_node(fake_api *f, const char *name) {
    json_t *n = json_pack("{s:{s:s,s:{s:s}},s:{s:{s:s,s:s,s:s},s:[{s:s,s:s}]}}", "metadata", "name",
                          name, "labels", "kubernetes.io/hostname", name, "status", "allocatable",
                          "nvidia.com/gpu", "8", "cpu", "96", "memory", "512Gi", "conditions",
                          "type", "Ready", "status", "True");
    fake_api_put(f, "nodes", n);
    json_decref(n);
}

/*
 * Every test's start: the in-memory API server (graceful pods or not) with
 * one 8-GPU node "n0", and an operator synced on it. The teardown stops both,
 * after a failed assertion too (cmocka runs it), so a failure is reported as
 * itself, with no leaked server or running controller after it.
 */
typedef struct world {
    fake_api *f;
    op o;
} world;

static int world_new(void **state, bool graceful) {
    world *w = calloc(1, sizeof *w);
    if (w == NULL || (w->f = fake_api_start()) == NULL) {
        free(w);
        return -1;
    }
    *state = w;
    if (graceful)
        fake_api_graceful_pods(w->f, true);
    put_node(w->f, "n0");
    op_start(&w->o, w->f);
    return 0;
}

static int world_setup(void **state) {
    return world_new(state, false);
}

static int world_setup_graceful(void **state) {
    return world_new(state, true);
}

static int world_teardown(void **state) {
    world *w = *state;
    if (w->o.ctl != NULL)
        op_stop(&w->o);
    fake_api_stop(w->f);
    free(w);
    return 0;
}

/* A trainer-only job of one pod ("<name>-trainer-0") of `gpus` GPUs, with spec.config
 * `config` (stolen; NULL: none). */
static void put_job_config(fake_api *f, const char *name, int gpus, int priority, int ttl,
                           json_t *config) {
    char alloc[32];
    snprintf(alloc, sizeof alloc, "megatron:d1t%d", gpus);
    json_t *j =
        json_pack("{s:s,s:s,s:{s:s,s:s,s:i},s:{s:s,s:s,s:i}}", "apiVersion", "areal.io/v1alpha1",
                  "kind", "AReaLJob", "metadata", "name", name, "namespace", "team", "generation",
                  1, "spec", "allocation", alloc, "image", "img", "priority", priority);
    if (ttl >= 0)
        json_object_set_new(json_object_get(j, "spec"), "ttlSecondsAfterFinished",
                            json_integer(ttl));
    if (config != NULL)
        json_object_set_new(json_object_get(j, "spec"), "config", config);
    fake_api_put(f, "arealjobs", j);
    json_decref(j);
}

static void put_job(fake_api *f, const char *name, int gpus, int priority, int ttl) {
    put_job_config(f, name, gpus, priority, ttl, NULL);
}

static json_t *get_job(fake_api *f, const char *name) {
    char key[128];
    snprintf(key, sizeof key, "team/%s", name);
    return fake_api_get(f, "arealjobs", key);
}

static json_t *get_pod(fake_api *f, const char *job) {
    char key[128];
    snprintf(key, sizeof key, "team/%s-trainer-0", job);
    return fake_api_get(f, "pods", key);
}

static bool bound(fake_api *f, const char *job) {
    json_t *p = get_pod(f, job);
    bool b = json_string_value(json_object_get(json_object_get(p, "spec"), "nodeName")) != NULL;
    json_decref(p);
    return b;
}

static bool has_pod(fake_api *f, const char *job) {
    json_t *p = get_pod(f, job);
    json_decref(p);
    return p != NULL;
}

static bool job_gone(fake_api *f, const char *job) {
    json_t *j = get_job(f, job);
    json_decref(j);
    return j == NULL;
}

static bool terminating(fake_api *f, const char *job) {
    json_t *p = get_pod(f, job);
    bool t = json_object_get(json_object_get(p, "metadata"), "deletionTimestamp") != NULL;
    json_decref(p);
    return t;
}

/* status.phase, or "" */
static const char *phase_of(fake_api *f, const char *job, char *buf, size_t cap) {
    json_t *j = get_job(f, job);
    const char *ph = json_string_value(json_object_get(json_object_get(j, "status"), "phase"));
    snprintf(buf, cap, "%s", ph ? ph : "");
    json_decref(j);
    return buf;
}

static bool phase_is(fake_api *f, const char *job, const char *want) {
    char buf[32];
    return strcmp(phase_of(f, job, buf, sizeof buf), want) == 0;
}

/* The reason of condition Scheduled, or "". */
static bool scheduled_reason_is(fake_api *f, const char *job, const char *want) {
    json_t *j = get_job(f, job);
    size_t i;
    json_t *c;
    bool is = false;
    json_array_foreach(json_object_get(json_object_get(j, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        const char *r = json_string_value(json_object_get(c, "reason"));
        if (t && strcmp(t, "Scheduled") == 0)
            is = r && strcmp(r, want) == 0;
    }
    json_decref(j);
    return is;
}

typedef struct pod_phase {
    const char *phase;
} pod_phase;

static int set_pod_phase(json_t *pod, void *ud) {
    const pod_phase *p = ud;
    json_object_set_new(pod, "status",
                        json_pack("{s:s,s:[{s:s,s:s}]}", "phase", p->phase, "conditions", "type",
                                  "Ready", "status",
                                  strcmp(p->phase, "Running") == 0 ? "True" : "False"));
    return 0;
}

/* The kubelet: the job's pod is in `phase` now. */
static void kubelet(fake_api *f, const char *job, const char *phase) {
    char key[128];
    snprintf(key, sizeof key, "team/%s-trainer-0", job);
    pod_phase p = {phase};
    assert_int_equal(fake_api_modify(f, "pods", key, set_pod_phase, &p), 0);
}

/* Places and runs `job` (its pod bound, then Running). */
static void run_job(fake_api *f, const char *job) {
    WAIT_FOR(bound(f, job), job);
    kubelet(f, job, "Running");
    WAIT_FOR(phase_is(f, job, "Running"), job);
}

/* Deletes the job (the operator removes its pods and finalizer). */
static void delete_job(fake_api *f, const char *job) {
    char key[128];
    snprintf(key, sizeof key, "team/%s", job);
    fake_api_delete(f, "arealjobs", key);
    WAIT_FOR(job_gone(f, job) && !has_pod(f, job), job);
}

typedef struct spec_edit {
    const char *field;
    json_t *value; /* stolen */
} spec_edit;

static int edit_spec(json_t *job, void *ud) {
    spec_edit *e = ud;
    json_object_set_new(json_object_get(job, "spec"), e->field, e->value);
    json_t *meta = json_object_get(job, "metadata");
    json_object_set_new(meta, "generation",
                        json_integer(json_integer_value(json_object_get(meta, "generation")) + 1));
    return 0;
}

static void set_spec(fake_api *f, const char *job, const char *field, json_t *value) {
    char key[128];
    snprintf(key, sizeof key, "team/%s", job);
    spec_edit e = {field, value};
    assert_int_equal(fake_api_modify(f, "arealjobs", key, edit_spec, &e), 0);
}

/*
 * One node of 8 GPUs, held by r1 and r2 (4 each). Low (4 GPUs, priority 0,
 * created first) and high (8 GPUs, priority 10) wait. r1 goes: 4 GPUs free,
 * which low would fit and high not - low must not take them (else high,
 * needing the whole node, could wait forever behind low). r2 goes: high is
 * placed. high goes: low is placed.
 */
static void a_waiting_high_priority_job_is_not_starved(void **state) {
    world *w = *state;
    fake_api *f = w->f;
    put_job(f, "r1", 4, 0, -1);
    run_job(f, "r1");
    put_job(f, "r2", 4, 0, -1);
    run_job(f, "r2");
    put_job(f, "low", 4, 0, -1);
    WAIT_FOR(scheduled_reason_is(f, "low", "Unschedulable"), "low Unschedulable");
    struct timespec second = {1, 100 * 1000000L}; /* creationTimestamp has second resolution */
    nanosleep(&second, NULL);
    put_job(f, "high", 8, 10, -1);
    WAIT_FOR(scheduled_reason_is(f, "high", "Unschedulable"), "high Unschedulable");
    WAIT_FOR(scheduled_reason_is(f, "low", "Queued"), "low Queued behind high");

    delete_job(f, "r1");
    /* room for low, not for high: low stays queued (no pod), high waits */
    double t0 = areal_mono_s();
    while (areal_mono_s() - t0 < 1.0) {
        assert_false(has_pod(f, "low"));
        nap();
    }
    assert_true(scheduled_reason_is(f, "low", "Queued"));
    assert_true(phase_is(f, "high", "Pending"));
    delete_job(f, "r2");
    run_job(f, "high");
    assert_false(has_pod(f, "low"));
    /* high is placed: low no longer waits behind it, only for room */
    WAIT_FOR(scheduled_reason_is(f, "low", "Unschedulable"), "low Unschedulable after high");
    delete_job(f, "high");
    run_job(f, "low");
}

/* Equal priorities do not hold each other: a younger job that fits is placed
 * while an older one that does not waits. */
static void equal_priorities_do_not_block(void **state) {
    world *w = *state;
    fake_api *f = w->f;
    put_job(f, "r1", 4, 0, -1);
    run_job(f, "r1");
    put_job(f, "wide", 8, 0, -1);
    WAIT_FOR(scheduled_reason_is(f, "wide", "Unschedulable"), "wide Unschedulable");
    put_job(f, "small", 4, 0, -1);
    run_job(f, "small");
    assert_true(phase_is(f, "wide", "Pending"));
}

static int set_progress(json_t *job, void *ud) {
    (void)ud;
    json_t *st = json_object_get(job, "status");
    json_object_set_new(st, "progress", json_pack("{s:i,s:i}", "step", 7, "policyVersion", 7));
    return 0;
}

/*
 * a (8 GPUs) runs, b (8 GPUs) waits. a suspended: its pod is deleted with its
 * grace period (Terminating until the kubelet confirms; no force), a keeps its
 * progress and says Suspended; once the pod is gone b is placed on the room a
 * released. a resumed waits for room, then is placed again.
 */
static void suspend_releases_the_gpus_and_resume_replaces(void **state) {
    world *w = *state;
    fake_api *f = w->f;
    put_job(f, "a", 8, 0, -1);
    run_job(f, "a");
    assert_int_equal(fake_api_modify(f, "arealjobs", "team/a", set_progress, NULL), 0);
    put_job(f, "b", 8, 0, -1);
    WAIT_FOR(scheduled_reason_is(f, "b", "Unschedulable"), "b Unschedulable");

    set_spec(f, "a", "suspend", json_true());
    WAIT_FOR(terminating(f, "a"), "a's pod deleted");
    WAIT_FOR(phase_is(f, "a", "Suspended"), "a Suspended");
    assert_int_equal(fake_api_count(f, "force-delete"), 0);
    /* the pod still runs out its grace period: its GPUs are still taken */
    double t0 = areal_mono_s();
    while (areal_mono_s() - t0 < 0.5) {
        assert_false(has_pod(f, "b"));
        nap();
    }
    fake_api_delete(f, "pods", "team/a-trainer-0"); /* the kubelet confirms */
    run_job(f, "b");
    json_t *j = get_job(f, "a");
    const json_t *st = json_object_get(j, "status");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(st, "progress"), "step")),
                     7);
    assert_true(scheduled_reason_is(f, "a", "Suspended"));
    assert_false(has_pod(f, "a"));
    json_decref(j);

    set_spec(f, "a", "suspend", json_false());
    WAIT_FOR(scheduled_reason_is(f, "a", "Unschedulable"), "a resumed, waiting for room");
    assert_true(phase_is(f, "a", "Pending"));
    char key[] = "team/b-trainer-0";
    fake_api_delete(f, "arealjobs", "team/b");
    WAIT_FOR(terminating(f, "b"), "b's pod deleted");
    fake_api_delete(f, "pods", key);
    run_job(f, "a");
}

/* ttlSecondsAfterFinished 2: the job is kept about 2 s after it Succeeded,
 * then deleted - by a second operator, the first stopped right after the
 * finish was written (the wait is in the stored status, not in a timer). */
static void ttl_deletes_the_job_after_an_operator_restart(void **state) {
    world *w = *state;
    fake_api *f = w->f;
    put_job(f, "t", 4, 0, 2);
    run_job(f, "t");
    kubelet(f, "t", "Succeeded");
    WAIT_FOR(phase_is(f, "t", "Succeeded"), "t Succeeded");
    double done = areal_mono_s();
    json_t *j = get_job(f, "t");
    assert_non_null(
        json_string_value(json_object_get(json_object_get(j, "status"), "completionTime")));
    json_decref(j);
    op_stop(&w->o);
    op_start(&w->o, f);
    while (areal_mono_s() - done < 0.9) { /* completionTime has second resolution */
        assert_false(job_gone(f, "t"));
        nap();
    }
    WAIT_FOR(job_gone(f, "t"), "t deleted after its TTL");
    double after = areal_mono_s() - done;
    assert_true(after < 4.0);
}

static json_t *get_child(fake_api *f, const char *resource, const char *name) {
    char key[192];
    snprintf(key, sizeof key, "team/%s", name);
    return fake_api_get(f, resource, key);
}

/* metadata.uid of the job, or of its child's first owner (owner != 0), into buf; "" if none */
static const char *uid_of(json_t *obj, int owner, char *buf, size_t cap) {
    json_t *m = json_object_get(obj, "metadata");
    if (owner)
        m = json_array_get(json_object_get(m, "ownerReferences"), 0);
    const char *u = json_string_value(json_object_get(m, "uid"));
    snprintf(buf, cap, "%s", u ? u : "");
    return buf;
}

/* totalSteps in the job's ConfigMap's config.json, or -1 */
static long cm_total_steps(fake_api *f, const char *job) {
    char name[128];
    snprintf(name, sizeof name, "%s-config", job);
    json_t *cm = get_child(f, "configmaps", name);
    const char *text =
        json_string_value(json_object_get(json_object_get(cm, "data"), "config.json"));
    json_t *cfg = text ? json_loads(text, 0, NULL) : NULL;
    json_t *n = json_object_get(json_object_get(cfg, "rl"), "totalSteps");
    long v = json_is_integer(n) ? (long)json_integer_value(n) : -1;
    json_decref(cfg);
    json_decref(cm);
    return v;
}

/* Whether resource `name` names the job's current incarnation as its owner. */
static bool owned_by_job(fake_api *f, const char *resource, const char *name, const char *job) {
    json_t *j = get_job(f, job), *o = get_child(f, resource, name);
    char a[64], b[64];
    bool yes = j != NULL && o != NULL && uid_of(j, 0, a, sizeof a)[0] &&
               strcmp(a, uid_of(o, 1, b, sizeof b)) == 0;
    json_decref(j);
    json_decref(o);
    return yes;
}

static void put_job_steps(fake_api *f, const char *name, int steps) {
    put_job_config(f, name, 4, 0, -1, json_pack("{s:{s:i}}", "rl", "totalSteps", steps));
}

/*
 * kubectl delete, then apply of an edited job of the same name within seconds:
 * the first job's ConfigMap and Service outlive it until the garbage collector
 * comes (the fake API has none: they stay). The new job must not start its
 * trainer on the old spec.config (e2e w_rl_world's second job once trained its
 * namesake's 40 steps instead of its 20), and both objects must name the new
 * job as owner, or the collector deletes them from under its pods.
 */
static void a_recreated_job_takes_over_what_its_namesake_left(void **state) {
    world *w = *state;
    fake_api *f = w->f;
    put_job_steps(f, "re", 40);
    run_job(f, "re");
    WAIT_FOR(cm_total_steps(f, "re") == 40, "the first job's ConfigMap");
    assert_true(owned_by_job(f, "configmaps", "re-config", "re"));
    assert_true(owned_by_job(f, "services", "re", "re"));
    delete_job(f, "re");
    assert_int_equal(cm_total_steps(f, "re"), 40); /* left behind, as before a collector runs */
    put_job_steps(f, "re", 20);
    WAIT_FOR(bound(f, "re"), "the new job's pod");
    assert_int_equal(cm_total_steps(f, "re"), 20);
    assert_true(owned_by_job(f, "configmaps", "re-config", "re"));
    assert_true(owned_by_job(f, "services", "re", "re"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_waiting_high_priority_job_is_not_starved, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(equal_priorities_do_not_block, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(suspend_releases_the_gpus_and_resume_replaces,
                                        world_setup_graceful, world_teardown),
        cmocka_unit_test_setup_teardown(ttl_deletes_the_job_after_an_operator_restart, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(a_recreated_job_takes_over_what_its_namesake_left,
                                        world_setup, world_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
