/*
 * bench_serve.h - what worker/train's weight-sync benches share (header
 * only, for the benches): a monotonic clock, this process's and another
 * process's CPU seconds, a free loopback port, and `areal-worker serve`
 * processes started from $AREAL_BIN (default build/rel) and waited for
 * until /health answers. Rejected: a bench library component (two bench
 * binaries, no test, nothing else needs them).
 */
#ifndef BENCH_SERVE_H
#define BENCH_SERVE_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "areal/train/sgl_client.h"

extern char **environ;

/* monotonic wall seconds */
static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* user + system CPU seconds of this process (all its threads) */
static inline double cpu_self(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

/* utime + stime of a process, from /proc (0 when unreadable) */
static inline double cpu_of(pid_t pid) {
    char p[64], buf[2048];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(p, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *s = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (s == NULL ||
        sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* a port on 127.0.0.1 that was free a moment ago (-1 when none could be bound) */
static inline int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* one `areal-worker serve` child: its pid (0 before it started) and host:port */
typedef struct srv {
    pid_t pid;
    char addr[64];
} srv;

/*
 * Starts `areal-worker serve --model dir` on a free loopback port (stdout and
 * stderr to /dev/null, 8m of KV memory) and waits, up to a minute, for its
 * /health. 0 when it answers; -1 otherwise (s->pid may still be a child:
 * unserve it).
 */
static inline int serve(const char *dir, srv *s) {
    int port = free_port();
    snprintf(s->addr, sizeof s->addr, "127.0.0.1:%d", port);
    char bin[512], ps[16];
    const char *b = getenv("AREAL_BIN");
    snprintf(bin, sizeof bin, "%s/areal-worker", b && b[0] ? b : "build/rel");
    snprintf(ps, sizeof ps, "%d", port);
    char *argv[] = {bin,      "serve", "--model",     (char *)dir, "--host", "127.0.0.1",
                    "--port", ps,      "--kv-memory", "8m",        NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawn(&s->pid, bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return -1;
    for (int i = 0; i < 1200; i++) {
        areal_sgl_client *c = NULL;
        bool ok =
            areal_sgl_client_create(s->addr, 2, &c, NULL) == 0 && areal_sgl_health(c, NULL) == 0;
        areal_sgl_client_free(c);
        if (ok)
            return 0;
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

/* kills and reaps a server started by serve (nothing when it never started) */
static inline void unserve(srv *s) {
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
}

#endif
