/*
 * coll.h - one collective interface over every backend: a group handle with
 * a const ops table, the way Redis's poller backends and curl's vtls/ do it.
 *
 * A handle wraps one backend group (the CPU backend's areal_pg, comm.h, or
 * the NCCL backend's areal_ncclpg, ncclpg.h) and records which memory its
 * buffers live in (host or device, and the device ordinal). Every entry point
 * checks each buffer it is given against that record before the backend
 * sees it (areal_mem_of), so a host pointer never reaches NCCL and a device
 * pointer never reaches the CPU transport: AREAL_EINVAL naming the group, the
 * operation, the argument and both memory kinds, with the group still
 * usable. Parallel layers (TP, PP, EP), ZeRO and weight sync are written once
 * against this header; they never name a backend.
 *
 * The operations have the arguments and the semantics of the CPU backend's
 * areal_pg_* (comm.h): element counts, group member indices, every member
 * calling the same operation with the same count, type and op. Failure is the
 * backend's: a deadline on every operation, AREAL_EIO naming the group, the
 * operation and the peer, after which the group is broken.
 *
 * Asynchronous forms: where the backend has them (the CPU backend's worker
 * thread) they queue; where it has none (NCCL, whose calls already wait for
 * their stream), the operation runs at issue and the handle holds its result,
 * so callers write one code path.
 *
 * Rejected: parallel entry points per backend (every layer written twice) and
 * a switch on a backend enum inside each operation (a third backend would
 * edit every function; the table is the seam).
 */
#ifndef AREAL_COMM_COLL_H
#define AREAL_COMM_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "areal/comm/dtype.h"
#include "areal/error.h"

typedef enum areal_mem { AREAL_MEM_HOST = 0, AREAL_MEM_DEVICE = 1 } areal_mem;

/* "host" or "device". */
const char *areal_mem_name(areal_mem m);

/*
 * The memory kind of p as this build can tell, and (for device memory) its
 * device ordinal in *device (may be NULL; -1 for host memory). A build
 * without CUDA has no device memory: always host. A build with CUDA asks
 * cudaPointerGetAttributes (which initialises CUDA in the calling process;
 * memory CUDA does not know, or no CUDA driver at all, is host; managed
 * memory counts as device).
 */
areal_mem areal_mem_of(const void *p, int *device);

typedef struct areal_coll areal_coll;
typedef struct areal_coll_work areal_coll_work;

/*
 * Byte counters: the kinds of operation a group counts the bytes of
 * (areal_coll_bytes_of). An asynchronous form counts as its blocking kind;
 * OTHER holds transfers of an operation name this list does not know.
 */
typedef enum areal_coll_kind {
    AREAL_COLL_ALL_REDUCE = 0,
    AREAL_COLL_REDUCE_SCATTER,
    AREAL_COLL_ALL_GATHER,
    AREAL_COLL_BROADCAST,
    AREAL_COLL_SEND,
    AREAL_COLL_RECV,
    AREAL_COLL_ALL_TO_ALL,
    AREAL_COLL_ALL_TO_ALLV,
    AREAL_COLL_BARRIER,
    AREAL_COLL_OTHER,
    AREAL_COLL_KIND_COUNT
} areal_coll_kind;

/*
 * The bytes this member put on the wire to other members (sent) and took
 * from them (recv), per kind, since the group was made: what the transport
 * moved (shared memory or socket), not what the call's arguments hold, so a
 * ring all-reduce of N bytes on k members sends 2(k-1)/k N here and a member
 * never counts a copy to itself. Monotonic; a reader diffs two snapshots.
 */
typedef struct areal_coll_bytes {
    uint64_t sent[AREAL_COLL_KIND_COUNT];
    uint64_t recv[AREAL_COLL_KIND_COUNT];
} areal_coll_bytes;

/* "all_reduce", "reduce_scatter", ... "other": the operation names the transports report. */
const char *areal_coll_kind_name(areal_coll_kind k);

