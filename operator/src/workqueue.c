/*
 * workqueue.c - see areal/operator/workqueue.h for the contract and the
 * invariants. The FIFO is a growable ring of owned key copies; delayed keys
 * live in a binary min-heap with lazy deletion (the `waiting` set holds each
 * key's earliest due time, and heap entries that no longer match it are
 * dropped when they surface).
 */
#include "areal/operator/workqueue.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/clock.h"
#include "areal/keyset.h"

typedef struct delayed {
    long long due_ms;
    char *key;
} delayed;

struct workqueue {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    workqueue_config cfg;
    char **ring; /* FIFO of queued keys */
    size_t ring_cap, ring_head, ring_len;
    areal_keyset dirty, processing, failures, waiting;
    delayed *heap;
    size_t heap_len, heap_cap;
    bool shutting_down;
};

int workqueue_new(const workqueue_config *cfg, workqueue **out) {
    workqueue *q = calloc(1, sizeof *q);
    if (q == NULL)
        return -1;
    q->cfg.base_delay_ms = cfg && cfg->base_delay_ms > 0 ? cfg->base_delay_ms : 5;
    q->cfg.max_delay_ms = cfg && cfg->max_delay_ms > 0 ? cfg->max_delay_ms : 300000;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* immune to wall-clock jumps */
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cond, &attr);
    pthread_condattr_destroy(&attr);
    areal_keyset_init(&q->dirty);
    areal_keyset_init(&q->processing);
    areal_keyset_init(&q->failures);
    areal_keyset_init(&q->waiting);
    *out = q;
    return 0;
}

