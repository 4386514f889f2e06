/*
 * ranks.h - runs N ranks as forked processes for the comm tests.
 *
 * A forked helper process runs the store server on a free loopback port; the
 * parent forks one child per rank (each joins with host_store = 0) and
 * collects exit codes. The store is not a thread of the parent because a
 * rank forked while that thread held an allocator lock (ASan's, under make
 * test-san) inherits the lock held and hangs in its first large malloc: seen
 * as rare test_collectives timeouts. The parent therefore runs no thread when
 * it forks. A
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

#include "areal/comm/store.h"

#include "areal/comm/comm.h"

#define RANK_COMM_FAIL 2
#define RANK_WRONG     3
#define RANKS_MAX      16

/*
 * Checks for a rank function shaped like test_slots.c's and test_coll_bytes.c's:
 * `me` (the rank), `rc` (its exit code), `e` (an areal_error) and an `out:`
 * label that frees and returns rc. RANK_CHECK fails the rank as RANK_WRONG
 * naming the line, RANK_COMM as RANK_COMM_FAIL printing the comm error.
 * (Prefixed: tests including this header define CHECK macros of their own.)
 */
#define RANK_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: check failed at line %d: %s\n", me, __LINE__, #cond);        \
            rc = RANK_WRONG;                                                                       \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

#define RANK_COMM(call)                                                                            \
    do {                                                                                           \
        if ((call) != AREAL_OK) {                                                                  \
            fprintf(stderr, "rank %d: %s\n", me, e.msg);                                           \
            rc = RANK_COMM_FAIL;                                                                   \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

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

/* The store in a process of its own: port, pid, and the pipe whose closing stops it. */
typedef struct ranks_store {
    pid_t pid;
    int port, stop_fd;
} ranks_store;

/* Starts the store process. Returns 0, or -1 (message on stderr). */
static inline int ranks_store_start(ranks_store *st) {
    int up[2], stop[2];
    st->pid = -1, st->port = -1, st->stop_fd = -1;
    if (pipe(up) != 0)
        return -1;
    if (pipe(stop) != 0) {
        close(up[0]), close(up[1]);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(up[0]), close(stop[1]);
        areal_store_server *srv = NULL;
        areal_error e;
        int port = 0;
        if (areal_store_server_start("127.0.0.1", 0, &srv, &port, &e) != AREAL_OK) {
            fprintf(stderr, "store: %s\n", e.msg);
            port = -1;
        }
        ssize_t w = write(up[1], &port, sizeof port);
        char ch;
        while (w == (ssize_t)sizeof port && port > 0 && read(stop[0], &ch, 1) > 0) {
        } /* until every holder of the write end closed it */
        if (port > 0)
            areal_store_server_stop(srv);
        fflush(NULL);
        _exit(0);
    }
    close(up[1]), close(stop[0]);
    int port = -1;
    if (pid < 0 || read(up[0], &port, sizeof port) != (ssize_t)sizeof port)
        port = -1;
    close(up[0]);
    st->pid = pid, st->port = port, st->stop_fd = stop[1];
    if (port <= 0) {
        close(stop[1]);
        if (pid > 0)
            waitpid(pid, NULL, 0);
        st->pid = -1, st->stop_fd = -1;
        return -1;
    }
    return 0;
}

/* Stops the store process and waits for it. */
static inline void ranks_store_stop(ranks_store *st) {
    if (st->stop_fd >= 0)
        close(st->stop_fd);
    if (st->pid > 0)
        waitpid(st->pid, NULL, 0);
    st->pid = -1, st->stop_fd = -1;
}

/*
 * Starts the store (*st; stop it with ranks_store_stop after the ranks ended)
 * and forks `world` ranks running fn; pids[] gets their ids. Returns 0, or -1
 * when the store did not start (no rank runs then). With pods > 0 the ranks
 * are split into that many "pods" of consecutive ranks (a local id each), so
 * ranks of one pod connect through shared memory and the others through TCP.
 * Rank r has shared memory turned off when bit r of shm_off is set (a pod
 * then falls back to its Unix-domain sockets).
 */
static inline int ranks_start_opts(ranks_store *st, int world, int pods, unsigned shm_off,
                                   int timeout_ms, rank_fn fn, void *arg, pid_t *pids) {
    if (ranks_store_start(st) != 0)
        return -1;
    fflush(NULL);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            close(st->stop_fd); /* only the parent keeps the store alive */
            areal_comm_config cfg = rank_config(r, world, st->port, timeout_ms);
            char id[32];
            snprintf(id, sizeof id, "pod%d", pods > 0 ? r * pods / world : 0);
            cfg.local_id = pods > 0 ? id : NULL;
            cfg.shm_off = (shm_off >> r) & 1u;
            areal_comm *c = NULL;
            areal_error e;
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
    return 0;
}

static inline int ranks_start_pods(ranks_store *st, int world, int pods, int timeout_ms, rank_fn fn,
                                   void *arg, pid_t *pids) {
    return ranks_start_opts(st, world, pods, 0, timeout_ms, fn, arg, pids);
}

static inline int ranks_start(ranks_store *st, int world, int timeout_ms, rank_fn fn, void *arg,
                              pid_t *pids) {
    return ranks_start_pods(st, world, 0, timeout_ms, fn, arg, pids);
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
    ranks_store st;
    if (world > RANKS_MAX ||
        ranks_start_opts(&st, world, pods, shm_off, timeout_ms, fn, arg, pids) != 0)
        return RANK_COMM_FAIL;
    int worst = ranks_wait(world, pids);
    ranks_store_stop(&st);
    return worst;
}

static inline int ranks_run_pods(int world, int pods, int timeout_ms, rank_fn fn, void *arg) {
    return ranks_run_opts(world, pods, 0, timeout_ms, fn, arg);
}

static inline int ranks_run(int world, int timeout_ms, rank_fn fn, void *arg) {
    return ranks_run_pods(world, 0, timeout_ms, fn, arg);
}

#endif
