/*
 * pg_coll.c - the collectives of the CPU backend; see areal/comm/comm.h.
 *
 * When every member shares this rank's shared-memory segment, buffers up
 * to the SLOT_* sizes below take one round through the segment's slots
 * (pg_small.c): every member writes its input once and reads what it needs
 * from the others. Otherwise, and above those sizes:
 *
 * All-reduce: recursive doubling for small buffers (log2 n steps; with
 * n = 2^k + r, the first 2r ranks fold pairwise first and the odd one of each
 * pair gets the result back at the end) and a ring (reduce-scatter, then
 * all-gather: 2(n-1) steps moving 2(n-1)/n of the buffer) for large ones.
 * Both give identical bytes on every rank, because every element is combined
 * by one commutative op whose two sides compute op(a,b) and op(b,a).
 * bf16/fp16 reductions convert to an fp32 work buffer, reduce in fp32 and
 * round once. The ring's reduce steps move 128 KiB segments so each
 * received piece is reduced while in cache. Broadcast: binomial tree (small)
 * or a chain pipelined in 256 KiB segments (large). All-to-all(v): every
 * block in flight at once in one poll loop over all members (measured 1.4-2x
 * faster on loopback than n-1 pairwise steps), except when every member
 * shares this rank's memory segment: then rounds through the slots (below),
 * and n-1 pairwise steps, one ring pair at a time, only for a block too large
 * for them (pairwise was measured 1.6-2x faster at 64 MiB on 4 local ranks
 * than all rings at once, which spreads the copies over every ring and misses
 * cache). Rejected for now:
 * Rabenseifner's recursive halving (the ring moves the same bytes; latency
 * matters little at the sizes where it would win on CPUs).
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "areal/comm/net.h"
#include "pg_internal.h"

#define CHAIN_SEG (256u << 10) /* bytes per broadcast chain segment */
#define RS_SEG    (128u << 10) /* bytes per reduce-scatter segment */

/*
 * Largest buffers that go through the one-round shared-memory slots
 * (pg_small.c) when every member shares this rank's segment (also bounded
 * by the slot size, 256 KiB up to 16 local members): bytes of the
 * all-reduce buffer, of the gathered or scattered total, of the broadcast
 * buffer; all-to-all blocks of up to SLOT_A2A_ROUNDS pieces of
 * areal_pg_small_block (the slot's share per peer: 32 KiB on 8 ranks, 64 KiB
 * on 4, 128 KiB on 2) go through the slots in that many rounds. Measured on the 2-core VM (load ~10
 * from other builds, mean per call, slots vs the paths below): all-reduce 16 KiB 12 vs 36 us (2
 * ranks), 73 vs 148 (4), 80 vs 332 (8); 64 KiB 21 vs 35, 131 vs 268, 583 vs 642; 256 KiB 385 vs
 * 337, 3038 vs 1402, 6998 vs 3306 — every member reads all n inputs, n times the ring's bytes, so
 * the ring wins from there. All-gather, reduce-scatter and broadcast read no more than their ring
 * or tree (each member reads the total once): within noise at 64-256 KiB and far ahead below, so up
 * to the slot size. All-to-all at 256 KiB on 4 and 8 ranks: slots 754 / 2025 us, pairwise rings 664
 * / 1905 (when the slots took send buffers up to 64 KiB; with copy.h and the rounds, 2026-12-01,
 * load 15-18, all ranks' CPU per call, rings / slot rounds: 256 KiB on 8 ranks 1170-1250 / 310-430
 * us (two rounds), on 4 ranks 362 / 132, on 2 ranks 86 / 42. A later reading of "1 MiB on 8
 * ranks in four rounds 2980-3180 against the rings' 2330-2650" had kept two rounds at most, but
 * four pieces are a header short of a 128 KiB block, so that run paid four slot rounds and the
 * rings. With no round limit, on the idle VM (2026-12-02, all ranks' CPU per call, two rounds +
 * rings / slot rounds only; wall time in ratios to OpenMPI in worker/comm/README.md): 8 ranks 1
 * MiB 1680-1850 / 555-770 us, 4 MiB 5260-5650 / 3230-4950, 16 MiB 16100-29200 / 11800-15100; 4
 * ranks 1 MiB 540-620 / 210-320; 2 ranks 64 MiB 15700 / 9600-11300; 4 ranks at 64-256 MiB within
 * the machine's noise either way. So every block of an all-local group takes the slots.
 * All-reduce with 3+ members: one round up to 16 KiB, then the two-stage
 * slot form (each member reduces 1/n and copies the rest: two
 * synchronisations, each input byte read once) up to the slot size; with 2
 * members one round up to 64 KiB, then the ring, which moves only the half
 * the peer needs in its two steps (2026-12-01, load 12, all ranks' CPU per
 * call, ring / two-stage: 256 KiB on 2 ranks 240 / 330-350 us; on 4 ranks
 * 64 KiB one round 316-451 / two stages 215, 256 KiB 1161 / 804-1291; on
 * 8 ranks 64 KiB 995 / 610, 256 KiB 2131 / 1694-1734; measured before
 * copy.h replaced memcpy on these paths).
 */
