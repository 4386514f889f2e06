/*
 * pg.c - a process group's lifecycle and accessors: destroy, break (the
 * failure that shuts every connection so peers notice at once) and the
 * name/size/rank queries. Creation lives in comm.c (it needs the job's
 * listeners and the pending list); the data path in pg_xfer.c and pg_coll.c,
 * which call areal_pg_break here rather than back into comm.c.
 */
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pg_internal.h"
#include "shm.h"

void areal_pg_destroy(areal_pg *g) {
    if (g == NULL)
        return;
    areal_pg_async_stop(g);
    for (int j = 0; j < g->n; j++)
        if (g->fd[j] >= 0)
            close(g->fd[j]);
    areal_shm_close(g->shm);
    pthread_mutex_destroy(&g->mu);
    pthread_mutex_destroy(&g->qmu);
    pthread_cond_destroy(&g->qcv);
    free(g->ranks);
    free(g->fd);
    free(g);
}

const char *areal_pg_name(const areal_pg *g) {
    return g->name;
}

int areal_pg_size(const areal_pg *g) {
    return g->n;
}

int areal_pg_rank(const areal_pg *g) {
    return g->me;
}

int areal_pg_global_rank(const areal_pg *g, int j) {
    return j >= 0 && j < g->n ? g->ranks[j] : -1;
}

void areal_pg_set_timeout(areal_pg *g, int timeout_ms) {
    if (timeout_ms > 0)
        g->timeout_ms = timeout_ms;
}

void areal_pg_bytes(const areal_pg *g, areal_coll_bytes *out) {
    for (int k = 0; k < AREAL_COLL_KIND_COUNT; k++) {
        out->sent[k] = atomic_load_explicit(&g->sent[k], memory_order_relaxed);
        out->recv[k] = atomic_load_explicit(&g->recv[k], memory_order_relaxed);
    }
}

void areal_pg_break(areal_pg *g, const areal_error *err) {
    if (g->broken.code == AREAL_OK)
        g->broken = *err;
    if (g->shm != NULL)
        areal_shm_break(g->shm, g->me);
    for (int j = 0; j < g->n; j++)
        if (g->fd[j] >= 0)
            shutdown(g->fd[j], SHUT_RDWR);
}
