/*
 * ncclpg.h - the NCCL backend of the comm API: process groups over NCCL
 * communicators, operating on device buffers.
 *
 * Built into libareal.a only when CUDA and NCCL are found (worker/gpu.mk).
 * This header needs neither: CUDA streams and NCCL communicators stay
 * opaque, so callers compile without them.
 *
 * A group is created by every member with the same name and member list
 * (global ranks, member order = group rank order), like areal_comm_group().
 * Member 0 makes an NCCL unique id and publishes it in the rendezvous store
 * under "nccl/<name>/<gen>/id"; the others read it from there. <gen> is the
 * group's creation count (an atomic counter "nccl/<name>/joins" that every
 * member bumps once per creation, divided by the member count), so a group
 * name can be created again after a destroy without reading a stale id.
 * Each group owns one non-blocking CUDA stream on its device; every
 * operation is queued there and waited for before the call returns.
 *
 * The operations take the same arguments in the same order as areal_pg_*
 * (comm.h), with buffers in device memory of the group's device. Callers
 * other than the backend's own tests use them through the one collective
 * interface (areal/comm/coll.h: areal_coll_from_ncclpg), whose handle
 * records device memory and checks every buffer at entry, so a host pointer
 * never reaches NCCL; a role's groups come from areal_comm_role_groups with
 * areal_ncclpg_coll_factory.
 *
 * Failure: communicators are created non-blocking; initialisation and every
 * operation are polled (ncclCommGetAsyncError, cudaStreamQuery) until the
 * group's timeout. When it passes, the communicator is aborted
 * (ncclCommAbort) and the call returns AREAL_EIO naming the group, the
 * operation and the timeout; nothing hangs. The group is then broken: every
 * later operation returns the same error (destroy it and create it again).
 * Argument errors (AREAL_EINVAL) are found before anything is queued and
 * leave the group usable.
 *
 * Threads: calls on one group are serialised by a mutex; different groups
 * may be used from different threads. Every call sets the calling thread's
 * current CUDA device to the group's.
 */
#ifndef AREAL_COMM_NCCLPG_H
#define AREAL_COMM_NCCLPG_H

#include <stddef.h>

#include "areal/comm/coll.h"
#include "areal/comm/comm.h"
#include "areal/comm/dtype.h"
#include "areal/comm/store.h"
#include "areal/error.h"

typedef struct areal_ncclpg areal_ncclpg;

/*
 * The number of CUDA devices this process sees (>= 1), or AREAL_EIO with a
 * message saying why there is none ("no CUDA device: ..." quoting CUDA:
 * no driver, driver too old, CUDA_VISIBLE_DEVICES empty). Initialises CUDA
 * in the calling process: fork rank processes before calling it.
 */
int areal_ncclpg_devices(areal_error *err);

typedef struct areal_ncclpg_config {
    areal_store *store; /* rendezvous store of the job (areal_comm_store()) */
    const char *name;   /* 1..AREAL_COMM_GROUP_NAME_MAX-1 bytes, the same on every member */
    const int *ranks;   /* n distinct global ranks, member order */
    int n;
    int rank;       /* this process's global rank; must be in ranks */
    int device;     /* CUDA device ordinal this process drives */
    int timeout_ms; /* deadline of the creation and of every operation (> 0) */
} areal_ncclpg_config;

/*
 * Creates the group described by cfg (see above): exchanges the unique id
 * through the store, creates the communicator and its stream. On success
 * the caller owns *out (areal_ncclpg_destroy). AREAL_EINVAL naming the field
 * for a bad config; AREAL_EIO naming the group when the id does not appear,
 * a member does not join within the timeout, or CUDA/NCCL fail (their
 * message is quoted); AREAL_ENOMEM.
 */
int areal_ncclpg_create(const areal_ncclpg_config *cfg, areal_ncclpg **out, areal_error *err);