#define SLOT_ALLREDUCE_BYTES  (64u << 10)  /* one round, 2 members */
#define SLOT_ALLREDUCE1_WIDE  (16u << 10)  /* one round, 3+ members */
#define SLOT_ALLREDUCE2_BYTES (256u << 10) /* two stages, 3+ members */

/* The largest all-reduce of the one-round and of the two-stage slot form for n members. */
static size_t slot_ar1_bytes(int n) {
    return n == 2 ? SLOT_ALLREDUCE_BYTES : SLOT_ALLREDUCE1_WIDE;
}

static size_t slot_ar2_bytes(int n) {
    return n == 2 ? 0 : SLOT_ALLREDUCE2_BYTES;
}

#define SLOT_MOVE_BYTES (256u << 10)
/* all-to-all blocks of up to this many slot pieces take the slots: any block (32 KiB pieces x
 * INT_MAX is 64 TiB); the pairwise rings after the rounds stay for a larger one */
#define SLOT_A2A_ROUNDS INT_MAX

/* 1 when an operation whose slot content is `bytes` (<= lim) goes through the slots. */
static int use_slots(const areal_pg *g, size_t bytes, size_t lim) {
    return bytes <= lim && bytes <= areal_pg_small_cap(g);
}

static size_t off_of(size_t count, int n, int c) {
    return (size_t)(((unsigned __int128)count * (unsigned)c) / (unsigned)n);
}

static int mod(int a, int n) {
    return ((a % n) + n) % n;
}

/* Locks g and checks the common arguments; on failure g is left unlocked. */
static int enter(areal_pg *g, const char *op, areal_dtype t, size_t count, size_t blocks,
                 areal_error *err) {
    if (!areal_comm_dtype_ok(t))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "group %s: %s: element type %d is not one of fp32, bf16, fp16, "
                               "int32, int64",
                               g->name, op, (int)t);
    if (blocks == 0 || count > (SIZE_MAX / 16) / blocks)
        return areal_error_set(err, AREAL_EINVAL, -1, "group %s: %s: count %zu is too large",
                               g->name, op, count);
    areal_pg_drain(g);
    pthread_mutex_lock(&g->mu);
    if (g->broken.code != AREAL_OK) {
        if (err != NULL)
            *err = g->broken;
        pthread_mutex_unlock(&g->mu);
        return g->broken.code;
    }
    return AREAL_OK;
}

static int leave(areal_pg *g, int rc) {
    pthread_mutex_unlock(&g->mu);
    return rc;
}

static int64_t deadline_of(const areal_pg *g) {
    return areal_now_ms() + g->timeout_ms;
}

static int nomem(areal_pg *g, const char *op, areal_error *err) {
    return areal_error_set(err, AREAL_ENOMEM, -1, "group %s: %s: out of memory", g->name, op);
}

