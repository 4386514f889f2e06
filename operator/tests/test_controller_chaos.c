/*
 * test_controller_chaos.c - a randomized fault test of the whole controller
 * (issue 11's first acceptance line): the real controller (informers, work
 * queue, workers, ledger) against the in-memory API server
 * (operator/tests/util/fake_api.h), many jobs on a multi-rack node set, and a
 * seeded driver that, step by step, injects what a cluster does to an
 * operator: API errors (5xx, 429, 409 on writes, 410 on lists), expired (410)
 * and broken watches, operator restarts on the same server, node deaths
 * (NotReady, no kubelet confirming deletions there, so pods stay
 * Terminating), pod kills (Failed, or deleted outright), scale changes of
 * spec.rollout.replicas (what the scale subresource writes), job deletes and
 * new jobs - some with specs the API server refuses children of (422).
 *
 * After every step, from the API server's own objects (never the operator's
 * caches): no node carries more GPUs, CPU or memory than it has; no job says
 * Running while one of its trainer pods is unbound (AREAL_CHAOS_STRICT=1: any
 * pod - a rollout server replaced alone while the trainer runs is allowed by
 * default, as op-roles' reconcile does it), or a pod is missing when nothing
 * but the operator could have removed it; no two live pods of a job hold the
 * same role and rank. After the last step the faults stop and every job must
 * converge within a bounded time: Running with every planned pod bound and
 * running (and the status saying what the pods say - readyPods, gpus,
 * rolloutReplicas - with RolloutReady True exactly when every wanted rollout
 * server is ready, False with a reason while one is missing), waiting (Pending, Scheduled=False
 * with a reason) with no trainer pod (its rollout servers may stay), or Failed with a condition
 * that says why (a refused spec: ChildRejected or InvalidSpec naming the field), and every deleted
 * job gone; then the operator must be at rest (no write for 0.6 s).
 *
 * Seeds: REGRESSION_SEEDS (each found a bug; kept) and then AREAL_CHAOS_SEEDS
 * seeds from AREAL_CHAOS_FIRST (defaults: 200 from 1; 24 in a sanitized
 * build), AREAL_CHAOS_PAR at a time (default 8: a seed mostly waits on
 * watches and backoffs). AREAL_CHAOS_SEED=N runs that seed alone with the
 * controller's log on stderr (AREAL_CHAOS_LOG=1: always; each run's jobs live
 * in their own namespace "w<run>", named in its failure report). A seed fixes the fault schedule;
 * thread timing still varies, so a failure prints the seed and the step log (what was done, and
 * what the checker saw) to rerun and read. `make test-long` runs thousands. The kubelets are the
 * driver's: bound pods become Running, deleted pods on live nodes are confirmed gone, pods of
 * deleted jobs are garbage collected.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "areal/kube/client.h"
#include "areal/log.h"
#include "areal/operator/cached.h"
#include "areal/operator/controller.h"
#include "util/fake_api.h"

/*
 * Seeds that found bugs; run every time (thread timing varies, so a seed is a
 * fault schedule that once broke an invariant, not a replay):
 *   40, 52   a restart whose status write was lost left a gang Running over
 *            unbound pods (reconcile: a Running gang whose pods go is a restart)
 *   9, 11, 85, 140, 186
 *            5 GPUs on 4-GPU nodes: unbound pods of another job, planned for a
 *            node, held no room once the ledger's claims were gone (operator
 *            restart, a pass without binds) - they count on their planned node now
 *   387      36 CPUs bound on a 32-CPU node: per-pod CPU requests were never
 *            checked (desired_plan_fits)
 *   27, 368  a job stuck Restarting for 25 s (368: the test server closed every
 *            connection past its 128th - fixed in kube_test_server; 27: not
 *            explained, not seen again in 2,000 seeds)
 *   174, 339 a job stuck Restarting for good: its old pod had reported Failed,
 *            was deleted gracefully, and its node died before a kubelet
 *            confirmed; only a going pod that had not terminated counted as
 *            lost, so nothing force-deleted it (step_trainer.c, reconcile.c's
 *            servers). The pass also dropped the Scheduled condition (only
 *            RolloutReady was set), so the job said no reason.
 *   52, 101  (op-index) GPUs over-committed under load: a pass created a gang
 *            and was cut short (a failed bind); the next one, on a pod cache
 *            that showed none of the new pods yet, planned the gang afresh,
 *            had its creates answered 409 (taken as done) and bound the pods
 *            to the new plan's nodes, while the pods bound by the first pass
 *            held room no claim counted any more. Expectations are now kept
 *            pod by pod for every create and bind answered with success, also
 *            when a later action of the pass failed (ledger_answered), and the
 *            next pass waits for the pod cache to show them. The cause as the
 *            recorded failure of 52 describes it; neither seed failed again.
 *   266, 603 (op-index) Running with a pod missing for a second. A cause that
 *            fits (found by reading, not reproduced): a pod created and bound,
 *            then deleted by the driver before the job's next pass, was never
 *            "observed" in the cache, so that pass waited out the whole 5 s
 *            expectation window with the status still counting the pod. An
 *            expectation is now met by the pod informer's event (added,
 *            bound, deleted), not only by what the cache holds when the pass
 *            looks.
 *   979      (op-index, in its own first 3,000-seed run) writes at rest: a
 *            worker put its status write's answer into the job cache, the
 *            watch's older events then took the cache back, and passes on the
 *            regressed job wrote stale statuses (409). Job events no longer
 *            replace a newer cached version.
 *   130      not converged under load: not reproduced; kept as a regression seed
 *            (174 and 339 above were the same symptom).
 * On op-roles' split reconcile (merged for a trial): 690 (12 GPUs on an 8-GPU
 * node: rollout servers created before an operator restart, bound to their
 * planned node after three other jobs had been placed there). Fixed (opfix2):
 * a server's or a trainer gang's unbound pods are bound only when their
 * planned node still has their room (step_cluster_claim); servers planned in
 * one pass see each other's CPU and memory (step_cluster_take); a ledger
 * claim is not skipped for a cached pod counted on another node. 30: 5-6 GPUs
 * on 4-GPU nodes, a server bound to its planned node after other jobs'
 * servers were placed there.
 */
static const unsigned REGRESSION_SEEDS[] = {40,  52,  9,   11, 85,  140, 186, 387, 27, 368,
                                            101, 266, 690, 30, 174, 339, 603, 130, 979};
