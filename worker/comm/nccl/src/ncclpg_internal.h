/*
 * ncclpg_internal.h - the NCCL group's state and the pure helpers (type
 * mapping, store keys, argument checks) shared by the backend's files and
 * tested without a GPU (worker/nccl/tests/test_ncclpg_map.c).
 */
#ifndef AREAL_COMM_NCCLPG_INTERNAL_H
#define AREAL_COMM_NCCLPG_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "areal/comm/ncclpg.h"

struct areal_ncclpg {
    char name[AREAL_COMM_GROUP_NAME_MAX];
    int n;          /* members */
    int me;         /* this member's index */
    int *ranks;     /* global rank of each member */
    int device;     /* CUDA device */
    int timeout_ms; /* deadline of each operation */
    ncclComm_t comm;
    cudaStream_t stream;
    int32_t *scratch;   /* one device int32 for the barrier */
    pthread_mutex_t mu; /* one operation at a time */
    areal_error broken; /* code != 0 once an operation failed */
};

/* The NCCL type of t (fp32, bf16, fp16, int32, int64); -1 for any other. */
int areal_ncclpg_dtype(areal_dtype t, ncclDataType_t *out);

/* The NCCL reduction of op (sum, avg, max); -1 for any other. */
int areal_ncclpg_redop(areal_redop op, ncclRedOp_t *out);

/*
 * Writes the store key "nccl/<name>/<leaf>" (gen < 0) or
 * "nccl/<name>/<gen>/<leaf>" into buf[0..cap). Returns 0, or -1 when it
 * does not fit (buf then holds an empty string).
 */
int areal_ncclpg_key(char *buf, size_t cap, const char *name, long gen, const char *leaf);

/*
 * Checks a creation config before any CUDA or store call: store, name
 * length, n in 1..AREAL_COMM_MAX_WORLD, ranks distinct and non-negative,
 * rank among them (its index goes to *me), device >= 0, timeout_ms > 0.
 * AREAL_EINVAL naming the field.
 */
int areal_ncclpg_check_config(const areal_ncclpg_config *cfg, int *me, areal_error *err);

/*
 * Checks one operation's common arguments: g and the buffers not NULL
 * (when count > 0), the type and op supported, count * size * elements
 * within size_t. Sets *nt and (when op_out is not NULL) *nop. AREAL_EINVAL
 * naming the group, the operation and the argument.
 */
int areal_ncclpg_check_args(const areal_ncclpg *g, const char *opname, const void *a, const void *b,
                            size_t count, size_t blocks, areal_dtype t, areal_redop op,
                            ncclDataType_t *nt, ncclRedOp_t *nop, areal_error *err);

/*
 * Waits for the work queued on g's stream: polls the communicator's async
 * error and the stream until both are done or g's timeout from `start_ms`
 * passes; then aborts the communicator, breaks g and returns AREAL_EIO
 * naming g, opname and the timeout. An NCCL or CUDA error breaks g too.
 */
int areal_ncclpg_wait(areal_ncclpg *g, const char *opname, int64_t start_ms, areal_error *err);

/*
 * After an NCCL call on g's communicator returned r: ncclSuccess and
 * ncclInProgress are fine (0); anything else breaks g and returns AREAL_EIO
 * quoting NCCL's message.
 */
int areal_ncclpg_check_call(areal_ncclpg *g, const char *opname, ncclResult_t r, areal_error *err);

/* Monotonic clock in milliseconds. */
int64_t areal_ncclpg_now_ms(void);

#endif
