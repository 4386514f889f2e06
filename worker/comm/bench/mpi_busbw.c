/*
 * mpi_busbw.c - the OpenMPI side of `make bench` for the comm runtime: times
 * MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall and
 * MPI_Bcast (root 0) on
 * fp32 for sizes MIN..MAX bytes (x4 steps) and prints, from rank 0, one line
 * "OP BYTES USEC CPU_USEC" per case: the median over REPEAT blocks of the
 * slowest rank's mean time per iteration, and every rank's CPU time per
 * iteration, summed. Arguments: MIN MAX [REPEAT [OPS]] (OPS a comma list,
 * empty for all), as bench_comm passes them.
 * Built with mpicc by worker/module.mk, run by bench_comm under mpirun.
 * BYTES follows nccl-tests: the all-reduce buffer, the gathered (all-gather)
 * or scattered (reduce-scatter) total, the all-to-all send buffer, the
 * broadcast buffer.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static double cpu_us(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + (double)u.ru_utime.tv_usec +
           (double)u.ru_stime.tv_usec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int wanted(const char *l, const char *name) {
    if (l == NULL || *l == 0)
        return 1;
    size_t k = strlen(name);
    for (const char *p = strstr(l, name); p != NULL; p = strstr(p + 1, name))
        if ((p == l || p[-1] == ',') && (p[k] == 0 || p[k] == ','))
            return 1;
    return 0;
}

static void run(int op, float *a, float *b, int cnt, int blk) {
    if (op == 0)
        MPI_Allreduce(MPI_IN_PLACE, a, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (op == 1)
        MPI_Allgather(a, blk, MPI_FLOAT, b, blk, MPI_FLOAT, MPI_COMM_WORLD);
    else if (op == 2)
        MPI_Reduce_scatter_block(a, b, blk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (op == 3)
        MPI_Alltoall(a, blk, MPI_FLOAT, b, blk, MPI_FLOAT, MPI_COMM_WORLD);
    else
        MPI_Bcast(a, cnt, MPI_FLOAT, 0, MPI_COMM_WORLD);
}

static int iters_for(size_t bytes) {
    size_t it = (size_t)(64u << 20) / (bytes ? bytes : 1);
    return it < 3 ? 3 : it > 50 ? 50 : (int)it;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t lo = argc > 1 ? strtoull(argv[1], NULL, 10) : 1024;
    size_t hi = argc > 2 ? strtoull(argv[2], NULL, 10) : (256u << 20);
    int reps = argc > 3 ? atoi(argv[3]) : 1;
    const char *only = argc > 4 ? argv[4] : NULL;
    if (reps < 1 || reps > 15)
        reps = 1;
    float *a = malloc(hi), *b = malloc(hi);
    if (a == NULL || b == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    memset(a, 0, hi);
    memset(b, 0, hi);
    static const char *const ops[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                      "broadcast"};
    for (int op = 0; op < 5; op++) {
        if (!wanted(only, ops[op]))
            continue;
        for (size_t bytes = lo; bytes <= hi; bytes *= 4) {
            int cnt = (int)(bytes / sizeof(float)), blk = cnt / n;
            int iters = iters_for(bytes);
            double t[15];
            run(op, a, b, cnt, blk); /* warm-up */
            double c0 = cpu_us();
            for (int r = 0; r < reps; r++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                for (int it = 0; it < iters; it++)
                    run(op, a, b, cnt, blk);
                double us = (MPI_Wtime() - t0) * 1e6 / iters;
                MPI_Allreduce(&us, &t[r], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            }
            double cpu = (cpu_us() - c0) / (iters * reps), sum = 0;
            MPI_Reduce(&cpu, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            qsort(t, (size_t)reps, sizeof t[0], cmp_d);
            if (rank == 0)
                printf("%s %zu %.3f %.3f\n", ops[op], bytes, t[reps / 2], sum);
            fflush(stdout);
        }
    }
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