/* The kind of operation name `op` ("all_reduce", ...; AREAL_COLL_OTHER for any other name). */
areal_coll_kind areal_coll_kind_of(const char *op);

/*
 * A backend: every function takes the backend's own group (`g`, the impl
 * pointer given to areal_coll_wrap). Arguments are checked by the backend as
 * its own API does; memory kinds were checked before the call. The async
 * members may be NULL (see above); work handles are the backend's.
 */
typedef struct areal_coll_ops {
    const char *backend; /* "cpu", "nccl": for messages */
    areal_mem mem;       /* where this backend's buffers live */
    const char *(*name)(const void *g);
    int (*size)(const void *g);
    int (*rank)(const void *g);
    int (*global_rank)(const void *g, int j);
    void (*set_timeout)(void *g, int timeout_ms);
    int (*all_reduce)(void *g, void *buf, size_t count, areal_dtype t, areal_redop op,
                      areal_error *err);
    int (*reduce_scatter)(void *g, const void *in, void *out, size_t count, areal_dtype t,
                          areal_redop op, areal_error *err);
    int (*all_gather)(void *g, const void *in, void *out, size_t count, areal_dtype t,
                      areal_error *err);
    int (*broadcast)(void *g, void *buf, size_t count, areal_dtype t, int root, areal_error *err);
    int (*send)(void *g, const void *buf, size_t count, areal_dtype t, int peer, areal_error *err);
    int (*recv)(void *g, void *buf, size_t count, areal_dtype t, int peer, areal_error *err);
    int (*all_to_all)(void *g, const void *in, void *out, size_t count, areal_dtype t,
                      areal_error *err);
    int (*all_to_allv)(void *g, const void *in, const size_t *scounts, const size_t *sdispls,
                       void *out, const size_t *rcounts, const size_t *rdispls, areal_dtype t,
                       areal_error *err);
    int (*barrier)(void *g, areal_error *err);
    int (*all_reduce_async)(void *g, void *buf, size_t count, areal_dtype t, areal_redop op,
                            void **work, areal_error *err);
    int (*reduce_scatter_async)(void *g, const void *in, void *out, size_t count, areal_dtype t,
                                areal_redop op, void **work, areal_error *err);
    int (*all_gather_async)(void *g, const void *in, void *out, size_t count, areal_dtype t,
                            void **work, areal_error *err);
    int (*broadcast_async)(void *g, void *buf, size_t count, areal_dtype t, int root, void **work,
                           areal_error *err);
    void (*work_test)(void *work, int *done);
    int (*work_wait)(void *work, areal_error *err);
    void (*destroy)(void *g);
    /* the group's byte counters (areal_coll_bytes); NULL where the backend has none */
    void (*bytes)(const void *g, areal_coll_bytes *out);
} areal_coll_ops;

/*
 * Wraps backend group `impl` (taken over: areal_coll_destroy destroys it,
 * also when this call fails) behind `ops` (static storage, outlives the
 * handle). `device` is the group's device ordinal for a device backend, -1
 * for host memory. AREAL_ENOMEM.
 */
int areal_coll_wrap(const areal_coll_ops *ops, void *impl, int device, areal_coll **out,
                    areal_error *err);

/* Destroys the backend group and the handle; NULL is a no-op. Every work handle waited first. */
void areal_coll_destroy(areal_coll *c);

const char *areal_coll_name(const areal_coll *c);
const char *areal_coll_backend(const areal_coll *c);
areal_mem areal_coll_mem(const areal_coll *c);
int areal_coll_device(const areal_coll *c); /* -1 for host memory */
int areal_coll_size(const areal_coll *c);
int areal_coll_rank(const areal_coll *c);                   /* this member's index */
int areal_coll_global_rank(const areal_coll *c, int j);     /* member j's global rank, -1 if none */
void areal_coll_set_timeout(areal_coll *c, int timeout_ms); /* ignored unless > 0 */
/*
 * This member's byte counters of c (see areal_coll_bytes); all zero for a
 * backend that does not count (NCCL today). Safe to call from any thread
 * while operations run: each counter is read atomically, the set as a whole
 * is not one instant.
 */