void workqueue_free(workqueue *q) {
    if (q == NULL)
        return;
    for (size_t i = 0; i < q->ring_len; i++)
        free(q->ring[(q->ring_head + i) % q->ring_cap]);
    free(q->ring);
    for (size_t i = 0; i < q->heap_len; i++)
        free(q->heap[i].key);
    free(q->heap);
    areal_keyset_free(&q->dirty);
    areal_keyset_free(&q->processing);
    areal_keyset_free(&q->failures);
    areal_keyset_free(&q->waiting);
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

static int check_key(const char *key) {
    size_t n = key ? strnlen(key, WORKQUEUE_KEY_MAX) : 0;
    return (n == 0 || n >= WORKQUEUE_KEY_MAX) ? -2 : 0;
}

static int ring_push(workqueue *q, const char *key) {
    if (q->ring_len == q->ring_cap) {
        size_t cap = q->ring_cap ? 2 * q->ring_cap : 16;
        char **ring = malloc(cap * sizeof *ring);
        if (ring == NULL)
            return -1;
        for (size_t i = 0; i < q->ring_len; i++)
            ring[i] = q->ring[(q->ring_head + i) % q->ring_cap];
        free(q->ring);
        q->ring = ring;
        q->ring_cap = cap;
        q->ring_head = 0;
    }
    char *copy = strdup(key);
    if (copy == NULL)
        return -1;
    q->ring[(q->ring_head + q->ring_len) % q->ring_cap] = copy;
    q->ring_len++;
    return 0;
}

/* add with the lock held */
static int add_locked(workqueue *q, const char *key) {
    if (q->shutting_down)
        return -3;
    int added = areal_keyset_add(&q->dirty, key);
    if (added < 0)
        return -1;
    if (added == 0 || areal_keyset_has(&q->processing, key))
        return 0; /* already waiting, or queued again by done() */
    if (ring_push(q, key) != 0) {
        areal_keyset_remove(&q->dirty, key);
        return -1;
    }
    pthread_cond_signal(&q->cond);
    return 0;
}

int workqueue_add(workqueue *q, const char *key) {
    if (check_key(key) != 0)
        return -2;
    pthread_mutex_lock(&q->mu);
    int rc = add_locked(q, key);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

static void heap_swap(delayed *h, size_t a, size_t b) {
    delayed t = h[a];
    h[a] = h[b];
    h[b] = t;
}

static int heap_push(workqueue *q, long long due, const char *key) {
    if (q->heap_len == q->heap_cap) {
        size_t cap = q->heap_cap ? 2 * q->heap_cap : 16;
        delayed *h = realloc(q->heap, cap * sizeof *h);
        if (h == NULL)
            return -1;
        q->heap = h;
        q->heap_cap = cap;
    }
    char *copy = strdup(key);
    if (copy == NULL)
        return -1;
    size_t i = q->heap_len++;
    q->heap[i] = (delayed){due, copy};
    while (i > 0 && q->heap[(i - 1) / 2].due_ms > q->heap[i].due_ms) {
        heap_swap(q->heap, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    return 0;
}

static delayed heap_pop(workqueue *q) {
    delayed top = q->heap[0];
    q->heap[0] = q->heap[--q->heap_len];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < q->heap_len && q->heap[l].due_ms < q->heap[m].due_ms)
            m = l;
        if (r < q->heap_len && q->heap[r].due_ms < q->heap[m].due_ms)
            m = r;
        if (m == i)
            break;
        heap_swap(q->heap, i, m);
        i = m;
    }
    return top;
}

static int add_after_locked(workqueue *q, const char *key, long delay_ms) {
    if (q->shutting_down)
        return -3;
    if (delay_ms <= 0)
        return add_locked(q, key);
    long long due = areal_now_ms() + delay_ms;
    int64_t *prev = areal_keyset_value(&q->waiting, key);
    if (prev != NULL && *prev <= due)
        return 0; /* an earlier wake-up is already planned */
    if (prev == NULL && areal_keyset_add(&q->waiting, key) < 0)
        return -1;
    if (heap_push(q, due, key) != 0)
        return -1;
    *areal_keyset_value(&q->waiting, key) = (int64_t)due;
    pthread_cond_broadcast(&q->cond); /* a sleeping get() may need to wake earlier */
    return 0;
}

int workqueue_add_after(workqueue *q, const char *key, long delay_ms) {
    if (check_key(key) != 0)
        return -2;
    pthread_mutex_lock(&q->mu);
    int rc = add_after_locked(q, key, delay_ms);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

int workqueue_add_rate_limited(workqueue *q, const char *key) {
    if (check_key(key) != 0)
        return -2;
    pthread_mutex_lock(&q->mu);
    int rc = areal_keyset_add(&q->failures, key) < 0 ? -1 : 0;
    if (rc == 0) {
        int64_t *n = areal_keyset_value(&q->failures, key);
        long delay = q->cfg.base_delay_ms;
        for (long i = 0; i < *n && delay < q->cfg.max_delay_ms; i++)
            delay *= 2;
        if (delay > q->cfg.max_delay_ms)
            delay = q->cfg.max_delay_ms;
        (*n)++;
        rc = add_after_locked(q, key, delay);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

void workqueue_forget(workqueue *q, const char *key) {
    pthread_mutex_lock(&q->mu);
    areal_keyset_remove(&q->failures, key);
    pthread_mutex_unlock(&q->mu);
}

int workqueue_failures(workqueue *q, const char *key) {
    pthread_mutex_lock(&q->mu);
    int64_t *n = areal_keyset_value(&q->failures, key);
    int v = n ? (int)*n : 0;
    pthread_mutex_unlock(&q->mu);
    return v;
}

/* Moves due delayed keys into the FIFO; returns the next due time or -1. */
static long long promote_due(workqueue *q) {
    long long now = areal_now_ms();
    while (q->heap_len > 0 && q->heap[0].due_ms <= now) {
        delayed d = heap_pop(q);
        int64_t *want = areal_keyset_value(&q->waiting, d.key);
        if (want != NULL && *want == (long)d.due_ms) {
            areal_keyset_remove(&q->waiting, d.key);
            add_locked(q, d.key); /* out of memory here only delays the key */
        }
        free(d.key);
    }
    return q->heap_len > 0 ? q->heap[0].due_ms : -1;
}

int workqueue_get(workqueue *q, char *buf, size_t cap, long timeout_ms) {
    if (buf == NULL || cap < WORKQUEUE_KEY_MAX)
        return -1;
    long long deadline = timeout_ms < 0 ? -1 : areal_now_ms() + timeout_ms;
    pthread_mutex_lock(&q->mu);
    int rc;
    for (;;) {
        long long next_due = q->shutting_down ? -1 : promote_due(q);
        if (q->ring_len > 0) {
            char *key = q->ring[q->ring_head];
            q->ring_head = (q->ring_head + 1) % q->ring_cap;
            q->ring_len--;
            areal_keyset_remove(&q->dirty, key);
            if (areal_keyset_add(&q->processing, key) < 0) {
                /* cannot track it: put it back and report a timeout-like miss */
                areal_keyset_add(&q->dirty, key);
                ring_push(q, key);
                free(key);
                rc = -1;
                break;
            }
            strcpy(buf, key); /* check_key bounded every key below cap */
            free(key);
            rc = 1;
            break;
        }
        if (q->shutting_down) {
            rc = 0;
            break;
        }
        long long wake = next_due;
        if (deadline >= 0 && (wake < 0 || deadline < wake))
            wake = deadline;
        if (deadline >= 0 && areal_now_ms() >= deadline) {
            rc = -1;
            break;
        }
        if (wake < 0) {
            pthread_cond_wait(&q->cond, &q->mu);
        } else {
            struct timespec ts = {.tv_sec = wake / 1000, .tv_nsec = (wake % 1000) * 1000000};
            pthread_cond_timedwait(&q->cond, &q->mu, &ts);
        }
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

void workqueue_done(workqueue *q, const char *key) {
    pthread_mutex_lock(&q->mu);
    if (areal_keyset_remove(&q->processing, key) && areal_keyset_has(&q->dirty, key)) {
        if (ring_push(q, key) == 0)
            pthread_cond_signal(&q->cond);
        else
            areal_keyset_remove(&q->dirty, key); /* out of memory: the next event re-adds it */
    }
    pthread_mutex_unlock(&q->mu);
}

void workqueue_shutdown(workqueue *q) {
    pthread_mutex_lock(&q->mu);
    q->shutting_down = true;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->mu);
}

size_t workqueue_len(workqueue *q) {
    pthread_mutex_lock(&q->mu);
    size_t n = q->ring_len;
    pthread_mutex_unlock(&q->mu);
    return n;
}
