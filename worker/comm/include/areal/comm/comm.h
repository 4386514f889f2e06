/*
 * comm.h - the comm runtime of one rank: rendezvous, process groups and the
 * CPU backend's collectives.
 *
 * areal_comm_init() joins the job: the host rank starts the store, every rank
 * listens on a port of its own and publishes "host:port" under
 * "areal/<prefix>/addr/<rank>". Ranks of one pod (same local_id) also listen
 * on an abstract Unix-domain socket, published under
 * "areal/<prefix>/local/<rank>", and
 * connect to each other through it (same stream semantics, no TCP stack). A process group is a
 * named list of global ranks; every member creates it with the same name and list. Its members are
 * connected pairwise by dedicated connections (the higher rank dials the
 * lower and introduces itself with the group's name), so groups used at the
 * same time, even from different threads, never share a stream. The members
 * of one pod in a group then share one anonymous memory segment (created
 * with the group, gone with it) and move data through per-pair rings in it,
 * one copy in and one copy out, with their Unix socket kept only to notice
 * a dead peer; shm_off in the config keeps them on the socket. A role's
 * groups are built by areal_comm_role_groups (areal/comm/role_groups.h).
 *
 * Collectives work on typed buffers with element counts (areal/comm/dtype.h).
 * Algorithms: all-reduce uses recursive doubling (with a fold for non-powers
 * of two) below AREAL_COMM_SMALL_BYTES and a ring (reduce-scatter then
 * all-gather) above; broadcast a binomial tree below and a pipelined chain
 * above; reduce-scatter and all-gather rings; all-to-all(v) with every
 * block in flight at once. bf16/fp16 reductions run in fp32 and round once.
 *
 * Failure: every operation has a deadline (the group's timeout from its
 * start). A peer that closes its connection or does not answer in time fails
 * the operation with AREAL_EIO and a message naming the group, the operation
 * and the peer's global rank. The group is then broken: its connections are
 * shut down, so peers blocked on this rank fail at once too (the failure
 * spreads through the group instead of each rank waiting out its deadline),
 * and every later operation on it returns the same error.
 *
 * Threads: one operation at a time per group (calls on one group are
 * serialised by a mutex); different groups may be used concurrently.
 */
#ifndef AREAL_COMM_COMM_H
#define AREAL_COMM_COMM_H

#include <stddef.h>

#include "areal/comm/coll.h"
#include "areal/comm/dtype.h"
#include "areal/comm/store.h"
#include "areal/error.h"

#define AREAL_COMM_GROUP_NAME_MAX 64
#define AREAL_COMM_SMALL_BYTES    (64u << 10)
#define AREAL_COMM_MAX_WORLD      65536

typedef struct areal_comm areal_comm;
typedef struct areal_pg areal_pg;

typedef struct areal_comm_config {
    int rank;                   /* global rank, 0..world-1 */
    int world;                  /* number of ranks */
    const char *store_host;     /* where the store runs (MASTER_ADDR) */
    int store_port;             /* its port (MASTER_PORT) */
    int host_store;             /* nonzero: this process starts the store (rank 0) */
    const char *bind_host;      /* address to listen on for peers; NULL = every address */
    const char *advertise_host; /* address peers dial; NULL = this host's name */
    int timeout_ms;             /* deadline of every operation, from its start */
    int connect_timeout_ms;     /* how long to wait for the store and for peers to appear */
    const char *local_id;       /* ranks with the same non-empty id (one pod) connect through
                                   Unix-domain sockets instead of TCP; NULL or "" = TCP only */
    const char *key_prefix;     /* namespace of this world's keys in the store, so several
                                   worlds (roles) share one store; NULL = "job" */
    int shm_off;                /* nonzero: ranks of one pod move data through their Unix
                                   sockets, not shared memory (AREAL_COMM_SHM=0 in the launcher) */
} areal_comm_config;

/*
 * Joins the job described by cfg (see above). On success the caller owns
 * *out and frees it with areal_comm_destroy() after every group. AREAL_EINVAL
 * for a bad config (named field); AREAL_EIO naming host:port when the store
 * cannot be started or reached or the peer port cannot be opened.
 */
int areal_comm_init(const areal_comm_config *cfg, areal_comm **out, areal_error *err);

/* Closes the connections and the store (stopping it on the host rank); NULL is a no-op. */
void areal_comm_destroy(areal_comm *c);

/* The store client of this rank (owned by c), for application keys. */
areal_store *areal_comm_store(areal_comm *c);
int areal_comm_rank(const areal_comm *c);
int areal_comm_world(const areal_comm *c);

/*
 * Creates the group `name` (1..63 bytes, the same on every member) of the
 * n distinct global ranks in `ranks`, which must include this rank. Member
 * order is the order of `ranks` (group rank j is ranks[j]). Blocks until
 * every member is connected or the connect timeout passes (AREAL_EIO naming
 * the missing rank). The caller owns *out (areal_pg_destroy before
 * areal_comm_destroy).
 */