#define N_REGRESSION (sizeof REGRESSION_SEEDS / sizeof REGRESSION_SEEDS[0])

#if defined(__SANITIZE_ADDRESS__)
#define DEFAULT_SEEDS 24 /* ASan+UBSan: a seed takes 3-5 times as long */
#define CONVERGE_S    50.0
#else
#define DEFAULT_SEEDS 200
#define CONVERGE_S    25.0
#endif

#define N_NODES       8
#define MAX_JOBS      16
#define FIRST_JOBS    7
#define N_STEPS       24
#define LOG_CAP       (512 * 1024)
#define GPU_KEY       "nvidia.com/gpu"
#define NODE_CPU      "32"
#define NODE_CPU_M    32000
#define NODE_MEM      "128Gi"
#define NODE_MEM_B    (128LL << 30)
#define LONG_NAME_JOB 6 /* template index of a job whose name is too long */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

typedef enum job_kind { JOB_GOOD, JOB_BAD_ENV, JOB_BAD_VOLUME, JOB_LONG_NAME } job_kind;

typedef struct djob {
    char name[96];
    const char *alloc;
    job_kind kind;
    bool deleted; /* the driver deleted it */
    long gen;
    long disrupted_rv; /* the last time the driver took pods of it away (or changed its spec) */
    int replicas;      /* spec.rollout.replicas as last scaled (-1: never) */
} djob;

typedef struct world {
    unsigned seed;
    char ns[32]; /* the jobs' namespace: "w<run>", so a shared log tells runs apart */
    uint64_t rng;
    fake_api *f;
    kube_client *kc;
    controller *ctl;
    pthread_t th;
    bool running;
    int gpus[N_NODES];
    bool dead[N_NODES];
    djob jobs[MAX_JOBS];
    int n_jobs;
    int step;
    char *log;
    size_t log_n;
    char failure[2048];
    int connections; /* accepted by the API server over the run */
} world;

static const char *const ALLOCS[] = {
    "sglang:d2+megatron:d1t2", /* 4 GPUs, 3 pods */
    "sglang:d2+fsdp:d4",       /* 6 */
    "sglang:d1+fsdp:d1",       /* 2 */
    "sglang:d4+fsdp:d4",       /* 8 */
    "sglang:d2t2+megatron:d2p2t2",
};
#define N_ALLOCS (int)(sizeof ALLOCS / sizeof ALLOCS[0])

/* ---- randomness and the step log ------------------------------------------------- */

static uint64_t rnd(world *w) { /* xorshift64* */
    w->rng ^= w->rng >> 12;
    w->rng ^= w->rng << 25;
    w->rng ^= w->rng >> 27;
    return w->rng * 2685821657736338717ULL;
}

static int pick(world *w, int n) {
    return n > 0 ? (int)(rnd(w) % (uint64_t)n) : 0;
}

static void wlog(world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wlog(world *w, const char *fmt, ...) {
    if (w->log_n + 512 >= LOG_CAP)
        return;
    int n = snprintf(w->log + w->log_n, LOG_CAP - w->log_n, "  step %2d (rv %ld): ", w->step,
                     w->f ? fake_api_rv(w->f) : 0L);
    w->log_n += (size_t)n;
    va_list ap;
    va_start(ap, fmt);
    n = vsnprintf(w->log + w->log_n, LOG_CAP - w->log_n - 2, fmt, ap);
    va_end(ap);
    if (n > 0)
        w->log_n += (size_t)n < LOG_CAP - w->log_n - 2 ? (size_t)n : LOG_CAP - w->log_n - 2;
    w->log[w->log_n++] = '\n';
    w->log[w->log_n] = '\0';
}

/* Records the first failure; returns false (for `return wfail(...)`). */
static bool wfail(world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool wfail(world *w, const char *fmt, ...) {
    if (w->failure[0] != '\0')
        return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->failure, sizeof w->failure, fmt, ap);
    va_end(ap);
    wlog(w, "VIOLATION: %s", w->failure);
    return false;
}

/* ---- the cluster's objects ----------------------------------------------------------- */

static void put_node(world *w, int i) {
    char name[16], g[8], since[32];
    snprintf(name, sizeof name, "n%d", i);
    snprintf(g, sizeof g, "%d", w->gpus[i]);
    time_t t = time(NULL) - 120; /* a dead node has been NotReady for two minutes */
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char rack[16];
    snprintf(rack, sizeof rack, "rack-%d", i % 3);
    json_t *n = json_pack(
        "{s:{s:s,s:{s:s,s:s}},s:{s:{s:s,s:s,s:s},s:[{s:s,s:s,s:s}]}}", "metadata", "name", name,
        "labels", "kubernetes.io/hostname", name, "network.topology.nvidia.com/leaf", rack,
        "status", "allocatable", GPU_KEY, g, "cpu", NODE_CPU, "memory", NODE_MEM, "conditions",
        "type", "Ready", "status", w->dead[i] ? "Unknown" : "True", "lastTransitionTime", since);
    fake_api_put(w->f, "nodes", n);
    json_decref(n);
}

static json_t *job_object(world *w, const djob *j) {
    json_t *spec =
        json_pack("{s:s,s:s,s:{s:i,s:i,s:{s:i,s:i}}}", "allocation", j->alloc, "image", "img",
                  "failurePolicy", "maxRestarts", 2 + pick(w, 3), "nodeLostSeconds", pick(w, 3),
                  "backoff", "initialSeconds", 1, "maxSeconds", 1);
    /* one override for the trainer (it exists at every scale, 0 included) */
    json_t *trainer = json_pack("{s:s}", "name", "trainer");
    if (pick(w, 2)) /* CPU and memory that count on the nodes too */
        json_object_set_new(trainer, "resources",
                            json_pack("{s:{s:s,s:s}}", "requests", "cpu", "9", "memory", "40Gi"));
    if (j->kind == JOB_BAD_ENV)
        json_object_set_new(trainer, "env",
                            json_pack("[{s:s,s:s}]", "name", "BAD=NAME", "value", "x"));
    if (j->kind == JOB_BAD_VOLUME)
        json_object_set_new(trainer, "volumes",
                            json_pack("[{s:s,s:{}}]", "name", "Bad_Volume", "emptyDir"));
    json_t *roles = json_pack("[o]", trainer);
    json_object_set_new(spec, "roles", roles);
    if (pick(w, 2))
        json_object_set_new(spec, "topology",
                            json_pack("{s:[{s:s,s:s}]}", "levels", "label",
                                      "network.topology.nvidia.com/leaf", "policy", "Preferred"));
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:i},s:o}", "apiVersion", "areal.io/v1alpha1", "kind",
                     "AReaLJob", "metadata", "name", j->name, "namespace", w->ns, "generation",
                     (int)j->gen, "spec", spec);
}

