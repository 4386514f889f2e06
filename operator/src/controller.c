/*
 * controller.c - informers, work queue and workers (see
 * areal/operator/controller.h). A worker builds the reconcile input from the
 * caches: the job, its pods, and the cluster as the caches see it (every
 * node, with the GPUs of every bound, unfinished pod that is not the job's),
 * then applies the decision's actions in order and writes the status. Runs
 * of creates, pod binds and pod deletes are applied APPLY_PARALLEL at a time on
 * the client's pooled connections (a run ends before the next begins, so a
 * gang is still created whole before any of it is bound). An action that
 * fails stops the pass and requeues the key with backoff; the next pass
 * starts from what the caches then show, so partial progress is never
 * repeated (creates of existing objects and deletes of missing ones are
 * treated as done). Pods and nodes are cached in the compact forms of
 * areal/operator/cached.h; the job's own pods are handed to reconcile as
 * small JSON views of those entries, nodes become the placement inventory.
 * Rejected: one reconcile action after another (a 128-pod gang took 256
 * sequential round trips).
 */
#include "areal/operator/controller.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/clock.h"
#include "areal/kube/watch.h"
#include "areal/log.h"
#include "areal/operator/cache.h"
#include "areal/operator/cached.h"
#include "areal/operator/forbidden.h"
#include "areal/keyset.h"
#include "areal/operator/ledger.h"
#include "areal/operator/priority.h"
#include "areal/operator/reconcile.h"
#include "areal/operator/workqueue.h"

#define MAX_WORKERS 16
/* Objects per list page. Each page's JSON tree is held while it is converted:
 * 100 pods cost about 2 MB of jansson values, so the peak of an initial list
 * stays a few MB above the caches (500, client-go's default, measured 21 MB
 * more at 10,000 pods and was slower: larger trees churn malloc). */
#define LIST_PAGE 100
/* Concurrent API writes of one run of pod creates, binds or deletes: a gang
 * of 128 pods is created and bound in a fraction of a second instead of one
 * round trip after another. 8 = the client's pooled connections
 * (KUBE_POOL_MAX), so no request pays a new TLS handshake; the client's
 * QPS/burst limiter still bounds the rate. */
#define APPLY_PARALLEL 8
/* How long a job waits for the pod cache to show the binds of its last pass. */
#define EXPECT_WINDOW_MS 5000

typedef struct informer {
    struct controller *ctl;
    const char *kind; /* "arealjobs", "pods", "nodes" */
    kube_resource res;
    obj_cache *cache;
    kube_watch *watch;
    pthread_t thread;
    bool started;
    /* transient failures since the last good list, and when one was last
     * logged (informer thread only) */
    int failures;
    double logged_s;
} informer;

struct controller {
    kube_client *kc;
    controller_config cfg;
    informer jobs, pods, nodes;
    workqueue *q;
    pthread_t workers[MAX_WORKERS];
    int n_workers;
    atomic_bool stopping;
    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cond;
    metrics_family *m_reconciles, *m_reconcile_s, *m_actions, *m_depth;
    /* The last Event recorded per job (a hash of reason and message): a reconcile
     * that runs on a cached job older than its own last status write would
     * otherwise see the same transition again and repeat the Event. */
    pthread_mutex_t events_mu;
    areal_keyset last_event;
    /* Jobs whose child the API server refused, by key -> metadata.generation,
     * until the job cache shows the refusal written (under events_mu). */
    areal_keyset rejected;
    /* jobs refused Forbidden (403), held until their next slow retry */
    forbidden_gate forbidden;
    /* Planned pods not yet observed bound, charged to every worker's cluster;
     * its lock serialises planning (see areal/operator/ledger.h). */
    ledger ledger;
    /* Pods of the ledger's claims, by key -> what the pod informer has seen of
     * them since their claim was made (EXPECT_SEEN_*), under expect_mu (taken
     * after the ledger's lock, never before). An expectation is met by an
     * event, not only by what the cache shows at the next pass: a pod created
     * and bound, then deleted by someone else before that pass, was never
     * "observed" and stalled its job for the whole window (chaos seeds 266,
     * 603: Running with a missing pod for a second). */
    pthread_mutex_t expect_mu;
    areal_keyset expect_seen;
    /* spec.priority (areal/operator/priority.h), under events_mu: the jobs
     * whose last pass was held behind a higher-ranked waiting job (`queued`)
     * and the jobs named as that (`blockers`). An event of a blocker or of a
     * new waiting job enqueues every held job, which looks again. */
    areal_keyset queued, blockers;
};

#define EXPECT_SEEN_THERE 1    /* an event of the pod (added, modified or deleted) */
#define EXPECT_SEEN_BOUND 2    /* an event of it bound, or its deletion */
#define EXPECT_MAX        4096 /* past it the set is cleared: the cache alone answers */

/* ---- event routing -------------------------------------------------------- */

static void enqueue_job_of_pod(controller *ctl, const json_t *pod) {
    const json_t *meta = json_object_get(pod, "metadata");
    const char *job =
        json_string_value(json_object_get(json_object_get(meta, "labels"), AREAL_LABEL_JOB));
    const char *ns = json_string_value(json_object_get(meta, "namespace"));
    if (job == NULL || ns == NULL)
        return;
    char key[WORKQUEUE_KEY_MAX];
    snprintf(key, sizeof key, "%s/%s", ns, job);
    workqueue_add(ctl->q, key);
}

static void enqueue_job(void *ud, const void *entry);

/* A job that may wait for room, as collected for enqueue_waiting_ranked. */
typedef struct waiting_job {
    char key[WORKQUEUE_KEY_MAX];
    char created[32]; /* metadata.creationTimestamp (RFC 3339 UTC: text order is time order) */
    int priority;
} waiting_job;

typedef struct waiting_list {
    waiting_job *jobs;
    int n, cap;
    bool oom;
} waiting_list;

static void collect_waiting(void *ud, const void *entry) {
    waiting_list *w = ud;
    const json_t *job = entry;
    const char *phase = json_string_value(json_object_get(json_object_get(job, "status"), "phase"));
    if (!(phase == NULL || strcmp(phase, "Pending") == 0 || strcmp(phase, "Restarting") == 0))
        return;
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 16;
        waiting_job *grown = realloc(w->jobs, (size_t)cap * sizeof *grown);
        if (grown == NULL) {
            w->oom = true;
            return;
        }
        w->jobs = grown;
        w->cap = cap;
    }
    waiting_job *j = &w->jobs[w->n];
    if (!cache_key(job, j->key, sizeof j->key))
        return;
    const char *made =
        json_string_value(json_object_get(json_object_get(job, "metadata"), "creationTimestamp"));
    snprintf(j->created, sizeof j->created, "%s", made ? made : "");
    j->priority = job_spec_priority(job);
    w->n++;
}

static int by_rank(const void *a, const void *b) {
    const waiting_job *x = a, *y = b;
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    int c = strcmp(x->created, y->created);
    return c != 0 ? c : strcmp(x->key, y->key);
}

/* Enqueues every job that may wait for room (Pending or Restarting) in the
 * order of areal/operator/priority.h - spec.priority, then the oldest - so
 * that when room frees the first-ranked job plans first (the queue is FIFO
 * and planning is serialised through the ledger). Out of memory: in cache
 * order (every job still looks again). */
static void enqueue_waiting_ranked(controller *ctl) {
    waiting_list w = {0};
    cache_each(ctl->jobs.cache, collect_waiting, &w);
    if (!w.oom && w.n > 1) /* qsort of NULL, even of 0 items, is undefined */
        qsort(w.jobs, (size_t)w.n, sizeof *w.jobs, by_rank);
    for (int i = 0; i < w.n; i++)
        workqueue_add(ctl->q, w.jobs[i].key);
    free(w.jobs);
    if (w.oom) /* the ones not collected */
        cache_each(ctl->jobs.cache, enqueue_job, ctl);
}

static void enqueue_job(void *ud, const void *entry) {
    controller *ctl = ud;
    const json_t *job = entry;
    char key[WORKQUEUE_KEY_MAX];
    if (cache_key(job, key, sizeof key))
        workqueue_add(ctl->q, key);
}

