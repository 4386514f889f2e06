/*
 * mem_host.c - areal_mem_of for a build without CUDA: such a process holds no
 * device memory, so every pointer is host memory. A build with CUDA replaces
 * this file by worker/nccl/src/mem_cuda.c (worker/gpu.mk).
 */
#include "areal/comm/coll.h"

areal_mem areal_mem_of(const void *p, int *device) {
    (void)p;
    if (device != NULL)
        *device = -1;
    return AREAL_MEM_HOST;
}
