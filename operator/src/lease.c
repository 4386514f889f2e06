/*
 * lease.c - see areal/operator/lease.h. One round: read the Lease (create it
 * when missing); if another holder renewed it within its duration, lose the
 * round; else write ourselves as holder with the read resourceVersion. Time
 * comparisons use this process's clock against renewTime, as client-go does
 * (it also observes renewals with its own clock; holding the Lease longer
 * than leaseDuration without renewing is what the renew deadline prevents).
 */
#include "areal/operator/lease.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/clock.h"

struct leader_elector {
    kube_client *kc;
    lease_config cfg;
    char ns[64], name[64], identity[128];
    void (*on_started)(void *);
    void (*on_lost)(void *);
    void *ud;
    pthread_t thread;
    atomic_bool stop, leader;
    pthread_mutex_t mu;
    pthread_cond_t cond;
};

static void micro_time(long long us, char buf[40]) {
    time_t t = (time_t)(us / 1000000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char base[24];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, 40, "%s.%06lldZ", base, us % 1000000);
}

static long long parse_micro(const char *s) {
    if (s == NULL)
        return -1;
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (rest == NULL)
        return -1;
    long long us = (long long)timegm(&tm) * 1000000;
    if (*rest == '.') {
        long long frac = 0;
        int digits = 0;
        for (rest++; *rest >= '0' && *rest <= '9'; rest++)
            if (digits++ < 6)
                frac = frac * 10 + (*rest - '0');
        while (digits++ < 6)
            frac *= 10;
        us += frac;
    }
    return us;
}

static kube_resource lease_res(const leader_elector *le) {
    return (kube_resource){"coordination.k8s.io", "v1", "leases", le->ns};
}

/* One round; true when we hold the Lease afterwards. */
static bool try_acquire_or_renew(leader_elector *le) {
    kube_resource res = lease_res(le);
    kube_error err;
    json_t *lease = NULL;
    long long now = areal_wall_us();
    char now_text[40];
    micro_time(now, now_text);
    int rc = kube_get(le->kc, &res, le->name, &lease, &err);
    if (rc == KUBE_ENOTFOUND) {
        json_t *obj = json_pack(
            "{s:s,s:s,s:{s:s,s:s},s:{s:s,s:i,s:s,s:s,s:i}}", "apiVersion", "coordination.k8s.io/v1",
            "kind", "Lease", "metadata", "name", le->name, "namespace", le->ns, "spec",
            "holderIdentity", le->identity, "leaseDurationSeconds", le->cfg.duration_s,
            "acquireTime", now_text, "renewTime", now_text, "leaseTransitions", 0);
        rc = kube_create(le->kc, &res, obj, NULL, &err);
        json_decref(obj);
        return rc == KUBE_OK;
    }
    if (rc != KUBE_OK)
        return false;
    json_t *spec = json_object_get(lease, "spec");
    if (spec == NULL) {
        spec = json_object();
        json_object_set_new(lease, "spec", spec);
    }
    const char *holder = json_string_value(json_object_get(spec, "holderIdentity"));
    long long renewed = parse_micro(json_string_value(json_object_get(spec, "renewTime")));
    long long duration = json_integer_value(json_object_get(spec, "leaseDurationSeconds"));
    if (duration <= 0)
        duration = le->cfg.duration_s;
    bool ours = holder != NULL && strcmp(holder, le->identity) == 0;
    bool free_ =
        holder == NULL || holder[0] == '\0' || renewed < 0 || now > renewed + duration * 1000000;
    if (!ours && !free_) {
        json_decref(lease);
        return false;
    }
    if (!ours) {
        json_object_set_new(spec, "acquireTime", json_string(now_text));
        json_object_set_new(
            spec, "leaseTransitions",
            json_integer(json_integer_value(json_object_get(spec, "leaseTransitions")) + 1));
    }
    json_object_set_new(spec, "holderIdentity", json_string(le->identity));
    json_object_set_new(spec, "leaseDurationSeconds", json_integer(le->cfg.duration_s));
    json_object_set_new(spec, "renewTime", json_string(now_text));
    rc = kube_update(le->kc, &res, lease, NULL, &err); /* resourceVersion guards the race */
    json_decref(lease);
    return rc == KUBE_OK;
}