/* Recursive doubling all-reduce of buf in place (t is fp32, int32 or int64). */
static int rd_allreduce(areal_pg *g, const char *opn, void *buf, size_t count, areal_dtype t,
                        areal_redop op, int64_t dl, areal_error *err) {
    int n = g->n, me = g->me;
    size_t bytes = count * areal_dtype_size(t);
    void *tmp = malloc(bytes ? bytes : 1);
    if (tmp == NULL)
        return nomem(g, opn, err);
    int p2 = 1;
    while (p2 * 2 <= n)
        p2 *= 2;
    int rem = n - p2, vr, rc = AREAL_OK;
    if (me < 2 * rem) {
        if (me % 2 == 0) {
            rc = areal_pg_xfer(g, opn, me + 1, buf, bytes, -1, NULL, 0, dl, err);
            vr = -1;
        } else {
            rc = areal_pg_xfer(g, opn, -1, NULL, 0, me - 1, tmp, bytes, dl, err);
            if (rc == AREAL_OK)
                areal_reduce(buf, tmp, count, t, op);
            vr = me / 2;
        }
    } else {
        vr = me - rem;
    }
    for (int mask = 1; vr >= 0 && mask < p2 && rc == AREAL_OK; mask <<= 1) {
        int pv = vr ^ mask;
        int peer = pv < rem ? pv * 2 + 1 : pv + rem;
        rc = areal_pg_xfer(g, opn, peer, buf, bytes, peer, tmp, bytes, dl, err);
        if (rc == AREAL_OK)
            areal_reduce(buf, tmp, count, t, op);
    }
    if (rc == AREAL_OK && me < 2 * rem) {
        if (me % 2 == 1)
            rc = areal_pg_xfer(g, opn, me - 1, buf, bytes, -1, NULL, 0, dl, err);
        else
            rc = areal_pg_xfer(g, opn, -1, NULL, 0, me + 1, buf, bytes, dl, err);
    }
    free(tmp);
    return rc;
}

/*
 * Ring reduce-scatter in place over n chunks of buf (chunk c spans
 * [off_of(count, n, c), off_of(count, n, c + 1))); afterwards this rank's
 * chunk `me` holds the reduction.
 */
static int ring_rs(areal_pg *g, const char *opn, void *buf, size_t count, areal_dtype t,
                   areal_redop op, int64_t dl, areal_error *err) {
    int n = g->n, me = g->me;
    size_t es = areal_dtype_size(t), seg = RS_SEG / es; /* elements per segment */
    uint8_t *tmp = malloc(seg * es), *b = buf;
    if (tmp == NULL)
        return nomem(g, opn, err);
    int rc = AREAL_OK, next = mod(me + 1, n), prev = mod(me - 1, n);
    for (int s = 0; s < n - 1 && rc == AREAL_OK; s++) {
        int sc = mod(me - s - 1, n), rcv = mod(me - s - 2, n);
        size_t so = off_of(count, n, sc), sn = off_of(count, n, sc + 1) - so;
        size_t ro = off_of(count, n, rcv), rn = off_of(count, n, rcv + 1) - ro;
        /* segment by segment, so each received piece is reduced while still in cache */
        for (size_t k = 0; (k < sn || k < rn) && rc == AREAL_OK; k += seg) {
            size_t ks = k < sn ? (sn - k < seg ? sn - k : seg) : 0;
            size_t kr = k < rn ? (rn - k < seg ? rn - k : seg) : 0;
            rc = areal_pg_xfer_reduce(g, opn, next, b + (so + k) * es, ks * es, prev,
                                      b + (ro + k) * es, tmp, kr * es, t, op, dl, err);
        }
    }
    free(tmp);
    return rc;
}

