/*
 * mpi_busbw.c - the OpenMPI side of `make bench` for the comm runtime: times
 * MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall and
 * MPI_Bcast (root 0) on
 * fp32 for sizes MIN..MAX bytes (x4 steps) and prints, from rank 0, one line
 * "OP BYTES USEC" per case (the slowest rank's mean time per iteration).
 * Built with mpicc by worker/module.mk, run by bench_comm under mpirun.
 * BYTES follows nccl-tests: the all-reduce buffer, the gathered (all-gather)
 * or scattered (reduce-scatter) total, the all-to-all send buffer, the
 * broadcast buffer.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    float *a = malloc(hi), *b = malloc(hi);
    if (a == NULL || b == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    memset(a, 0, hi);
    memset(b, 0, hi);
    static const char *const ops[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                      "broadcast"};
    for (int op = 0; op < 5; op++) {
        for (size_t bytes = lo; bytes <= hi; bytes *= 4) {
            int cnt = (int)(bytes / sizeof(float)), blk = cnt / n;
            int iters = iters_for(bytes);
            double t0 = 0;
            for (int it = -1; it < iters; it++) { /* iteration -1 warms up */
                if (it == 0) {
                    MPI_Barrier(MPI_COMM_WORLD);
                    t0 = MPI_Wtime();
                }
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
            double us = (MPI_Wtime() - t0) * 1e6 / iters, worst = 0;
            MPI_Reduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank == 0)
                printf("%s %zu %.3f\n", ops[op], bytes, worst);
            fflush(stdout);
        }
    }
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