static void new_job(world *w) {
    if (w->n_jobs == MAX_JOBS)
        return;
    djob *j = &w->jobs[w->n_jobs];
    memset(j, 0, sizeof *j);
    int roll = pick(w, 20);
    j->kind = roll == 0   ? JOB_BAD_ENV
              : roll == 1 ? JOB_BAD_VOLUME
              : roll == 2 ? JOB_LONG_NAME
                          : JOB_GOOD;
    if (j->kind == JOB_LONG_NAME) /* 64 characters: the Service name cannot take it */
        snprintf(j->name, sizeof j->name, "j%d-%s", w->n_jobs,
                 "a-name-much-too-long-for-a-service-and-its-pods-hostnames-xyzw");
    else
        snprintf(j->name, sizeof j->name, "j%d", w->n_jobs);
    j->name[64] = '\0';
    j->alloc = ALLOCS[pick(w, N_ALLOCS)];
    j->gen = 1;
    j->replicas = -1;
    json_t *o = job_object(w, j);
    fake_api_put(w->f, "arealjobs", o);
    json_decref(o);
    wlog(w, "new job %s (%s%s)", j->name, j->alloc,
         j->kind == JOB_BAD_ENV      ? ", bad env name"
         : j->kind == JOB_BAD_VOLUME ? ", bad volume name"
         : j->kind == JOB_LONG_NAME  ? ", name too long"
                                     : "");
    w->n_jobs++;
}

/* ---- the operator --------------------------------------------------------------------- */

static void *run_ctl(void *arg) {
    controller_run(arg);
    return NULL;
}

static bool operator_start(world *w) {
    kube_config cfg;
    kube_config_init(&cfg);
    cfg.server = strdup(fake_api_url(w->f));
    cfg.allow_insecure = 1;
    cfg.qps = 0;
    cfg.backoff_base_ms = 5;
    cfg.backoff_max_ms = 50;
    w->kc = kube_client_new(&cfg, NULL);
    kube_config_free(&cfg);
    if (w->kc == NULL)
        return wfail(w, "no kube client");
    controller_config cc = {.workers = 4};
    areal_error err;
    if (controller_new(w->kc, &cc, NULL, &w->ctl, &err) != AREAL_OK)
        return wfail(w, "controller_new: %s", err.msg);
    if (pthread_create(&w->th, NULL, run_ctl, w->ctl) != 0)
        return wfail(w, "pthread_create");
    w->running = true;
    return true;
}

static void operator_stop(world *w) {
    if (!w->running)
        return;
    controller_stop(w->ctl);
    pthread_join(w->th, NULL);
    controller_free(w->ctl);
    kube_client_free(w->kc);
    w->ctl = NULL;
    w->kc = NULL;
    w->running = false;
}

/* ---- the kubelets and the garbage collector ------------------------------------------- */

static int node_index(const char *name) {
    int i;
    return name && sscanf(name, "n%d", &i) == 1 && i >= 0 && i < N_NODES ? i : -1;
}

typedef struct edit {
    const char *uid;
    const char *phase; /* set this phase (NULL: the kubelet's start) */
} edit;

static bool same_uid(const json_t *o, const char *uid) {
    const char *u = json_string_value(json_object_get(json_object_get(o, "metadata"), "uid"));
    return u && uid && strcmp(u, uid) == 0;
}

/* A live node's kubelet: a deleted pod is gone; a new bound pod runs. */
static int kubelet_edit(json_t *pod, void *ud) {
    const edit *e = ud;
    if (!same_uid(pod, e->uid))
        return -1;
    if (json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp"))
        return 1;
    if (json_object_get(json_object_get(pod, "spec"), "nodeName") == NULL ||
        json_object_get(pod, "status") != NULL)
        return -1;
    json_object_set_new(pod, "status",
                        json_pack("{s:s,s:[{s:s,s:s}]}", "phase", "Running", "conditions", "type",
                                  "Ready", "status", "True"));
    return 0;
}

/* A pod killed: its container exited 137. */
static int kill_edit(json_t *pod, void *ud) {
    const edit *e = ud;
    if (!same_uid(pod, e->uid))
        return -1;
    json_object_set_new(pod, "status",
                        json_pack("{s:s,s:[{s:s,s:s}],s:[{s:s,s:{s:{s:i,s:s}}}]}", "phase",
                                  "Failed", "conditions", "type", "Ready", "status", "False",
                                  "containerStatuses", "name", "worker", "state", "terminated",
                                  "exitCode", 137, "reason", "Error"));
    return 0;
}

static int delete_edit(json_t *pod, void *ud) {
    const edit *e = ud;
    return same_uid(pod, e->uid) ? 1 : -1;
}

static bool job_exists(const world *w, const json_t *jobs, const char *name) {
    char key[160];
    snprintf(key, sizeof key, "%s/%s", w->ns, name);
    return json_object_get(jobs, key) != NULL;
}

static void kubelets(world *w) {
    json_t *pods = fake_api_list(w->f, "pods");
    json_t *jobs = fake_api_list(w->f, "arealjobs");
    const char *key;
    json_t *pod;
    json_object_foreach(pods, key, pod) {
        cached_pod *p = cached_pod_new(pod);
        if (p == NULL)
            continue;
        edit e = {.uid = p->uid};
        if (p->job && !job_exists(w, jobs, p->job)) { /* the garbage collector */
            fake_api_modify(w->f, "pods", key, delete_edit, &e);
        } else {
            int n = node_index(p->node_name);
            if (n >= 0 && !w->dead[n])
                fake_api_modify(w->f, "pods", key, kubelet_edit, &e);
        }
        cached_pod_release(p);
    }
    json_decref(jobs);
    json_decref(pods);
}

/* ---- the invariants -------------------------------------------------------------------- */

static const char *str_at(const json_t *o, const char *a, const char *b) {
    const json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

static long rv_of(const json_t *o) {
    const char *rv = str_at(o, "metadata", "resourceVersion");
    return rv ? strtol(rv, NULL, 10) : 0;
}

static const json_t *condition(const json_t *job, const char *type) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(job, "status"), "conditions"), i, c) {
        const char *t = str_at(c, "type", NULL);
        if (t && strcmp(t, type) == 0)
            return c;
    }
    return NULL;
}

