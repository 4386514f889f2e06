/*
 * progress_poll.c - the thread that carries each trainer's /status into its
 * job (see areal/operator/progress.h).
 *
 * How: one round = ask the caller for the running master pods, then per pod
 * GET /status (bounded), merge-patch {"status": {"progress": ...}} into the
 * job's status subresource (no resourceVersion: the patch names only
 * progress, which no reconcile pass writes, so it cannot undo a pass's
 * write), record "TrainerPhase" when the phase moved, set the gauges. The
 * last phase per job lives in a small table under a mutex (a round may also
 * run on a test's thread). A terminated rank 0's termination message (its
 * final /status) is a target too, written once per pod uid: a trainer ending
 * within a period would otherwise leave an old step. Rounds are sequential: at most one GET at a
 * time, so a round of N silent trainers takes N timeouts (1 s each by default); that bounds
 * progress latency, not reconciles, which never wait for it. Rejected: a thread per job (the
 * operator watches thousands of jobs, few of which train at once) and an async client (one blocking
 * round is simpler and fast enough for a 5 s period with tens of trainers).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/log.h"
#include "areal/operator/autoscale.h"
#include "areal/operator/progress.h"
#include "areal/operator/reconcile.h"

#define TARGETS_MAX 1024

typedef struct seen {
    char key[520];
    char phase[24];
    bool live;               /* polled this round */
    autoscale_state auto_st; /* spec.rollout.target's policy, per job */
    char final_uid[64];      /* the pod whose final message is written ("": none yet) */
    bool final_ok;           /* it parsed: final_st holds it (the gauges keep it) */
    trainer_status final_st;
} seen;

struct progress_poller {
    kube_client *kc;
    progress_config cfg;
    progress_targets_fn targets;
    void *ud;
    metrics_family *g_step, *g_version, *g_reward, *g_stale, *g_sps, *g_sync, *c_errors;
    pthread_mutex_t mu; /* rounds and the table */
    pthread_mutex_t wake_mu;
    pthread_cond_t wake;
    bool stop;
    pthread_t th;
    seen *seen;
    size_t n_seen, cap_seen;
    metrics_registry *own; /* when the caller gave none */
};

static seen *seen_get(progress_poller *p, const char *key) {
    for (size_t i = 0; i < p->n_seen; i++)
        if (strcmp(p->seen[i].key, key) == 0)
            return &p->seen[i];
    if (p->n_seen == p->cap_seen) {
        size_t cap = p->cap_seen ? p->cap_seen * 2 : 16;
        seen *g = realloc(p->seen, cap * sizeof *g);
        if (g == NULL)
            return NULL;
        p->seen = g;
        p->cap_seen = cap;
    }
    seen *s = &p->seen[p->n_seen++];
    memset(s, 0, sizeof *s);
    snprintf(s->key, sizeof s->key, "%s", key);
    return s;
}

static void event(progress_poller *p, const progress_target *t, const json_t *job,
                  const char *reason, const char *msg) {
    const char *uid = json_string_value(json_object_get(json_object_get(job, "metadata"), "uid"));
    char now[32], prefix[300];
    reconcile_format_time((long long)time(NULL) * 1000, now);
    snprintf(prefix, sizeof prefix, "%s.", t->job);
    json_t *ev =
        json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s,s:s,s:s,s:s},s:s,s:s,s:s,s:s,s:s,s:i,s:{s:s}}",
                  "apiVersion", "v1", "kind", "Event", "metadata", "generateName", prefix,
                  "namespace", t->ns, "involvedObject", "apiVersion", "areal.io/v1alpha1", "kind",
                  "AReaLJob", "name", t->job, "namespace", t->ns, "uid", uid ? uid : "", "reason",
                  reason, "message", msg, "type", "Normal", "firstTimestamp", now, "lastTimestamp",
                  now, "count", 1, "source", "component", "areal-operator");
    if (ev == NULL)
        return;
    kube_resource res = {NULL, "v1", "events", t->ns};
    kube_error ke;
    if (kube_create(p->kc, &res, ev, NULL, &ke) != KUBE_OK)
        areal_log(AREAL_LOG_WARN, "progress", AREAL_FIELDS({"job", t->job}),
                  "event %s not recorded: %s", reason, ke.msg);
    json_decref(ev);
}