/* Ring all-gather in place: chunk `me` of buf is this rank's; afterwards all are filled. */
static int ring_ag(areal_pg *g, const char *opn, void *buf, size_t count, size_t es, int64_t dl,
                   areal_error *err) {
    int n = g->n, me = g->me, rc = AREAL_OK, next = mod(me + 1, n), prev = mod(me - 1, n);
    uint8_t *b = buf;
    for (int s = 0; s < n - 1 && rc == AREAL_OK; s++) {
        int sc = mod(me - s, n), rcv = mod(me - s - 1, n);
        size_t so = off_of(count, n, sc), sn = off_of(count, n, sc + 1) - so;
        size_t ro = off_of(count, n, rcv), rn = off_of(count, n, rcv + 1) - ro;
        rc = areal_pg_xfer(g, opn, next, b + so * es, sn * es, prev, b + ro * es, rn * es, dl, err);
    }
    return rc;
}

static int allreduce_core(areal_pg *g, const char *opn, void *buf, size_t count, areal_dtype t,
                          areal_redop op, int64_t dl, areal_error *err) {
    if (g->n == 1 || count == 0)
        return AREAL_OK;
    size_t bytes = count * areal_dtype_size(t);
    if (use_slots(g, bytes, slot_ar1_bytes(g->n)))
        return areal_pg_small_all_reduce(g, opn, buf, count, t, op, dl, err);
    if (use_slots(g, bytes, slot_ar2_bytes(g->n)))
        return areal_pg_small_all_reduce2(g, opn, buf, count, t, op, dl, err);
    if (count * areal_dtype_size(t) <= AREAL_COMM_SMALL_BYTES || count < (size_t)g->n)
        return rd_allreduce(g, opn, buf, count, t, op, dl, err);
    int rc = ring_rs(g, opn, buf, count, t, op, dl, err);
    if (rc == AREAL_OK)
        rc = ring_ag(g, opn, buf, count, areal_dtype_size(t), dl, err);
    return rc;
}

static int is_half(areal_dtype t) {
    return t == AREAL_DT_BF16 || t == AREAL_DT_F16;
}

static void to_f32(float *dst, const uint16_t *src, size_t n, areal_dtype t) {
    for (size_t i = 0; i < n; i++)
        dst[i] = t == AREAL_DT_BF16 ? areal_bf16_to_f32(src[i]) : areal_f16_to_f32(src[i]);
}

static void from_f32(uint16_t *dst, const float *src, size_t n, areal_dtype t) {
    for (size_t i = 0; i < n; i++)
        dst[i] = t == AREAL_DT_BF16 ? areal_f32_to_bf16(src[i]) : areal_f32_to_f16(src[i]);
}

static int check_redop(areal_pg *g, const char *opn, areal_redop op, areal_error *err) {
    if ((unsigned)op >= AREAL_REDOP_COUNT)
        return areal_error_set(err, AREAL_EINVAL, -1, "group %s: %s: unknown reduction %d", g->name,
                               opn, (int)op);
    return AREAL_OK;
}

int areal_pg_all_reduce(areal_pg *g, void *buf, size_t count, areal_dtype t, areal_redop op,
                        areal_error *err) {
    const char *opn = "all_reduce";
    int rc = check_redop(g, opn, op, err);
    if (rc == AREAL_OK && buf == NULL && count > 0)
        rc = areal_error_set(err, AREAL_EINVAL, -1, "group %s: %s: NULL buffer", g->name, opn);
    if (rc != AREAL_OK || (rc = enter(g, opn, t, count, 1, err)) != AREAL_OK)
        return rc;
    int64_t dl = deadline_of(g);
    areal_redop core = op == AREAL_AVG ? AREAL_SUM : op;
    if (!is_half(t)) {
        rc = allreduce_core(g, opn, buf, count, t, core, dl, err);
        if (rc == AREAL_OK && op == AREAL_AVG)
            areal_scale_avg(buf, count, t, g->n);
        return leave(g, rc);
    }
    float *w = malloc((count ? count : 1) * sizeof *w);
    if (w == NULL)
        return leave(g, nomem(g, opn, err));
    to_f32(w, buf, count, t);
    rc = allreduce_core(g, opn, w, count, AREAL_DT_F32, core, dl, err);
    if (rc == AREAL_OK) {
        if (op == AREAL_AVG)
            areal_scale_avg(w, count, AREAL_DT_F32, g->n);
        from_f32(buf, w, count, t);
    }
    free(w);
    return leave(g, rc);
}

