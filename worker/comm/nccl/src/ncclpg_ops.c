/*
 * ncclpg_ops.c - the collectives and point-to-point operations of the NCCL
 * backend, with areal_pg_*'s arguments on device buffers.
 *
 * Each call checks its arguments (nothing is queued on a bad one), takes
 * the group's mutex, makes the group's device current, queues the NCCL call
 * on the group's stream and waits for it with the group's deadline
 * (areal_ncclpg_wait). All-to-all(v) is one ncclGroupStart/End of a send
 * and a receive per member, so NCCL runs every block at once. The barrier
 * is an all-reduce of one device int32. Rejected: returning before the
 * stream finishes (callers would have to order their own streams and check
 * deadlines themselves; the stream is exposed for that later).
 */
#include <stdint.h>
#include <stdlib.h>

#include "ncclpg_internal.h"

/* Locks g and makes its device current; fails with g's recorded error once broken. */
static int begin(areal_ncclpg *g, const char *opname, int64_t *start, areal_error *err) {
    pthread_mutex_lock(&g->mu);
    *start = areal_ncclpg_now_ms();
    if (g->broken.code != AREAL_OK || g->comm == NULL) {
        if (err != NULL)
            *err = g->broken;
        int code = g->broken.code != AREAL_OK ? g->broken.code : AREAL_EIO;
        pthread_mutex_unlock(&g->mu);
        return code;
    }
    cudaError_t e = cudaSetDevice(g->device);
    if (e != cudaSuccess) {
        pthread_mutex_unlock(&g->mu);
        return areal_error_set(err, AREAL_EIO, -1, "nccl group %s: %s: cudaSetDevice(%d): %s",
                               g->name, opname, g->device, cudaGetErrorString(e));
    }
    return AREAL_OK;
}

/* Checks the NCCL call's result, waits for the stream, unlocks g. */
static int finish(areal_ncclpg *g, const char *opname, ncclResult_t r, int64_t start,
                  areal_error *err) {
    int rc = areal_ncclpg_check_call(g, opname, r, err);
    if (rc == AREAL_OK)
        rc = areal_ncclpg_wait(g, opname, start, err);
    pthread_mutex_unlock(&g->mu);
    return rc;
}

static int bad_member(const areal_ncclpg *g, const char *opname, const char *what, int j,
                      areal_error *err) {
    return areal_error_set(err, AREAL_EINVAL, -1,
                           "nccl group %s: %s %s %d is not a member index 0..%d%s", g->name, opname,
                           what, j, g->n - 1, j == g->me ? " other than this rank's" : "");
}

int areal_ncclpg_all_reduce(areal_ncclpg *g, void *buf, size_t count, areal_dtype t, areal_redop op,
                            areal_error *err) {
    ncclDataType_t nt;
    ncclRedOp_t nop;
    int64_t start;
    int rc = areal_ncclpg_check_args(g, "all_reduce", buf, buf, count, 1, t, op, &nt, &nop, err);
    if (rc != AREAL_OK || count == 0 || (rc = begin(g, "all_reduce", &start, err)) != AREAL_OK)
        return rc;
    ncclResult_t r = ncclAllReduce(buf, buf, count, nt, nop, g->comm, g->stream);
    return finish(g, "all_reduce", r, start, err);
}

int areal_ncclpg_reduce_scatter(areal_ncclpg *g, const void *in, void *out, size_t count,
                                areal_dtype t, areal_redop op, areal_error *err) {
    ncclDataType_t nt;
    ncclRedOp_t nop;
    int64_t start;
    int rc = areal_ncclpg_check_args(g, "reduce_scatter", in, out, count,
                                     g == NULL ? 1 : (size_t)g->n, t, op, &nt, &nop, err);
    if (rc != AREAL_OK || count == 0 || (rc = begin(g, "reduce_scatter", &start, err)) != AREAL_OK)
        return rc;
    ncclResult_t r = ncclReduceScatter(in, out, count, nt, nop, g->comm, g->stream);
    return finish(g, "reduce_scatter", r, start, err);
}

int areal_ncclpg_all_gather(areal_ncclpg *g, const void *in, void *out, size_t count, areal_dtype t,
                            areal_error *err) {
    ncclDataType_t nt;
    int64_t start;
    int rc = areal_ncclpg_check_args(g, "all_gather", in, out, count, g == NULL ? 1 : (size_t)g->n,
                                     t, AREAL_SUM, &nt, NULL, err);
    if (rc != AREAL_OK || count == 0 || (rc = begin(g, "all_gather", &start, err)) != AREAL_OK)
        return rc;
    ncclResult_t r = ncclAllGather(in, out, count, nt, g->comm, g->stream);
    return finish(g, "all_gather", r, start, err);
}

int areal_ncclpg_broadcast(areal_ncclpg *g, void *buf, size_t count, areal_dtype t, int root,
                           areal_error *err) {
    ncclDataType_t nt;
    int64_t start;
    int rc =
        areal_ncclpg_check_args(g, "broadcast", buf, buf, count, 1, t, AREAL_SUM, &nt, NULL, err);
    if (rc != AREAL_OK)
        return rc;
    if (root < 0 || root >= g->n)
        return bad_member(g, "broadcast", "root", root, err);
    if (count == 0 || (rc = begin(g, "broadcast", &start, err)) != AREAL_OK)
        return rc;
    ncclResult_t r = ncclBroadcast(buf, buf, count, nt, root, g->comm, g->stream);
    return finish(g, "broadcast", r, start, err);
}