/* What the API server holds of job `name`'s pods. */
typedef struct job_pods {
    int live;                          /* not being deleted */
    int live_bound;                    /* of those, bound */
    int running;                       /* of those, bound and Running on a live node */
    int active;                        /* not Succeeded/Failed (deleting or not) */
    int trainer_live, trainer_unbound; /* live trainer pods, and those of them unbound */
    int ready;                         /* live pods with Ready=True */
    int servers_ready;                 /* of those, rollout servers (one pod each here) */
    int gpus;                          /* GPUs of the pods not Succeeded/Failed */
} job_pods;

static job_pods pods_of(world *w, const json_t *pods, const char *name) {
    job_pods jp = {0};
    const char *key;
    json_t *pod;
    json_object_foreach((json_t *)pods, key, pod) {
        cached_pod *p = cached_pod_new(pod);
        if (p == NULL)
            continue;
        if (p->job && strcmp(p->job, name) == 0) {
            bool terminal = p->phase == CACHED_PHASE_SUCCEEDED || p->phase == CACHED_PHASE_FAILED;
            jp.active += !terminal;
            jp.gpus += terminal ? 0 : p->gpus;
            if (p->deletion_timestamp == NULL) {
                bool trainer = p->role_kind && strcmp(p->role_kind, "trainer") == 0;
                jp.trainer_live += trainer;
                jp.trainer_unbound += trainer && p->node_name == NULL;
                jp.live++;
                jp.live_bound += p->node_name != NULL;
                int n = node_index(p->node_name);
                jp.running += n >= 0 && !w->dead[n] && p->phase == CACHED_PHASE_RUNNING;
                jp.ready += p->ready;
                jp.servers_ready +=
                    p->ready && p->role_kind && strcmp(p->role_kind, "rollout") == 0;
            }
        }
        cached_pod_release(p);
    }
    return jp;
}

static djob *driver_job(world *w, const char *name) {
    for (int i = 0; i < w->n_jobs; i++)
        if (strcmp(w->jobs[i].name, name) == 0)
            return &w->jobs[i];
    return NULL;
}

/* Every invariant, from the API server's objects; false (and w->failure) on a
 * violation. A job Running with fewer pods than planned is only *suspect (the
 * operator may have written Running from a cache a watch event behind the
 * driver's last kill); the caller looks again before calling it a violation. */
static bool check(world *w, char *suspect, size_t scap) {
    if (suspect)
        suspect[0] = '\0';
    json_t *pods = fake_api_list(w->f, "pods");
    json_t *jobs = fake_api_list(w->f, "arealjobs");
    int gpus[N_NODES] = {0};
    long long cpu[N_NODES] = {0}, mem[N_NODES] = {0};
    const char *key, *key2;
    json_t *pod, *pod2, *jo;
    bool ok = true;
    json_object_foreach(pods, key, pod) {
        cached_pod *p = cached_pod_new(pod);
        if (p == NULL)
            continue;
        int n = node_index(p->node_name);
        if (n >= 0 && p->phase != CACHED_PHASE_SUCCEEDED && p->phase != CACHED_PHASE_FAILED) {
            gpus[n] += p->gpus;
            cpu[n] += p->cpu_milli;
            mem[n] += p->mem_bytes;
        }
        cached_pod_release(p);
    }
    for (int n = 0; n < N_NODES && ok; n++) {
        if (gpus[n] > w->gpus[n]) {
            char what[1024] = "";
            size_t at = 0;
            json_object_foreach(pods, key, pod) {
                cached_pod *p = cached_pod_new(pod);
                if (p && node_index(p->node_name) == n && at < sizeof what - 120)
                    at += (size_t)snprintf(
                        what + at, sizeof what - at, " %s(%d GPUs, %s%s, %s, bound at rv %s)", key,
                        p->gpus, p->deletion_timestamp ? "deleting, " : "",
                        p->phase == CACHED_PHASE_RUNNING  ? "Running"
                        : p->phase == CACHED_PHASE_FAILED ? "Failed"
                                                          : "not started",
                        p->uid,
                        json_string_value(json_object_get(
                            json_object_get(json_object_get(pod, "metadata"), "annotations"),
                            "fake.areal.io/bound-rv")));
                cached_pod_release(p);
            }
            ok = wfail(w, "node n%d over-committed: %d GPUs bound of %d:%s", n, gpus[n], w->gpus[n],
                       what);
        } else if (cpu[n] > NODE_CPU_M)
            ok = wfail(w, "node n%d over-committed: %lldm CPU bound of %dm", n, cpu[n], NODE_CPU_M);
        else if (mem[n] > NODE_MEM_B)
            ok = wfail(w, "node n%d over-committed: %lld bytes of memory bound of %lld", n, mem[n],
                       NODE_MEM_B);
    }
    /* duplicates: two live pods of one job with the same role and rank */
    json_object_foreach(pods, key, pod) {
        if (!ok)
            break;
        cached_pod *a = cached_pod_new(pod);
        if (a == NULL || a->deletion_timestamp || !a->job || !a->role || !a->pod_index) {
            cached_pod_release(a);
            continue;
        }
        json_object_foreach(pods, key2, pod2) {
            if (strcmp(key, key2) >= 0)
                continue;
            cached_pod *b = cached_pod_new(pod2);
            if (b && !b->deletion_timestamp && b->job && b->role && b->pod_index &&
                strcmp(a->job, b->job) == 0 && strcmp(a->role, b->role) == 0 &&
                strcmp(a->pod_index, b->pod_index) == 0)
                ok = wfail(w, "job %s has two live pods of %s rank %s: %s and %s", a->job, a->role,
                           a->pod_index, key, key2);
            cached_pod_release(b);
        }
        cached_pod_release(a);
    }
    /* Running means every planned pod bound (and there, unless the driver took it) */
    json_object_foreach(jobs, key, jo) {
        if (!ok)
            break;
        const char *name = str_at(jo, "metadata", "name");
        const char *phase = str_at(jo, "status", "phase");
        if (name == NULL || phase == NULL || strcmp(phase, "Running") != 0 ||
            str_at(jo, "metadata", "deletionTimestamp"))
            continue;
        job_pods jp = pods_of(w, pods, name);
        long planned =
            (long)json_integer_value(json_object_get(json_object_get(jo, "status"), "pods"));
        const djob *dj = driver_job(w, name);
        if (getenv("AREAL_CHAOS_STRICT") ? jp.live_bound < jp.live : jp.trainer_unbound > 0)
            ok =
                wfail(w, "job %s is Running with %d of its %d pods unbound (%d of %d trainer pods)",
                      name, jp.live - jp.live_bound, jp.live, jp.trainer_unbound, jp.trainer_live);
        else if (planned <= 0)
            ok = wfail(w, "job %s is Running with status.pods %ld", name, planned);
        else if (jp.live < planned && dj && rv_of(jo) > dj->disrupted_rv) {
            if (suspect == NULL)
                ok = wfail(w,
                           "job %s has been Running with %d of %ld pods for a second (written "
                           "at rv %ld, after the driver last took pods at rv %ld)",
                           name, jp.live, planned, rv_of(jo), dj->disrupted_rv);
            else if (suspect[0] == '\0')
                snprintf(suspect, scap, "%s", name);
        }
    }
    json_decref(jobs);
    json_decref(pods);
    return ok;
}

