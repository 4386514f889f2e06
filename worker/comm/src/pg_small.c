/*
 * pg_small.c - one-round collectives through the shared-memory slots (shm.h)
 * for groups whose members all share this rank's segment; pg_coll.c picks
 * them by size (the thresholds are measured there).
 *
 * Every operation is the same protocol with sequence q (this member's next):
 * a member that writes waits until every member finished reading q - 2 (the
 * slot of q's parity is free again; for all-reduce and the others where
 * every member writes this holds already, the check is a few loads), copies
 * its data into its slot, publishes `arrived = q`, waits for the arrivals it
 * needs, reads the peers' slots, and publishes `finished = q`. So a small
 * all-reduce is one synchronisation instead of log2(n) exchanges, each of
 * which on an oversubscribed machine costs a context switch per peer.
 *
 * All-reduce reduces the n slots in member order on every member (slot 0,
 * then op(acc, slot 1), ...), so every member computes bit-identical results
 * from the same operands in the same order; bf16/fp16 arrive here already
 * widened to fp32 (pg_coll.c). Its two-stage form (larger buffers) reads
 * each byte of the inputs once instead of n times: after the arrivals each
 * member reduces only its 1/n piece (the same member order, so the same
 * bits as the one-round form) into its own piece of its slot (which no peer
 * reads before then: the member keeps that input piece in its buffer and
 * writes only the others), publishes `reduced`, and copies every other piece
 * from the member that reduced it: a reduce-scatter and an all-gather
 * through the segment, two synchronisations and no ring copies. Reduce-scatter does the same for
 * its block. All-to-all(v): each member writes its blocks for every peer into its slot behind a
 * table of (offset, length) per destination; a block goes through the slot when it is at most the
 * caller's limit (the sender decides and the table tells the receiver), the rest through the rings
 * afterwards (pg_coll.c), and a receiver that finds a length other than the
 * one it expects fails with both numbers instead of hanging.
 *
 * Byte counters (areal_pg_count): what the peers read from this member's
 * slot is sent, what it reads from theirs is received, so all-gather,
 * reduce-scatter and all-to-all count what their rings would.
 *
 * Waiting, deadlines and liveness as in pg_xfer.c: poll-yield-sleep on the
 * doorbell in 20 ms slices (areal_shm_wait_until), after an idle slice the
 * members still awaited must hold their Unix sockets open, a broken segment
 * ends the wait at once, and a failure names the group, the operation and a
 * peer, and breaks the group. Rejected: one shared accumulation buffer that
 * members add into under a lock (arrival order would decide the rounding).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/comm/net.h"
#include "copy.h"
#include "pg_internal.h"
#include "shm.h"

#define SLICE_MS 20      /* longest doorbell sleep between liveness checks */
#define POLL_NS  200000L /* polling before the doorbell sleep: the waits here are short (shm.c) */
#define NO_SLOT  UINT64_MAX

typedef struct {
    areal_pg *g;
    int member; /* the one to wait for, or -1: every other member */
    int which;  /* which counter: AREAL_SHM_ARRIVED, ... */
    uint64_t seq;
} slot_wait;

/* The first awaited member whose counter is still below seq, or -1. */
static int missing(const slot_wait *w) {
    const areal_pg *g = w->g;
    for (int j = w->member < 0 ? 0 : w->member; j < g->n; j++) {
        if (j != g->me && areal_shm_slot_seq(g->shm, areal_shm_local(g->shm, j), w->which) < w->seq)
            return j;
        if (w->member >= 0)
            break;
    }
    return -1;
}

static int ready(void *arg) {
    const slot_wait *w = arg;
    return missing(w) < 0 || areal_shm_broken_by(w->g->shm) >= 0;
}

static int fail(areal_pg *g, const char *op, int peer, const char *why, areal_error *err) {
    areal_error e;
    areal_error_set(&e, AREAL_EIO, -1, "group %s: %s failed: rank %d (member %d) %s", g->name, op,
                    g->ranks[peer], peer, why);
    areal_pg_break(g, &e);
    if (err != NULL)
        *err = e;
    return AREAL_EIO;
}