int areal_comm_group(areal_comm *c, const char *name, const int *ranks, int n, areal_pg **out,
                     areal_error *err);

/* Closes the group's connections and frees it; NULL is a no-op. */
void areal_pg_destroy(areal_pg *g);

const char *areal_pg_name(const areal_pg *g);
int areal_pg_size(const areal_pg *g);
int areal_pg_rank(const areal_pg *g);               /* this rank's index in the group */
int areal_pg_global_rank(const areal_pg *g, int j); /* member j's global rank, -1 if none */
void areal_pg_set_timeout(areal_pg *g, int timeout_ms);
/* g's byte counters: what its transport moved per kind of operation (areal/comm/coll.h). */
void areal_pg_bytes(const areal_pg *g, areal_coll_bytes *out);

/*
 * The collectives. Every member calls the same operation with the same
 * count, type and op (a mismatch is undefined: the stream carries raw
 * elements). Return AREAL_OK or a negative code with err naming the group,
 * the operation and the peer; AREAL_EINVAL for bad arguments (checked before
 * any byte moves, so the group stays usable); AREAL_ENOMEM.
 */

/* In place: buf[0..count) becomes op over every member's buf. */
int areal_pg_all_reduce(areal_pg *g, void *buf, size_t count, areal_dtype t, areal_redop op,
                        areal_error *err);

/* in has size*count elements; out (count elements) gets block `rank` of op over every in. */
int areal_pg_reduce_scatter(areal_pg *g, const void *in, void *out, size_t count, areal_dtype t,
                            areal_redop op, areal_error *err);

/* out (size*count elements) gets every member's in (count elements) in member order. */
int areal_pg_all_gather(areal_pg *g, const void *in, void *out, size_t count, areal_dtype t,
                        areal_error *err);

/* buf of member `root` is copied to every member's buf. */
int areal_pg_broadcast(areal_pg *g, void *buf, size_t count, areal_dtype t, int root,
                       areal_error *err);

/* Point to point with group member `peer` (not this rank). */
int areal_pg_send(areal_pg *g, const void *buf, size_t count, areal_dtype t, int peer,
                  areal_error *err);
int areal_pg_recv(areal_pg *g, void *buf, size_t count, areal_dtype t, int peer, areal_error *err);

/* Block j (count elements) of in goes to member j; block j of out comes from member j. */
int areal_pg_all_to_all(areal_pg *g, const void *in, void *out, size_t count, areal_dtype t,
                        areal_error *err);

/*
 * Variable blocks: scounts[j] elements from in + sdispls[j] go to member j;
 * rcounts[j] elements from member j land at out + rdispls[j] (element
 * offsets). Each rcounts[j] must equal member j's scounts[this rank].
 */
int areal_pg_all_to_allv(areal_pg *g, const void *in, const size_t *scounts, const size_t *sdispls,
                         void *out, const size_t *rcounts, const size_t *rdispls, areal_dtype t,
                         areal_error *err);

/* Returns once every member has entered the barrier. */
int areal_pg_barrier(areal_pg *g, areal_error *err);

/*
 * Asynchronous forms, for overlapping communication with compute. Each
 * queues the operation on the group's worker thread (started on first use)
 * and returns a handle at once; operations on one group run in issue order,
 * and a blocking call on the group first waits for the queued ones. Buffers
 * must stay valid and untouched until the handle is waited on. Argument
 * errors are reported when the handle is waited on. AREAL_ENOMEM when no
 * handle can be made (nothing queued then).
 */
typedef struct areal_work areal_work;

int areal_pg_all_reduce_async(areal_pg *g, void *buf, size_t count, areal_dtype t, areal_redop op,
                              areal_work **out, areal_error *err);
int areal_pg_reduce_scatter_async(areal_pg *g, const void *in, void *out, size_t count,
                                  areal_dtype t, areal_redop op, areal_work **w, areal_error *err);
int areal_pg_all_gather_async(areal_pg *g, const void *in, void *out, size_t count, areal_dtype t,
                              areal_work **w, areal_error *err);
int areal_pg_broadcast_async(areal_pg *g, void *buf, size_t count, areal_dtype t, int root,
                             areal_work **w, areal_error *err);

/* Sets *done to 1 when the operation has finished (then wait returns at once). */
void areal_work_test(areal_work *w, int *done);

/*
 * Waits for the operation, frees the handle and returns the operation's
 * result (err filled as by the blocking form). Every handle must be waited
 * on exactly once, before areal_pg_destroy of its group.
 */
int areal_work_wait(areal_work *w, areal_error *err);

/*
 * The CPU backend behind the one collective interface (areal/comm/coll.h):
 * wraps g (taken over, also on failure) in a host-memory handle.
 */
int areal_coll_from_pg(areal_pg *g, areal_coll **out, areal_error *err);

/*
 * A factory of CPU groups over c (areal_comm_group then areal_coll_from_pg),
 * for areal_comm_role_groups; c must outlive every use of it.
 */
areal_coll_factory areal_comm_coll_factory(areal_comm *c);

#endif
