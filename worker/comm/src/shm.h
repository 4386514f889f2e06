/*
 * shm.h - the shared-memory transport between the members of one process
 * group that run in one pod (same local id): one mapping per group, with a
 * single-producer/single-consumer byte ring per ordered pair of local
 * members and one futex doorbell per member.
 *
 * The segment is an anonymous memfd (never a name in /dev/shm, so nothing
 * can leak: it disappears with the last mapping). The group's lowest local
 * member creates it and passes the descriptor to the others over their
 * Unix-domain connections (SCM_RIGHTS); see shm_setup.c. Those connections
 * stay open as the liveness channel: the data path never writes to them, so
 * a hang-up or EOF there means the peer is gone.
 *
 * Waiting: a rank that can make no progress snapshots its doorbell, checks
 * its rings, and sleeps on the doorbell futex; every producer or consumer
 * that changes a ring rings the other side's bell (a counter increment, and
 * a wake only when that side sleeps). Rejected: an eventfd per member
 * (pollable together with sockets, but a descriptor exchange per pair and a
 * syscall per ring) and pure spinning (the CI machine runs 8 ranks on 2 cores).
 * Before sleeping a waiter polls (pause, then sched_yield; see shm.c).
 *
 * Slots (one-round collectives for small buffers, pg_small.c): each local
 * member owns two slots of areal_shm_slot_cap() bytes (used by sequence
 * parity) and three counters, `arrived` (the last sequence whose slot content
 * it published), `reduced` (the two-stage all-reduce: the last sequence whose
 * reduced piece it published in its slot) and `finished` (the last sequence
 * whose peers' slots it is done reading). Every member takes part in every slot operation in the
 * same order, so sequence numbers agree; a member may overwrite its slot
 * for sequence q once every member finished q - 2.
 */
#ifndef AREAL_COMM_SHM_H
#define AREAL_COMM_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "areal/comm/dtype.h"

#define AREAL_SHM_MAX_LOCAL 64 /* more local members than this: sockets only */

typedef struct areal_shm areal_shm;

/*
 * Bytes of the segment for k local members (k >= 2), and the ring capacity
 * used for it (a power of two). Both sides compute the same values.
 */
size_t areal_shm_ring_cap(int k);
size_t areal_shm_segment_bytes(int k);

/* Bytes of each slot for k local members (a power of two, 16..256 KiB). */
size_t areal_shm_slot_bytes(int k);

/*
 * Maps the segment behind descriptor fd (len bytes, for k local members) as
 * local member `mine`; `loc` (n entries, copied) gives each group member's
 * local index or -1. With init != 0 the caller creates the segment and the
 * header is written. Returns NULL when the mapping fails or the header does
 * not match (the caller then falls back to sockets). fd stays the caller's.
 */
areal_shm *areal_shm_map(int fd, size_t len, int k, int mine, const int *loc, int n, int init);

/* Unmaps and frees; NULL is a no-op. */
void areal_shm_close(areal_shm *s);

/* Local index of group member j, or -1 when j is not reached through shared memory. */
int areal_shm_local(const areal_shm *s, int j);

/*
 * Copies up to n bytes of buf into the ring towards member j (a local
 * member), without blocking; returns how many went in (0 when the ring is
 * full) and rings j's bell when any did.
 */
size_t areal_shm_put(areal_shm *s, int j, const void *buf, size_t n);

/* Copies up to n bytes from the ring from member j into buf; returns how many. */
size_t areal_shm_get(areal_shm *s, int j, void *buf, size_t n);

/*
 * Like areal_shm_get, but reduces the bytes into dst (dst[i] = op(dst[i],
 * incoming[i]) over elements of type t, straight from the ring); only
 * whole elements are taken. Returns the bytes consumed.
 */
size_t areal_shm_get_reduce(areal_shm *s, int j, void *dst, size_t n, areal_dtype t,
                            areal_redop op);

/* This member's doorbell counter, read before checking the rings. */
uint32_t areal_shm_bell(const areal_shm *s);

/*
 * Sleeps until the bell moves past `seen` or timeout_ms passes (polling
 * briefly first). Returns 1 when it timed out, 0 otherwise.
 */
int areal_shm_wait(areal_shm *s, uint32_t seen, int timeout_ms);

/*
 * Waits until ready(arg) != 0 (returns 0) or timeout_ms passes (returns 1):
 * polls ready (a short spin where this member seems to have a core of its
 * own, then sched_yield until poll_ns have passed; see shm.c), then sleeps
 * on this member's doorbell, which areal_shm_slot_publish, the rings and
 * areal_shm_break ring (so a ready that should end at a broken mark must
 * check areal_shm_broken_by itself). ready must only read shared state.
 */
int areal_shm_wait_until(areal_shm *s, int (*ready)(void *), void *arg, int timeout_ms,
                         long poll_ns);

/* The slot size of this segment (areal_shm_slot_bytes(k)). */
size_t areal_shm_slot_cap(const areal_shm *s);

/* Local member li's slot for sequence seq (its parity picks one of two). */
uint8_t *areal_shm_slot(areal_shm *s, int li, uint64_t seq);

/* The sequence number of this member's next slot operation. */
uint64_t areal_shm_slot_next(const areal_shm *s);

/* The slot counters (shm.h's file comment); the values are what callers pass as `which`. */
enum { AREAL_SHM_ARRIVED = 0, AREAL_SHM_FINISHED = 1, AREAL_SHM_REDUCED = 2 };

/* Local member li's counter `which` (AREAL_SHM_ARRIVED, ...; acquire order). */
uint64_t areal_shm_slot_seq(const areal_shm *s, int li, int which);

/*
 * Publishes this member's counter `which` as seq (release order: the slot's
 * content is visible first) and wakes the members sleeping on their
 * doorbells.
 */
void areal_shm_slot_publish(areal_shm *s, uint64_t seq, int which);

/*
 * Marks the segment broken by group member `who` (the first caller wins)
 * and wakes every local member, so their waits end at once.
 */
void areal_shm_break(areal_shm *s, int who);

/* The group member that broke the segment, or -1. */
int areal_shm_broken_by(const areal_shm *s);

#endif