static int wait_for(areal_pg *g, const char *op, int member, int which, uint64_t seq, int64_t dl,
                    areal_error *err) {
    slot_wait w = {g, member, which, seq};
    for (;;) {
        int j = missing(&w);
        if (j < 0)
            return AREAL_OK;
        int who = areal_shm_broken_by(g->shm);
        if (who >= 0)
            return fail(g, op, who == g->me ? j : who,
                        "aborted the group (an operation failed there)", err);
        int64_t left = dl - areal_now_ms();
        if (left <= 0) {
            char why[128];
            snprintf(why, sizeof why, "did not %s within the %d ms deadline",
                     which == AREAL_SHM_FINISHED  ? "take our data"
                     : which == AREAL_SHM_REDUCED ? "send its reduced piece"
                                                  : "send its data",
                     g->timeout_ms);
            return fail(g, op, j, why, err);
        }
        if (!areal_shm_wait_until(g->shm, ready, &w, left < SLICE_MS ? (int)left : SLICE_MS,
                                  POLL_NS))
            continue;
        /* only members still awaited: one that is done may have left already */
        for (int k = 0; k < g->n; k++) {
            slot_wait one = {g, k, which, seq};
            if (k != g->me && (member < 0 || k == member) && missing(&one) >= 0 &&
                areal_pg_peer_gone(g, k))
                return fail(g, op, k, "closed its connection: it exited or aborted the group", err);
        }
    }
}

static uint8_t *slot_of(areal_pg *g, int j, uint64_t q) {
    return areal_shm_slot(g->shm, areal_shm_local(g->shm, j), q);
}

/* Takes this member's next sequence; a writer first waits until its slot is free. */
static int begin(areal_pg *g, const char *op, uint64_t *q, int writes, int64_t dl,
                 areal_error *err) {
    *q = areal_shm_slot_next(g->shm);
    return writes && *q > 2 ? wait_for(g, op, -1, AREAL_SHM_FINISHED, *q - 2, dl, err) : AREAL_OK;
}

/* Publishes arrival and waits for `member` (-1: all). */
static int arrive(areal_pg *g, const char *op, uint64_t q, int member, int64_t dl,
                  areal_error *err) {
    areal_shm_slot_publish(g->shm, q, AREAL_SHM_ARRIVED);
    return wait_for(g, op, member, AREAL_SHM_ARRIVED, q, dl, err);
}

static void finish(areal_pg *g, uint64_t q) {
    areal_shm_slot_publish(g->shm, q, AREAL_SHM_FINISHED);
}

size_t areal_pg_small_cap(const areal_pg *g) {
    return areal_pg_all_local(g) ? areal_shm_slot_cap(g->shm) : 0;
}

static size_t a2a_hdr(int n);

size_t areal_pg_small_block(const areal_pg *g) {
    size_t cap = areal_pg_small_cap(g), hdr = a2a_hdr(g->n);
    return cap > hdr ? (cap - hdr) / (size_t)g->n / 64 * 64 : 0;
}

int areal_pg_small_all_reduce(areal_pg *g, const char *op, void *buf, size_t count, areal_dtype t,
                              areal_redop rop, int64_t dl, areal_error *err) {
    size_t bytes = count * areal_dtype_size(t);
    uint64_t q;
    int rc = begin(g, op, &q, 1, dl, err);
    if (rc != AREAL_OK)
        return rc;
    areal_comm_copy(slot_of(g, g->me, q), buf, bytes);
    if ((rc = arrive(g, op, q, -1, dl, err)) != AREAL_OK)
        return rc;
    if (g->me != 0)
        areal_comm_copy(buf, slot_of(g, 0, q), bytes);
    for (int j = 1; j < g->n; j++)
        areal_reduce(buf, slot_of(g, j, q), count, t, rop);
    finish(g, q);
    areal_pg_count(g, op, (uint64_t)(g->n - 1) * bytes, (uint64_t)(g->n - 1) * bytes);
    return AREAL_OK;
}

static size_t piece_at(size_t count, int n, int c) {
    return (size_t)(((unsigned __int128)count * (unsigned)c) / (unsigned)n);
}