/* A pod of the node index's bucket of a node: its job looks again. */
static void enqueue_pod_job(void *ud, const void *entry) {
    controller *ctl = ud;
    const cached_pod *pod = entry;
    if (pod->job && pod->ns) {
        char key[WORKQUEUE_KEY_MAX];
        snprintf(key, sizeof key, "%s/%s", pod->ns, pod->job);
        workqueue_add(ctl->q, key);
    }
}

static bool node_ready(const json_t *node) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(node, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        const char *s = json_string_value(json_object_get(c, "status"));
        if (t && strcmp(t, "Ready") == 0)
            return s && strcmp(s, "True") == 0;
    }
    return false;
}

/* A job event that may let held jobs go (or hold them behind a new one):
 * the job is a blocker (placed, suspended, deleted, re-prioritised), or a
 * waiting job that is not held itself. Running jobs' status writes (progress)
 * enqueue nothing more. */
typedef struct lower {
    controller *ctl;
    int priority;
} lower;

static void enqueue_lower_waiting(void *ud, const void *entry) {
    const lower *l = ud;
    const json_t *job = entry;
    char key[WORKQUEUE_KEY_MAX];
    if (job_spec_priority(job) < l->priority && job_waits_for_gpus(job) &&
        cache_key(job, key, sizeof key))
        workqueue_add(l->ctl->q, key);
}

static void wake_queued(controller *ctl, const json_t *job, bool deleted) {
    char key[WORKQUEUE_KEY_MAX];
    if (!cache_key(job, key, sizeof key))
        return;
    pthread_mutex_lock(&ctl->events_mu);
    bool waiting = !deleted && job_waits_for_gpus(job) && !areal_keyset_has(&ctl->queued, key);
    bool wake = ctl->queued.len > 0 && (areal_keyset_has(&ctl->blockers, key) || waiting);
    pthread_mutex_unlock(&ctl->events_mu);
    /* a job that waits now: those of lower priority that wait too say they
     * are queued behind it (none with the default priorities) */
    if (waiting) {
        lower l = {ctl, job_spec_priority(job)};
        cache_each(ctl->jobs.cache, enqueue_lower_waiting, &l);
    }
    pthread_mutex_lock(&ctl->events_mu);
    if (wake) {
        for (size_t i = 0; i < ctl->queued.cap; i++) {
            if (ctl->queued.slots[i].key != NULL)
                workqueue_add(ctl->q, ctl->queued.slots[i].key);
        }
    }
    pthread_mutex_unlock(&ctl->events_mu);
}

static void route(informer *inf, const json_t *obj, bool deleted) {
    controller *ctl = inf->ctl;
    if (inf == &ctl->jobs) {
        enqueue_job(ctl, obj);
        wake_queued(ctl, obj, deleted);
        return;
    }
    if (inf == &ctl->pods)
        enqueue_job_of_pod(ctl, obj);
    if (inf == &ctl->nodes && (deleted || !node_ready(obj))) {
        /* the jobs with pods there look again (and requeue for the end of the grace) */
        const char *node =
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
        if (node != NULL) /* the node's pods only (bound there, or planned there) */
            cache_each_in(ctl->pods.cache, CACHE_POD_BY_NODE, node, enqueue_pod_job, ctl);
    }
    /* room may have changed: jobs that wait for it look again, first-ranked first */
    enqueue_waiting_ranked(ctl);
}

/* A list arrives page by page into the cache's staging store; each page's
 * JSON is freed by the reflector as soon as it is converted. */
static void on_list_begin(void *ud) {
    informer *inf = ud;
    cache_replace_begin(inf->cache);
}

static int on_list_page(void *ud, const json_t *items) {
    informer *inf = ud;
    return cache_replace_items(inf->cache, items) == 0 ? KUBE_OK : KUBE_ENOMEM;
}

/* How often a failing informer says so again (the first failure is logged at once). */
#define TRANSIENT_LOG_EVERY_S 30.0

/* A list or watch failed and will be retried: the cause is logged at once
 * (a wrong CA, a refused connection, a 5xx), then at most every
 * TRANSIENT_LOG_EVERY_S with the count, so an operator that cannot reach its
 * API server says why instead of only failing /readyz. */
static void on_transient(void *ud, const kube_error *e, int failures) {
    informer *inf = ud;
    inf->failures = failures;
    double now = areal_mono_s();
    if (failures > 1 && now - inf->logged_s < TRANSIENT_LOG_EVERY_S)
        return;
    inf->logged_s = now;
    char count[16];
    snprintf(count, sizeof count, "%d", failures);
    areal_log(AREAL_LOG_ERROR, "controller",
              AREAL_FIELDS({"informer", inf->kind}, {"failures", count}),
              "cannot list or watch %s (%d failures so far; retrying with backoff): %s", inf->kind,
              failures, e->msg);
}

static void on_list_end(void *ud, int ok) {
    informer *inf = ud;
    if (ok && inf->failures > 0) {
        areal_log(AREAL_LOG_INFO, "controller", AREAL_FIELDS({"informer", inf->kind}),
                  "%s listed again after %d failures", inf->kind, inf->failures);
        inf->failures = 0;
    }
    cache_replace_end(inf->cache, ok != 0);
    if (ok) /* every job looks again at the world as listed */
        cache_each(inf->ctl->jobs.cache, enqueue_job, inf->ctl);
}

/* A pod event: a claim's pod that the ledger expects is seen (expect_seen). */
static void note_expected(controller *ctl, const json_t *pod, bool deleted) {
    char key[WORKQUEUE_KEY_MAX];
    if (!cache_key(pod, key, sizeof key))
        return;
    bool bound = deleted || json_object_get(json_object_get(pod, "spec"), "nodeName") != NULL;
    pthread_mutex_lock(&ctl->expect_mu);
    int64_t *seen = ctl->expect_seen.len ? areal_keyset_value(&ctl->expect_seen, key) : NULL;
    if (seen != NULL)
        *seen |= EXPECT_SEEN_THERE | (bound ? EXPECT_SEEN_BOUND : 0);
    pthread_mutex_unlock(&ctl->expect_mu);
}

/* metadata.resourceVersion as a number, or -1 (none, or not a number). */
static long long rv_number(const json_t *obj) {
    const char *rv =
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    char *end;
    long long n = rv ? strtoll(rv, &end, 10) : -1;
    return rv && *rv && *end == '\0' ? n : -1;
}

/* An AReaLJob event's object is stored unless the cache holds a newer
 * version: a worker puts the answer of its own status write there
 * (keep_newer_job), and the watch's older events that arrive after it must
 * not take the cache back (the chaos test's seed 979: passes on the
 * regressed job wrote stale statuses, answered 409, at rest). */
static bool not_newer_job(const void *cached, const json_t *job) {
    long long have = rv_number(cached), got = rv_number(job);
    return have < 0 || got < 0 || got >= have;
}

static int on_event(void *ud, const kube_event *ev) {
    informer *inf = ud;
    if (ev->type != KUBE_EVENT_ADDED && ev->type != KUBE_EVENT_MODIFIED &&
        ev->type != KUBE_EVENT_DELETED)
        return KUBE_OK;
    bool deleted = ev->type == KUBE_EVENT_DELETED;
    int rc = inf == &inf->ctl->jobs && !deleted
                 ? cache_update_if(inf->cache, ev->object, not_newer_job, true)
                 : cache_apply(inf->cache, ev->object, deleted);
    if (rc < 0)
        return KUBE_ENOMEM;
    if (inf == &inf->ctl->pods)
        note_expected(inf->ctl, ev->object, ev->type == KUBE_EVENT_DELETED);
    route(inf, ev->object, ev->type == KUBE_EVENT_DELETED);
    return KUBE_OK;
}

