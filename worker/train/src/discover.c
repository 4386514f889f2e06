/*
 * discover.c - the trainer's view of the registered rollout servers (see
 * areal/train/discover.h).
 *
 * One thread lists the registry every 0.5 s; a listing replaces the
 * controller's server list (areal_rollout_ctl_set_registered decides, under
 * the controller's lock, which new servers need the current weights first)
 * and logs who joined, moved (a replacement pod of the same name at a new
 * address) or left. The mutex orders the thread's listings with attach,
 * detach and areal_discover_poll; no controller call is made once detached.
 */
#include "areal/train/discover.h"

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/comm/registry.h"
#include "areal/comm/store.h"

#define POLL_MS 500

typedef struct reg_entry {
    char name[AREAL_REGISTRY_NAME_MAX];
    char addr[128];
    char version[64];
} reg_entry;

struct areal_discover {
    areal_store_server *srv;
    areal_store *st;
    int port;
    void (*log)(void *ctx, const char *line);
    void *log_ctx;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool stop, started;
    areal_rollout_ctl *ctl;
    areal_registry_reader reader;
    reg_entry cur[AREAL_ROLLOUT_MAX_SERVERS], next[AREAL_ROLLOUT_MAX_SERVERS];
    int n_cur, n_next;
    bool ever; /* a registration was seen: from then on they are the list */
    atomic_bool pending;
    bool error_logged;
};

static void say(areal_discover *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(areal_discover *d, const char *fmt, ...) {
    if (d->log == NULL)
        return;
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    d->log(d->log_ctx, line);
}

/* One registration: {"addr": "host:port", "version": "v"}; a malformed one is skipped. */
static void on_entry(void *ctx, const char *name, const char *value) {
    areal_discover *d = ctx;
    if (d->n_next == AREAL_ROLLOUT_MAX_SERVERS)
        return;
    json_t *j = json_loads(value, 0, NULL);
    const char *addr = json_string_value(json_object_get(j, "addr"));
    const char *ver = json_string_value(json_object_get(j, "version"));
    if (addr != NULL && addr[0] != '\0' && strlen(addr) < sizeof d->next[0].addr) {
        reg_entry *e = &d->next[d->n_next++];
        snprintf(e->name, sizeof e->name, "%s", name);
        snprintf(e->addr, sizeof e->addr, "%s", addr);
        snprintf(e->version, sizeof e->version, "%s", ver ? ver : "");
    }
    json_decref(j);
}

static const reg_entry *find(const reg_entry *list, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(list[i].name, name) == 0)
            return &list[i];
    return NULL;
}

/* A listing applied to the controller. Called locked, attached. */
static int apply(areal_discover *d, areal_error *err) {
    const char *addrs[AREAL_ROLLOUT_MAX_SERVERS], *versions[AREAL_ROLLOUT_MAX_SERVERS];
    for (int i = 0; i < d->n_next; i++) {
        addrs[i] = d->next[i].addr;
        versions[i] = d->next[i].version;
    }
    int stale = 0;
    int rc = areal_rollout_ctl_set_registered(d->ctl, addrs, versions, d->n_next, &stale, err);
    if (rc != AREAL_OK)
        return rc;
    long policy = areal_rollout_ctl_version(d->ctl);
    char pv[32];
    snprintf(pv, sizeof pv, "%ld", policy);
    for (int i = 0; i < d->n_next; i++) {
        const reg_entry *e = &d->next[i], *was = find(d->cur, d->n_cur, e->name);
        if (was != NULL && strcmp(was->addr, e->addr) == 0)
            continue;
        bool current = strcmp(e->version, pv) == 0;
        say(d, "rollout server %s %s at %s with weight version %s (policy %ld): %s", e->name,
            was ? "registered again" : "registered", e->addr, e->version, policy,
            current ? "it takes requests" : "it gets the current weights before any request");
    }
    for (int i = 0; i < d->n_cur; i++)
        if (find(d->next, d->n_next, d->cur[i].name) == NULL)
            say(d, "rollout server %s at %s deregistered: no more requests go to it",
                d->cur[i].name, d->cur[i].addr);
    memcpy(d->cur, d->next, (size_t)d->n_next * sizeof *d->cur);
    d->n_cur = d->n_next;
    if (stale > 0)
        atomic_store(&d->pending, true);
    return AREAL_OK;
}

/* Lists and, when attached and something was ever registered, applies. Called locked. */
static int poll_locked(areal_discover *d, areal_error *err) {
    d->n_next = 0;
    int rc = areal_registry_list(d->st, &d->reader, on_entry, d, err);
    if (rc != AREAL_OK)
        return rc;
    d->ever = d->ever || d->n_next > 0;
    if (d->ctl == NULL || !d->ever)
        return AREAL_OK;
    return apply(d, err);
}

int areal_discover_poll(areal_discover *d, areal_error *err) {
    pthread_mutex_lock(&d->mu);
    int rc = poll_locked(d, err);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static void *discover_main(void *arg) {
    areal_discover *d = arg;
    pthread_mutex_lock(&d->mu);
    while (!d->stop) {
        areal_error e;
        if (poll_locked(d, &e) != AREAL_OK && !d->error_logged) {
            d->error_logged = true; /* its own store, in this process: should not happen */
            say(d, "listing the rollout servers failed: %s", e.msg);
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += POLL_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&d->cv, &d->mu, &ts);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

int areal_discover_start(const char *host, int port, void (*log)(void *ctx, const char *line),
                         void *log_ctx, areal_discover **out, areal_error *err) {
    *out = NULL;
    areal_discover *d = calloc(1, sizeof *d);
    if (d == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for server discovery");
    d->log = log;
    d->log_ctx = log_ctx;
    int rc = areal_store_server_start(host, port, &d->srv, &d->port, err);
    if (rc == AREAL_OK)
        rc = areal_store_connect(host ? host : "127.0.0.1", d->port, 2000, 10000, &d->st, err);
    if (rc != AREAL_OK) {
        areal_store_server_stop(d->srv);
        free(d);
        return rc;
    }
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    if (pthread_create(&d->thread, NULL, discover_main, d) != 0) {
        areal_discover_stop(d);
        return areal_error_set(err, AREAL_ENOMEM, -1, "cannot start the discovery thread");
    }
    d->started = true;
    *out = d;
    return AREAL_OK;
}

int areal_discover_port(const areal_discover *d) {
    return d->port;
}

int areal_discover_attach(areal_discover *d, areal_rollout_ctl *ctl, areal_error *err) {
    pthread_mutex_lock(&d->mu);
    d->ctl = ctl;
    d->n_cur = 0; /* a new controller knows none of them */
    int rc = poll_locked(d, err);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

void areal_discover_detach(areal_discover *d) {
    if (d == NULL)
        return;
    pthread_mutex_lock(&d->mu);
    d->ctl = NULL;
    pthread_mutex_unlock(&d->mu);
}

bool areal_discover_take_pending(areal_discover *d) {
    return d != NULL && atomic_exchange(&d->pending, false);
}

int areal_discover_count(areal_discover *d) {
    pthread_mutex_lock(&d->mu);
    int n = d->n_cur;
    pthread_mutex_unlock(&d->mu);
    return n;
}

void areal_discover_stop(areal_discover *d) {
    if (d == NULL)
        return;
    if (d->started) {
        pthread_mutex_lock(&d->mu);
        d->stop = true;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
    }
    areal_store_close(d->st);
    areal_store_server_stop(d->srv);
    areal_registry_reader_free(&d->reader);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d);
}