int areal_pg_small_all_reduce2(areal_pg *g, const char *op, void *buf, size_t count, areal_dtype t,
                               areal_redop rop, int64_t dl, areal_error *err) {
    int n = g->n, me = g->me;
    size_t es = areal_dtype_size(t), bytes = count * es;
    size_t lo = piece_at(count, n, me) * es, mine = piece_at(count, n, me + 1) * es - lo;
    uint8_t *b = buf;
    uint64_t q;
    int rc = begin(g, op, &q, 1, dl, err);
    if (rc != AREAL_OK)
        return rc;
    /* the pieces the peers reduce; this member's own piece stays in buf */
    uint8_t *slot = slot_of(g, me, q), *acc = slot + lo;
    areal_comm_copy(slot, b, lo);
    areal_comm_copy(acc + mine, b + lo + mine, bytes - lo - mine);
    if ((rc = arrive(g, op, q, -1, dl, err)) != AREAL_OK)
        return rc;
    /*
     * stage 1: this member's piece, reduced over the members' inputs in member
     * order, into its own piece of its slot (no peer reads that one before
     * `reduced`)
     */
    areal_comm_copy(acc, me == 0 ? b + lo : slot_of(g, 0, q) + lo, mine);
    for (int j = 1; j < n; j++)
        areal_reduce(acc, j == me ? b + lo : slot_of(g, j, q) + lo, mine / es, t, rop);
    areal_shm_slot_publish(g->shm, q, AREAL_SHM_REDUCED);
    areal_comm_copy(b + lo, acc, mine);
    if ((rc = wait_for(g, op, -1, AREAL_SHM_REDUCED, q, dl, err)) != AREAL_OK)
        return rc;
    /* stage 2: every other piece from the member that reduced it */
    for (int j = 0; j < n; j++) {
        size_t at = piece_at(count, n, j) * es, len = piece_at(count, n, j + 1) * es - at;
        if (j != me)
            areal_comm_copy(b + at, slot_of(g, j, q) + at, len);
    }
    finish(g, q);
    /* peers read this member's other pieces, then its reduced one n - 1 times; and back */
    uint64_t moved = (uint64_t)(bytes - mine) + (uint64_t)(n - 1) * mine;
    areal_pg_count(g, op, moved, moved);
    return AREAL_OK;
}

int areal_pg_small_all_gather(areal_pg *g, const char *op, const void *in, void *out, size_t bytes,
                              int64_t dl, areal_error *err) {
    uint64_t q;
    int rc = begin(g, op, &q, 1, dl, err);
    if (rc != AREAL_OK)
        return rc;
    areal_comm_copy(slot_of(g, g->me, q), in, bytes);
    if ((rc = arrive(g, op, q, -1, dl, err)) != AREAL_OK)
        return rc;
    for (int j = 0; j < g->n; j++)
        areal_comm_copy((uint8_t *)out + (size_t)j * bytes, slot_of(g, j, q), bytes);
    finish(g, q);
    areal_pg_count(g, op, (uint64_t)(g->n - 1) * bytes, (uint64_t)(g->n - 1) * bytes);
    return AREAL_OK;
}

static int is_half(areal_dtype t) {
    return t == AREAL_DT_BF16 || t == AREAL_DT_F16;
}

int areal_pg_small_reduce_scatter(areal_pg *g, const char *op, const void *in, void *out,
                                  size_t count, areal_dtype t, areal_redop rop, int64_t dl,
                                  areal_error *err) {
    int n = g->n, half = is_half(t);
    areal_dtype wt = half ? AREAL_DT_F32 : t;
    size_t wes = areal_dtype_size(wt), blk = count * wes;
    areal_redop core = rop == AREAL_AVG ? AREAL_SUM : rop;
    /* allocated before the protocol starts: failing half-way would leave the peers waiting */
    float *acc = half ? malloc(blk ? blk : 1) : NULL;
    if (half && acc == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "group %s: %s: out of memory", g->name, op);
    uint64_t q;
    int rc = begin(g, op, &q, 1, dl, err);
    if (rc == AREAL_OK) {
        uint8_t *mine = slot_of(g, g->me, q);
        if (!half) {
            areal_comm_copy(mine, in, (size_t)n * blk);
        } else {
            const uint16_t *h = in;
            float *w = (float *)(void *)mine;
            for (size_t i = 0; i < (size_t)n * count; i++)
                w[i] = t == AREAL_DT_BF16 ? areal_bf16_to_f32(h[i]) : areal_f16_to_f32(h[i]);
        }
        rc = arrive(g, op, q, -1, dl, err);
    }
    if (rc == AREAL_OK) {
        uint8_t *dst = half ? (uint8_t *)acc : out;
        size_t at = (size_t)g->me * blk;
        areal_comm_copy(dst, slot_of(g, 0, q) + at, blk);
        for (int j = 1; j < n; j++)
            areal_reduce(dst, slot_of(g, j, q) + at, count, wt, core);
        finish(g, q);
        uint64_t moved = (uint64_t)(n - 1) * count * areal_dtype_size(t);
        areal_pg_count(g, op, moved, moved);
        if (rop == AREAL_AVG)
            areal_scale_avg(dst, count, wt, n);
        if (half) {
            uint16_t *o = out;
            for (size_t i = 0; i < count; i++)
                o[i] = t == AREAL_DT_BF16 ? areal_f32_to_bf16(acc[i]) : areal_f32_to_f16(acc[i]);
        }
    }
    free(acc);
    return rc;
}