/* The rollout servers job j wants: its last scale, else the allocation's
 * inference data parallelism ("sglang:dN..."). */
static int servers_wanted(const djob *j) {
    if (j->replicas >= 0)
        return j->replicas;
    int n = 0;
    return sscanf(j->alloc, "sglang:d%d", &n) == 1 ? n : 0;
}

/*
 * Issue 11 items 4 and 6 for a Running job that settled: the status says
 * what the API server's pods say (status writes retried on conflict are
 * never lost: readyPods, gpus, rolloutReplicas), and RolloutReady is True
 * exactly when every wanted server is ready - False, with a reason, while
 * one is missing (Running means the trainer gang; the servers come and go
 * alone). False and *why set when not (yet).
 */
static bool status_is_true(world *w, const djob *j, const json_t *jo, const job_pods *jp, char *why,
                           size_t cap) {
    (void)w;
    const json_t *st = json_object_get(jo, "status");
    long ready = (long)json_integer_value(json_object_get(st, "readyPods"));
    long gpus = (long)json_integer_value(json_object_get(st, "gpus"));
    long servers = (long)json_integer_value(json_object_get(st, "rolloutReplicas"));
    const json_t *rr = condition(jo, "RolloutReady");
    const char *rs = str_at(rr, "status", NULL), *rreason = str_at(rr, "reason", NULL);
    int want = servers_wanted(j);
    bool all = jp->servers_ready == want;
    size_t at = strlen(why);
    if (ready != jp->ready || gpus != jp->gpus || servers != jp->servers_ready) {
        snprintf(why + at, cap - at,
                 "; status says readyPods %ld, gpus %ld, rolloutReplicas %ld but the pods say "
                 "%d, %d, %d",
                 ready, gpus, servers, jp->ready, jp->gpus, jp->servers_ready);
        return false;
    }
    if (rs == NULL || rreason == NULL || rreason[0] == '\0' ||
        strcmp(rs, all ? "True" : "False") != 0) {
        snprintf(why + at, cap - at, "; RolloutReady %s/%s with %d of %d servers ready",
                 rs ? rs : "-", rreason ? rreason : "-", jp->servers_ready, want);
        return false;
    }
    return true;
}

/* Whether job j has settled; *why says where it is when not. */
static bool converged(world *w, const djob *j, const json_t *jobs, const json_t *pods, char *why,
                      size_t cap) {
    char key[160];
    snprintf(key, sizeof key, "%s/%s", w->ns, j->name);
    const json_t *jo = json_object_get(jobs, key);
    if (j->deleted) {
        snprintf(why, cap, "deleted, still there");
        return jo == NULL;
    }
    if (jo == NULL) {
        snprintf(why, cap, "gone, never deleted");
        return false;
    }
    const char *phase = str_at(jo, "status", "phase");
    const json_t *sched = condition(jo, "Scheduled");
    const char *reason = str_at(sched, "reason", NULL), *msg = str_at(sched, "message", NULL);
    job_pods jp = pods_of(w, pods, j->name);
    long planned = (long)json_integer_value(json_object_get(json_object_get(jo, "status"), "pods"));
    snprintf(why, cap, "phase %s, Scheduled %s/%s, pods %ld planned, %d live, %d bound, %d running",
             phase ? phase : "-",
             str_at(sched, "status", NULL) ? str_at(sched, "status", NULL) : "-",
             reason ? reason : "-", planned, jp.live, jp.live_bound, jp.running);
    if (phase == NULL)
        return false;
    bool refused = j->kind != JOB_GOOD;
    if (strcmp(phase, "Failed") == 0) {
        if (reason == NULL || msg == NULL || jp.active > 0)
            return false;
        if (refused) { /* the condition names the field the API server (or the CRD) refused */
            const char *field = j->kind == JOB_BAD_ENV      ? ".env["
                                : j->kind == JOB_BAD_VOLUME ? "volumes["
                                                            : "metadata.name";
            if (strstr(msg, field) == NULL)
                return wfail(w, "job %s failed (%s) without naming %s: %s", j->name, reason, field,
                             msg);
            return true;
        }
        if (strcmp(reason, "BackoffLimitExceeded") != 0)
            return wfail(w, "job %s (a good spec) failed with %s: %s", j->name, reason, msg);
        return true;
    }
    if (refused) {
        /* a refused child may only fail the job; a job of one that was never
         * created (it waits for room) may wait */
        return strcmp(phase, "Pending") == 0 && reason && strcmp(reason, "Unschedulable") == 0 &&
               jp.trainer_live == 0;
    }
    if (strcmp(phase, "Running") == 0)
        return planned > 0 && jp.live == planned && jp.running == planned &&
               status_is_true(w, j, jo, &jp, why, cap);
    if (strcmp(phase, "Pending") == 0)
        return sched && strcmp(str_at(sched, "status", NULL), "False") == 0 && reason &&
               strcmp(reason, "Unschedulable") == 0 && jp.trainer_live == 0;
    return false;
}