static void *informer_main(void *arg) {
    informer *inf = arg;
    kube_reflector_fns fns = {.event = on_event,
                              .ud = inf,
                              .list_begin = on_list_begin,
                              .list_page = on_list_page,
                              .list_end = on_list_end,
                              .transient_error = on_transient};
    kube_watch_opts opts = {.timeout_seconds = 300, .list_limit = LIST_PAGE};
    while (!atomic_load(&inf->ctl->stopping)) {
        kube_error err;
        int rc = kube_reflector_run(inf->watch, &inf->res, &opts, &fns, &err);
        if (rc == KUBE_ESTOPPED || atomic_load(&inf->ctl->stopping))
            break;
        areal_log(AREAL_LOG_ERROR, "controller", AREAL_FIELDS({"informer", inf->kind}),
                  "informer %s stopped: %s; restarting", inf->kind, err.msg);
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* ---- one reconcile ------------------------------------------------------------ */

typedef struct gather {
    const char *ns, *job;
    char job_key[WORKQUEUE_KEY_MAX]; /* "ns/job": the pod cache's job index key */
    json_t **pods;                   /* the job's pods, as the JSON shape reconcile reads */
    int n_pods, cap_pods;
    areal_cluster *cluster;
    areal_keyset node_index;       /* node name -> index in cluster */
    long long (*used)[CACHE_SUMS]; /* per cluster node: room other jobs' pods hold */
    areal_keyset all_nodes;        /* every node name, also those placement is not offered */
    reconcile_down_node *down;     /* nodes not Ready (names owned) */
    int n_down, cap_down;
    ledger *ledger; /* locked by the caller: bound pods it counts are marked seen */
    bool oom;
} gather;

static void add_down(gather *g, const char *name, long long since_ms) {
    if (g->n_down == g->cap_down) {
        int cap = g->cap_down ? 2 * g->cap_down : 8;
        reconcile_down_node *grown = realloc(g->down, (size_t)cap * sizeof *grown);
        if (grown == NULL) {
            g->oom = true;
            return;
        }
        g->down = grown;
        g->cap_down = cap;
    }
    char *copy = strdup(name);
    if (copy == NULL) {
        g->oom = true;
        return;
    }
    g->down[g->n_down++] = (reconcile_down_node){copy, since_ms};
}

static void gather_node(void *ud, const void *entry) {
    gather *g = ud;
    const cached_node *node = entry;
    if (areal_keyset_add(&g->all_nodes, node->name) < 0)
        g->oom = true;
    if (!node->ready)
        add_down(g, node->name, node->not_ready_since_ms);
    int at = cached_node_add_to(node, g->cluster, NULL);
    if (at == AREAL_ENOMEM)
        g->oom = true;
    if (at < 0)
        return; /* a node we cannot read is not offered to placement */
    if (areal_keyset_add(&g->node_index, node->name) < 0)
        g->oom = true;
    else
        *areal_keyset_value(&g->node_index, node->name) = at;
}

/* One of the job's own pods (the job index's bucket): its JSON view for
 * reconcile, and its room taken back off its node - the cluster counts only
 * other jobs' pods, so that a gang replans over its own. */
static void gather_own(void *ud, const void *entry) {
    gather *g = ud;
    const cached_pod *pod = entry;
    if (g->n_pods == g->cap_pods) {
        int cap = g->cap_pods ? 2 * g->cap_pods : 16;
        json_t **grown = realloc(g->pods, (size_t)cap * sizeof *grown);
        if (grown == NULL) {
            g->oom = true;
            return;
        }
        g->pods = grown;
        g->cap_pods = cap;
    }
    json_t *view = cached_pod_to_json(pod);
    if (view == NULL)
        g->oom = true;
    else
        g->pods[g->n_pods++] = view;
    long long w[CACHE_SUMS];
    const char *node = cache_pod_room(pod, w);
    int64_t *at = node ? areal_keyset_value(&g->node_index, node) : NULL;
    if (at != NULL) {
        long long *used = g->used[*at];
        for (int k = 0; k < CACHE_SUMS; k++)
            used[k] -= w[k];
    }
}

typedef struct seen_ctx {
    gather *g;
    cache_view *v;
} seen_ctx;

/* Whether the pod of a ledger claim is counted on `node` in this pass: it is
 * another job's, it holds room (see cache_pod_room) and that room is on `node`. */
static bool counted_on(void *ud, const char *pod_key, const char *node) {
    seen_ctx *s = ud;
    const cached_pod *pod = cache_view_get(s->v, pod_key);
    if (pod == NULL ||
        (pod->job && pod->ns && strcmp(pod->ns, s->g->ns) == 0 && strcmp(pod->job, s->g->job) == 0))
        return false;
    long long w[CACHE_SUMS];
    const char *at = cache_pod_room(pod, w);
    bool holds = pod->requests_ok && pod->phase != CACHED_PHASE_SUCCEEDED &&
                 pod->phase != CACHED_PHASE_FAILED;
    return holds && at != NULL && strcmp(at, node) == 0 &&
           areal_keyset_has(&s->g->node_index, node);
}

/*
 * The pods' part of a pass, in one read of the pod cache (so the room of a
 * pod that moves meanwhile - bound from its planned node to another - is
 * counted exactly once): every node's used room from the node index's sums,
 * less the job's own pods (the job index's bucket), which become the JSON
 * views reconcile reads. Other tenants' pods are never visited (issue 11: no
 * step scans the whole cluster per job). An unbound pod of another job that
 * names its planned node holds that room too (as the scheduler's nominated
 * pods): the ledger's claims on it are lost when the operator restarts or a
 * pass of its job decides no binds, and that job's next pass binds it to the
 * planned node without planning again - the chaos test's seeds 9 and 11 put
 * 5 GPUs on nodes of 4 that way. Ledger claims whose pods are counted here
 * are marked seen (not charged twice).
 */
static void gather_pods(void *ud, cache_view *v) {
    gather *g = ud;
    for (int i = 0; i < g->cluster->n_nodes; i++)
        cache_view_sums(v, CACHE_POD_BY_NODE, g->cluster->nodes[i].name, g->used[i]);
    cache_view_each_in(v, CACHE_POD_BY_JOB, g->job_key, gather_own, g);
    for (int i = 0; i < g->cluster->n_nodes; i++) {
        areal_node *n = &g->cluster->nodes[i];
        long long gpus = g->used[i][0] > 0 ? g->used[i][0] : 0;
        n->gpus_used = gpus > n->gpus ? n->gpus : (int)gpus;
        n->cpu_used_milli = (long)g->used[i][1];
        n->mem_used_bytes = g->used[i][2];
    }
    if (ledger_len(g->ledger) > 0) {
        seen_ctx sc = {g, v};
        ledger_mark_seen(g->ledger, counted_on, &sc);
    }
}

/* The room pod `name` of a decision asks for: from its create in the same
 * decision, else from the pod cache. False when neither knows the pod (it is
 * then claimed with no room: its bind fails and the gang is replanned). */
static bool claim_room(controller *ctl, const char *ns, const reconcile_result *r, const char *name,
                       ledger_claim *c) {
    for (int i = 0; i < r->n_actions; i++) {
        const reconcile_action *a = &r->actions[i];
        if (a->kind != RECONCILE_CREATE || strcmp(a->resource, "pods") != 0 ||
            strcmp(a->name, name) != 0)
            continue;
        cached_pod *p = cached_pod_new(a->obj);
        if (p == NULL)
            return false;
        c->gpus = p->gpus;
        c->cpu_milli = p->cpu_milli;
        c->mem_bytes = p->mem_bytes;
        cached_pod_release(p);
        return true;
    }
    char key[WORKQUEUE_KEY_MAX];
    snprintf(key, sizeof key, "%s/%s", ns, name);
    cached_pod *p = cache_get(ctl->pods.cache, key);
    if (p == NULL)
        return false;
    c->gpus = p->gpus;
    c->cpu_milli = p->cpu_milli;
    c->mem_bytes = p->mem_bytes;
    cache_release(ctl->pods.cache, p);
    return true;
}

/* Records the binds of decision `r` as the job's claims (replacing its old
 * ones; a decision without binds drops them). Ledger locked. False when out
 * of memory. */
/* Pod `pod_key` gets a claim: the pod informer's events of it count from now
 * (an earlier incarnation's seen marks are dropped). */
static void expect_from_now(controller *ctl, const char *pod_key) {
    pthread_mutex_lock(&ctl->expect_mu);
    if (ctl->expect_seen.len >= EXPECT_MAX) { /* bounded: only weaker expectations */
        areal_keyset_free(&ctl->expect_seen);
        areal_keyset_init(&ctl->expect_seen);
    }
    if (areal_keyset_add(&ctl->expect_seen, pod_key) >= 0)
        *areal_keyset_value(&ctl->expect_seen, pod_key) = 0;
    pthread_mutex_unlock(&ctl->expect_mu);
}

static bool record_claims(controller *ctl, const char *key, const char *ns,
                          const reconcile_result *r) {
    int n = 0;
    for (int i = 0; i < r->n_actions; i++)
        n += r->actions[i].kind == RECONCILE_BIND;
    ledger_claim *claims = n ? calloc((size_t)n, sizeof *claims) : NULL;
    if (n && claims == NULL) {
        ledger_set(&ctl->ledger, key, NULL, 0);
        return false;
    }
    char(*pods)[WORKQUEUE_KEY_MAX] = n ? calloc((size_t)n, sizeof *pods) : NULL;
    bool ok = n == 0 || pods != NULL;
    int k = 0;
    for (int i = 0; ok && i < r->n_actions; i++) {
        const reconcile_action *a = &r->actions[i];
        if (a->kind != RECONCILE_BIND)
            continue;
        snprintf(pods[k], sizeof pods[k], "%s/%s", ns, a->name);
        claims[k].pod = pods[k];
        expect_from_now(ctl, pods[k]);
        claims[k].node = (char *)a->node;
        claim_room(ctl, ns, r, a->name, &claims[k]);
        k++;
    }
    ok = ok && ledger_set(&ctl->ledger, key, claims, ok ? k : 0) == 0;
    free(pods);
    free(claims);
    return ok;
}

static kube_resource resource_for(const char *kind, const char *ns) {
    if (strcmp(kind, "arealjobs") == 0)
        return (kube_resource){"areal.io", "v1alpha1", "arealjobs", ns};
    return (kube_resource){NULL, "v1", kind, ns};
}

static long event_hash(const reconcile_action *a) {
    unsigned long long h = 1469598103934665603ULL;
    for (const char *s = a->reason; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    h = (h ^ '|') * 1099511628211ULL;
    for (const char *s = a->message; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (long)(h >> 1);
}

/* True (and remembered) when this Event differs from the job's last one. */
static bool event_is_new(controller *ctl, const json_t *job, const reconcile_action *a) {
    char key[WORKQUEUE_KEY_MAX];
    if (!cache_key(job, key, sizeof key))
        return true;
    long h = event_hash(a);
    pthread_mutex_lock(&ctl->events_mu);
    bool fresh = true;
    int64_t *last = areal_keyset_value(&ctl->last_event, key);
    if (last == NULL && areal_keyset_add(&ctl->last_event, key) >= 0)
        last = areal_keyset_value(&ctl->last_event, key);
    if (last != NULL) {
        fresh = *last != h;
        *last = h;
    }
    pthread_mutex_unlock(&ctl->events_mu);
    return fresh;
}

static int record_event(controller *ctl, const json_t *job, const reconcile_action *a,
                        kube_error *err) {
    if (!event_is_new(ctl, job, a))
        return KUBE_OK;
    const json_t *meta = json_object_get(job, "metadata");
    const char *ns = json_string_value(json_object_get(meta, "namespace"));
    char now[32], prefix[300];
    reconcile_format_time(areal_wall_ms(), now);
    snprintf(prefix, sizeof prefix, "%s.", a->name);
    json_t *ev = json_pack(
        "{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s,s:s,s:s,s:s},s:s,s:s,s:s,s:s,s:s,s:i,s:{s:s}}",
        "apiVersion", "v1", "kind", "Event", "metadata", "generateName", prefix, "namespace",
        ns ? ns : "default", "involvedObject", "apiVersion", "areal.io/v1alpha1", "kind",
        "AReaLJob", "name", a->name, "namespace", ns ? ns : "default", "uid",
        json_string_value(json_object_get(meta, "uid"))
            ? json_string_value(json_object_get(meta, "uid"))
            : "",
        "reason", a->reason, "message", a->message, "type", a->warning ? "Warning" : "Normal",
        "firstTimestamp", now, "lastTimestamp", now, "count", 1, "source", "component",
        ctl->cfg.desired.scheduler_name ? ctl->cfg.desired.scheduler_name : "areal-operator");
    kube_resource res = resource_for("events", ns);
    int rc = kube_create(ctl->kc, &res, ev, NULL, err);
    json_decref(ev);
    return rc;
}

/*
 * A create of the job's Service or ConfigMap found one of that name. It is this
 * job's (an earlier pass made it), or a deleted job's of the same name that the
 * garbage collector has not removed yet: a `kubectl delete` and `apply` of an
 * edited job within seconds. The latter would carry the old spec.config to the
 * new trainer (e2e w_rl_world's second job trained the first one's 40 steps, not
 * its 20) and, once collected, take the Service from under the new pods. So the
 * desired object is merge-patched over it: this job's ownerReferences (the
 * collector re-reads them before it deletes) and labels, and the ConfigMap's data
 * or the Service's spec. Only at the job's first placement (step_trainer.c): a gang
 * restart's pass keeps the job's own objects untouched, as before (a patch there
 * would rewrite plan.json under the rollout pods that stay, and adds writes to a
 * pass whose timing the lagging-cache rules were measured on). One that vanished in
 * between (404) is created again, once.
 * Rejected: a get first to compare owners (the operator has no get on these, and
 * the patch is one request either way), a name with the job's uid in it (users and
 * tests read <job>-config), a PUT (a Service's needs its resourceVersion).
 */
static int adopt_child(controller *ctl, const kube_resource *res, const json_t *obj,
                       kube_error *err) {
    const json_t *meta = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *body = strcmp(res->resource, "configmaps") == 0 ? "data" : "spec";
    json_t *patch =
        json_pack("{s:{s:O,s:O},s:O}", "metadata", "labels", json_object_get(meta, "labels"),
                  "ownerReferences", json_object_get(meta, "ownerReferences"), body,
                  json_object_get(obj, body));
    if (name == NULL || patch == NULL) {
        json_decref(patch);
        return kube_error_set(err, KUBE_ENOMEM, "%s: cannot build the patch", res->resource);
    }
    int rc = kube_patch(ctl->kc, res, name, KUBE_PATCH_MERGE, patch, NULL, NULL, err);
    json_decref(patch);
    if (rc == KUBE_ENOTFOUND) {
        rc = kube_create(ctl->kc, res, obj, NULL, err);
        if (rc == KUBE_ECONFLICT)
            rc = KUBE_OK; /* made again meanwhile: the next pass's create adopts it */
    }
    return rc;
}

/* Applies one action. A patch of the job itself leaves the patched job in
 * *patched (new reference; the caller frees it), else *patched is untouched. */
static int apply(controller *ctl, const json_t *job, const reconcile_action *a, json_t **patched,
                 kube_error *err) {
    const char *ns =
        json_string_value(json_object_get(json_object_get(job, "metadata"), "namespace"));
    kube_resource res = resource_for(a->resource, ns);
    int rc = KUBE_OK;
    switch (a->kind) {
    case RECONCILE_CREATE:
        rc = kube_create(ctl->kc, &res, a->obj, NULL, err);
        if (rc == KUBE_ECONFLICT && a->adopt)
            rc = adopt_child(ctl, &res, a->obj, err);
        else if (rc == KUBE_ECONFLICT)
            rc = KUBE_OK; /* it exists: done already */
        break;
    case RECONCILE_DELETE: {
        /* force: grace 0, the API server removes the pod without waiting for a
         * kubelet (its node is lost) */
        kube_delete_opts opts = {.uid = a->uid[0] ? a->uid : NULL,
                                 .propagation_policy = "Background",
                                 .grace_period_seconds = a->force ? 0 : -1};
        rc = kube_delete(ctl->kc, &res, a->name, &opts, NULL, err);
        if (rc == KUBE_ENOTFOUND)
            rc = KUBE_OK;
        break;
    }
    case RECONCILE_BIND:
        rc = kube_bind_pod(ctl->kc, ns, a->name, NULL, a->node, err);
        if (rc == KUBE_ECONFLICT)
            rc = KUBE_OK; /* bound already (our bind, observed late): the next pass sees where */
        break;
    case RECONCILE_PATCH_JOB:
        json_decref(*patched);
        *patched = NULL;
        rc = kube_patch(ctl->kc, &res, a->name, KUBE_PATCH_MERGE, a->obj, NULL, patched, err);
        break;
    case RECONCILE_EVENT:
        /* recorded once the pass's status is written (record_events): a pass whose
         * status write gets 409 runs again and decides the same, and its Events
         * would be told twice (e2e v_rl_kill: two GangRestarting for one restart) */
        return KUBE_OK;
    }
    static const char *const names[] = {"create", "delete", "bind", "patch", "event"};
    const char *labels[] = {names[a->kind], rc == KUBE_OK ? "ok" : "error"};
    metrics_counter_add(ctl->m_actions, labels, 1);
    return rc;
}

/* The Events of a pass whose writes all landed (best effort: one that fails is lost). */
static void record_events(controller *ctl, const json_t *job, const reconcile_result *r) {
    for (int i = 0; i < r->n_actions; i++) {
        if (r->actions[i].kind != RECONCILE_EVENT)
            continue;
        kube_error e;
        int rc = record_event(ctl, job, &r->actions[i], &e);
        const char *labels[] = {"event", rc == KUBE_OK ? "ok" : "error"};
        metrics_counter_add(ctl->m_actions, labels, 1);
    }
}

/* ---- applying a decision -------------------------------------------------------- */

/* Whether actions a and b belong to one run that may be applied concurrently:
 * creates (the Service, the ConfigMap and the pods of a gang), binds, deletes
 * of pods. Their order inside a run does not matter; runs stay in order
 * (every create of a gang ends before its first bind, so a gang is bound
 * whole or not at all, and no pod is bound before its ConfigMap exists). */
static bool same_run(const reconcile_action *a, const reconcile_action *b) {
    if (a->kind != b->kind)
        return false;
    if (a->kind == RECONCILE_CREATE)
        return true;
    return (a->kind == RECONCILE_BIND || a->kind == RECONCILE_DELETE) &&
           strcmp(a->resource, "pods") == 0 && strcmp(b->resource, "pods") == 0;
}

typedef struct run_ctx {
    controller *ctl;
    const json_t *job;
    const char *key;
    const reconcile_action *actions;
    int n;
    json_t **patched;    /* a job patch is a run of its own: only one thread writes it */
    unsigned char *done; /* [n]: 1 when that action was answered with success */
    atomic_int next;
    atomic_bool failed;
    atomic_flag claimed;  /* the first failure is kept: */
    int failed_at;        /* its action's index in actions */
    kube_error first_err; /* and the API's answer */
} run_ctx;

static void *run_worker(void *arg) {
    run_ctx *r = arg;
    int i;
    while (!atomic_load(&r->failed) && (i = atomic_fetch_add(&r->next, 1)) < r->n) {
        kube_error kerr;
        if (apply(r->ctl, r->job, &r->actions[i], r->patched, &kerr) == KUBE_OK) {
            r->done[i] = 1; /* each thread writes its own actions' entries */
        } else {
            areal_log(AREAL_LOG_WARN, "controller",
                      AREAL_FIELDS({"job", r->key}, {"resource", r->actions[i].resource},
                                   {"name", r->actions[i].name}),
                      "%s %s failed: %s", r->actions[i].resource, r->actions[i].name, kerr.msg);
            if (!atomic_flag_test_and_set(&r->claimed)) {
                r->failed_at = i;
                r->first_err = kerr;
            }
            atomic_store(&r->failed, true); /* the rest of the run is not started */
        }
    }
    return NULL;
}

/* Applies n actions of one run, up to APPLY_PARALLEL at once; false when one
 * failed (then *failed_at is its index in `actions` and *ferr the API's answer).
 * done[k] is set to 1 for each action answered with success (the others of a
 * failed run may have been started or not). A job patch leaves the patched
 * job in *patched (see apply). */
static bool apply_run(controller *ctl, const json_t *job, const char *key,
                      const reconcile_action *actions, int n, json_t **patched, unsigned char *done,
                      int *failed_at, kube_error *ferr) {
    run_ctx r = {.ctl = ctl,
                 .job = job,
                 .key = key,
                 .actions = actions,
                 .n = n,
                 .patched = patched,
                 .done = done,
                 .claimed = ATOMIC_FLAG_INIT};
    atomic_init(&r.next, 0);
    atomic_init(&r.failed, false);
    pthread_t helpers[APPLY_PARALLEL];
    int started = 0;
    for (int h = 0; h < APPLY_PARALLEL - 1 && h < n - 1; h++)
        if (pthread_create(&helpers[started], NULL, run_worker, &r) == 0)
            started++; /* fewer helpers only means a slower run */
    run_worker(&r);
    for (int h = 0; h < started; h++)
        pthread_join(helpers[h], NULL);
    if (atomic_load(&r.failed)) {
        *failed_at = r.failed_at;
        *ferr = r.first_err;
        return false;
    }
    return true;
}

/* The API server refused a child of the job for good: the job says so (a
 * condition with the API's message and an Event) and is not retried until its
 * spec changes. Returns true when that could not be written (retry). */
/* retry_ms > 0: a Forbidden refusal, tried again after that long (attempt n) */
static bool report_rejected(controller *ctl, const char *key, const json_t *job,
                            const reconcile_input *in, const reconcile_action *a,
                            const kube_error *kerr, long retry_ms, int attempt) {
    char msg[KUBE_ERROR_MSG_MAX + 600];
    /* kerr->msg has the request, the HTTP status and the API's own message */
    int n = snprintf(msg, sizeof msg, "the API server rejected %s %s%s: %s", a->resource, a->name,
                     a->kind == RECONCILE_BIND ? "'s binding" : "", kerr->msg);
    if (retry_ms > 0 && n > 0 && (size_t)n < sizeof msg)
        snprintf(msg + n, sizeof msg - (size_t)n,
                 "; retried in %g s (attempt %d; Forbidden is retried from %g s, doubling "
                 "to %g s, so a fixed RBAC rule heals the job)",
                 (double)retry_ms / 1000, attempt, (double)ctl->forbidden.first_ms / 1000,
                 (double)ctl->forbidden.max_ms / 1000);
    areal_log(AREAL_LOG_ERROR, "controller", AREAL_FIELDS({"job", key}), "%s%s", msg,
              retry_ms > 0 ? "" : "; not retried until the spec changes");
    reconcile_result r;
    areal_error aerr;
    if ((retry_ms > 0 ? reconcile_forbidden(in, msg, &r, &aerr)
                      : reconcile_rejected(in, msg, &r, &aerr)) != AREAL_OK)
        return true;
    bool retry = false;
    for (int i = 0; i < r.n_actions; i++) {
        kube_error e;
        if (r.actions[i].kind == RECONCILE_EVENT)
            record_event(ctl, job, &r.actions[i], &e);
    }
    const json_t *meta = json_object_get(job, "metadata");
    kube_resource res =
        resource_for("arealjobs", json_string_value(json_object_get(meta, "namespace")));
    json_t *patch = json_pack("{s:O}", "status", r.status);
    kube_error e;
    if (kube_patch(ctl->kc, &res, json_string_value(json_object_get(meta, "name")),
                   KUBE_PATCH_MERGE, patch, "status", NULL, &e) != KUBE_OK) {
        areal_log(AREAL_LOG_WARN, "controller", AREAL_FIELDS({"job", key}),
                  "status write failed, retrying: %s", e.msg);
        retry = true;
    }
    json_decref(patch);
    reconcile_result_free(&r);
    return retry;
}

/* True when merge-patching `patch` into `target` (RFC 7386, as the status
 * write does) would change nothing. A status without a key the stored one has
 * cannot remove that key by a merge patch, so comparing the two for equality
 * said "changed" forever: a Pending job that had written "pods": 0 and then
 * left the key out rewrote the same status as fast as its own watch events
 * came back (the chaos test's at-rest check, seeds 9, 140, 387, 690 under
 * ASan; seed 27's job stuck with thousands of writes). */
static bool merge_changes_nothing(const json_t *target, const json_t *patch) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)patch, k, v) {
        const json_t *cur = json_object_get(target, k);
        if (json_is_null(v)) {
            if (cur != NULL)
                return false;
        } else if (json_is_object(v) && json_is_object(cur)) {
            if (!merge_changes_nothing(cur, v))
                return false;
        } else if (cur == NULL || !json_equal(cur, v)) {
            return false;
        }
    }
    return true;
}

/*
 * Puts `job` (the server's answer to a status write) into
 * the job cache when the cache holds an older version of it: the informer
 * shows our own writes a watch round trip later, and a pass meanwhile would
 * read the old status (its writes then conflict, 409, or it repeats an
 * Event). Only an older cached version is replaced (resourceVersions compared
 * as the numbers every API server uses, opaque ones skipped), and a job the
 * cache no longer has is not brought back; the informer's newer events (see
 * not_newer_job) and lists replace it. Rejected: re-applying the same status with the new
 * resourceVersion (it was decided from the old status: stale counters).
 */
static bool older_job(const void *cached, const json_t *job) {
    long long have = rv_number(cached), got = rv_number(job);
    return have >= 0 && got > have;
}

static void keep_newer_job(controller *ctl, const json_t *job) {
    if (job != NULL && json_is_object(json_object_get(job, "metadata")))
        cache_update_if(ctl->jobs.cache, job, older_job, false);
}

/* Expectations: every pod create and bind of decision `r` answered with
 * success (done[i]), also when a later action failed, is awaited by the
 * job's next pass until the pod cache shows it (ledger_answered). */
static void expect_answered(controller *ctl, const char *ns, const reconcile_result *r,
                            const unsigned char *done) {
    long long now = areal_wall_ms();
    ledger_lock(&ctl->ledger);
    for (int i = 0; i < r->n_actions; i++) {
        const reconcile_action *a = &r->actions[i];
        if (!done[i] || strcmp(a->resource, "pods") != 0 ||
            (a->kind != RECONCILE_CREATE && a->kind != RECONCILE_BIND))
            continue;
        char key[WORKQUEUE_KEY_MAX];
        snprintf(key, sizeof key, "%s/%s", ns, a->name);
        ledger_answered(&ctl->ledger, key, a->kind == RECONCILE_CREATE, now);
    }
    ledger_unlock(&ctl->ledger);
}

/* What the pod cache shows of pod `pod_key`. */
static ledger_pod_state pod_observed(void *ud, const char *pod_key) {
    controller *ctl = ud;
    cached_pod *p = cache_get(ctl->pods.cache, pod_key);
    ledger_pod_state st = p == NULL              ? LEDGER_POD_ABSENT
                          : p->node_name == NULL ? LEDGER_POD_CREATED
                                                 : LEDGER_POD_BOUND;
    cache_release(ctl->pods.cache, p);
    pthread_mutex_lock(&ctl->expect_mu); /* or its events said so, whatever came after */
    int64_t *seen = areal_keyset_value(&ctl->expect_seen, pod_key);
    if (seen != NULL && (*seen & EXPECT_SEEN_BOUND))
        st = LEDGER_POD_BOUND;
    else if (seen != NULL && (*seen & EXPECT_SEEN_THERE) && st < LEDGER_POD_CREATED)
        st = LEDGER_POD_CREATED;
    pthread_mutex_unlock(&ctl->expect_mu);
    return st;
}

/* True while job `job` was refused at its generation and the job cache has not
 * shown that refusal yet: a pass now would read the job from before its own
 * status write and send the refused creates again (the chaos and rejection
 * tests saw a second 422 a few ms after the first). The status write's watch
 * event brings the job back. Clears the mark once the cache caught up or the
 * spec moved on. */
static bool refusal_unobserved(controller *ctl, const char *key, const json_t *job) {
    long long gen =
        json_integer_value(json_object_get(json_object_get(job, "metadata"), "generation"));
    const json_t *st = json_object_get(job, "status");
    bool shown = false;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        const char *r = json_string_value(json_object_get(c, "reason"));
        shown =
            shown || (t && r && strcmp(t, "Scheduled") == 0 && strcmp(r, "ChildRejected") == 0 &&
                      json_integer_value(json_object_get(c, "observedGeneration")) == gen);
    }
    pthread_mutex_lock(&ctl->events_mu);
    int64_t *at = areal_keyset_value(&ctl->rejected, key);
    bool wait = at != NULL && *at == gen && !shown;
    if (at != NULL && !wait)
        areal_keyset_remove(&ctl->rejected, key);
    pthread_mutex_unlock(&ctl->events_mu);
    return wait;
}

