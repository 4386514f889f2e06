/*
 * pg_internal.h - the process group's state, shared by comm.c (creation and
 * connections) and the collective files.
 */
#ifndef AREAL_COMM_PG_INTERNAL_H
#define AREAL_COMM_PG_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "areal/comm/comm.h"

struct areal_pg {
    char name[AREAL_COMM_GROUP_NAME_MAX];
    int n;                 /* members */
    int me;                /* this rank's index */
    int *ranks;            /* global rank of each member */
    int *fd;               /* connection to each member (-1 for me) */
    struct areal_shm *shm; /* shared memory with the members of this pod, or NULL (shm.h) */
    int timeout_ms;        /* deadline of each operation */
    pthread_mutex_t mu;    /* one operation at a time */
    areal_error broken;    /* code != 0 once an operation failed */
    /* asynchronous operations (pg_async.c): a FIFO run by one worker thread */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    struct areal_work *qhead, *qtail;
    int queued; /* issued and not yet finished */
    int worker_started, stop;
    pthread_t worker;
    /*
     * byte counters (areal_coll_bytes), added to by run_parts in pg_xfer.c,
     * the one data mover, and only there: relaxed atomics, so the hot path
     * takes no lock and areal_pg_bytes may read them from any thread
     */
    _Atomic uint64_t sent[AREAL_COLL_KIND_COUNT], recv[AREAL_COLL_KIND_COUNT];
};

/*
 * Waits until every asynchronous operation issued on g has finished, so a
 * blocking call keeps issue order; returns at once on g's worker thread.
 */
void areal_pg_drain(areal_pg *g);

/* Stops g's worker thread (after its queue is empty). */
void areal_pg_async_stop(areal_pg *g);

/*
 * Moves bytes with up to two peers at once before the deadline: sends
 * sbuf[0..sn) to member sp and receives rbuf[0..rn) from member rp (either
 * may be -1 or empty; they may be the same member). On failure breaks the
 * group and returns AREAL_EIO with a message naming op and the peer.
 */
int areal_pg_xfer(areal_pg *g, const char *op, int sp, const void *sbuf, size_t sn, int rp,
                  void *rbuf, size_t rn, int64_t deadline, areal_error *err);

/*
 * Moves bytes with every member at once: sends sb[j][0..sn[j]) to and
 * receives rb[j][0..rn[j]) from each member j != me, all in flight together
 * (all-to-all). Failure as areal_pg_xfer.
 */
int areal_pg_xfer_all(areal_pg *g, const char *op, const uint8_t *const *sb, const size_t *sn,
                      uint8_t *const *rb, const size_t *rn, int64_t deadline, areal_error *err);

/*
 * Sets up g->shm with the members reached through the pod's Unix socket
 * (via_unix[j] != 0), see shm_setup.c; leaves it NULL when there are none,
 * when any of them has shared memory off (enable == 0 on that rank) or
 * cannot map it. AREAL_EIO naming the member when the exchange fails.
 */
int areal_pg_shm_setup(areal_pg *g, const uint8_t *via_unix, int enable, int64_t deadline,
                       areal_error *err);

/*
 * Like areal_pg_xfer, but the received rn bytes (whole elements of t: fp32,
 * int32 or int64) are reduced into rbuf (rbuf = op(rbuf, incoming)) instead
 * of stored: from shared memory straight out of the peer's ring, from a
 * socket through tmp (rn bytes, the caller's).
 */
int areal_pg_xfer_reduce(areal_pg *g, const char *op, int sp, const void *sbuf, size_t sn, int rp,
                         void *rbuf, void *tmp, size_t rn, areal_dtype t, areal_redop rop,
                         int64_t deadline, areal_error *err);

/*
 * The ring reduce-scatter behind areal_pg_reduce_scatter (pg_rs.c): out
 * (count elements of t) gets block g->me of op over every member's in
 * (n*count elements); any type and op of the API. Failure as areal_pg_xfer;
 * AREAL_ENOMEM.
 */
int areal_pg_ring_reduce_scatter(areal_pg *g, const char *opn, const void *in, void *out,
                                 size_t count, areal_dtype t, areal_redop op, int64_t dl,
                                 areal_error *err);

/*
 * 1 when member j's socket shows a hang-up, EOF or stray bytes (a
 * shared-memory peer's data goes through memory, so its socket only tells
 * liveness).
 */
int areal_pg_peer_gone(areal_pg *g, int j);

/*
 * One-round collectives through the shared-memory slots (pg_small.c), for
 * groups where areal_pg_all_local holds; g is locked and every member calls
 * the same one with the same sizes. areal_pg_small_cap: the bytes one
 * member may put in its slot (0 when the group is not all local).
 * all_reduce: t is fp32, int32 or int64, count * size(t) <= cap;
 * all_reduce2 the same in two stages (each member reduces 1/n of the
 * buffer, then copies the other pieces: the same bits). all_gather:
 * `bytes` per member <= cap. reduce_scatter: any type and op of the API, n *
 * count elements (fp32 for halves) <= cap. broadcast: bytes <= cap.
 * a2a: blocks of at most `rounds` pieces of lim bytes (lim lowered to
 * areal_pg_small_block, the most that fits for every peer) move through
 * the slots, one piece per block per round, and their sn/rn entries become
 * 0; the rest is left for the rings; fails when a peer sends a length other
 * than rn. Failure as areal_pg_xfer.
 */
size_t areal_pg_small_cap(const areal_pg *g);
size_t areal_pg_small_block(const areal_pg *g);
int areal_pg_small_all_reduce(areal_pg *g, const char *op, void *buf, size_t count, areal_dtype t,
                              areal_redop rop, int64_t dl, areal_error *err);
int areal_pg_small_all_reduce2(areal_pg *g, const char *op, void *buf, size_t count, areal_dtype t,
                               areal_redop rop, int64_t dl, areal_error *err);
int areal_pg_small_all_gather(areal_pg *g, const char *op, const void *in, void *out, size_t bytes,
                              int64_t dl, areal_error *err);
int areal_pg_small_reduce_scatter(areal_pg *g, const char *op, const void *in, void *out,
                                  size_t count, areal_dtype t, areal_redop rop, int64_t dl,
                                  areal_error *err);
int areal_pg_small_broadcast(areal_pg *g, const char *op, void *buf, size_t bytes, int root,
                             int64_t dl, areal_error *err);
int areal_pg_small_a2a(areal_pg *g, const char *op, const uint8_t *const *sb, size_t *sn,
                       uint8_t *const *rb, size_t *rn, size_t lim, int rounds, int64_t dl,
                       areal_error *err);

/*
 * Adds to g's byte counters (areal_coll_bytes) under op's kind: `sent`
 * bytes this member moved out to other members, `recv` bytes it took in
 * from them. areal_pg_xfer* count their own transfers through it; a data
 * path that bypasses them (a collective straight through shared memory)
 * must call it once per operation, or its bytes go uncounted.
 */
void areal_pg_count(areal_pg *g, const char *op, uint64_t sent, uint64_t recv);

/* 1 when every other member is reached through shared memory (g->shm covers the group). */
int areal_pg_all_local(const areal_pg *g);

/* Records err as the group's failure and shuts its connections down. */
void areal_pg_break(areal_pg *g, const areal_error *err);

#endif
