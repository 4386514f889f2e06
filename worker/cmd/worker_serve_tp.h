/*
 * worker_serve_tp.h - the ranks of a tensor-parallel rollout server (t > 1),
 * internal to areal-worker (worker_serve_tp.c).
 */
#ifndef AREAL_WORKER_SERVE_TP_H
#define AREAL_WORKER_SERVE_TP_H

#include <stdbool.h>
#include <sys/types.h>

#include "areal/comm/coll.h"
#include "areal/comm/comm.h"
#include "areal/error.h"

#define WORKER_TP_MAX 64 /* ranks of one server at most */

/* One rank of a server's tp world. */
typedef struct worker_tp_spec {
    int rank, t;                        /* this rank, of t */
    const char *store_host;             /* the store (MASTER_ADDR, or 127.0.0.1 by hand) */
    int store_port;                     /* its port */
    bool host_store;                    /* rank 0 by hand: start the store */
    const char *prefix;                 /* the server's key prefix in the store */
    const char *bind_host;              /* POD_IP, or NULL */
    int timeout_ms, connect_timeout_ms; /* the group's deadline (a dead peer is seen within
                                         * it) and the join's; 0: 60 s, 120 s */
} worker_tp_spec;

/* Joins the world of sp and makes its tp group (*c owns the comm, *g the group). */
int worker_tp_join(const worker_tp_spec *sp, areal_comm **c, areal_coll **g, areal_error *err);

/* A follower rank's whole life: join, follow the server's rank 0, leave. The exit code. */
int worker_tp_follower_main(const worker_tp_spec *sp, const char *model, int threads);

/* A free loopback port for a store (-1 if none). */
int worker_tp_free_port(void);

/*
 * Forks ranks 1..t-1 of sp as local followers (pids[1..t-1]); call before
 * any thread starts. Returns 0, or -1 when fork failed.
 */
int worker_tp_spawn_local(const worker_tp_spec *sp, const char *model, int threads, pid_t *pids);

/* Waits up to wait_ms for the followers of spawn_local (then kills them); the worst exit code. */
int worker_tp_reap(const pid_t *pids, int t, int wait_ms);

#endif