int areal_pg_reduce_scatter(areal_pg *g, const void *in, void *out, size_t count, areal_dtype t,
                            areal_redop op, areal_error *err) {
    const char *opn = "reduce_scatter";
    int rc = check_redop(g, opn, op, err);
    if (rc == AREAL_OK && (in == NULL || out == NULL) && count > 0)
        rc = areal_error_set(err, AREAL_EINVAL, -1, "group %s: %s: NULL buffer", g->name, opn);
    if (rc != AREAL_OK || (rc = enter(g, opn, t, count, (size_t)g->n, err)) != AREAL_OK)
        return rc;
    size_t wes = is_half(t) ? sizeof(float) : areal_dtype_size(t);
    if (g->n > 1 && count > 0 && use_slots(g, (size_t)g->n * count * wes, SLOT_MOVE_BYTES))
        rc = areal_pg_small_reduce_scatter(g, opn, in, out, count, t, op, deadline_of(g), err);
    else
        rc = areal_pg_ring_reduce_scatter(g, opn, in, out, count, t, op, deadline_of(g), err);
    return leave(g, rc);
}

int areal_pg_all_gather(areal_pg *g, const void *in, void *out, size_t count, areal_dtype t,
                        areal_error *err) {
    const char *opn = "all_gather";
    if ((in == NULL || out == NULL) && count > 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "group %s: %s: NULL buffer", g->name, opn);
    int rc = enter(g, opn, t, count, (size_t)g->n, err);
    if (rc != AREAL_OK)
        return rc;
    size_t es = areal_dtype_size(t);
    uint8_t *o = out;
    if (g->n > 1 && count > 0 && use_slots(g, (size_t)g->n * count * es, SLOT_MOVE_BYTES))
        return leave(g,
                     areal_pg_small_all_gather(g, opn, in, out, count * es, deadline_of(g), err));
    if (count)
        memmove(o + (size_t)g->me * count * es, in, count * es);
    if (g->n > 1 && count > 0)
        rc = ring_ag(g, opn, out, count * (size_t)g->n, es, deadline_of(g), err);
    return leave(g, rc);
}

int areal_pg_broadcast(areal_pg *g, void *buf, size_t count, areal_dtype t, int root,
                       areal_error *err) {
    const char *opn = "broadcast";
    if (root < 0 || root >= g->n)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "group %s: broadcast root %d is not a member (0..%d)", g->name, root,
                               g->n - 1);
    if (buf == NULL && count > 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "group %s: %s: NULL buffer", g->name, opn);
    int rc = enter(g, opn, t, count, 1, err);
    if (rc != AREAL_OK || g->n == 1 || count == 0)
        return leave(g, rc);
    int n = g->n, vr = mod(g->me - root, n);
    size_t bytes = count * areal_dtype_size(t);
    int64_t dl = deadline_of(g);
    uint8_t *b = buf;
    if (use_slots(g, bytes, SLOT_MOVE_BYTES))
        return leave(g, areal_pg_small_broadcast(g, opn, b, bytes, root, dl, err));
    if (bytes <= AREAL_COMM_SMALL_BYTES) {
        int mask = 1;
        while (mask < n) {
            if (vr & mask) {
                rc =
                    areal_pg_xfer(g, opn, -1, NULL, 0, mod(vr - mask + root, n), b, bytes, dl, err);
                break;
            }
            mask <<= 1;
        }
        for (mask >>= 1; mask > 0 && rc == AREAL_OK; mask >>= 1)
            if (vr + mask < n)
                rc =
                    areal_pg_xfer(g, opn, mod(vr + mask + root, n), b, bytes, -1, NULL, 0, dl, err);
        return leave(g, rc);
    }
    size_t nseg = (bytes + CHAIN_SEG - 1) / CHAIN_SEG;
    int next = vr + 1 < n ? mod(vr + 1 + root, n) : -1, prev = vr > 0 ? mod(vr - 1 + root, n) : -1;
    for (size_t i = 0; i <= nseg && rc == AREAL_OK; i++) {
        long s = vr == 0 ? (i < nseg ? (long)i : -1) : (i >= 1 && next >= 0 ? (long)i - 1 : -1);
        long r = (vr > 0 && i < nseg) ? (long)i : -1;
        size_t so = s >= 0 ? (size_t)s * CHAIN_SEG : 0, ro = r >= 0 ? (size_t)r * CHAIN_SEG : 0;
        size_t sn = s >= 0 ? (bytes - so < CHAIN_SEG ? bytes - so : CHAIN_SEG) : 0;
        size_t rn = r >= 0 ? (bytes - ro < CHAIN_SEG ? bytes - ro : CHAIN_SEG) : 0;
        rc = areal_pg_xfer(g, opn, s >= 0 ? next : -1, b + so, sn, r >= 0 ? prev : -1, b + ro, rn,
                           dl, err);
    }
    return leave(g, rc);
}

