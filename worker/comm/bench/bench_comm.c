/*
 * bench_comm.c - bus bandwidth of the CPU backend's all-reduce, all-gather,
 * reduce-scatter, all-to-all and broadcast (from member 0) from 1 KiB to 256 MiB (x4 steps) on 2, 4
 * and 8 local ranks, side by side with OpenMPI (mpi_busbw under mpirun) in the same run, printing
 * ours/OpenMPI.
 *
 * Bus bandwidth is nccl-tests' formula: algbw = bytes / time, busbw = algbw
 * times 2(n-1)/n for all-reduce, (n-1)/n for the gathers and scatters, 1
 * for broadcast. Time is the
 * slowest rank's mean over iterations after one warm-up, the median of
 * AREAL_BENCH_REPEAT such blocks (default 1: the machine is shared, so a
 * single block can catch another process's burst); the CPU column is every
 * rank's user + system time per iteration, summed (on an oversubscribed
 * machine wall time measures the scheduler, CPU time the work). Environment:
 * AREAL_BENCH_MIN_BYTES / AREAL_BENCH_MAX_BYTES bound the sizes,
 * AREAL_BENCH_RANKS picks one rank count, AREAL_BENCH_OPS a comma list of
 * ops (default all), AREAL_BENCH_TCP=1 uses TCP for everything. Ours runs twice, as one pod with
 * shared memory ("shm") and with the data on the pod's Unix-domain sockets ("sock");
 * AREAL_BENCH_SHM=1 or =0 runs only that one. Ranks are forked processes joined through a store in
 * this process, exactly as in the tests.
 */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "areal/comm/comm.h"

#define N_OPS   5
#define N_SIZES 16

static const char *const op_names[N_OPS] = {"all_reduce", "all_gather", "reduce_scatter",
                                            "all_to_all", "broadcast"};

/* 1 when op is in AREAL_BENCH_OPS (or that is unset). */
static int op_wanted(int op) {
    const char *l = getenv("AREAL_BENCH_OPS");
    if (l == NULL || *l == 0)
        return 1;
    size_t k = strlen(op_names[op]);
    for (const char *p = strstr(l, op_names[op]); p != NULL; p = strstr(p + 1, op_names[op]))
        if ((p == l || p[-1] == ',') && (p[k] == 0 || p[k] == ','))
            return 1;
    return 0;
}

static int repeats(void) {
    const char *r = getenv("AREAL_BENCH_REPEAT");
    int n = r ? atoi(r) : 1;
    return n < 1 ? 1 : n > 15 ? 15 : n;
}

static int64_t cpu_us(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (int64_t)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000 + u.ru_utime.tv_usec +
           u.ru_stime.tv_usec;
}