static void release(leader_elector *le) {
    kube_resource res = lease_res(le);
    json_t *lease = NULL;
    kube_error err;
    if (kube_get(le->kc, &res, le->name, &lease, &err) != KUBE_OK)
        return;
    json_t *spec = json_object_get(lease, "spec");
    const char *holder = json_string_value(json_object_get(spec, "holderIdentity"));
    if (holder != NULL && strcmp(holder, le->identity) == 0) {
        json_object_set_new(spec, "holderIdentity", json_string(""));
        kube_update(le->kc, &res, lease, NULL, &err);
    }
    json_decref(lease);
}

/* Sleeps up to `s` seconds; false when asked to stop. */
static bool pause_s(leader_elector *le, int s) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += s;
    pthread_mutex_lock(&le->mu);
    while (!atomic_load(&le->stop))
        if (pthread_cond_timedwait(&le->cond, &le->mu, &until) != 0)
            break;
    pthread_mutex_unlock(&le->mu);
    return !atomic_load(&le->stop);
}

static void *campaign(void *arg) {
    leader_elector *le = arg;
    long long last_renew = 0;
    while (!atomic_load(&le->stop)) {
        bool held = try_acquire_or_renew(le);
        long long now = areal_wall_us();
        if (held) {
            last_renew = now;
            if (!atomic_exchange(&le->leader, true) && le->on_started)
                le->on_started(le->ud);
        } else if (atomic_load(&le->leader) &&
                   now - last_renew > (long long)le->cfg.renew_deadline_s * 1000000) {
            atomic_store(&le->leader, false);
            if (le->on_lost)
                le->on_lost(le->ud);
            break; /* a lost leader stops campaigning; the process restarts as a candidate */
        }
        if (!pause_s(le, le->cfg.retry_period_s))
            break;
    }
    if (atomic_load(&le->leader))
        release(le);
    return NULL;
}

int leader_elector_start(kube_client *kc, const lease_config *cfg, void (*on_started)(void *),
                         void (*on_lost)(void *), void *ud, leader_elector **out,
                         areal_error *err) {
    *out = NULL;
    if (cfg->ns == NULL || cfg->name == NULL || cfg->identity == NULL || cfg->identity[0] == '\0')
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "leader election needs a namespace, a lease name and an identity");
    leader_elector *le = calloc(1, sizeof *le);
    if (le == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    le->kc = kc;
    le->cfg = *cfg;
    snprintf(le->ns, sizeof le->ns, "%s", cfg->ns);
    snprintf(le->name, sizeof le->name, "%s", cfg->name);
    snprintf(le->identity, sizeof le->identity, "%s", cfg->identity);
    if (le->cfg.duration_s <= 0)
        le->cfg.duration_s = 15;
    if (le->cfg.renew_deadline_s <= 0)
        le->cfg.renew_deadline_s = 10;
    if (le->cfg.retry_period_s <= 0)
        le->cfg.retry_period_s = 2;
    if (le->cfg.renew_deadline_s >= le->cfg.duration_s)
        le->cfg.renew_deadline_s = le->cfg.duration_s * 2 / 3;
    le->on_started = on_started;
    le->on_lost = on_lost;
    le->ud = ud;
    pthread_mutex_init(&le->mu, NULL);
    pthread_cond_init(&le->cond, NULL);
    if (pthread_create(&le->thread, NULL, campaign, le) != 0) {
        free(le);
        return areal_error_set(err, AREAL_ENOMEM, -1, "cannot start the election thread");
    }
    *out = le;
    return AREAL_OK;
}

bool leader_elector_is_leader(leader_elector *le) {
    return le != NULL && atomic_load(&le->leader);
}

void leader_elector_stop(leader_elector *le) {
    if (le == NULL)
        return;
    pthread_mutex_lock(&le->mu);
    atomic_store(&le->stop, true);
    pthread_cond_broadcast(&le->cond);
    pthread_mutex_unlock(&le->mu);
    pthread_join(le->thread, NULL);
    pthread_cond_destroy(&le->cond);
    pthread_mutex_destroy(&le->mu);
    free(le);
}