static int p2p(areal_pg *g, const char *opn, int send, void *buf, size_t count, areal_dtype t,
               int peer, areal_error *err) {
    if (peer < 0 || peer >= g->n || peer == g->me)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "group %s: %s peer %d must be another member (0..%d, not %d)",
                               g->name, opn, peer, g->n - 1, g->me);
    if (buf == NULL && count > 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "group %s: %s: NULL buffer", g->name, opn);
    int rc = enter(g, opn, t, count, 1, err);
    if (rc != AREAL_OK)
        return rc;
    size_t bytes = count * areal_dtype_size(t);
    if (send)
        rc = areal_pg_xfer(g, opn, peer, buf, bytes, -1, NULL, 0, deadline_of(g), err);
    else
        rc = areal_pg_xfer(g, opn, -1, NULL, 0, peer, buf, bytes, deadline_of(g), err);
    return leave(g, rc);
}

int areal_pg_send(areal_pg *g, const void *buf, size_t count, areal_dtype t, int peer,
                  areal_error *err) {
    return p2p(g, "send", 1, (void *)(uintptr_t)buf, count, t, peer, err);
}

int areal_pg_recv(areal_pg *g, void *buf, size_t count, areal_dtype t, int peer, areal_error *err) {
    return p2p(g, "recv", 0, buf, count, t, peer, err);
}

/* The pairwise exchange behind all_to_all and all_to_allv; g is locked. */
static int a2a(areal_pg *g, const char *opn, const uint8_t *in, const size_t *sc, const size_t *sd,
               uint8_t *out, const size_t *rc_, const size_t *rd, size_t es, areal_error *err) {
    int n = g->n, me = g->me;
    if (rc_[me])
        memmove(out + rd[me] * es, in + sd[me] * es, rc_[me] * es);
    if (n == 1)
        return AREAL_OK;
    const uint8_t **sb = malloc(sizeof *sb * (size_t)n);
    uint8_t **rb = malloc(sizeof *rb * (size_t)n);
    size_t *sn = malloc(sizeof *sn * 2 * (size_t)n), *rn = sn ? sn + n : NULL;
    int rc = AREAL_OK;
    if (sb == NULL || rb == NULL || sn == NULL) {
        rc = nomem(g, opn, err);
    } else {
        for (int j = 0; j < n; j++) {
            sb[j] = in + sd[j] * es;
            sn[j] = j == me ? 0 : sc[j] * es;
            rb[j] = out + rd[j] * es;
            rn[j] = j == me ? 0 : rc_[j] * es;
        }
        if (areal_pg_all_local(g)) {
            /* every block through the slots in rounds; a block beyond SLOT_A2A_ROUNDS
             * pieces one ring pair at a time: every pair in flight at once thrashes the cache */
            int64_t dl = deadline_of(g);
            rc = areal_pg_small_a2a(g, opn, sb, sn, rb, rn, areal_pg_small_block(g),
                                    SLOT_A2A_ROUNDS, dl, err);
            for (int s = 1; s < n && rc == AREAL_OK; s++) {
                int to = (me + s) % n, from = (me - s + n) % n;
                rc = areal_pg_xfer(g, opn, to, sb[to], sn[to], from, rb[from], rn[from], dl, err);
            }
        } else {
            rc = areal_pg_xfer_all(g, opn, sb, sn, rb, rn, deadline_of(g), err);
        }
    }
    free(sb);
    free(rb);
    free(sn);
    return rc;
}