static int p2p(areal_ncclpg *g, const char *opname, void *buf, size_t count, areal_dtype t,
               int peer, int is_send, areal_error *err) {
    ncclDataType_t nt;
    int64_t start;
    int rc = areal_ncclpg_check_args(g, opname, buf, buf, count, 1, t, AREAL_SUM, &nt, NULL, err);
    if (rc != AREAL_OK)
        return rc;
    if (peer < 0 || peer >= g->n || peer == g->me)
        return bad_member(g, opname, "peer", peer, err);
    if (count == 0 || (rc = begin(g, opname, &start, err)) != AREAL_OK)
        return rc;
    ncclResult_t r = is_send ? ncclSend(buf, count, nt, peer, g->comm, g->stream)
                             : ncclRecv(buf, count, nt, peer, g->comm, g->stream);
    return finish(g, opname, r, start, err);
}

int areal_ncclpg_send(areal_ncclpg *g, const void *buf, size_t count, areal_dtype t, int peer,
                      areal_error *err) {
    return p2p(g, "send", (void *)(uintptr_t)buf, count, t, peer, 1, err);
}

int areal_ncclpg_recv(areal_ncclpg *g, void *buf, size_t count, areal_dtype t, int peer,
                      areal_error *err) {
    return p2p(g, "recv", buf, count, t, peer, 0, err);
}

/* Queues one grouped send+receive per member with non-empty blocks. */
static ncclResult_t queue_a2a(areal_ncclpg *g, const char *in, const size_t *sc, const size_t *sd,
                              char *out, const size_t *rc, const size_t *rd, size_t esz,
                              ncclDataType_t nt) {
    ncclResult_t r = ncclGroupStart();
    for (int j = 0; j < g->n && (r == ncclSuccess || r == ncclInProgress); j++) {
        if (sc[j] > 0)
            r = ncclSend(in + sd[j] * esz, sc[j], nt, j, g->comm, g->stream);
        if (rc[j] > 0 && (r == ncclSuccess || r == ncclInProgress))
            r = ncclRecv(out + rd[j] * esz, rc[j], nt, j, g->comm, g->stream);
    }
    ncclResult_t e = ncclGroupEnd();
    return r == ncclSuccess || r == ncclInProgress ? e : r;
}

int areal_ncclpg_all_to_allv(areal_ncclpg *g, const void *in, const size_t *scounts,
                             const size_t *sdispls, void *out, const size_t *rcounts,
                             const size_t *rdispls, areal_dtype t, areal_error *err) {
    ncclDataType_t nt;
    int64_t start;
    int rc = areal_ncclpg_check_args(g, "all_to_allv", in, out, 0, 1, t, AREAL_SUM, &nt, NULL, err);
    if (rc != AREAL_OK)
        return rc;
    if (scounts == NULL || sdispls == NULL || rcounts == NULL || rdispls == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "nccl group %s: all_to_allv needs scounts, sdispls, rcounts and "
                               "rdispls (%d entries each)",
                               g->name, g->n);
    size_t esz = areal_dtype_size(t), lim = SIZE_MAX / esz, total = 0;
    for (int j = 0; j < g->n; j++) {
        if (scounts[j] > lim || sdispls[j] > lim - scounts[j] || rcounts[j] > lim ||
            rdispls[j] > lim - rcounts[j])
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "nccl group %s: all_to_allv block %d overflows size_t", g->name,
                                   j);
        if ((scounts[j] > 0 && in == NULL) || (rcounts[j] > 0 && out == NULL))
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "nccl group %s: all_to_allv block %d is non-empty but its "
                                   "buffer is NULL",
                                   g->name, j);
        total += scounts[j] + rcounts[j];
    }
    if (total == 0 || (rc = begin(g, "all_to_allv", &start, err)) != AREAL_OK)
        return rc;
    ncclResult_t r = queue_a2a(g, in, scounts, sdispls, out, rcounts, rdispls, esz, nt);
    return finish(g, "all_to_allv", r, start, err);
}

int areal_ncclpg_all_to_all(areal_ncclpg *g, const void *in, void *out, size_t count, areal_dtype t,
                            areal_error *err) {
    ncclDataType_t nt;
    int64_t start;
    int rc = areal_ncclpg_check_args(g, "all_to_all", in, out, count, g == NULL ? 1 : (size_t)g->n,
                                     t, AREAL_SUM, &nt, NULL, err);
    if (rc != AREAL_OK || count == 0)
        return rc;
    size_t *v = malloc(sizeof *v * 2 * (size_t)g->n);
    if (v == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "nccl group %s: all_to_all: out of memory",
                               g->name);
    for (int j = 0; j < g->n; j++) {
        v[j] = count;
        v[g->n + j] = (size_t)j * count;
    }
    if ((rc = begin(g, "all_to_all", &start, err)) == AREAL_OK) {
        size_t esz = areal_dtype_size(t);
        ncclResult_t r = queue_a2a(g, in, v, v + g->n, out, v, v + g->n, esz, nt);
        rc = finish(g, "all_to_all", r, start, err);
    }
    free(v);
    return rc;
}

int areal_ncclpg_barrier(areal_ncclpg *g, areal_error *err) {
    if (g == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "nccl barrier: group is NULL");
    int64_t start;
    int rc = begin(g, "barrier", &start, err);
    if (rc != AREAL_OK)
        return rc;
    ncclResult_t r =
        ncclAllReduce(g->scratch, g->scratch, 1, ncclInt32, ncclSum, g->comm, g->stream);
    return finish(g, "barrier", r, start, err);
}
