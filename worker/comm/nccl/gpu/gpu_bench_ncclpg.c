/*
 * gpu_bench_ncclpg.c - NCCL all-reduce and all-gather bandwidth through the
 * backend's API (make bench-gpu), one rank process per GPU, plus
 * device-to-device cudaMemcpy bandwidth on GPU 0 for reference.
 *
 * Each size runs a few warm-up calls, then ITERS timed calls (each call
 * waits for its stream, as the API does). algbw = bytes / time; busbw
 * follows nccl-tests: all-reduce algbw * 2(n-1)/n, all-gather algbw *
 * (n-1)/n (0 at one rank: nothing crosses a link then, so algbw is the
 * number to read; a one-rank in-place all-reduce moves nothing and prints no
 * figure). Memcpy: bytes copied / time (each byte is read and
 * written, so memory traffic is twice that). Without a GPU it says so and
 * exits 0.
 */
#include <cuda_runtime_api.h>

#include "gpu_util.h"

#define ITERS 20

static const size_t SIZES[] = {1u << 20, 8u << 20, 64u << 20, 256u << 20, 1024u << 20};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

static int rank_bench(int rank, int world, int ngpu, int port, void *arg) {
    (void)arg;
    areal_store *st = gpu_store(port);
    if (st == NULL)
        return GPU_RANK_FAIL;
    int ranks[GPU_MAX_RANKS];
    areal_ncclpg_config cfg = gpu_world_group(st, "bench", ranks, rank, world, ngpu, 60000);
    areal_ncclpg *g = NULL;
    areal_error e;
    if (areal_ncclpg_create(&cfg, &g, &e) != AREAL_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        areal_store_close(st);
        return GPU_RANK_FAIL;
    }
    size_t maxb = SIZES[NSIZES - 1];
    void *a = NULL, *b = NULL;
    if (cudaMalloc(&a, maxb) != cudaSuccess ||
        cudaMalloc(&b, maxb * (size_t)world) != cudaSuccess) {
        fprintf(stderr, "rank %d: cudaMalloc of %zu MiB failed\n", rank, maxb >> 20);
        areal_ncclpg_destroy(g);
        return GPU_RANK_FAIL;
    }
    cudaMemset(a, 0, maxb);
    if (rank == 0)
        printf("%-11s %10s %10s %10s %10s\n", "op", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s");
    int rc = 0;
    for (int op = 0; op < 2 && rc == 0; op++) {
        for (size_t s = 0; s < NSIZES && rc == 0; s++) {
            size_t bytes = SIZES[s], count = bytes / 4;
            double t0 = 0;
            for (int it = -3; it < ITERS; it++) {
                if (it == 0) {
                    areal_ncclpg_barrier(g, &e);
                    t0 = gpu_now_ms();
                }
                int r = op == 0 ? areal_ncclpg_all_reduce(g, a, count, AREAL_DT_F32, AREAL_SUM, &e)
                                : areal_ncclpg_all_gather(g, a, b, count / (size_t)world,
                                                          AREAL_DT_F32, &e);
                if (r != AREAL_OK) {
                    fprintf(stderr, "rank %d: %s\n", rank, e.msg);
                    rc = GPU_RANK_FAIL;
                    break;
                }
            }
            double us = (gpu_now_ms() - t0) * 1e3 / ITERS;
            double alg = (double)bytes / us / 1e3;
            double factor = op == 0 ? 2.0 * (world - 1) / world : (double)(world - 1) / world;
            if (rc == 0 && rank == 0 && op == 0 && world == 1)
                /* One rank, in place: NCCL moves no byte, so no bandwidth to report. */
                printf("%-11s %10zu %10.1f %10s %10s  (one rank, in place: no data moves)\n",
                       "all_reduce", bytes, us, "-", "-");
            else if (rc == 0 && rank == 0)
                printf("%-11s %10zu %10.1f %10.2f %10.2f\n", op == 0 ? "all_reduce" : "all_gather",
                       bytes, us, alg, alg * factor);
        }
    }
    if (rc == 0 && rank == 0) {
        for (size_t s = 0; s < NSIZES; s++) {
            size_t bytes = SIZES[s];
            cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
            cudaDeviceSynchronize();
            double t0 = gpu_now_ms();
            for (int it = 0; it < ITERS; it++)
                cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0);
            cudaDeviceSynchronize();
            double us = (gpu_now_ms() - t0) * 1e3 / ITERS;
            printf("%-11s %10zu %10.1f %10.2f %10s  (GPU 0, bytes copied / time)\n", "memcpy_d2d",
                   bytes, us, (double)bytes / us / 1e3, "-");
        }
    }
    cudaFree(a);
    cudaFree(b);
    areal_ncclpg_destroy(g);
    areal_store_close(st);
    return rc;
}

int main(void) {
    char why[AREAL_ERROR_MSG_MAX + 16];
    int n = gpu_probe(why, sizeof why);
    if (n < 1) {
        printf("*** SKIP gpu_bench_ncclpg: %s\n", why);
        return 0;
    }
    int world = n < GPU_MAX_RANKS ? n : GPU_MAX_RANKS;
    printf("gpu_bench_ncclpg: %d GPU(s), %d rank process(es), %d timed calls per size\n", n, world,
           ITERS);
    int rc = gpu_run_ranks(world, n, 200, rank_bench, NULL);
    printf("gpu_bench_ncclpg: %s\n", rc == 0 ? "done" : "FAILED");
    return rc == 0 ? 0 : 1;
}