void areal_coll_bytes_of(const areal_coll *c, areal_coll_bytes *out);
/* The backend's own group (areal_pg *, areal_ncclpg *), owned by c: for backend-only calls. */
void *areal_coll_impl(areal_coll *c);

/*
 * The collectives, as areal_pg_* in comm.h (same arguments, same order).
 * Each checks its buffers' memory kind first (AREAL_EINVAL, see above), then
 * runs the backend's operation and returns its result.
 */
int areal_coll_all_reduce(areal_coll *c, void *buf, size_t count, areal_dtype t, areal_redop op,
                          areal_error *err);
int areal_coll_reduce_scatter(areal_coll *c, const void *in, void *out, size_t count, areal_dtype t,
                              areal_redop op, areal_error *err);
int areal_coll_all_gather(areal_coll *c, const void *in, void *out, size_t count, areal_dtype t,
                          areal_error *err);
int areal_coll_broadcast(areal_coll *c, void *buf, size_t count, areal_dtype t, int root,
                         areal_error *err);
int areal_coll_send(areal_coll *c, const void *buf, size_t count, areal_dtype t, int peer,
                    areal_error *err);
int areal_coll_recv(areal_coll *c, void *buf, size_t count, areal_dtype t, int peer,
                    areal_error *err);
int areal_coll_all_to_all(areal_coll *c, const void *in, void *out, size_t count, areal_dtype t,
                          areal_error *err);
/* Counts and displacements are host arrays of size entries (element units) for every backend. */
int areal_coll_all_to_allv(areal_coll *c, const void *in, const size_t *scounts,
                           const size_t *sdispls, void *out, const size_t *rcounts,
                           const size_t *rdispls, areal_dtype t, areal_error *err);
int areal_coll_barrier(areal_coll *c, areal_error *err);

/*
 * Asynchronous forms (see above). On AREAL_OK *w is a handle to wait on
 * exactly once; buffers stay untouched until then. A memory-kind error is
 * returned at issue (nothing queued, *w NULL); backend argument errors may
 * surface at wait. AREAL_ENOMEM.
 */
int areal_coll_all_reduce_async(areal_coll *c, void *buf, size_t count, areal_dtype t,
                                areal_redop op, areal_coll_work **w, areal_error *err);
int areal_coll_reduce_scatter_async(areal_coll *c, const void *in, void *out, size_t count,
                                    areal_dtype t, areal_redop op, areal_coll_work **w,
                                    areal_error *err);
int areal_coll_all_gather_async(areal_coll *c, const void *in, void *out, size_t count,
                                areal_dtype t, areal_coll_work **w, areal_error *err);
int areal_coll_broadcast_async(areal_coll *c, void *buf, size_t count, areal_dtype t, int root,
                               areal_coll_work **w, areal_error *err);

/* Sets *done to 1 when the operation has finished. */
void areal_coll_work_test(areal_coll_work *w, int *done);

/* Waits, frees the handle, returns the operation's result (err filled as the blocking form). */
int areal_coll_work_wait(areal_coll_work *w, areal_error *err);

/*
 * Makes groups of one backend: what the role-group builder
 * (areal/comm/role_groups.h) calls for each group. `group` creates the group
 * `name` of the n global ranks in `ranks` (member order), which hold `rank`.
 */
typedef struct areal_coll_factory {
    int (*group)(void *ctx, const char *name, const int *ranks, int n, areal_coll **out,
                 areal_error *err);
    void *ctx;
    int rank;  /* this process's global rank */
    int world; /* ranks of the world the groups are drawn from */
} areal_coll_factory;

#endif
