/*
 * bench_comm.c - bus bandwidth of the CPU backend's all-reduce, all-gather,
 * reduce-scatter, all-to-all and broadcast (from member 0) from 1 KiB to 256 MiB (x4 steps) on 2, 4
 * and 8 local ranks, side by side with OpenMPI (mpi_busbw under mpirun) in the same run, printing
 * ours/OpenMPI.
 *
 * Bus bandwidth is nccl-tests' formula: algbw = bytes / time, busbw = algbw
 * times 2(n-1)/n for all-reduce, (n-1)/n for the gathers and scatters, 1
 * for broadcast. Time is the
 * slowest rank's mean over iterations after one warm-up. Environment:
 * AREAL_BENCH_MIN_BYTES / AREAL_BENCH_MAX_BYTES bound the sizes,
 * AREAL_BENCH_RANKS picks one rank count, AREAL_BENCH_TCP=1 uses TCP for
 * everything. Ours runs twice, as one pod with shared memory ("shm") and
 * with the data on the pod's Unix-domain sockets ("sock"); AREAL_BENCH_SHM=1
 * or =0 runs only that one. Ranks are forked processes joined through a store in
 * this process, exactly as in the tests.
 */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "areal/comm/comm.h"

#define N_OPS   5
#define N_SIZES 16

static const char *const op_names[N_OPS] = {"all_reduce", "all_gather", "reduce_scatter",
                                            "all_to_all", "broadcast"};

static int iters_for(size_t bytes) {
    size_t it = (size_t)(64u << 20) / (bytes ? bytes : 1);
    return it < 3 ? 3 : it > 50 ? 50 : (int)it;
}

static int run_op(areal_pg *g, int op, float *a, float *b, size_t cnt, areal_error *e) {
    size_t blk = cnt / (size_t)areal_pg_size(g);
    switch (op) {
    case 0:
        return areal_pg_all_reduce(g, a, cnt, AREAL_DT_F32, AREAL_SUM, e);
    case 1:
        return areal_pg_all_gather(g, a, b, blk, AREAL_DT_F32, e);
    case 2:
        return areal_pg_reduce_scatter(g, a, b, blk, AREAL_DT_F32, AREAL_SUM, e);
    case 3:
        return areal_pg_all_to_all(g, a, b, blk, AREAL_DT_F32, e);
    default:
        return areal_pg_broadcast(g, a, cnt, AREAL_DT_F32, 0, e);
    }
}

/* One rank: times every op and size; rank 0 writes "OP BYTES USEC" lines to fd. */
static int rank_main(int rank, int n, int port, size_t lo, size_t hi, int shm_off, int fd) {
    areal_comm_config cfg = {.rank = rank,
                             .world = n,
                             .store_host = "127.0.0.1",
                             .store_port = port,
                             .bind_host = "127.0.0.1",
                             .advertise_host = "127.0.0.1",
                             .timeout_ms = 600000,
                             .connect_timeout_ms = 30000,
                             /* local ranks are one pod, as areal-worker runs them */
                             .local_id = getenv("AREAL_BENCH_TCP") ? NULL : "bench",
                             .shm_off = shm_off};
    areal_comm *c = NULL;
    areal_pg *g = NULL;
    areal_error e;
    int ranks[64];
    for (int j = 0; j < n; j++)
        ranks[j] = j;
    if (areal_comm_init(&cfg, &c, &e) != AREAL_OK ||
        areal_comm_group(c, "bench", ranks, n, &g, &e) != AREAL_OK) {
        fprintf(stderr, "bench rank %d: %s\n", rank, e.msg);
        return 1;
    }
    float *a = calloc(hi / sizeof(float), sizeof(float));
    float *b = calloc(hi / sizeof(float), sizeof(float));
    FILE *out = rank == 0 ? fdopen(fd, "w") : NULL;
    int rc = a && b ? 0 : 1;
    for (int op = 0; op < N_OPS && rc == 0; op++) {
        for (size_t bytes = lo; bytes <= hi && rc == 0; bytes *= 4) {
            size_t cnt = bytes / sizeof(float);
            int iters = iters_for(bytes);
            int64_t t0 = 0;
            for (int it = -1; it < iters && rc == 0; it++) {
                if (it == 0) {
                    rc = areal_pg_barrier(g, &e);
                    t0 = areal_now_us();
                }
                if (rc == 0)
                    rc = run_op(g, op, a, b, cnt, &e);
            }
            float us = (float)(areal_now_us() - t0) / (float)iters;
            if (rc == 0)
                rc = areal_pg_all_reduce(g, &us, 1, AREAL_DT_F32, AREAL_MAX, &e);
            if (rc == 0 && out != NULL) {
                fprintf(out, "%s %zu %.3f\n", op_names[op], bytes, (double)us);
                fflush(out);
            }
        }
    }
    if (rc != 0)
        fprintf(stderr, "bench rank %d: %s\n", rank, e.msg);
    if (out != NULL)
        fclose(out);
    free(a);
    free(b);
    areal_pg_destroy(g);
    areal_comm_destroy(c);
    return rc;
}

