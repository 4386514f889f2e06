/*
 * pool.c - the pthread pool of pool.h.
 *
 * One job at a time: the caller publishes (fn, ctx, n, chunk) under the mutex,
 * bumps a generation counter and broadcasts; every thread (caller included)
 * then claims chunk indices from a shared counter until none are left, and the
 * caller waits until all workers have reported the generation done. Work
 * stealing and per-thread queues were rejected: the kernels are regular loops
 * over rows, so static claiming of equal chunks is enough.
 */
#include <pthread.h>
#include <stdlib.h>

#include "areal/model/pool.h"

struct areal_pool {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    pthread_t *threads;
    int n_workers;
    unsigned long gen; /* bumped per job */
    int finished;      /* workers done with the current generation */
    int stop;
    areal_pool_fn fn;
    void *ctx;
    size_t n, chunk, n_chunks, next;
};

/* Claims and runs chunks until none are left. */
static void drain(areal_pool *p) {
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t c = p->next < p->n_chunks ? p->next++ : p->n_chunks;
        pthread_mutex_unlock(&p->mu);
        if (c >= p->n_chunks)
            return;
        size_t b = c * p->chunk, e = b + p->chunk;
        p->fn(p->ctx, b, e < p->n ? e : p->n);
    }
}

static void *worker(void *arg) {
    areal_pool *p = arg;
    unsigned long seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->gen == seen)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->stop) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->gen;
        pthread_mutex_unlock(&p->mu);
        drain(p);
        pthread_mutex_lock(&p->mu);
        p->finished++;
        pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

int areal_pool_create(int n_threads, areal_pool **out, areal_error *err) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 256)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "thread pool: %d threads requested; use 1..256", n_threads);
    areal_pool *p = calloc(1, sizeof *p);
    if (p == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "thread pool: no memory");
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (p->threads == NULL) {
        free(p);
        return areal_error_set(err, AREAL_ENOMEM, -1, "thread pool: no memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int i = 0; i < n_threads - 1; i++) {
        if (pthread_create(&p->threads[i], NULL, worker, p) != 0) {
            areal_pool_destroy(p);
            return areal_error_set(err, AREAL_ENOMEM, -1,
                                   "thread pool: could not start thread %d of %d", i + 1,
                                   n_threads - 1);
        }
        p->n_workers++;
    }
    *out = p;
    return AREAL_OK;
}

void areal_pool_destroy(areal_pool *p) {
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_workers; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

int areal_pool_threads(const areal_pool *p) {
    return p == NULL ? 1 : p->n_workers + 1;
}

void areal_pool_for(areal_pool *p, size_t n, size_t grain, areal_pool_fn fn, void *ctx) {
    if (n == 0)
        return;
    if (grain == 0)
        grain = 1;
    int nt = areal_pool_threads(p);
    if (p == NULL || p->n_workers == 0 || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    size_t chunk = (n + (size_t)nt * 4 - 1) / ((size_t)nt * 4);
    if (chunk < grain)
        chunk = grain;
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk;
    p->n_chunks = (n + chunk - 1) / chunk;
    p->next = 0;
    p->finished = 0;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    drain(p);
    pthread_mutex_lock(&p->mu);
    while (p->finished < p->n_workers)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
