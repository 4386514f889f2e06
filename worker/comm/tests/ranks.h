/*
 * ranks.h - runs N ranks as forked processes for the comm tests.
 *
 * The parent starts a store server on a free loopback port, forks one child
 * per rank (each joins with host_store = 0), and collects exit codes. A
 * child returns 0 when its checks passed, RANK_COMM_FAIL when a comm call
 * failed (the message goes to stderr), RANK_WRONG when a result was wrong.
 */
#ifndef AREAL_TEST_RANKS_H
#define AREAL_TEST_RANKS_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "areal/comm/comm.h"

#define RANK_COMM_FAIL 2
#define RANK_WRONG     3
#define RANKS_MAX      16

typedef int (*rank_fn)(areal_comm *c, void *arg);

static inline areal_comm_config rank_config(int rank, int world, int port, int timeout_ms) {
    areal_comm_config cfg = {
        .rank = rank,
        .world = world,
        .store_host = "127.0.0.1",
        .store_port = port,
        .host_store = 0,
        .bind_host = "127.0.0.1",
        .advertise_host = "127.0.0.1",
        .timeout_ms = timeout_ms,
        .connect_timeout_ms = timeout_ms < 5000 ? 2 * timeout_ms : 10000,
    };
    return cfg;
}

/*
 * Forks `world` ranks running fn; pids[] gets their ids. Returns the store
 * (stop it after). With pods > 0 the ranks are split into that many "pods"
 * of consecutive ranks (a local id each), so ranks of one pod connect
 * through shared memory and the others through TCP. Rank r has shared
 * memory turned off when bit r of shm_off is set (a pod then falls back to
 * its Unix-domain sockets).
 */
static inline areal_store_server *ranks_start_opts(int world, int pods, unsigned shm_off,
                                                   int timeout_ms, rank_fn fn, void *arg,
                                                   pid_t *pids) {
    areal_store_server *srv = NULL;
    int port = 0;
    areal_error e;
    if (areal_store_server_start("127.0.0.1", 0, &srv, &port, &e) != AREAL_OK) {
        fprintf(stderr, "store: %s\n", e.msg);
        return NULL;
    }
    fflush(NULL);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            areal_comm_config cfg = rank_config(r, world, port, timeout_ms);
            char id[32];
            snprintf(id, sizeof id, "pod%d", pods > 0 ? r * pods / world : 0);
            cfg.local_id = pods > 0 ? id : NULL;
            cfg.shm_off = (shm_off >> r) & 1u;
            areal_comm *c = NULL;
            if (areal_comm_init(&cfg, &c, &e) != AREAL_OK) {
                fprintf(stderr, "rank %d: init: %s\n", r, e.msg);
                _exit(RANK_COMM_FAIL);
            }
            int rc = fn(c, arg);
            areal_comm_destroy(c);
            fflush(NULL);
            _exit(rc);
        }
    }
    return srv;
}

static inline areal_store_server *ranks_start_pods(int world, int pods, int timeout_ms, rank_fn fn,
                                                   void *arg, pid_t *pids) {
    return ranks_start_opts(world, pods, 0, timeout_ms, fn, arg, pids);
}

static inline areal_store_server *ranks_start(int world, int timeout_ms, rank_fn fn, void *arg,
                                              pid_t *pids) {
    return ranks_start_pods(world, 0, timeout_ms, fn, arg, pids);
}

/* Waits for every rank; returns the worst exit code (signals count as 100 + signal). */
static inline int ranks_wait(int world, const pid_t *pids) {
    int worst = 0;
    for (int r = 0; r < world; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
        if (code > worst)
            worst = code;
    }
    return worst;
}

/* Runs fn on `world` ranks split into `pods` (see ranks_start_opts); returns the worst exit code.
 */
static inline int ranks_run_opts(int world, int pods, unsigned shm_off, int timeout_ms, rank_fn fn,
                                 void *arg) {
    pid_t pids[RANKS_MAX];
    areal_store_server *srv = ranks_start_opts(world, pods, shm_off, timeout_ms, fn, arg, pids);
    if (srv == NULL)
        return RANK_COMM_FAIL;
    int worst = ranks_wait(world, pids);
    areal_store_server_stop(srv);
    return worst;
}

static inline int ranks_run_pods(int world, int pods, int timeout_ms, rank_fn fn, void *arg) {
    return ranks_run_opts(world, pods, 0, timeout_ms, fn, arg);
}

static inline int ranks_run(int world, int timeout_ms, rank_fn fn, void *arg) {
    return ranks_run_pods(world, 0, timeout_ms, fn, arg);
}

#endif
