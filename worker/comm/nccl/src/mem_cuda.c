/*
 * mem_cuda.c - areal_mem_of for a build with CUDA (it replaces
 * worker/src/mem_host.c there, see worker/gpu.mk): asks the CUDA runtime
 * what a pointer is. Memory CUDA does not know (plain malloc, the stack) and
 * pinned host memory are host; device and managed memory are device. Without
 * a usable driver the call fails and every pointer is host, which is right:
 * no device memory can exist then. The failure is cleared so it does not
 * linger as CUDA's last error. Rejected: the driver API's cuPointerGetAttribute
 * (it would not initialise CUDA, but needs libcuda at link time, which the
 * pip wheels do not ship).
 */
#include <cuda_runtime_api.h>

#include "areal/comm/coll.h"

areal_mem areal_mem_of(const void *p, int *device) {
    struct cudaPointerAttributes a;
    if (device != NULL)
        *device = -1;
    if (p == NULL || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return AREAL_MEM_HOST;
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
        return AREAL_MEM_HOST;
    if (device != NULL)
        *device = a.device;
    return AREAL_MEM_DEVICE;
}
