/*
 * register.c - see areal_rollout_register_start in areal/rollout/server.h.
 *
 * Key convention (worker/rollout/README.md, areal/comm/registry.h):
 * "rollout/servers/<name>" = {"addr": "host:port", "version": "<weight
 * version>"}, announced in the store's index so the trainer can list the
 * servers (it discovers them: a server added by scaling is seen without a
 * restart). The thread connects with a short connect timeout, backs off
 * 0.5 s -> 5 s between failures with one log line each, announces, and
 * rewrites the value whenever a weight update lands (version_seq moves).
 * Every second it checks that its key is still there: a trainer that
 * restarted hosts a new, empty store on the same address (the old
 * connection may even look alive until the next call), and the server must
 * announce itself again there. Rejected: the former 30 s backoff cap (a
 * trainer restart took up to half a minute to see its servers again).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/comm/registry.h"
#include "server_internal.h"

#define BACKOFF_MAX_MS 5000
#define CHECK_EVERY_MS 1000

struct areal_rollout_reg {
    areal_rollout_server *s;
    char host[256], name[AREAL_REGISTRY_NAME_MAX], addr[300];
    int port;
    FILE *log;
    pthread_t t;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    areal_store *st; /* the thread's connection, NULL while unreachable */
};

/* Waits up to ms or until stop; returns whether to stop. */
static bool nap(areal_rollout_reg *r, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->mu);
    while (!r->stop && pthread_cond_timedwait(&r->cv, &r->mu, &ts) == 0) {
    }
    bool stop = r->stop;
    pthread_mutex_unlock(&r->mu);
    return stop;
}

/* The registration value now (caller frees), or NULL without memory. */
static char *value_now(areal_rollout_reg *r) {
    char version[AREAL_ENGINE_VERSION_MAX];
    areal_rollout_server_version(r->s, version, sizeof version);
    json_t *j = json_pack("{s:s,s:s}", "addr", r->addr, "version", version);
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    return text;
}

/* announce: a new connection (or a store that lost the key); else an update. */
static int publish(areal_rollout_reg *r, bool announce, areal_error *e) {
    char *text = value_now(r);
    int rc = text == NULL ? areal_error_set(e, AREAL_ENOMEM, -1, "out of memory")
             : announce   ? areal_registry_announce(r->st, r->name, text, e)
                          : areal_registry_update(r->st, r->name, text, e);
    free(text);
    return rc;
}

static void reconnect_later(areal_rollout_reg *r) {
    areal_store_close(r->st);
    r->st = NULL;
}

static void *reg_main(void *arg) {
    areal_rollout_reg *r = arg;
    int backoff = 500, seen = -1, since_check = 0;
    bool announced = false;
    for (;;) {
        areal_error e;
        if (r->st == NULL &&
            areal_store_connect(r->host, r->port, 2000, 10000, &r->st, &e) != AREAL_OK) {
            r->st = NULL;
            if (r->log)
                fprintf(r->log,
                        "areal-worker serve: the trainer's store %s:%d is unreachable (%s); "
                        "retrying registration in %.1f s\n",
                        r->host, r->port, e.msg, backoff / 1000.0);
            if (nap(r, backoff))
                break;
            backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
            announced = false;
            continue;
        }
        int now = atomic_load(&r->s->version_seq);
        if (!announced || now != seen) {
            bool fresh = !announced;
            if (publish(r, fresh, &e) != AREAL_OK) {
                if (r->log)
                    fprintf(r->log, "areal-worker serve: registering %s failed: %s\n", r->name,
                            e.msg);
                reconnect_later(r);
                announced = false;
                continue;
            }
            if (r->log && fresh)
                fprintf(r->log, "areal-worker serve: registered %s%s = %s at %s:%d\n",
                        AREAL_REGISTRY_PREFIX, r->name, r->addr, r->host, r->port);
            announced = true;
            seen = now;
            backoff = 500;
            since_check = 0;
        }
        if (nap(r, 200))
            break;
        if ((since_check += 200) >= CHECK_EVERY_MS) {
            since_check = 0;
            bool present = false;
            if (areal_registry_present(r->st, r->name, &present, &e) != AREAL_OK) {
                reconnect_later(r); /* the store went away: connect (and announce) again */
                announced = false;
            } else if (!present) {
                announced = false; /* a new store on the same address */
            }
        }
    }
    return NULL;
}

int areal_rollout_register_start(areal_rollout_server *s, const char *store_host, int store_port,
                                 const char *name, const char *addr, FILE *log,
                                 areal_rollout_reg **out, areal_error *err) {
    *out = NULL;
    if (store_host == NULL || name == NULL || addr == NULL || name[0] == '\0' ||
        strlen(name) >= AREAL_REGISTRY_NAME_MAX)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "registration needs the store host (MASTER_ADDR), a server name "
                               "(1..%d bytes) and its address",
                               AREAL_REGISTRY_NAME_MAX - 1);
    areal_rollout_reg *r = calloc(1, sizeof *r);
    if (r == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    r->s = s;
    r->port = store_port;
    r->log = log;
    snprintf(r->host, sizeof r->host, "%s", store_host);
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->addr, sizeof r->addr, "%s", addr);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (pthread_create(&r->t, NULL, reg_main, r) != 0) {
        free(r);
        return areal_error_set(err, AREAL_ENOMEM, -1, "cannot start the registration thread");
    }
    *out = r;
    return AREAL_OK;
}

void areal_rollout_register_stop(areal_rollout_reg *r) {
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->t, NULL);
    if (r->st != NULL) {
        areal_registry_remove(r->st, r->name, NULL);
        areal_store_close(r->st);
    }
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}
