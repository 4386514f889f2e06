/*
 * forbidden.c - see areal/operator/forbidden.h: three keysets (generation,
 * refusals, time of the next attempt) under one mutex.
 *
 * Rejected: the work queue's per-key rate limiter (workqueue_add_rate_limited)
 * - its backoff is milliseconds to seconds for transient errors, and any
 * watch event (the job's own status write, a pod's update) re-adds the key at
 * once; the gate holds the job until its time whatever wakes it.
 */
#include "areal/operator/forbidden.h"

void forbidden_init(forbidden_gate *g, long first_ms, long max_ms) {
    pthread_mutex_init(&g->mu, NULL);
    g->first_ms = first_ms > 0 ? first_ms : FORBIDDEN_FIRST_MS;
    g->max_ms = max_ms > 0 ? max_ms : FORBIDDEN_MAX_MS;
    if (g->max_ms < g->first_ms)
        g->max_ms = g->first_ms;
    areal_keyset_init(&g->gen);
    areal_keyset_init(&g->attempts);
    areal_keyset_init(&g->retry_at);
}

void forbidden_free(forbidden_gate *g) {
    areal_keyset_free(&g->gen);
    areal_keyset_free(&g->attempts);
    areal_keyset_free(&g->retry_at);
    pthread_mutex_destroy(&g->mu);
}

static void forget_locked(forbidden_gate *g, const char *key) {
    areal_keyset_remove(&g->gen, key);
    areal_keyset_remove(&g->attempts, key);
    areal_keyset_remove(&g->retry_at, key);
}

long forbidden_refused(forbidden_gate *g, const char *key, int64_t gen, int64_t now_ms,
                       int *attempt) {
    pthread_mutex_lock(&g->mu);
    int64_t *old_gen = areal_keyset_value(&g->gen, key);
    if (old_gen != NULL && *old_gen != gen)
        forget_locked(g, key); /* a new spec starts afresh */
    int64_t *n = areal_keyset_value(&g->attempts, key);
    int64_t refusals = n ? *n + 1 : 1;
    long delay = g->first_ms;
    for (int64_t i = 1; i < refusals && delay < g->max_ms; i++)
        delay *= 2;
    if (delay > g->max_ms)
        delay = g->max_ms;
    /* a keyset that cannot grow (out of memory) leaves the job ungated: it is then
     * retried by the work queue's own backoff, which is still no hot loop */
    if (areal_keyset_add(&g->gen, key) >= 0 && areal_keyset_add(&g->attempts, key) >= 0 &&
        areal_keyset_add(&g->retry_at, key) >= 0) {
        *areal_keyset_value(&g->gen, key) = gen;
        *areal_keyset_value(&g->attempts, key) = refusals;
        *areal_keyset_value(&g->retry_at, key) = now_ms + delay;
    }
    pthread_mutex_unlock(&g->mu);
    if (attempt != NULL)
        *attempt = (int)refusals;
    return delay;
}

long forbidden_wait(forbidden_gate *g, const char *key, int64_t gen, int64_t now_ms) {
    pthread_mutex_lock(&g->mu);
    long wait = 0;
    int64_t *at = areal_keyset_value(&g->retry_at, key);
    int64_t *old_gen = areal_keyset_value(&g->gen, key);
    if (at != NULL && old_gen != NULL && *old_gen != gen)
        forget_locked(g, key);
    else if (at != NULL && *at > now_ms)
        wait = (long)(*at - now_ms);
    pthread_mutex_unlock(&g->mu);
    return wait;
}

void forbidden_clear(forbidden_gate *g, const char *key) {
    pthread_mutex_lock(&g->mu);
    forget_locked(g, key);
    pthread_mutex_unlock(&g->mu);
}
