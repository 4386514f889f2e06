/*
 * worker_serve_tp.c - the ranks of a tensor-parallel rollout server (t > 1):
 * joining the server's tp group, the follower ranks' process, and the
 * local followers `areal-worker serve --tp N` starts by hand.
 *
 * A server of t ranks is one world of its own (its keys in the store carry
 * the server's prefix): rank 0 serves HTTP and registers, ranks 1..t-1 run
 * the engine's follower loop (areal/rollout/server.h areal_rollout_follow).
 * By hand, rank 0 hosts a store of its own on a free loopback port and the
 * followers are forked before any thread exists (a fork after threads could
 * inherit a held allocator lock, as worker/comm/tests/ranks.h explains); in
 * a job, every rank dials the job's store (MASTER_ADDR).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "areal/comm/net.h"
#include "areal/escape.h"
#include "areal/rollout/server.h"
#include "worker_serve_tp.h"

int worker_tp_join(const worker_tp_spec *sp, areal_comm **c, areal_coll **g, areal_error *err) {
    *c = NULL;
    *g = NULL;
    areal_comm_config cfg = {
        .rank = sp->rank,
        .world = sp->t,
        .store_host = sp->store_host,
        .store_port = sp->store_port,
        .host_store = sp->host_store,
        .bind_host = sp->bind_host,
        .advertise_host = sp->bind_host,
        .timeout_ms = sp->timeout_ms > 0 ? sp->timeout_ms : 60000,
        .connect_timeout_ms = sp->connect_timeout_ms > 0 ? sp->connect_timeout_ms : 120000,
        .key_prefix = sp->prefix,
    };
    int rc = areal_comm_init(&cfg, c, err);
    int ranks[WORKER_TP_MAX];
    for (int r = 0; r < sp->t && r < WORKER_TP_MAX; r++)
        ranks[r] = r;
    areal_pg *pg = NULL;
    if (rc == AREAL_OK)
        rc = areal_comm_group(*c, "rollout-tp", ranks, sp->t, &pg, err);
    if (rc == AREAL_OK)
        rc = areal_coll_from_pg(pg, g, err);
    if (rc != AREAL_OK) {
        areal_comm_destroy(*c);
        *c = NULL;
    }
    return rc;
}

int worker_tp_follower_main(const worker_tp_spec *sp, const char *model, int threads) {
    areal_comm *c = NULL;
    areal_coll *g = NULL;
    areal_error e;
    int rc = worker_tp_join(sp, &c, &g, &e);
    if (rc == AREAL_OK)
        rc = areal_rollout_follow(model, g, threads, &e);
    if (rc != AREAL_OK)
        areal_print_line(stderr, "areal-worker serve: tp rank %d of %d: %s", sp->rank, sp->t,
                         e.msg);
    areal_coll_destroy(g);
    areal_comm_destroy(c);
    return rc == AREAL_OK ? 0 : 1;
}

int worker_tp_free_port(void) {
    int fd = -1, port = 0;
    areal_error e;
    if (areal_net_listen("127.0.0.1", 0, &fd, &port, &e) != AREAL_OK)
        return -1;
    close(fd);
    return port;
}

int worker_tp_spawn_local(const worker_tp_spec *sp, const char *model, int threads, pid_t *pids) {
    fflush(NULL);
    for (int r = 1; r < sp->t; r++) {
        pid_t pid = fork();
        if (pid < 0)
            return -1;
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the server */
            worker_tp_spec me = *sp;
            me.rank = r;
            me.host_store = false;
            int code = worker_tp_follower_main(&me, model, threads);
            fflush(NULL);
            _exit(code);
        }
        pids[r] = pid;
    }
    return 0;
}

int worker_tp_reap(const pid_t *pids, int t, int wait_ms) {
    int worst = 0;
    for (int r = 1; r < t; r++) {
        if (pids[r] <= 0)
            continue;
        int st = 0;
        pid_t got = 0;
        for (int waited = 0; (got = waitpid(pids[r], &st, WNOHANG)) == 0 && waited < wait_ms;
             waited += 50)
            usleep(50 * 1000);
        if (got == 0) { /* a follower that did not stop: it is useless without rank 0 */
            kill(pids[r], SIGKILL);
            waitpid(pids[r], &st, 0);
        }
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
        worst = code > worst ? code : worst;
    }
    return worst;
}