static bool all_converged(world *w, char *why, size_t cap) {
    json_t *jobs = fake_api_list(w->f, "arealjobs");
    json_t *pods = fake_api_list(w->f, "pods");
    bool all = true;
    why[0] = '\0';
    for (int i = 0; i < w->n_jobs && all && !w->failure[0]; i++) {
        char one[400];
        if (!converged(w, &w->jobs[i], jobs, pods, one, sizeof one)) {
            snprintf(why, cap, "job %s: %s", w->jobs[i].name, one);
            all = false;
        }
    }
    json_decref(pods);
    json_decref(jobs);
    return all && !w->failure[0];
}

/* ---- the steps ------------------------------------------------------------------------- */

typedef struct fault_site {
    const char *what, *res;
} fault_site;

static const fault_site SITES[] = {
    {"create", "pods"}, {"create", "services"}, {"create", "configmaps"},
    {"bind", "pods"},   {"patch", "arealjobs"}, {"delete", "pods"},
    {"list", "pods"},   {"list", "nodes"},      {"list", "arealjobs"},
};
#define N_SITES (int)(sizeof SITES / sizeof SITES[0])

static void inject_error(world *w) {
    const fault_site *s = &SITES[pick(w, N_SITES)];
    static const int transient[] = {500, 503, 504, 429};
    int code = transient[pick(w, 4)];
    if (strcmp(s->what, "patch") == 0 && pick(w, 2))
        code = 409;
    if (strcmp(s->what, "list") == 0 && pick(w, 3) == 0)
        code = 410;
    int times = 1 + pick(w, 4);
    const char *reason = code == 409   ? "Conflict"
                         : code == 410 ? "Expired"
                         : code == 429 ? "TooManyRequests"
                                       : "ServiceUnavailable";
    fake_api_fail(w->f, s->what, s->res, code, reason, "fake_api: injected by the chaos driver",
                  times);
    wlog(w, "the next %d %s of %s answer %d", times, s->what, s->res, code);
}

static void heal(world *w) {
    for (int i = 0; i < N_SITES; i++)
        fake_api_fail(w->f, SITES[i].what, SITES[i].res, 0, "", "", 0);
}

/* A random pod of the API server (key and uid copied), optionally only bound ones. */
static bool random_pod(world *w, bool bound, char *key, size_t kcap, char *uid, size_t ucap,
                       char *jobname, size_t jcap) {
    json_t *pods = fake_api_list(w->f, "pods");
    int n = 0;
    const char *k;
    json_t *pod;
    json_object_foreach(pods, k, pod) n +=
        !bound || json_object_get(json_object_get(pod, "spec"), "nodeName") != NULL;
    int want = pick(w, n), at = 0;
    bool found = false;
    json_object_foreach(pods, k, pod) {
        if (bound && json_object_get(json_object_get(pod, "spec"), "nodeName") == NULL)
            continue;
        if (at++ == want && !found) {
            snprintf(key, kcap, "%s", k);
            const char *u = str_at(pod, "metadata", "uid");
            snprintf(uid, ucap, "%s", u ? u : "");
            const char *jn = json_string_value(json_object_get(
                json_object_get(json_object_get(pod, "metadata"), "labels"), "areal.io/job"));
            snprintf(jobname, jcap, "%s", jn ? jn : "");
            found = true;
        }
    }
    json_decref(pods);
    return found;
}

static void disrupt(world *w, const char *jobname) {
    djob *j = driver_job(w, jobname);
    if (j != NULL)
        j->disrupted_rv = fake_api_rv(w->f);
}

/* Every job with a pod on node n counts as disrupted (its pods will be lost). */
static void disrupt_node(world *w, int n) {
    json_t *pods = fake_api_list(w->f, "pods");
    const char *k;
    json_t *pod;
    json_object_foreach(pods, k, pod) {
        cached_pod *p = cached_pod_new(pod);
        if (p && p->job && node_index(p->node_name) == n)
            disrupt(w, p->job);
        cached_pod_release(p);
    }
    json_decref(pods);
}

static void step(world *w) {
    int roll = pick(w, 100);
    char key[300], uid[64], jn[128];
    if (roll < 30) {
        inject_error(w);
    } else if (roll < 36) {
        static const char *const res[] = {"pods", "nodes", "arealjobs"};
        const char *r = res[pick(w, 3)];
        fake_api_expire(w->f, r);
        wlog(w, "the next watch of %s answers 410 Gone", r);
    } else if (roll < 42) {
        static const char *const res[] = {"pods", "nodes", "arealjobs"};
        const char *r = res[pick(w, 3)];
        fake_api_drop_watch(w->f, r);
        wlog(w, "the next watch of %s breaks off", r);
    } else if (roll < 48) {
        wlog(w, "the operator restarts");
        operator_stop(w);
        operator_start(w);
    } else if (roll < 56) {
        int n = pick(w, N_NODES), alive = 0;
        for (int i = 0; i < N_NODES; i++)
            alive += !w->dead[i];
        if (w->dead[n] || alive > N_NODES - 2) {
            if (!w->dead[n]) {
                disrupt_node(w, n);
                w->dead[n] = true;
                wlog(w, "node n%d dies (NotReady; no kubelet confirms anything there)", n);
            } else {
                w->dead[n] = false;
                wlog(w, "node n%d comes back", n);
            }
            put_node(w, n);
        }
    } else if (roll < 70) {
        if (random_pod(w, true, key, sizeof key, uid, sizeof uid, jn, sizeof jn)) {
            edit e = {.uid = uid};
            bool del = pick(w, 3) == 0;
            int rc = fake_api_modify(w->f, "pods", key, del ? delete_edit : kill_edit, &e);
            disrupt(w, jn);
            wlog(w, "pod %s %s%s", key, del ? "deleted at once" : "killed (Failed, exit 137)",
                 rc < 0 ? " (it was gone)" : "");
        }
    } else if (roll < 80) {
        int i = pick(w, w->n_jobs);
        djob *j = &w->jobs[i];
        if (!j->deleted) {
            char k[160];
            snprintf(k, sizeof k, "%s/%s", w->ns, j->name);
            json_t *o = fake_api_get(w->f, "arealjobs", k);
            if (o != NULL) {
                int replicas = pick(w, 4); /* 0 included: scale to zero must not fail the job */
                json_t *spec = json_object_get(o, "spec");
                json_t *rollout = json_object_get(spec, "rollout");
                if (!json_is_object(rollout))
                    json_object_set_new(spec, "rollout", rollout = json_object());
                json_object_set_new(rollout, "replicas", json_integer(replicas));
                j->replicas = replicas;
                json_object_set_new(json_object_get(o, "metadata"), "generation",
                                    json_integer(++j->gen));
                fake_api_put(w->f, "arealjobs", o);
                json_decref(o);
                disrupt(w, j->name);
                wlog(w, "job %s scaled to %d rollout replicas (generation %ld)", j->name, replicas,
                     j->gen);
            }
        }
    } else if (roll < 86) {
        int i = pick(w, w->n_jobs);
        djob *j = &w->jobs[i];
        if (!j->deleted) {
            char k[160];
            snprintf(k, sizeof k, "%s/%s", w->ns, j->name);
            fake_api_delete(w->f, "arealjobs", k);
            j->deleted = true;
            disrupt(w, j->name);
            wlog(w, "job %s deleted", j->name);
        }
    } else if (roll < 93) {
        new_job(w);
    } else {
        wlog(w, "nothing");
    }
}