/* Destroys the communicator (aborting it when broken), the stream, the group; NULL is a no-op. */
void areal_ncclpg_destroy(areal_ncclpg *g);

const char *areal_ncclpg_name(const areal_ncclpg *g);
int areal_ncclpg_size(const areal_ncclpg *g);
int areal_ncclpg_rank(const areal_ncclpg *g);               /* this member's index */
int areal_ncclpg_global_rank(const areal_ncclpg *g, int j); /* member j's global rank, -1 if none */
int areal_ncclpg_device(const areal_ncclpg *g);
void areal_ncclpg_set_timeout(areal_ncclpg *g, int timeout_ms); /* ignored unless > 0 */
/* The group's cudaStream_t (as void *), owned by the group: for ordering compute around it. */
void *areal_ncclpg_stream(areal_ncclpg *g);

/* As areal_pg_all_reduce: in place, buf (device) becomes op over every member's buf. */
int areal_ncclpg_all_reduce(areal_ncclpg *g, void *buf, size_t count, areal_dtype t, areal_redop op,
                            areal_error *err);

/* As areal_pg_reduce_scatter: in has size*count elements, out count. */
int areal_ncclpg_reduce_scatter(areal_ncclpg *g, const void *in, void *out, size_t count,
                                areal_dtype t, areal_redop op, areal_error *err);

/* As areal_pg_all_gather: out (size*count) gets every member's in (count) in member order. */
int areal_ncclpg_all_gather(areal_ncclpg *g, const void *in, void *out, size_t count, areal_dtype t,
                            areal_error *err);

/* As areal_pg_broadcast: buf of member root goes to every member's buf. */
int areal_ncclpg_broadcast(areal_ncclpg *g, void *buf, size_t count, areal_dtype t, int root,
                           areal_error *err);

/* As areal_pg_send / areal_pg_recv, with group member peer (not this member). */
int areal_ncclpg_send(areal_ncclpg *g, const void *buf, size_t count, areal_dtype t, int peer,
                      areal_error *err);
int areal_ncclpg_recv(areal_ncclpg *g, void *buf, size_t count, areal_dtype t, int peer,
                      areal_error *err);

/* As areal_pg_all_to_all: block j of in to member j, block j of out from member j. */
int areal_ncclpg_all_to_all(areal_ncclpg *g, const void *in, void *out, size_t count, areal_dtype t,
                            areal_error *err);

/* As areal_pg_all_to_allv (element counts and offsets, host arrays of size entries). */
int areal_ncclpg_all_to_allv(areal_ncclpg *g, const void *in, const size_t *scounts,
                             const size_t *sdispls, void *out, const size_t *rcounts,
                             const size_t *rdispls, areal_dtype t, areal_error *err);

/* Returns once every member has entered the barrier (a one-element all-reduce). */
int areal_ncclpg_barrier(areal_ncclpg *g, areal_error *err);

/*
 * The NCCL backend behind the one collective interface: wraps g (taken over,
 * also on failure) in a handle of device memory on g's device. Its async
 * forms run at issue (every NCCL call here already waits for its stream).
 */
int areal_coll_from_ncclpg(areal_ncclpg *g, areal_coll **out, areal_error *err);

/* Where this process's NCCL groups are made: the factory's context (caller-owned). */
typedef struct areal_ncclpg_site {
    areal_store *store; /* rendezvous store of the job */
    int rank;           /* this process's global rank */
    int device;         /* CUDA device it drives */
    int timeout_ms;     /* deadline of creation and of every operation */
} areal_ncclpg_site;

/*
 * A factory of NCCL groups at `site` (which must outlive every use) drawn
 * from a world of `world` ranks, for areal_comm_role_groups. Group ids live
 * under "nccl/" in the store, so the CPU and NCCL groups of one role coexist.
 */
areal_coll_factory areal_ncclpg_coll_factory(const areal_ncclpg_site *site, int world);

#endif
