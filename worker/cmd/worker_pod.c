/*
 * worker_pod.c - the pod launcher: one rank process per local slot,
 * supervised.
 *
 * Each rank is this program again (/proc/self/exe) with RANK, LOCAL_RANK and
 * LOCAL_WORLD_SIZE set, and PR_SET_PDEATHSIG so it cannot outlive the pod.
 * The launcher waits on signals with sigtimedwait (SIGCHLD, SIGTERM, SIGINT
 * blocked, so none is lost): the first rank to fail stops the others
 * (SIGTERM, then SIGKILL after AREAL_GRACE_MS) and the pod exits 1 naming the
 * rank and its cause; SIGTERM/SIGINT are forwarded and the pod exits
 * 128 + signal. Rejected: a signal handler with global state (the
 * project keeps no mutable globals).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "areal/comm/net.h"
#include "areal/log.h"
#include "worker_env.h"

#define MAX_SLOTS 1024

typedef struct slot {
    pid_t pid;
    int done;
} slot;

static void signal_all(slot *s, int n, int sig) {
    for (int i = 0; i < n; i++)
        if (!s[i].done && s[i].pid > 0)
            kill(s[i].pid, sig);
}

static int spawn(char **argv, int rank, int local, int n, const sigset_t *old, pid_t *out) {
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        char v[32];
        snprintf(v, sizeof v, "%d", rank);
        setenv(AREAL_ENV_RANK, v, 1);
        snprintf(v, sizeof v, "%d", local);
        setenv(AREAL_ENV_LOCAL_RANK, v, 1);
        snprintf(v, sizeof v, "%d", n);
        setenv(AREAL_ENV_LOCAL_WORLD_SIZE, v, 1);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        sigprocmask(SIG_SETMASK, old, NULL);
        execv("/proc/self/exe", argv);
        areal_log(AREAL_LOG_ERROR, "worker", NULL, "cannot start rank %d: %s", rank,
                  strerror(errno));
        _exit(127);
    }
    *out = pid;
    return 0;
}

int worker_pod_main(char **argv) {
    areal_error e;
    int world = 0, first = 0, lws = 0, n = 0, grace = 0;
    if (worker_env_int(AREAL_ENV_WORLD_SIZE, -1, 1, 1 << 20, &world, &e) != AREAL_OK ||
        worker_env_int(AREAL_ENV_FIRST_RANK, 0, 0, world - 1, &first, &e) != AREAL_OK ||
        worker_env_int(AREAL_ENV_LOCAL_WORLD_SIZE, 1, 1, MAX_SLOTS, &lws, &e) != AREAL_OK ||
        worker_env_int(AREAL_ENV_POD_RANKS, lws, 1, MAX_SLOTS, &n, &e) != AREAL_OK ||
        worker_env_int(WORKER_ENV_GRACE_MS, 5000, 0, 600000, &grace, &e) != AREAL_OK) {
        areal_log(AREAL_LOG_ERROR, "worker", NULL, "%s", e.msg);
        return 2;
    }
    if (first + n > world) {
        areal_log(AREAL_LOG_ERROR, "worker", NULL,
                  "the pod's ranks %d..%d do not fit WORLD_SIZE %d; check "
                  "AREAL_POD_FIRST_RANK and AREAL_POD_RANKS",
                  first, first + n - 1, world);
        return 2;
    }
    /* ranks of this pod share an id: they connect through Unix-domain sockets */
    if (getenv(WORKER_ENV_POD_ID) == NULL) {
        char host[128] = "pod", id[192];
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = '\0';
        snprintf(id, sizeof id, "%s-%d", host, (int)getpid());
        setenv(WORKER_ENV_POD_ID, id, 1);
    }
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, &old);
    slot s[MAX_SLOTS];
    memset(s, 0, sizeof s);
    int alive = 0, code = 0, stopping = 0;
    int64_t kill_at = -1;
    for (int i = 0; i < n; i++) {
        if (spawn(argv, first + i, i, n, &old, &s[i].pid) != 0) {
            areal_log(AREAL_LOG_ERROR, "worker", NULL, "cannot fork rank %d: %s", first + i,
                      strerror(errno));
            code = 1;
            stopping = 1;
            signal_all(s, i, SIGTERM);
            kill_at = areal_now_ms() + grace;
            break;
        }
        alive++;
    }
    while (alive > 0) {
        int64_t wait_ms = kill_at < 0 ? 1000 : kill_at - areal_now_ms();
        if (kill_at >= 0 && wait_ms <= 0) {
            signal_all(s, n, SIGKILL);
            kill_at = -1;
            wait_ms = 1000;
        }
        struct timespec ts = {.tv_sec = wait_ms / 1000, .tv_nsec = (wait_ms % 1000) * 1000000L};
        siginfo_t si;
        int sig = sigtimedwait(&set, &si, &ts);
        if (sig == SIGTERM || sig == SIGINT) {
            areal_log(AREAL_LOG_INFO, "worker", NULL, "%s received, stopping %d rank(s)",
                      sig == SIGTERM ? "SIGTERM" : "SIGINT", alive);
            signal_all(s, n, sig);
            if (code == 0)
                code = 128 + sig;
            if (!stopping) {
                stopping = 1;
                kill_at = areal_now_ms() + grace;
            }
        }
        int st;
        pid_t pid;
        while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
            int i = 0;
            while (i < n && s[i].pid != pid)
                i++;
            if (i == n)
                continue;
            s[i].done = 1;
            alive--;
            int failed = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
            if (failed && !stopping) {
                if (WIFEXITED(st))
                    areal_log(AREAL_LOG_ERROR, "worker", NULL,
                              "rank %d (local rank %d) exited with status %d; "
                              "stopping the pod",
                              first + i, i, WEXITSTATUS(st));
                else
                    areal_log(AREAL_LOG_ERROR, "worker", NULL,
                              "rank %d (local rank %d) was killed by signal %d "
                              "(%s); stopping the pod",
                              first + i, i, WTERMSIG(st), strsignal(WTERMSIG(st)));
                code = 1;
                stopping = 1;
                signal_all(s, n, SIGTERM);
                kill_at = areal_now_ms() + grace;
            }
        }
    }
    return code;
}