static void note_refusal(controller *ctl, const char *key, const json_t *job) {
    pthread_mutex_lock(&ctl->events_mu);
    if (areal_keyset_add(&ctl->rejected, key) >= 0)
        *areal_keyset_value(&ctl->rejected, key) = (int64_t)json_integer_value(
            json_object_get(json_object_get(job, "metadata"), "generation"));
    pthread_mutex_unlock(&ctl->events_mu);
}

/* ---- spec.priority ---------------------------------------------------------- */

typedef struct blocker_search {
    int priority;       /* spec.priority of the job being reconciled */
    const json_t *best; /* the first-ranked waiting job of higher priority */
} blocker_search;

static void find_blocker(void *ud, const void *entry) {
    blocker_search *b = ud;
    const json_t *other = entry; /* never the job itself: its priority is not higher */
    if (job_spec_priority(other) <= b->priority || !job_waits_for_gpus(other))
        return;
    if (b->best == NULL || job_rank_cmp(other, b->best) < 0)
        b->best = other;
}

/* The job that job `job` waits behind ("ns/name (priority P)" in buf), or
 * NULL. Jobs of equal priority never hold each other (priority.h). */
static const char *queued_behind(controller *ctl, const json_t *job, char *buf, size_t cap,
                                 char *key, size_t key_cap) {
    blocker_search b = {.priority = job_spec_priority(job)};
    cache_each(ctl->jobs.cache, find_blocker, &b);
    if (b.best == NULL || !cache_key(b.best, key, key_cap))
        return NULL;
    snprintf(buf, cap, "%s (priority %d)", key, job_spec_priority(b.best));
    return buf;
}

