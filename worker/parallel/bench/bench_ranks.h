/*
 * bench_ranks.h - the fork-and-time harness worker/parallel's benches share
 * (header only, for the benches; bench_parallel and bench_par_overlap): the
 * clocks a step is timed with (monotonic wall seconds, and the process's CPU
 * seconds, so a rank's comm worker threads count), memory the forked ranks
 * write their figures into for the parent to read, and the launch of one
 * configuration's ranks: one OpenBLAS thread each (set in the parent before
 * the fork, so every rank inherits it), the store in a child of its own
 * (pt_ranks_run), or one pod of shared memory, under one time limit. What a
 * step is stays each bench's own: bench_parallel composes the layouts' steps
 * as the parallel tests do, bench_par_overlap runs the overlapped dp step.
 */
#ifndef BENCH_RANKS_H
#define BENCH_RANKS_H

#include <cblas.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "../tests/par_test_util.h"

/* the limit one configuration's ranks run under */
#define BENCH_RANKS_TIMEOUT_MS 120000

/* monotonic wall seconds */
static inline double wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds of this process, all its threads (a rank's comm workers included) */
static inline double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * bytes of zeroed memory shared with the ranks forked after this call (each
 * writes its own slot; the parent reads them once the ranks exited); NULL
 * when it cannot be mapped. bench_shared_free unmaps it.
 */
static inline void *bench_shared_new(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static inline void bench_shared_free(void *p, size_t bytes) {
    if (p != NULL)
        munmap(p, bytes);
}

/*
 * Runs fn on n forked ranks, one OpenBLAS thread each: one pod per rank
 * (TCP on loopback, the tests' harness) or, with one_pod, all in one pod
 * (shared memory between them). Returns the worst exit code (ranks.h).
 */
static inline int bench_ranks_run(int n, bool one_pod, rank_fn fn, void *arg) {
    openblas_set_num_threads(1);
    return one_pod ? ranks_run_opts(n, 1, 0, BENCH_RANKS_TIMEOUT_MS, fn, arg)
                   : pt_ranks_run(n, BENCH_RANKS_TIMEOUT_MS, fn, arg);
}

#endif
