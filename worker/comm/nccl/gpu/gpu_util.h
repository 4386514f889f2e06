/*
 * gpu_util.h - helpers of the GPU tests and benchmark: counting devices
 * without initialising CUDA in the parent (a forked probe), typed host
 * values, and rank processes with a watchdog.
 *
 * CUDA state does not survive fork(), so the parent never touches CUDA: it
 * forks a probe that reports the device count through a pipe, then forks
 * one rank process per GPU (each on device rank % ngpu). Each rank arms
 * alarm() so a hang becomes a failed exit (100 + SIGALRM), never a stuck
 * test.
 */
#ifndef AREAL_NCCL_GPU_UTIL_H
#define AREAL_NCCL_GPU_UTIL_H

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "areal/comm/ncclpg.h"
#include "areal/dtype.h"

#define GPU_MAX_RANKS  8
#define GPU_RANK_FAIL  2 /* a comm call failed (message on stderr) */
#define GPU_RANK_WRONG 3 /* a result differed from the host's */

/* Device count seen by a forked probe (0 when none); why[] gets CUDA's reason. */
static inline int gpu_probe(char *why, size_t cap) {
    int fds[2];
    why[0] = '\0';
    if (pipe(fds) != 0) {
        snprintf(why, cap, "pipe failed");
        return 0;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        areal_error e;
        areal_error_clear(&e);
        int n = areal_ncclpg_devices(&e);
        char msg[AREAL_ERROR_MSG_MAX + 16];
        int w = snprintf(msg, sizeof msg, "%d %s", n < 0 ? 0 : n, n < 0 ? e.msg : "");
        if (write(fds[1], msg, (size_t)w) < 0)
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    char buf[AREAL_ERROR_MSG_MAX + 16];
    size_t got = 0;
    ssize_t r;
    while (got + 1 < sizeof buf && (r = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)r;
    buf[got] = '\0';
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    int n = 0, off = 0;
    if (sscanf(buf, "%d %n", &n, &off) < 1) {
        snprintf(why, cap, "the CUDA probe process died (status %d)", st);
        return 0;
    }
    snprintf(why, cap, "%s", buf + off);
    return n;
}

/* Milliseconds on the monotonic clock. */
static inline double gpu_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

typedef int (*gpu_rank_fn)(int rank, int world, int ngpu, int port, void *arg);

/*
 * Starts a store on loopback, forks `world` ranks running fn (each with a
 * watchdog of watchdog_s seconds), waits for them and returns the worst exit
 * code (a signal counts as 100 + its number).
 */
static inline int gpu_run_ranks(int world, int ngpu, int watchdog_s, gpu_rank_fn fn, void *arg) {
    areal_store_server *srv = NULL;
    int port = 0;
    areal_error e;
    if (areal_store_server_start("127.0.0.1", 0, &srv, &port, &e) != AREAL_OK) {
        fprintf(stderr, "store: %s\n", e.msg);
        return GPU_RANK_FAIL;
    }
    pid_t pids[GPU_MAX_RANKS];
    fflush(NULL);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm((unsigned)watchdog_s);
            int rc = fn(r, world, ngpu, port, arg);
            fflush(NULL);
            _exit(rc);
        }
    }
    int worst = 0;
    for (int r = 0; r < world; r++) {
        int st = 0;
        if (pids[r] < 0) {
            worst = GPU_RANK_FAIL;
            continue;
        }
        waitpid(pids[r], &st, 0);
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
        if (code != 0)
            fprintf(stderr, "rank %d exited with %d%s\n", r, code,
                    code == 100 + SIGALRM ? " (watchdog: it hung)" : "");
        if (code > worst)
            worst = code;
    }
    areal_store_server_stop(srv);
    return worst;
}

/* A store client of this rank process. */
static inline areal_store *gpu_store(int port) {
    areal_store *st = NULL;
    areal_error e;
    if (areal_store_connect("127.0.0.1", port, 10000, 30000, &st, &e) != AREAL_OK) {
        fprintf(stderr, "store connect: %s\n", e.msg);
        return NULL;
    }
    return st;
}

/* The group of the whole world (ranks 0..world-1 in order) named `name`,
 * rank r on GPU r % ngpu; ranks (GPU_MAX_RANKS entries, the caller's) backs
 * the config's rank list. */
static inline areal_ncclpg_config gpu_world_group(areal_store *st, const char *name, int *ranks,
                                                  int rank, int world, int ngpu, int timeout_ms) {
    for (int r = 0; r < world; r++)
        ranks[r] = r;
    return (areal_ncclpg_config){.store = st,
                                 .name = name,
                                 .ranks = ranks,
                                 .n = world,
                                 .rank = rank,
                                 .device = rank % ngpu,
                                 .timeout_ms = timeout_ms};
}

/* Writes value v as element i of a host buffer of type t. */
static inline void gpu_put(void *buf, areal_dtype t, size_t i, double v) {
    switch (t) {
    case AREAL_DT_F32:
        ((float *)buf)[i] = (float)v;
        break;
    case AREAL_DT_BF16:
        ((uint16_t *)buf)[i] = areal_f32_to_bf16((float)v);
        break;
    case AREAL_DT_F16:
        ((uint16_t *)buf)[i] = areal_f32_to_f16((float)v);
        break;
    case AREAL_DT_I32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case AREAL_DT_I64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    default:
        break;
    }
}

/* Element i of a host buffer of type t, as a double. */
static inline double gpu_get(const void *buf, areal_dtype t, size_t i) {
    switch (t) {
    case AREAL_DT_F32:
        return ((const float *)buf)[i];
    case AREAL_DT_BF16:
        return areal_bf16_to_f32(((const uint16_t *)buf)[i]);
    case AREAL_DT_F16:
        return areal_f16_to_f32(((const uint16_t *)buf)[i]);
    case AREAL_DT_I32:
        return ((const int32_t *)buf)[i];
    case AREAL_DT_I64:
        return (double)((const int64_t *)buf)[i];
    default:
        return 0;
    }
}

#endif