/* Remembers whether job `key`'s pass was held behind `blocker` (a key). */
static void note_queued(controller *ctl, const char *key, bool queued, const char *blocker) {
    pthread_mutex_lock(&ctl->events_mu);
    if (queued) {
        areal_keyset_add(&ctl->queued, key); /* out of memory: only a late wake-up lost */
        areal_keyset_add(&ctl->blockers, blocker);
        pthread_mutex_unlock(&ctl->events_mu);
        /* The blocker's event may have come between this pass's look at it and
         * the mark above (wake_queued found nothing to wake): look at it again
         * now; any later event finds the mark. */
        json_t *b = cache_get(ctl->jobs.cache, blocker);
        if (b == NULL || !job_waits_for_gpus(b))
            workqueue_add(ctl->q, key);
        cache_release(ctl->jobs.cache, b);
        return;
    } else {
        areal_keyset_remove(&ctl->queued, key);
        if (ctl->queued.len == 0) { /* nobody waits for them any more */
            areal_keyset_free(&ctl->blockers);
            areal_keyset_init(&ctl->blockers);
        }
    }
    pthread_mutex_unlock(&ctl->events_mu);
}

static int64_t job_generation(const json_t *job) {
    return json_integer_value(json_object_get(json_object_get(job, "metadata"), "generation"));
}