/* Reads "OP BYTES USEC" lines into us[op][size index]. */
static void parse(FILE *f, size_t lo, double us[N_OPS][N_SIZES]) {
    char name[32];
    size_t bytes;
    double t;
    while (fscanf(f, "%31s %zu %lf", name, &bytes, &t) == 3) {
        int si = 0;
        for (size_t b = lo; b < bytes && si < N_SIZES - 1; b *= 4)
            si++;
        for (int op = 0; op < N_OPS; op++)
            if (strcmp(name, op_names[op]) == 0)
                us[op][si] = t;
    }
}

static int ours(int n, size_t lo, size_t hi, int shm_off, double us[N_OPS][N_SIZES]) {
    areal_store_server *srv = NULL;
    int port = 0, p[2];
    areal_error e;
    if (areal_store_server_start("127.0.0.1", 0, &srv, &port, &e) != AREAL_OK || pipe(p) != 0) {
        fprintf(stderr, "bench: %s\n", e.msg);
        return 1;
    }
    fflush(NULL);
    pid_t pids[64];
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            close(p[0]);
            _exit(rank_main(r, n, port, lo, hi, shm_off, p[1]));
        }
    }
    close(p[1]);
    FILE *f = fdopen(p[0], "r");
    parse(f, lo, us);
    fclose(f);
    int bad = 0;
    for (int r = 0; r < n; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        bad |= !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    areal_store_server_stop(srv);
    return bad;
}

static int openmpi(const char *helper, int n, size_t lo, size_t hi, double us[N_OPS][N_SIZES]) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "mpirun --allow-run-as-root --oversubscribe -np %d %s %zu %zu 2>/dev/null", n, helper,
             lo, hi);
    FILE *f = popen(cmd, "r");
    if (f == NULL)
        return 1;
    parse(f, lo, us);
    return pclose(f) != 0;
}

static double busbw(int op, int n, size_t bytes, double us) {
    if (us <= 0)
        return 0;
    double alg = (double)bytes / us / 1e3; /* GB/s */
    return alg * (op == 0 ? 2.0 * (n - 1) / n : op == 4 ? 1.0 : (double)(n - 1) / n);
}

int main(int argc, char **argv) {
    (void)argc;
    size_t lo = 1024, hi = 256u << 20;
    if (getenv("AREAL_BENCH_MIN_BYTES"))
        lo = strtoull(getenv("AREAL_BENCH_MIN_BYTES"), NULL, 10);
    if (lo < 1024)
        lo = 1024;
    if (getenv("AREAL_BENCH_MAX_BYTES"))
        hi = strtoull(getenv("AREAL_BENCH_MAX_BYTES"), NULL, 10);
    char helper[1024], self[1024];
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(helper, sizeof helper, "%s/mpi_busbw", dirname(self));
    int have_mpi = access(helper, X_OK) == 0 && system("command -v mpirun >/dev/null 2>&1") == 0;
    if (!have_mpi)
        printf("OpenMPI column skipped: %s or mpirun is missing (scripts/install-deps.sh "
               "worker-bench)\n",
               helper);
    static const int counts[] = {2, 4, 8};
    int rc = 0;
    for (int ci = 0; ci < 3; ci++) {
        int n = counts[ci];
        if (getenv("AREAL_BENCH_RANKS") && atoi(getenv("AREAL_BENCH_RANKS")) != n)
            continue;
        static double a[N_OPS][N_SIZES], s[N_OPS][N_SIZES], m[N_OPS][N_SIZES];
        memset(a, 0, sizeof a);
        memset(s, 0, sizeof s);
        memset(m, 0, sizeof m);
        const char *only = getenv("AREAL_BENCH_SHM");
        if (only == NULL || strcmp(only, "0") != 0)
            rc |= ours(n, lo, hi, 0, a);
        if (only == NULL || strcmp(only, "0") == 0)
            rc |= ours(n, lo, hi, 1, s);
        if (have_mpi && openmpi(helper, n, lo, hi, m) != 0)
            printf("mpirun failed for %d ranks\n", n);
        printf("\n%d ranks   %-14s %10s %9s %9s %9s %8s %8s\n", n, "op", "bytes", "shm GB/s",
               "sock GB/s", "MPI GB/s", "shm/MPI", "sock/MPI");
        for (int op = 0; op < N_OPS; op++) {
            int si = 0;
            for (size_t bytes = lo; bytes <= hi && si < N_SIZES; bytes *= 4, si++) {
                double o = busbw(op, n, bytes, a[op][si]), k = busbw(op, n, bytes, s[op][si]);
                double q = busbw(op, n, bytes, m[op][si]);
                printf("%d ranks   %-14s %10zu %9.3f %9.3f %9.3f %8.2f %8.2f\n", n, op_names[op],
                       bytes, o, k, q, q > 0 ? o / q : 0.0, q > 0 ? k / q : 0.0);
            }
        }
        fflush(stdout);
    }
    return rc;
}