static void gauges(progress_poller *p, const progress_target *t, const trainer_status *st) {
    const char *lv[] = {t->ns, t->job};
    if (st->has_step)
        metrics_gauge_set(p->g_step, lv, (double)st->step);
    if (st->has_version)
        metrics_gauge_set(p->g_version, lv, (double)st->policy_version);
    if (st->has_reward)
        metrics_gauge_set(p->g_reward, lv, st->reward_mean);
    if (st->has_staleness)
        metrics_gauge_set(p->g_stale, lv, st->staleness_max);
    if (st->has_sps)
        metrics_gauge_set(p->g_sps, lv, st->samples_per_second);
    if (st->has_sync)
        metrics_gauge_set(p->g_sync, lv, st->last_weight_sync_seconds);
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long long int_or(const json_t *o, const char *k, long long d) {
    const json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (long long)json_integer_value(v) : d;
}

static double num_or(const json_t *o, const char *k, double d) {
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : d;
}

/*
 * spec.rollout.target set: the built-in policy (autoscale.h) decides the
 * rollout replicas from this sample and a change is written to
 * spec.rollout.replicas (a merge patch of the job, as `kubectl scale` writes
 * the scale subresource), with an Event "Autoscaled". The reconcile then
 * moves the rollout servers like for any other replica change.
 */
static void autoscale(progress_poller *p, const progress_target *t, const json_t *job,
                      const trainer_status *ts, seen *s) {
    const json_t *rollout = json_object_get(json_object_get(job, "spec"), "rollout");
    const json_t *target = json_object_get(rollout, "target");
    if (!json_is_object(target))
        return;
    long long cur = int_or(rollout, "replicas", -1);
    if (cur < 0)
        return; /* unset: the allocation's size; the policy starts once it is written */
    autoscale_policy pol = {
        .min_replicas = (int)int_or(rollout, "minReplicas", 0),
        .max_replicas = (int)int_or(rollout, "maxReplicas", cur),
        .up_window_s = num_or(target, "scaleUpWindowSeconds", 0),
        .down_window_s = num_or(target, "scaleDownWindowSeconds", 0),
        .cooldown_s = num_or(target, "cooldownSeconds", 0),
    };
    autoscale_sample smp = {.t_s = mono_s(),
                            .waiting_for_samples = ts->waiting_for_samples,
                            .running_ahead = ts->running_ahead,
                            .servers = ts->has_servers ? ts->servers : -1};
    autoscale_reason why;
    int want = autoscale_decide(&pol, &s->auto_st, &smp, (int)cur, &why);
    if (want == cur)
        return;
    json_t *patch = json_pack("{s:{s:{s:i}}}", "spec", "rollout", "replicas", want);
    kube_resource res = {"areal.io", "v1alpha1", "arealjobs", t->ns};
    kube_error ke;
    int rc = patch ? kube_patch(p->kc, &res, t->job, KUBE_PATCH_MERGE, patch, NULL, NULL, &ke)
                   : KUBE_ENOMEM;
    json_decref(patch);
    if (rc != KUBE_OK) {
        areal_log(AREAL_LOG_WARN, "progress", AREAL_FIELDS({"job", t->job}),
                  "autoscaling to %d rollout replicas not written: %s", want,
                  patch ? ke.msg : "out of memory");
        s->auto_st.decided = (int)cur; /* try again on the next sample */
        return;
    }
    char msg[200];
    snprintf(msg, sizeof msg, "rollout replicas %lld -> %d (%s: %s)", cur, want,
             autoscale_reason_name(why),
             why == AUTOSCALE_UP ? "the trainer waited for samples through the window"
             : why == AUTOSCALE_DOWN
                 ? "rollouts ran ahead of the staleness bound through the window"
                 : "outside minReplicas..maxReplicas");
    areal_log(AREAL_LOG_INFO, "progress", AREAL_FIELDS({"job", t->job}), "%s", msg);
    event(p, t, job, "Autoscaled", msg);
}

/*
 * Writes st (a live answer or a final message) into the job's
 * status.progress and records TrainerPhase when the phase moved. Returns
 * false when the patch failed (logged and counted).
 */
static bool write_progress(progress_poller *p, const progress_target *t, const char *key,
                           const trainer_status *st) {
    const char *lv[] = {t->ns, t->job};
    char now[32];
    reconcile_format_time((long long)time(NULL) * 1000, now);
    json_t *prog = progress_json(st, now);
    json_t *patch = prog ? json_pack("{s:{s:o}}", "status", "progress", prog) : NULL;
    if (patch == NULL)
        return false;
    kube_resource res = {"areal.io", "v1alpha1", "arealjobs", t->ns};
    json_t *job = NULL;
    kube_error ke;
    int rc = kube_patch(p->kc, &res, t->job, KUBE_PATCH_MERGE, patch, "status", &job, &ke);
    json_decref(patch);
    if (rc != KUBE_OK) {
        areal_log(AREAL_LOG_WARN, "progress", AREAL_FIELDS({"job", key}),
                  "status.progress not written: %s", ke.msg);
        metrics_counter_add(p->c_errors, lv, 1);
        return false;
    }
    seen *s = seen_get(p, key);
    if (s != NULL) {
        s->live = true;
        if (strcmp(s->phase, st->phase) != 0) {
            char msg[160];
            if (s->phase[0])
                snprintf(msg, sizeof msg, "trainer phase %s (was %s) at step %lld", st->phase,
                         s->phase, st->has_step ? st->step : 0);
            else
                snprintf(msg, sizeof msg, "trainer phase %s at step %lld", st->phase,
                         st->has_step ? st->step : 0);
            event(p, t, job, "TrainerPhase", msg);
            snprintf(s->phase, sizeof s->phase, "%s", st->phase);
        }
        if (t->final_message == NULL && strcmp(st->phase, "training") == 0)
            autoscale(p, t, job, st, s);
    }
    json_decref(job);
    return true;
}

/*
 * A terminated rank 0's last words: written once per pod uid (the pod stays a
 * target until it is deleted; re-patching the same numbers every round would
 * only move updateTime). Returns true with *out filled while the message
 * parsed (its gauges stay, as a live trainer's would).
 */
static bool final_one(progress_poller *p, const progress_target *t, const char *key,
                      trainer_status *out) {
    seen *s = seen_get(p, key);
    if (s == NULL)
        return false;
    s->live = true; /* its phase is remembered while the pod is a target */
    if (strcmp(s->final_uid, t->uid) == 0) {
        *out = s->final_st;
        return s->final_ok;
    }
    trainer_status st;
    areal_error err;
    if (progress_parse(t->final_message, strlen(t->final_message), &st, &err) != AREAL_OK) {
        /* not ours (a user's own termination message, say): once, then left alone */
        const char *lv[] = {t->ns, t->job};
        areal_log(AREAL_LOG_WARN, "progress", AREAL_FIELDS({"job", key}),
                  "the trainer's termination message is no status: %s", err.msg);
        metrics_counter_add(p->c_errors, lv, 1);
        snprintf(s->final_uid, sizeof s->final_uid, "%s", t->uid);
        s->final_ok = false;
        return false;
    }
    if (!write_progress(p, t, key, &st))
        return false;     /* the next round tries again */
    s = seen_get(p, key); /* write_progress may have grown the table */
    if (s == NULL)
        return false;
    areal_log(AREAL_LOG_INFO, "progress", AREAL_FIELDS({"job", key}),
              "final status of pod uid %s written: phase %s at step %lld", t->uid, st.phase,
              st.has_step ? st.step : 0);
    snprintf(s->final_uid, sizeof s->final_uid, "%s", t->uid);
    s->final_ok = true;
    s->final_st = st;
    *out = st;
    return true;
}

/* Returns true with *out filled when the trainer answered. */
static bool poll_one(progress_poller *p, const progress_target *t, trainer_status *out) {
    char key[520];
    snprintf(key, sizeof key, "%s/%s", t->ns, t->job);
    if (t->final_message != NULL)
        return final_one(p, t, key, out);
    const char *lv[] = {t->ns, t->job};
    char *body = NULL;
    size_t len = 0;
    areal_error err;
    trainer_status st;
    if (progress_http_get(t->pod_ip, p->cfg.port, "/status", p->cfg.timeout_ms, &body, &len,
                          &err) != AREAL_OK ||
        progress_parse(body, len, &st, &err) != AREAL_OK) {
        /* a trainer still starting has no server yet: debug, not a warning */
        areal_log(AREAL_LOG_DEBUG, "progress", AREAL_FIELDS({"job", key}), "%s", err.msg);
        metrics_counter_add(p->c_errors, lv, 1);
        free(body);
        seen *s = seen_get(p, key);
        if (s != NULL)
            s->live = true; /* keep its last phase: a blip is no phase change */
        return false;
    }
    free(body);
    *out = st;
    write_progress(p, t, key, &st);
    return true;
}

void progress_poller_round(progress_poller *p) {
    progress_target *ts = calloc(TARGETS_MAX, sizeof *ts);
    if (ts == NULL)
        return;
    size_t n = p->targets(p->ud, ts, TARGETS_MAX);
    trainer_status *st = calloc(n ? n : 1, sizeof *st);
    bool *ok = calloc(n ? n : 1, sizeof *ok);
    if (st == NULL || ok == NULL) {
        for (size_t i = 0; i < n; i++)
            free(ts[i].final_message);
        free(st);
        free(ok);
        free(ts);
        return;
    }
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n_seen; i++)
        p->seen[i].live = false;
    for (size_t i = 0; i < n; i++)
        ok[i] = poll_one(p, &ts[i], &st[i]);
    /* a snapshot, swapped in at once after the GETs (a scrape during a round
     * sees the last round's values, never none): jobs no longer polled go */
    metrics_family_reset(p->g_step);
    metrics_family_reset(p->g_version);
    metrics_family_reset(p->g_reward);
    metrics_family_reset(p->g_stale);
    metrics_family_reset(p->g_sps);
    metrics_family_reset(p->g_sync);
    for (size_t i = 0; i < n; i++)
        if (ok[i])
            gauges(p, &ts[i], &st[i]);
    size_t k = 0;
    for (size_t i = 0; i < p->n_seen; i++)
        if (p->seen[i].live)
            p->seen[k++] = p->seen[i];
    p->n_seen = k;
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < n; i++)
        free(ts[i].final_message);
    free(st);
    free(ok);
    free(ts);
}