/* Returns true when the key should be retried with backoff. */
static bool reconcile_key(controller *ctl, const char *key, long *requeue_ms) {
    *requeue_ms = 0;
    json_t *job = cache_get(ctl->jobs.cache, key);
    if (job != NULL && refusal_unobserved(ctl, key, job)) {
        cache_release(ctl->jobs.cache, job);
        return false;
    }
    if (job != NULL) { /* refused Forbidden: nothing until its retry (or a new spec) */
        long wait = forbidden_wait(&ctl->forbidden, key, job_generation(job), areal_now_ms());
        if (wait > 0) {
            cache_release(ctl->jobs.cache, job);
            *requeue_ms = wait;
            return false;
        }
    }
    if (job == NULL) {
        note_queued(ctl, key, false, NULL);
        pthread_mutex_lock(&ctl->events_mu);
        areal_keyset_remove(&ctl->rejected, key);
        pthread_mutex_unlock(&ctl->events_mu);
        forbidden_clear(&ctl->forbidden, key);
        ledger_lock(&ctl->ledger); /* its plan, if any, is dropped */
        ledger_set(&ctl->ledger, key, NULL, 0);
        ledger_unlock(&ctl->ledger);
        return false; /* deleted: owner references take the children */
    }
    /* The last pass created or bound pods the pod cache does not show yet (also
     * when the pass was cut short after them): a pass now would see them
     * missing or unbound and could plan the gang anew. Wait for the watch
     * (usually milliseconds); after EXPECT_WINDOW_MS act on what is seen. */
    ledger_lock(&ctl->ledger);
    int unobserved =
        ledger_unobserved(&ctl->ledger, key, areal_wall_ms(), EXPECT_WINDOW_MS, pod_observed, ctl);
    ledger_unlock(&ctl->ledger);
    if (unobserved > 0) {
        cache_release(ctl->jobs.cache, job);
        *requeue_ms = 20;
        return false;
    }
    const json_t *meta = json_object_get(job, "metadata");
    areal_cluster cluster;
    areal_cluster_init(&cluster);
    gather g = {.ns = json_string_value(json_object_get(meta, "namespace")),
                .job = json_string_value(json_object_get(meta, "name")),
                .cluster = &cluster,
                .ledger = &ctl->ledger};
    if (g.ns == NULL)
        g.ns = "default";
    areal_keyset_init(&g.node_index);
    areal_keyset_init(&g.all_nodes);
    /* Planning is serialised: from reading the caches until this decision's
     * binds are claimed, no other worker plans (the reconcile itself is pure
     * and short; the API writes below run outside the lock). */
    ledger_lock(&ctl->ledger);
    ledger_begin(&ctl->ledger);
    snprintf(g.job_key, sizeof g.job_key, "%s/%s", g.ns, g.job ? g.job : "");
    cache_each(ctl->nodes.cache, gather_node, &g);
    g.used = calloc((size_t)cluster.n_nodes + 1, sizeof *g.used);
    if (g.used == NULL)
        g.oom = true;
    else
        cache_read(ctl->pods.cache, gather_pods, &g);
    ledger_charge(&ctl->ledger, key, &cluster, &g.node_index);
    for (int i = 0; i < g.n_pods; i++) { /* a node that is gone has no kubelet either */
        const char *node =
            json_string_value(json_object_get(json_object_get(g.pods[i], "spec"), "nodeName"));
        if (node != NULL && !areal_keyset_has(&g.all_nodes, node)) {
            bool listed = false;
            for (int d = 0; d < g.n_down && !listed; d++)
                listed = strcmp(g.down[d].name, node) == 0;
            if (!listed)
                add_down(&g, node, 0);
        }
    }
    char behind[WORKQUEUE_KEY_MAX + 32], blocker[WORKQUEUE_KEY_MAX] = "";
    reconcile_input in = {
        .queued_behind = queued_behind(ctl, job, behind, sizeof behind, blocker, sizeof blocker),
        .job = job,
        .pods = (const json_t *const *)g.pods,
        .n_pods = g.n_pods,
        .down = g.down,
        .n_down = g.n_down,
        .cluster = &cluster,
        .now_ms = areal_wall_ms(),
        .cfg = ctl->cfg.desired};
    reconcile_result r;
    areal_error aerr;
    bool retry = g.oom;
    int decided = retry ? AREAL_ENOMEM : reconcile_job(&in, &r, &aerr);
    if (decided == AREAL_OK && !record_claims(ctl, key, g.ns, &r))
        retry = true; /* no claim, no binds: they would be invisible to other workers */
    ledger_unlock(&ctl->ledger);
    if (decided == AREAL_OK)
        note_queued(ctl, key, r.queued, blocker);
    if (decided == AREAL_OK && retry)
        reconcile_result_free(&r);
    if (!retry && decided == AREAL_OK) {
        kube_error kerr;
        json_t *patched = NULL; /* the job after this pass's own patch (finalizer) */
        bool rejected = false;
        long forbidden_ms = 0; /* > 0: refused Forbidden, retried after this long */
        unsigned char *done = calloc((size_t)r.n_actions + 1, 1);
        retry = done == NULL;
        for (int i = 0, j; i < r.n_actions && !retry && !rejected; i = j) {
            for (j = i + 1; j < r.n_actions && same_run(&r.actions[i], &r.actions[j]); j++) {
            }
            int at = 0;
            retry = !apply_run(ctl, job, key, &r.actions[i], j - i, &patched, &done[i], &at, &kerr);
            const reconcile_action *fa = &r.actions[i + at];
            if (retry && (fa->kind == RECONCILE_CREATE || fa->kind == RECONCILE_BIND) &&
                kerr.code == KUBE_EHTTP && reconcile_error_is_permanent(kerr.http_status)) {
                /* A retry would be refused the same way: say so once, then wait
                 * for a new spec - or, for a Forbidden (RBAC, which an admin fixes
                 * without a new spec), for the next slow retry. The job's claims
                 * go: this plan is dropped. */
                rejected = true;
                ledger_lock(&ctl->ledger);
                ledger_set(&ctl->ledger, key, NULL, 0);
                ledger_unlock(&ctl->ledger);
                int attempt = 0;
                forbidden_ms = kerr.http_status == 403
                                   ? forbidden_refused(&ctl->forbidden, key, job_generation(job),
                                                       areal_now_ms(), &attempt)
                                   : 0;
                retry = report_rejected(ctl, key, patched ? patched : job, &in, fa, &kerr,
                                        forbidden_ms, attempt);
                if (!retry && forbidden_ms == 0)
                    note_refusal(ctl, key, job);
            }
        }
        if (!rejected && done != NULL)
            expect_answered(ctl, g.ns, &r, done);
        free(done);
        if (!rejected && !retry)
            forbidden_clear(&ctl->forbidden, key); /* went through: a later 403 starts afresh */
        if (rejected) {
            r.requeue_after_ms = forbidden_ms;
            json_decref(r.status); /* the rejection's status was written instead */
            r.status = NULL;
        }
        if (!retry && r.status != NULL &&
            merge_changes_nothing(json_object_get(patched ? patched : job, "status"), r.status)) {
            json_decref(r.status); /* what the stored status already says */
            r.status = NULL;
        }
        if (!retry && r.status != NULL) {
            /* A merge patch of the status subresource, guarded by the resourceVersion
             * the pass read: a pass that ran on a cached job older than the last status
             * write (the informer lags behind our own writes) gets 409 and runs again on
             * the newer job, instead of writing back stale counters (restarts). A
             * finalizer patch of the same pass moved the version: use the patched one. */
            const json_t *seen = patched ? json_object_get(patched, "metadata") : meta;
            const char *rv = json_string_value(json_object_get(seen, "resourceVersion"));
            json_t *patch = rv ? json_pack("{s:{s:s},s:O}", "metadata", "resourceVersion", rv,
                                           "status", r.status)
                               : json_pack("{s:O}", "status", r.status);
            kube_resource res = resource_for("arealjobs", g.ns);
            json_t *written = NULL;
            if (kube_patch(ctl->kc, &res, g.job, KUBE_PATCH_MERGE, patch, "status", &written,
                           &kerr) == KUBE_OK) {
                keep_newer_job(ctl, written); /* the next pass starts from it */
            } else {
                /* 409: the pass read an older job than the server has (the
                 * informer had not shown a write yet). The retry decides again
                 * on the job as the cache then shows it: the status is
                 * recomputed, never the stale one written back over newer
                 * counters (restarts), and never lost; the queue's backoff
                 * bounds the retries. Other failures (5xx, no answer) retry the
                 * same way. Rejected: reading the job with a GET here (a verb
                 * the chart's RBAC does not grant: every read is the caches');
                 * the answers of our own writes keep the cache fresh instead. */
                areal_log(AREAL_LOG_WARN, "controller", AREAL_FIELDS({"job", key}),
                          "status write failed, retrying%s: %s",
                          kerr.code == KUBE_ECONFLICT ? " on a newer job" : "", kerr.msg);
                retry = true;
            }
            json_decref(written);
            json_decref(patch);
        }
        if (!retry)
            record_events(ctl, patched ? patched : job, &r);
        json_decref(patched);
        *requeue_ms = r.requeue_after_ms;
        reconcile_result_free(&r);
    } else if (!retry) {
        areal_log(AREAL_LOG_ERROR, "controller", AREAL_FIELDS({"job", key}), "%s", aerr.msg);
        retry = true;
    }
    for (int i = 0; i < g.n_pods; i++)
        json_decref(g.pods[i]);
    free(g.pods);
    free(g.used);
    for (int i = 0; i < g.n_down; i++)
        free((char *)g.down[i].name);
    free(g.down);
    areal_keyset_free(&g.node_index);
    areal_keyset_free(&g.all_nodes);
    areal_cluster_free(&cluster);
    cache_release(ctl->jobs.cache, job);
    return retry;
}