int areal_pg_all_to_allv(areal_pg *g, const void *in, const size_t *scounts, const size_t *sdispls,
                         void *out, const size_t *rcounts, const size_t *rdispls, areal_dtype t,
                         areal_error *err) {
    const char *opn = "all_to_allv";
    if (scounts == NULL || sdispls == NULL || rcounts == NULL || rdispls == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "group %s: %s: NULL count array", g->name,
                               opn);
    size_t lim = (SIZE_MAX / 16) / (size_t)g->n;
    for (int j = 0; j < g->n; j++) {
        if (scounts[j] > lim || sdispls[j] > lim || rcounts[j] > lim || rdispls[j] > lim)
            return areal_error_set(err, AREAL_EINVAL, -1, "group %s: %s: block %d is too large",
                                   g->name, opn, j);
        if ((scounts[j] && in == NULL) || (rcounts[j] && out == NULL))
            return areal_error_set(err, AREAL_EINVAL, -1, "group %s: %s: NULL buffer", g->name,
                                   opn);
    }
    if (scounts[g->me] != rcounts[g->me])
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "group %s: %s: this rank sends itself %zu elements but expects %zu",
                               g->name, opn, scounts[g->me], rcounts[g->me]);
    int rc = enter(g, opn, t, 0, 1, err);
    if (rc != AREAL_OK)
        return rc;
    rc = a2a(g, opn, in, scounts, sdispls, out, rcounts, rdispls, areal_dtype_size(t), err);
    return leave(g, rc);
}

int areal_pg_all_to_all(areal_pg *g, const void *in, void *out, size_t count, areal_dtype t,
                        areal_error *err) {
    const char *opn = "all_to_all";
    if ((in == NULL || out == NULL) && count > 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "group %s: %s: NULL buffer", g->name, opn);
    if (in == out && count > 0 && g->n > 1)
        return areal_error_set(err, AREAL_EINVAL, -1, "group %s: %s: in and out must differ",
                               g->name, opn);
    size_t *v = malloc(sizeof *v * 2 * (size_t)g->n);
    if (v == NULL)
        return nomem(g, opn, err);
    int rc = enter(g, opn, t, count, (size_t)g->n, err);
    if (rc == AREAL_OK) {
        for (int j = 0; j < g->n; j++) {
            v[j] = count;
            v[g->n + j] = (size_t)j * count;
        }
        rc = a2a(g, opn, in, v, v + g->n, out, v, v + g->n, areal_dtype_size(t), err);
        leave(g, rc);
    }
    free(v);
    return rc;
}

int areal_pg_barrier(areal_pg *g, areal_error *err) {
    const char *opn = "barrier";
    int rc = enter(g, opn, AREAL_DT_I32, 1, 1, err);
    if (rc != AREAL_OK)
        return rc;
    int32_t one = 1;
    rc = allreduce_core(g, opn, &one, 1, AREAL_DT_I32, AREAL_SUM, deadline_of(g), err);
    if (rc == AREAL_OK && one != g->n) {
        areal_error e;
        areal_error_set(&e, AREAL_EIO, -1,
                        "group %s: barrier counted %d members instead of %d: the members are "
                        "not running the same sequence of operations",
                        g->name, (int)one, g->n);
        areal_pg_break(g, &e);
        if (err != NULL)
            *err = e;
        rc = AREAL_EIO;
    }
    return leave(g, rc);
}