static void *run(void *arg) {
    progress_poller *p = arg;
    for (;;) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += p->cfg.interval_ms / 1000;
        until.tv_nsec += (long)(p->cfg.interval_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&p->wake_mu);
        while (!p->stop && pthread_cond_timedwait(&p->wake, &p->wake_mu, &until) == 0) {
        }
        bool stop = p->stop;
        pthread_mutex_unlock(&p->wake_mu);
        if (stop)
            return NULL;
        progress_poller_round(p);
    }
}

int progress_poller_start(kube_client *kc, const progress_config *cfg, progress_targets_fn targets,
                          void *ud, metrics_registry *m, progress_poller **out, areal_error *err) {
    *out = NULL;
    progress_poller *p = calloc(1, sizeof *p);
    if (p == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    p->kc = kc;
    p->targets = targets;
    p->ud = ud;
    p->cfg.port = cfg && cfg->port > 0 ? cfg->port : 8090;
    p->cfg.interval_ms = cfg && cfg->interval_ms > 0 ? cfg->interval_ms : 5000;
    p->cfg.timeout_ms = cfg && cfg->timeout_ms > 0 ? cfg->timeout_ms : 1000;
    /* without a caller's registry the gauges go to one of our own, never read */
    metrics_registry *own = m ? NULL : metrics_registry_new();
    metrics_registry *r = m ? m : own;
    static const char *const labels[] = {"namespace", "job", NULL};
    static const struct {
        const char *name, *help;
    } g[] = {
        {"areal_job_step", "Last completed training step the trainer reported."},
        {"areal_job_policy_version", "The trainer's policy (weight) version."},
        {"areal_job_reward_mean", "Mean reward of the trainer's last step."},
        {"areal_job_staleness", "Largest policy-version lag of the last step's samples."},
        {"areal_job_samples_per_second", "Samples the trainer consumed per second."},
        {"areal_job_weight_sync_seconds", "Duration of the trainer's last weight sync."},
    };
    metrics_family **fs[] = {&p->g_step,  &p->g_version, &p->g_reward,
                             &p->g_stale, &p->g_sps,     &p->g_sync};
    bool ok = r != NULL;
    for (size_t i = 0; ok && i < sizeof g / sizeof g[0]; i++)
        ok = (*fs[i] = metrics_register(r, METRIC_GAUGE, g[i].name, g[i].help, labels, NULL, 0)) !=
             NULL;
    ok = ok && (p->c_errors = metrics_register(r, METRIC_COUNTER, "areal_job_status_errors_total",
                                               "Trainer /status reads or progress writes that "
                                               "failed.",
                                               labels, NULL, 0)) != NULL;
    if (!ok) {
        metrics_registry_free(own);
        free(p);
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "cannot register the areal_job_* metrics (registered twice?)");
    }
    p->own = own;
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->wake_mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (pthread_create(&p->th, NULL, run, p) != 0) {
        pthread_mutex_destroy(&p->mu);
        pthread_mutex_destroy(&p->wake_mu);
        pthread_cond_destroy(&p->wake);
        metrics_registry_free(own);
        free(p);
        return areal_error_set(err, AREAL_EIO, -1, "cannot start the progress thread");
    }
    *out = p;
    return AREAL_OK;
}

void progress_poller_stop(progress_poller *p) {
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->wake_mu);
    p->stop = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->wake_mu);
    pthread_join(p->th, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->wake_mu);
    pthread_cond_destroy(&p->wake);
    metrics_registry_free(p->own);
    free(p->seen);
    free(p);
}