int areal_pg_small_broadcast(areal_pg *g, const char *op, void *buf, size_t bytes, int root,
                             int64_t dl, areal_error *err) {
    int me_root = g->me == root;
    uint64_t q;
    int rc = begin(g, op, &q, me_root, dl, err);
    if (rc != AREAL_OK)
        return rc;
    if (me_root)
        areal_comm_copy(slot_of(g, root, q), buf, bytes);
    /* every member publishes, so the sequence numbers stay in step */
    if ((rc = arrive(g, op, q, me_root ? g->me : root, dl, err)) != AREAL_OK)
        return rc;
    if (!me_root)
        areal_comm_copy(buf, slot_of(g, root, q), bytes);
    finish(g, q);
    areal_pg_count(g, op, me_root ? (uint64_t)(g->n - 1) * bytes : 0, me_root ? 0 : bytes);
    return AREAL_OK;
}

/* Bytes of the all-to-all table at the start of a slot: (offset, length) per member and a max. */
static size_t a2a_hdr(int n) {
    return (16 * (size_t)n + 8 + 63) / 64 * 64;
}

int areal_pg_small_a2a(areal_pg *g, const char *op, const uint8_t *const *sb, size_t *sn,
                       uint8_t *const *rb, size_t *rn, size_t lim, int rounds, int64_t dl,
                       areal_error *err) {
    int n = g->n, me = g->me;
    size_t hdr = a2a_hdr(n), piece = areal_pg_small_block(g);
    if (lim < piece)
        piece = lim;
    if (piece == 0 || rounds < 1)
        return AREAL_OK;
    size_t most = piece * (size_t)rounds; /* the largest block that goes through the slots */
    uint64_t sent = 0, got = 0, need = 0; /* need: rounds every member takes part in */
    int rc = AREAL_OK;
    for (uint64_t r = 0; r == 0 || r < need; r++) {
        uint64_t q;
        if ((rc = begin(g, op, &q, 1, dl, err)) != AREAL_OK)
            return rc;
        uint8_t *mine = slot_of(g, me, q);
        uint64_t *tab = (uint64_t *)(void *)mine, at = r * piece, big = 0;
        for (int j = 0; j < n; j++) {
            size_t len = j == me ? 0 : sn[j];
            int via = j != me && len <= most;
            if (r == 0) {
                tab[2 * j] = via ? hdr + (size_t)j * piece : NO_SLOT;
                tab[2 * j + 1] = len;
                if (via && len > big)
                    big = len;
            }
            if (via && len > at) {
                size_t k = len - at < piece ? len - at : piece;
                areal_comm_copy(mine + hdr + (size_t)j * piece, sb[j] + at, k);
                sent += k;
            }
        }
        if (r == 0)
            tab[2 * n] = (big + piece - 1) / piece; /* the rounds this member needs */
        if ((rc = arrive(g, op, q, -1, dl, err)) != AREAL_OK)
            return rc;
        for (int j = 0; j < n && rc == AREAL_OK; j++) {
            if (j == me)
                continue;
            const uint8_t *theirs = slot_of(g, j, q);
            const uint64_t *tj = (const uint64_t *)(const void *)theirs;
            if (r == 0) {
                uint64_t len = tj[2 * me + 1];
                if (tj[2 * n] > need)
                    need = tj[2 * n];
                if (len != rn[j]) {
                    char why[160];
                    snprintf(why, sizeof why,
                             "sends %llu bytes to this rank, which expects %zu (the counts of the "
                             "members disagree)",
                             (unsigned long long)len, rn[j]);
                    rc = fail(g, op, j, why, err);
                    break;
                }
            }
            /* a block from j comes through the slots when it is at most `most` (j's rule too) */
            if (rn[j] <= most && rn[j] > at) {
                size_t k = rn[j] - at < piece ? rn[j] - at : piece;
                areal_comm_copy(rb[j] + at, theirs + hdr + (size_t)me * piece, k);
                got += k;
            }
        }
        if (rc != AREAL_OK)
            return rc;
        if (r == 0 && big > 0 && need < tab[2 * n])
            need = tab[2 * n];
        finish(g, q);
    }
    for (int j = 0; j < n; j++) {
        if (j != me && sn[j] <= most)
            sn[j] = 0; /* moved: the rings skip it */
        if (j != me && rn[j] <= most)
            rn[j] = 0;
    }
    areal_pg_count(g, op, sent, got);
    return AREAL_OK;
}