static void *worker_main(void *arg) {
    controller *ctl = arg;
    char key[WORKQUEUE_KEY_MAX];
    while (workqueue_get(ctl->q, key, sizeof key, -1) == 1) {
        double t0 = areal_mono_s();
        long requeue;
        bool retry = reconcile_key(ctl, key, &requeue);
        const char *result[] = {retry ? "error" : "ok"};
        metrics_counter_add(ctl->m_reconciles, result, 1);
        metrics_histogram_observe(ctl->m_reconcile_s, NULL, areal_mono_s() - t0);
        if (retry) {
            workqueue_add_rate_limited(ctl->q, key);
        } else {
            workqueue_forget(ctl->q, key);
            if (requeue > 0)
                workqueue_add_after(ctl->q, key, requeue);
        }
        workqueue_done(ctl->q, key);
        metrics_gauge_set(ctl->m_depth, NULL, (double)workqueue_len(ctl->q));
    }
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------------ */

static int informer_init(controller *ctl, informer *inf, const char *kind, const char *ns,
                         const cache_ops *ops, areal_error *err) {
    inf->ctl = ctl;
    inf->kind = kind;
    inf->res = resource_for(kind, ns);
    inf->cache = cache_new(ops);
    kube_error kerr;
    inf->watch = kube_watch_new(ctl->kc, &kerr);
    if (inf->cache == NULL || inf->watch == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "cannot create the %s informer", kind);
    return AREAL_OK;
}

int controller_new(kube_client *kc, const controller_config *cfg, metrics_registry *m,
                   controller **out, areal_error *err) {
    *out = NULL;
    controller *ctl = calloc(1, sizeof *ctl);
    if (ctl == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    ctl->kc = kc;
    ctl->cfg = *cfg;
    ctl->n_workers =
        cfg->workers > 0 ? (cfg->workers < MAX_WORKERS ? cfg->workers : MAX_WORKERS) : 2;
    pthread_mutex_init(&ctl->stop_mu, NULL);
    pthread_cond_init(&ctl->stop_cond, NULL);
    pthread_mutex_init(&ctl->events_mu, NULL);
    areal_keyset_init(&ctl->last_event);
    areal_keyset_init(&ctl->rejected);
    forbidden_init(&ctl->forbidden, cfg->forbidden_retry_ms, cfg->forbidden_retry_max_ms);
    areal_keyset_init(&ctl->queued);
    areal_keyset_init(&ctl->blockers);
    ledger_init(&ctl->ledger);
    pthread_mutex_init(&ctl->expect_mu, NULL);
    areal_keyset_init(&ctl->expect_seen);
    int rc = workqueue_new(NULL, &ctl->q) == 0 ? AREAL_OK
                                               : areal_error_set(err, AREAL_ENOMEM, -1, "oom");
    if (rc == AREAL_OK)
        rc = informer_init(ctl, &ctl->jobs, "arealjobs", cfg->ns, &cache_ops_json, err);
    if (rc == AREAL_OK) /* every pod: other tenants' pods use room too */
        rc = informer_init(ctl, &ctl->pods, "pods", NULL, &cache_ops_pod, err);
    if (rc == AREAL_OK)
        rc = informer_init(ctl, &ctl->nodes, "nodes", NULL, &cache_ops_node, err);
    if (rc != AREAL_OK) {
        controller_free(ctl);
        return rc;
    }
    if (m != NULL) {
        const char *result[] = {"result", NULL}, *action[] = {"action", "result", NULL};
        const double buckets[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5};
        ctl->m_reconciles = metrics_register(m, METRIC_COUNTER, "areal_reconciles_total",
                                             "Reconciles of AReaLJobs by result.", result, NULL, 0);
        ctl->m_reconcile_s = metrics_register(m, METRIC_HISTOGRAM, "areal_reconcile_seconds",
                                              "Reconcile latency.", NULL, buckets, 8);
        ctl->m_actions = metrics_register(m, METRIC_COUNTER, "areal_actions_total",
                                          "API actions taken by reconciles.", action, NULL, 0);
        ctl->m_depth = metrics_register(m, METRIC_GAUGE, "areal_workqueue_depth",
                                        "Job keys waiting to be reconciled.", NULL, NULL, 0);
    }
    *out = ctl;
    return AREAL_OK;
}

int controller_run(controller *ctl) {
    informer *infs[] = {&ctl->nodes, &ctl->pods, &ctl->jobs};
    for (int i = 0; i < 3; i++)
        infs[i]->started = pthread_create(&infs[i]->thread, NULL, informer_main, infs[i]) == 0;
    /* No reconcile before every cache has listed once: a job reconciled on an
     * empty node cache would be told "the cluster has no nodes", and one on an
     * empty pod cache would create its gang again. Keys queue up meanwhile. */
    while (!atomic_load(&ctl->stopping) && !controller_synced(ctl)) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    int started = 0;
    for (; started < ctl->n_workers && !atomic_load(&ctl->stopping); started++)
        if (pthread_create(&ctl->workers[started], NULL, worker_main, ctl) != 0)
            break;
    pthread_mutex_lock(&ctl->stop_mu);
    while (!atomic_load(&ctl->stopping))
        pthread_cond_wait(&ctl->stop_cond, &ctl->stop_mu);
    pthread_mutex_unlock(&ctl->stop_mu);
    for (int i = 0; i < 3; i++) {
        kube_watch_stop(infs[i]->watch);
        if (infs[i]->started)
            pthread_join(infs[i]->thread, NULL);
        infs[i]->started = false;
    }
    workqueue_shutdown(ctl->q);
    for (int i = 0; i < started; i++)
        pthread_join(ctl->workers[i], NULL);
    return AREAL_OK;
}

void controller_stop(controller *ctl) {
    pthread_mutex_lock(&ctl->stop_mu);
    atomic_store(&ctl->stopping, true);
    pthread_cond_broadcast(&ctl->stop_cond);
    pthread_mutex_unlock(&ctl->stop_mu);
}

bool controller_synced(controller *ctl) {
    return cache_synced(ctl->jobs.cache) && cache_synced(ctl->pods.cache) &&
           cache_synced(ctl->nodes.cache);
}

void controller_cache_sizes(controller *ctl, size_t *jobs, size_t *pods, size_t *nodes) {
    if (jobs)
        *jobs = cache_len(ctl->jobs.cache);
    if (pods)
        *pods = cache_len(ctl->pods.cache);
    if (nodes)
        *nodes = cache_len(ctl->nodes.cache);
}

typedef struct each_pod {
    void (*fn)(void *ud, const cached_pod *pod);
    void *ud;
} each_pod;

static void each_pod_entry(void *ud, const void *entry) {
    each_pod *e = ud;
    e->fn(e->ud, entry);
}

void controller_each_pod(controller *ctl, void (*fn)(void *ud, const cached_pod *pod), void *ud) {
    each_pod e = {fn, ud};
    cache_each(ctl->pods.cache, each_pod_entry, &e);
}

size_t controller_pod_visits(controller *ctl) {
    return cache_visits(ctl->pods.cache);
}

void controller_free(controller *ctl) {
    if (ctl == NULL)
        return;
    informer *infs[] = {&ctl->nodes, &ctl->pods, &ctl->jobs};
    for (int i = 0; i < 3; i++) {
        kube_watch_free(infs[i]->watch);
        cache_free(infs[i]->cache);
    }
    workqueue_free(ctl->q);
    areal_keyset_free(&ctl->last_event);
    areal_keyset_free(&ctl->rejected);
    forbidden_free(&ctl->forbidden);
    areal_keyset_free(&ctl->queued);
    areal_keyset_free(&ctl->blockers);
    ledger_free(&ctl->ledger);
    areal_keyset_free(&ctl->expect_seen);
    pthread_mutex_destroy(&ctl->expect_mu);
    pthread_mutex_destroy(&ctl->events_mu);
    pthread_cond_destroy(&ctl->stop_cond);
    pthread_mutex_destroy(&ctl->stop_mu);
    free(ctl);
}