/* ---- one seed ------------------------------------------------------------------------------ */

static bool run_seed(world *w) {
    static const int gpus[N_NODES] = {4, 4, 8, 8, 4, 8, 4, 8}; /* 48 GPUs in three racks */
    w->rng = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)w->seed * 0x100000001B3ULL);
    rnd(w);
    w->f = fake_api_start();
    if (w->f == NULL)
        return wfail(w, "fake_api_start");
    fake_api_graceful_pods(w->f, true);
    fake_api_validate(w->f, true);
    for (int i = 0; i < N_NODES; i++) {
        w->gpus[i] = gpus[i];
        put_node(w, i);
    }
    for (int i = 0; i < FIRST_JOBS; i++)
        new_job(w);
    bool ok = operator_start(w);
    for (w->step = 1; ok && w->step <= N_STEPS; w->step++) {
        step(w);
        nap_ms(5 + pick(w, 35));
        kubelets(w);
        char suspect[128];
        ok = check(w, suspect, sizeof suspect);
        if (ok && suspect[0]) { /* settle (the driver waits) and look again */
            wlog(w, "job %s is Running with pods missing; looking again in a second", suspect);
            for (int k = 0; k < 25 && ok && suspect[0]; k++) {
                nap_ms(40);
                kubelets(w);
                ok = check(w, suspect, sizeof suspect);
            }
            if (ok && suspect[0])
                ok = check(w, NULL, 0);
        }
    }
    /* the faults stop; the dead nodes stay dead */
    w->step = N_STEPS + 1;
    heal(w);
    if (ok && !w->running)
        ok = operator_start(w);
    wlog(w, "faults stop; every job must converge within %.0f s (%d connections so far)",
         CONVERGE_S, fake_api_connections(w->f));
    double t0 = now_s();
    int stable = 0;
    char why[600] = "";
    while (ok && now_s() - t0 < CONVERGE_S) {
        kubelets(w);
        char suspect[128];
        ok = check(w, suspect, sizeof suspect);
        if (ok && all_converged(w, why, sizeof why)) {
            if (++stable == 3)
                break;
        } else {
            stable = 0;
        }
        ok = ok && !w->failure[0];
        nap_ms(30);
    }
    if (ok && stable == 3) {
        /* at rest: a converged operator writes nothing (a status ping-pong or a
         * retry loop would; issue 11: "the operator's CPU stays idle") */
        static const char *const writes[] = {"create", "bind", "patch", "delete", "event", NULL};
        nap_ms(200);
        long before = 0, after = 0;
        for (int i = 0; writes[i]; i++)
            before += fake_api_count(w->f, writes[i]);
        nap_ms(600);
        for (int i = 0; writes[i]; i++)
            after += fake_api_count(w->f, writes[i]);
        if (after != before)
            ok = wfail(w, "converged, but the operator still wrote %ld times in 0.6 s",
                       after - before);
    }
    if (ok && stable < 3)
        ok = wfail(w, "not converged after %.0f s: %s", CONVERGE_S, why);
    if (!ok) {
        json_t *jobs = fake_api_list(w->f, "arealjobs");
        const char *k;
        json_t *jo;
        json_object_foreach(jobs, k, jo) {
            char *st = json_dumps(json_object_get(jo, "status"), JSON_COMPACT);
            wlog(w, "job %s (rv %ld, generation %lld): %s", k, rv_of(jo),
                 (long long)json_integer_value(
                     json_object_get(json_object_get(jo, "metadata"), "generation")),
                 st ? st : "-");
            free(st);
        }
        json_decref(jobs);
    }
    if (!ok) {
        char *tr = fake_api_trace(w->f, NULL);
        if (w->log_n + strlen(tr) + 64 < LOG_CAP)
            w->log_n += (size_t)snprintf(w->log + w->log_n, LOG_CAP - w->log_n,
                                         "  the API server's last writes:\n%s", tr);
        free(tr);
    }
    if (ok)
        wlog(w, "converged in %.2f s", now_s() - t0);
    operator_stop(w);
    w->connections = fake_api_connections(w->f);
    fake_api_stop(w->f);
    w->f = NULL;
    return ok;
}

/* ---- many seeds ---------------------------------------------------------------------------- */

typedef struct runner {
    const unsigned *seeds;
    int n;
    atomic_int next;
    atomic_int failed;
    unsigned *failed_seeds; /* [n]: the seeds that failed, first `failed` of them */
    pthread_mutex_t out_mu;
    double worst_s;
    unsigned worst_seed;
    int most_connections;
} runner;

