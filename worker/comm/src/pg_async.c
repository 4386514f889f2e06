/*
 * pg_async.c - asynchronous collectives: one worker thread per group runs
 * queued operations in issue order; see areal/comm/comm.h.
 *
 * The worker calls the blocking functions, so the algorithms and the
 * failure handling are the same. Blocking calls from other threads drain
 * the queue first (areal_pg_drain), which keeps every rank's order of
 * operations on a group equal to its issue order. Rejected: a thread per
 * operation (no order between them) and non-blocking state machines for
 * every algorithm (much more code for the same overlap on CPUs).
 */
#include <stdlib.h>

#include "pg_internal.h"

typedef enum { W_ALL_REDUCE, W_REDUCE_SCATTER, W_ALL_GATHER, W_BROADCAST } work_kind;

struct areal_work {
    struct areal_work *next;
    areal_pg *g;
    work_kind kind;
    const void *in;
    void *out;
    size_t count;
    areal_dtype t;
    areal_redop op;
    int root;
    int done, rc;
    areal_error err;
};

static void run(areal_work *w) {
    areal_pg *g = w->g;
    switch (w->kind) {
    case W_ALL_REDUCE:
        w->rc = areal_pg_all_reduce(g, w->out, w->count, w->t, w->op, &w->err);
        break;
    case W_REDUCE_SCATTER:
        w->rc = areal_pg_reduce_scatter(g, w->in, w->out, w->count, w->t, w->op, &w->err);
        break;
    case W_ALL_GATHER:
        w->rc = areal_pg_all_gather(g, w->in, w->out, w->count, w->t, &w->err);
        break;
    case W_BROADCAST:
        w->rc = areal_pg_broadcast(g, w->out, w->count, w->t, w->root, &w->err);
        break;
    }
}

static void *worker(void *arg) {
    areal_pg *g = arg;
    pthread_mutex_lock(&g->qmu);
    for (;;) {
        while (g->qhead == NULL && !g->stop)
            pthread_cond_wait(&g->qcv, &g->qmu);
        if (g->qhead == NULL)
            break;
        areal_work *w = g->qhead;
        g->qhead = w->next;
        if (g->qhead == NULL)
            g->qtail = NULL;
        pthread_mutex_unlock(&g->qmu);
        run(w);
        pthread_mutex_lock(&g->qmu);
        w->done = 1;
        g->queued--;
        pthread_cond_broadcast(&g->qcv);
    }
    pthread_mutex_unlock(&g->qmu);
    return NULL;
}

static int submit(areal_pg *g, areal_work *w, areal_work **out, areal_error *err) {
    w->g = g;
    areal_error_clear(&w->err);
    pthread_mutex_lock(&g->qmu);
    if (!g->worker_started) {
        if (pthread_create(&g->worker, NULL, worker, g) != 0) {
            pthread_mutex_unlock(&g->qmu);
            free(w);
            return areal_error_set(err, AREAL_ENOMEM, -1,
                                   "group %s: cannot start the thread for asynchronous operations",
                                   g->name);
        }
        g->worker_started = 1;
    }
    if (g->qtail != NULL)
        g->qtail->next = w;
    else
        g->qhead = w;
    g->qtail = w;
    g->queued++;
    pthread_cond_broadcast(&g->qcv);
    pthread_mutex_unlock(&g->qmu);
    *out = w;
    return AREAL_OK;
}

static areal_work *new_work(areal_pg *g, areal_error *err) {
    areal_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        areal_error_set(err, AREAL_ENOMEM, -1, "group %s: out of memory for a work handle",
                        g->name);
    return w;
}

int areal_pg_all_reduce_async(areal_pg *g, void *buf, size_t count, areal_dtype t, areal_redop op,
                              areal_work **out, areal_error *err) {
    areal_work *w = new_work(g, err);
    if (w == NULL)
        return AREAL_ENOMEM;
    *w = (areal_work){.kind = W_ALL_REDUCE, .out = buf, .count = count, .t = t, .op = op};
    return submit(g, w, out, err);
}

int areal_pg_reduce_scatter_async(areal_pg *g, const void *in, void *out, size_t count,
                                  areal_dtype t, areal_redop op, areal_work **w_out,
                                  areal_error *err) {
    areal_work *w = new_work(g, err);
    if (w == NULL)
        return AREAL_ENOMEM;
    *w = (areal_work){
        .kind = W_REDUCE_SCATTER, .in = in, .out = out, .count = count, .t = t, .op = op};
    return submit(g, w, w_out, err);
}

int areal_pg_all_gather_async(areal_pg *g, const void *in, void *out, size_t count, areal_dtype t,
                              areal_work **w_out, areal_error *err) {
    areal_work *w = new_work(g, err);
    if (w == NULL)
        return AREAL_ENOMEM;
    *w = (areal_work){.kind = W_ALL_GATHER, .in = in, .out = out, .count = count, .t = t};
    return submit(g, w, w_out, err);
}

int areal_pg_broadcast_async(areal_pg *g, void *buf, size_t count, areal_dtype t, int root,
                             areal_work **w_out, areal_error *err) {
    areal_work *w = new_work(g, err);
    if (w == NULL)
        return AREAL_ENOMEM;
    *w = (areal_work){.kind = W_BROADCAST, .out = buf, .count = count, .t = t, .root = root};
    return submit(g, w, w_out, err);
}

void areal_work_test(areal_work *w, int *done) {
    pthread_mutex_lock(&w->g->qmu);
    *done = w->done;
    pthread_mutex_unlock(&w->g->qmu);
}

int areal_work_wait(areal_work *w, areal_error *err) {
    areal_pg *g = w->g;
    pthread_mutex_lock(&g->qmu);
    while (!w->done)
        pthread_cond_wait(&g->qcv, &g->qmu);
    pthread_mutex_unlock(&g->qmu);
    int rc = w->rc;
    if (rc != AREAL_OK && err != NULL)
        *err = w->err;
    free(w);
    return rc;
}

void areal_pg_drain(areal_pg *g) {
    pthread_mutex_lock(&g->qmu);
    if (!(g->worker_started && pthread_equal(pthread_self(), g->worker)))
        while (g->queued > 0)
            pthread_cond_wait(&g->qcv, &g->qmu);
    pthread_mutex_unlock(&g->qmu);
}

void areal_pg_async_stop(areal_pg *g) {
    pthread_mutex_lock(&g->qmu);
    int started = g->worker_started;
    g->stop = 1;
    pthread_cond_broadcast(&g->qcv);
    pthread_mutex_unlock(&g->qmu);
    if (started)
        pthread_join(g->worker, NULL);
}
