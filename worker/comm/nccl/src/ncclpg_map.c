/*
 * ncclpg_map.c - the NCCL backend's pure helpers: areal types and
 * reductions to NCCL's, the store keys of the id exchange, and argument
 * checks done before anything reaches CUDA or NCCL.
 *
 * Kept apart from the CUDA calls so that `make test` checks them on
 * machines without a GPU. bf16 and fp16 map to NCCL's native types (NCCL
 * reduces them in their own precision, unlike the CPU backend's fp32
 * accumulation: results may differ in the last bits for sums of many
 * members). Rejected: passing byte counts with ncclUint8 (loses the type
 * for reductions).
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ncclpg_internal.h"

int areal_ncclpg_dtype(areal_dtype t, ncclDataType_t *out) {
    switch (t) {
    case AREAL_DT_F32:
        *out = ncclFloat32;
        return 0;
    case AREAL_DT_BF16:
        *out = ncclBfloat16;
        return 0;
    case AREAL_DT_F16:
        *out = ncclFloat16;
        return 0;
    case AREAL_DT_I32:
        *out = ncclInt32;
        return 0;
    case AREAL_DT_I64:
        *out = ncclInt64;
        return 0;
    default:
        return -1;
    }
}

int areal_ncclpg_redop(areal_redop op, ncclRedOp_t *out) {
    switch (op) {
    case AREAL_SUM:
        *out = ncclSum;
        return 0;
    case AREAL_AVG:
        *out = ncclAvg;
        return 0;
    case AREAL_MAX:
        *out = ncclMax;
        return 0;
    default:
        return -1;
    }
}

int areal_ncclpg_key(char *buf, size_t cap, const char *name, long gen, const char *leaf) {
    int w = gen < 0 ? snprintf(buf, cap, "nccl/%s/%s", name, leaf)
                    : snprintf(buf, cap, "nccl/%s/%ld/%s", name, gen, leaf);
    if (w < 0 || (size_t)w >= cap) {
        if (cap > 0)
            buf[0] = '\0';
        return -1;
    }
    return 0;
}

int areal_ncclpg_check_config(const areal_ncclpg_config *cfg, int *me, areal_error *err) {
    if (cfg == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "nccl group: config is NULL");
    const char *nm = cfg->name;
    if (nm == NULL || nm[0] == '\0' || strlen(nm) >= AREAL_COMM_GROUP_NAME_MAX)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "nccl group: name must be 1..%d bytes (got %s%zu bytes)",
                               AREAL_COMM_GROUP_NAME_MAX - 1, nm == NULL ? "NULL, " : "",
                               nm == NULL ? (size_t)0 : strlen(nm));
    if (cfg->store == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "nccl group %s: store is NULL; pass areal_comm_store() of the job",
                               nm);
    if (cfg->ranks == NULL || cfg->n < 1 || cfg->n > AREAL_COMM_MAX_WORLD)
        return areal_error_set(
            err, AREAL_EINVAL, -1, "nccl group %s: needs 1..%d member ranks (got n=%d%s)", nm,
            AREAL_COMM_MAX_WORLD, cfg->n, cfg->ranks == NULL ? ", ranks NULL" : "");
    if (cfg->device < 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "nccl group %s: device %d is negative; pass a CUDA device ordinal",
                               nm, cfg->device);
    if (cfg->timeout_ms <= 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "nccl group %s: timeout_ms must be > 0 (got %d)", nm,
                               cfg->timeout_ms);
    int idx = -1;
    for (int j = 0; j < cfg->n; j++) {
        if (cfg->ranks[j] < 0)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "nccl group %s: member %d has negative global rank %d", nm, j,
                                   cfg->ranks[j]);
        for (int k = 0; k < j; k++)
            if (cfg->ranks[k] == cfg->ranks[j])
                return areal_error_set(err, AREAL_EINVAL, -1,
                                       "nccl group %s: global rank %d is listed twice (members "
                                       "%d and %d); members must be distinct",
                                       nm, cfg->ranks[j], k, j);
        if (cfg->ranks[j] == cfg->rank)
            idx = j;
    }
    if (idx < 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "nccl group %s: this rank (%d) is not among its %d members; "
                               "only members create a group",
                               nm, cfg->rank, cfg->n);
    *me = idx;
    return AREAL_OK;
}

int areal_ncclpg_check_args(const areal_ncclpg *g, const char *opname, const void *a, const void *b,
                            size_t count, size_t blocks, areal_dtype t, areal_redop op,
                            ncclDataType_t *nt, ncclRedOp_t *nop, areal_error *err) {
    if (g == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "nccl %s: group is NULL", opname);
    if (areal_ncclpg_dtype(t, nt) != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "nccl group %s: %s of type %s is not supported (use F32, BF16, "
                               "F16, I32 or I64)",
                               g->name, opname, areal_dtype_name(t));
    if (nop != NULL && areal_ncclpg_redop(op, nop) != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "nccl group %s: %s with reduction %d is not supported (use "
                               "sum, avg or max)",
                               g->name, opname, (int)op);
    size_t esz = areal_dtype_size(t);
    if (blocks == 0 || count > SIZE_MAX / esz / blocks)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "nccl group %s: %s of %zu elements x %zu blocks overflows size_t",
                               g->name, opname, count, blocks);
    if (count > 0 && (a == NULL || b == NULL))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "nccl group %s: %s with %zu elements has a NULL buffer", g->name,
                               opname, count);
    return AREAL_OK;
}

int64_t areal_ncclpg_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