static int cmp_f(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

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

/* One rank: times every op and size; rank 0 writes "OP BYTES USEC CPU_USEC" lines to fd. */
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
    int reps = repeats();
    for (int op = 0; op < N_OPS && rc == 0; op++) {
        if (!op_wanted(op))
            continue;
        for (size_t bytes = lo; bytes <= hi && rc == 0; bytes *= 4) {
            size_t cnt = bytes / sizeof(float);
            int iters = iters_for(bytes);
            float t[15];
            rc = run_op(g, op, a, b, cnt, &e); /* warm-up */
            int64_t c0 = cpu_us();
            for (int r = 0; r < reps && rc == 0; r++) {
                rc = areal_pg_barrier(g, &e);
                int64_t t0 = areal_now_us();
                for (int it = 0; it < iters && rc == 0; it++)
                    rc = run_op(g, op, a, b, cnt, &e);
                t[r] = (float)(areal_now_us() - t0) / (float)iters;
                if (rc == 0)
                    rc = areal_pg_all_reduce(g, &t[r], 1, AREAL_DT_F32, AREAL_MAX, &e);
            }
            float cpu = (float)(cpu_us() - c0) / (float)(iters * reps);
            if (rc == 0)
                rc = areal_pg_all_reduce(g, &cpu, 1, AREAL_DT_F32, AREAL_SUM, &e);
            qsort(t, (size_t)reps, sizeof t[0], cmp_f);
            if (rc == 0 && out != NULL) {
                fprintf(out, "%s %zu %.3f %.3f\n", op_names[op], bytes, (double)t[reps / 2],
                        (double)cpu);
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

/* Reads "OP BYTES USEC CPU_USEC" lines into us[op][size index] and cpu[op][size index]. */
static void parse(FILE *f, size_t lo, double us[N_OPS][N_SIZES], double cpu[N_OPS][N_SIZES]) {
    char name[32];
    size_t bytes;
    double t, c;
    while (fscanf(f, "%31s %zu %lf %lf", name, &bytes, &t, &c) == 4) {
        int si = 0;
        for (size_t b = lo; b < bytes && si < N_SIZES - 1; b *= 4)
            si++;
        for (int op = 0; op < N_OPS; op++)
            if (strcmp(name, op_names[op]) == 0)
                us[op][si] = t, cpu[op][si] = c;
    }
}

static int ours(int n, size_t lo, size_t hi, int shm_off, double us[N_OPS][N_SIZES],
                double cpu[N_OPS][N_SIZES]) {
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
    parse(f, lo, us, cpu);
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

static int openmpi(const char *helper, int n, size_t lo, size_t hi, double us[N_OPS][N_SIZES],
                   double cpu[N_OPS][N_SIZES]) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "mpirun --allow-run-as-root --oversubscribe -np %d %s %zu %zu %d '%s' 2>/dev/null", n,
             helper, lo, hi, repeats(), getenv("AREAL_BENCH_OPS") ? getenv("AREAL_BENCH_OPS") : "");
    FILE *f = popen(cmd, "r");
    if (f == NULL)
        return 1;
    parse(f, lo, us, cpu);
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
        static double ac[N_OPS][N_SIZES], sc[N_OPS][N_SIZES], mc[N_OPS][N_SIZES];
        memset(a, 0, sizeof a);
        memset(s, 0, sizeof s);
        memset(m, 0, sizeof m);
        memset(ac, 0, sizeof ac);
        memset(sc, 0, sizeof sc);
        memset(mc, 0, sizeof mc);
        const char *only = getenv("AREAL_BENCH_SHM");
        if (only == NULL || strcmp(only, "0") != 0)
            rc |= ours(n, lo, hi, 0, a, ac);
        if (only == NULL || strcmp(only, "0") == 0)
            rc |= ours(n, lo, hi, 1, s, sc);
        if (have_mpi && openmpi(helper, n, lo, hi, m, mc) != 0)
            printf("mpirun failed for %d ranks\n", n);
        printf("\n%d ranks   %-14s %10s %9s %9s %9s %8s %8s %9s %9s %9s\n", n, "op", "bytes",
               "shm GB/s", "sock GB/s", "MPI GB/s", "shm/MPI", "sock/MPI", "shm cpu", "sock cpu",
               "MPI cpu");
        for (int op = 0; op < N_OPS; op++) {
            if (!op_wanted(op))
                continue;
            int si = 0;
            for (size_t bytes = lo; bytes <= hi && si < N_SIZES; bytes *= 4, si++) {
                double o = busbw(op, n, bytes, a[op][si]), k = busbw(op, n, bytes, s[op][si]);
                double q = busbw(op, n, bytes, m[op][si]);
                printf("%d ranks   %-14s %10zu %9.3f %9.3f %9.3f %8.2f %8.2f %9.1f %9.1f %9.1f\n",
                       n, op_names[op], bytes, o, k, q, q > 0 ? o / q : 0.0, q > 0 ? k / q : 0.0,
                       ac[op][si], sc[op][si], mc[op][si]);
            }
        }
        fflush(stdout);
    }
    return rc;
}