static void *runner_main(void *arg) {
    runner *r = arg;
    int i;
    while ((i = atomic_fetch_add(&r->next, 1)) < r->n) {
        world *w = calloc(1, sizeof *w);
        if (w == NULL || (w->log = malloc(LOG_CAP)) == NULL) {
            free(w);
            atomic_fetch_add(&r->failed, 1);
            continue;
        }
        w->log[0] = '\0';
        w->seed = r->seeds[i];
        snprintf(w->ns, sizeof w->ns, "w%d", i);
        double t0 = now_s();
        bool ok = run_seed(w);
        double took = now_s() - t0;
        pthread_mutex_lock(&r->out_mu);
        if (w->connections > r->most_connections)
            r->most_connections = w->connections;
        if (took > r->worst_s) {
            r->worst_s = took;
            r->worst_seed = w->seed;
        }
        if (!ok) {
            fprintf(stderr,
                    "chaos seed %u FAILED (%.1f s, namespace %s): %s\nrerun: AREAL_CHAOS_SEED=%u "
                    "%s\n%s",
                    w->seed, took, w->ns, w->failure, w->seed,
                    "build/rel/tests/test_controller_chaos", w->log);
            r->failed_seeds[atomic_fetch_add(&r->failed, 1)] = w->seed;
        }
        pthread_mutex_unlock(&r->out_mu);
        free(w->log);
        free(w);
    }
    return NULL;
}

static long env_long(const char *name, long dflt) {
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

/* Runs `n` seeds `par` at a time; the number that failed, their seeds into
 * failed_seeds[] (n entries) when that is not NULL. */
static int run_seeds_once(const unsigned *seeds, int n, int par, unsigned *failed_seeds) {
    runner r = {.seeds = seeds, .n = n};
    r.failed_seeds = calloc((size_t)(n > 0 ? n : 1), sizeof *r.failed_seeds);
    assert_non_null(r.failed_seeds);
    atomic_init(&r.next, 0);
    atomic_init(&r.failed, 0);
    pthread_mutex_init(&r.out_mu, NULL);
    pthread_t th[32];
    if (par > 32)
        par = 32;
    if (par < 1)
        par = 1;
    double t0 = now_s();
    int started = 0;
    for (int i = 0; i < par; i++)
        started += pthread_create(&th[started], NULL, runner_main, &r) == 0;
    if (started == 0)
        runner_main(&r);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    int failed = atomic_load(&r.failed);
    fprintf(stderr,
            "chaos: %d seeds, %d failed, %.1f s wall (%d at a time; slowest seed %u: %.1f s; at "
            "most %d API connections in a run)\n",
            n, failed, now_s() - t0, par, r.worst_seed, r.worst_s, r.most_connections);
    if (failed_seeds != NULL)
        memcpy(failed_seeds, r.failed_seeds, sizeof *failed_seeds * (size_t)failed);
    free(r.failed_seeds);
    pthread_mutex_destroy(&r.out_mu);
    return failed;
}

/*
 * Runs the seeds; a seed that fails is run again, alone, up to
 * AREAL_CHAOS_RERUNS times (default 0: a failure fails the test). The number
 * of seeds that failed every time. The knob stays for a bisection or a new
 * timing bug under investigation: a seed fixes the fault schedule, not the
 * thread timing, and the bugs once open here (52, 101, 266, 603, 130, 174,
 * 339: see the list above) showed once in hundreds of runs. A seed that fails
 * and then passes is still printed in full above and named in one line below.
 * Rejected: dropping the random seeds from make test (the acceptance asks for
 * hundreds of seeds).
 */
static int run_seeds(const unsigned *seeds, int n, int par) {
    unsigned *bad = calloc((size_t)(n > 0 ? n : 1), sizeof *bad);
    assert_non_null(bad);
    int failed = run_seeds_once(seeds, n, par, bad), persistent = 0;
    long reruns = env_long("AREAL_CHAOS_RERUNS", 0);
    for (int i = 0; i < failed; i++) {
        int passed_on = 0;
        for (long k = 1; k <= reruns && passed_on == 0; k++)
            if (run_seeds_once(&bad[i], 1, 1, NULL) == 0)
                passed_on = (int)k;
        if (passed_on > 0)
            fprintf(stderr,
                    "chaos seed %u failed once and passed on rerun %d (thread timing: an open "
                    "bug of the list above, or a new one - read its log)\n",
                    bad[i], passed_on);
        else
            persistent++;
    }
    free(bad);
    return persistent;
}

static void quiet_logs(bool verbose) {
    static FILE *devnull;
    if (!verbose && devnull == NULL)
        devnull = fopen("/dev/null", "w");
    areal_log_configure(verbose ? NULL : devnull, AREAL_LOG_TEXT,
                        verbose ? AREAL_LOG_INFO : AREAL_LOG_ERROR);
}

/* The seeds that found bugs, every time. */
static void regression_seeds(void **state) {
    (void)state;
    if (getenv("AREAL_CHAOS_SEED"))
        skip();
    quiet_logs(false);
    int n = 0;
    unsigned seeds[N_REGRESSION];
    for (size_t i = 0; i < N_REGRESSION; i++)
        if (REGRESSION_SEEDS[i] != 0)
            seeds[n++] = REGRESSION_SEEDS[i];
    if (n > 0)
        assert_int_equal(run_seeds(seeds, n, (int)env_long("AREAL_CHAOS_PAR", 8)), 0);
}

/* AREAL_CHAOS_SEEDS seeds from AREAL_CHAOS_FIRST (or AREAL_CHAOS_SEED alone, verbose). */
static void random_seeds(void **state) {
    (void)state;
    long one = env_long("AREAL_CHAOS_SEED", 0);
    long n = one > 0 ? 1 : env_long("AREAL_CHAOS_SEEDS", DEFAULT_SEEDS);
    long first = one > 0 ? one : env_long("AREAL_CHAOS_FIRST", 1);
    quiet_logs((one > 0 && env_long("AREAL_CHAOS_REPEAT", 1) <= 1) ||
               env_long("AREAL_CHAOS_LOG", 0));
    long repeat = env_long("AREAL_CHAOS_REPEAT", 1); /* each seed this many times (timing varies) */
    if (repeat < 1)
        repeat = 1;
    n *= repeat;
    unsigned *seeds = calloc((size_t)n, sizeof *seeds);
    assert_non_null(seeds);
    for (long i = 0; i < n; i++)
        seeds[i] = (unsigned)(first + i / repeat);
    int failed =
        run_seeds(seeds, (int)n, one > 0 && repeat == 1 ? 1 : (int)env_long("AREAL_CHAOS_PAR", 8));
    free(seeds);
    quiet_logs(true);
    assert_int_equal(failed, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(regression_seeds),
        cmocka_unit_test(random_seeds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
