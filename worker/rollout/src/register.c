/*
 * register.c - see areal_rollout_register_start in areal/rollout/server.h.
 *
 * Key convention (worker/rollout/README.md): "rollout/servers/<name>" =
 * {"addr": "host:port", "version": "<weight version>"}; the trainer lists
 * the servers it expects (it knows d from the allocation) and reads them.
 * The thread connects with a short connect timeout, backs off 0.5 s ->
 * 30 s between failures with one log line each, writes the key, and
 * rewrites it whenever a weight update lands (version_seq moves). A store
 * that dies later is reconnected the same way.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server_internal.h"

struct areal_rollout_reg {
    areal_rollout_server *s;
    char host[256], key[300], addr[300];
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

static int publish(areal_rollout_reg *r, areal_error *e) {
    char version[AREAL_ENGINE_VERSION_MAX];
    areal_rollout_server_version(r->s, version, sizeof version);
    json_t *j = json_pack("{s:s,s:s}", "addr", r->addr, "version", version);
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    int rc = text ? areal_store_set(r->st, r->key, text, strlen(text), e) : AREAL_ENOMEM;
    free(text);
    return rc;
}

static void *reg_main(void *arg) {
    areal_rollout_reg *r = arg;
    int backoff = 500, seen = -1;
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
            backoff = backoff * 2 > 30000 ? 30000 : backoff * 2;
            continue;
        }
        int now = atomic_load(&r->s->version_seq);
        if (now != seen) {
            if (publish(r, &e) != AREAL_OK) {
                if (r->log)
                    fprintf(r->log, "areal-worker serve: registering %s failed: %s\n", r->key,
                            e.msg);
                areal_store_close(r->st);
                r->st = NULL;
                continue;
            }
            if (r->log && seen < 0)
                fprintf(r->log, "areal-worker serve: registered %s = %s at %s:%d\n", r->key,
                        r->addr, r->host, r->port);
            seen = now;
            backoff = 500;
        }
        if (nap(r, 200))
            break;
    }
    return NULL;
}

int areal_rollout_register_start(areal_rollout_server *s, const char *store_host, int store_port,
                                 const char *name, const char *addr, FILE *log,
                                 areal_rollout_reg **out, areal_error *err) {
    *out = NULL;
    if (store_host == NULL || name == NULL || addr == NULL || name[0] == '\0')
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "registration needs the store host (MASTER_ADDR), a server name "
                               "and its address");
    areal_rollout_reg *r = calloc(1, sizeof *r);
    if (r == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    r->s = s;
    r->port = store_port;
    r->log = log;
    snprintf(r->host, sizeof r->host, "%s", store_host);
    snprintf(r->key, sizeof r->key, "rollout/servers/%.200s", name);
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
        areal_store_delete(r->st, r->key, NULL, NULL);
        areal_store_close(r->st);
    }
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}
