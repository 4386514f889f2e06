/*
 * pg_xfer.c - the one data mover of the CPU backend: sends to and receives
 * from several members at once, non-blocking, under a deadline, each
 * through its transport (shared memory with members of this pod when the
 * group has a segment, see shm.h; the member's socket otherwise).
 *
 * Ring and pairwise steps need both directions at once: if every rank first
 * sent a large block and then received, all would block on full buffers. So
 * every part of a step progresses in one loop; when none can, the rank
 * sleeps: in poll() on the sockets, or on its shared-memory doorbell (in
 * slices, checking after each idle slice that the Unix sockets of the
 * shared-memory peers it waits for are still open, so a dead peer is seen
 * within a slice), or, when both kinds are pending, in short polls. Errors
 * name the group, the operation and the peer's global rank, and break the
 * group (see areal_pg_break) so the failure reaches the other members
 * quickly; a member that broke the segment is seen at the next wake-up.
 *
 * Every byte an operation moves passes here, so this is where the group's
 * byte counters (areal_coll_bytes, coll.h) are added to: once per call, the
 * bytes each part moved, under the kind its op name maps to (relaxed atomic
 * adds, no lock; areal_pg_count). A new algorithm that moves data through
 * areal_pg_xfer* is counted without touching its own code; one that moves
 * data some other way calls areal_pg_count itself.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "areal/comm/net.h"
#include "pg_internal.h"
#include "shm.h"

#define SLICE_MS 20 /* longest doorbell sleep between liveness checks */
#define MIXED_MS 1  /* poll slice while shared-memory parts are pending too */

/* One direction of a step with one member. */
typedef struct part {
    int peer;
    int recv;
    uint8_t *buf;
    size_t n, done;
    /* receive-and-reduce: element type and op; tmp holds socket bytes until reduced */
    int reduce;
    areal_dtype t;
    areal_redop op;
    uint8_t *tmp;
    size_t red;
} part;

static int fail(areal_pg *g, const char *op, int peer, const char *why, areal_error *err) {
    areal_error e;
    areal_error_set(&e, AREAL_EIO, -1, "group %s: %s failed: rank %d (member %d) %s", g->name, op,
                    g->ranks[peer], peer, why);
    areal_pg_break(g, &e);
    if (err != NULL)
        *err = e;
    return AREAL_EIO;
}

/* Moves what it can of p without blocking: 1 on progress, 0 none, AREAL_EIO after fail(). */
static int step_socket(areal_pg *g, const char *op, part *p, areal_error *err) {
    ssize_t k;
    if (!p->recv) {
        k = send(g->fd[p->peer], p->buf + p->done, p->n - p->done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return fail(g, op, p->peer, "is gone (its connection failed while sending)", err);
    } else {
        uint8_t *dst = p->reduce ? p->tmp : p->buf;
        k = recv(g->fd[p->peer], dst + p->done, p->n - p->done, MSG_DONTWAIT);
        if (k == 0)
            return fail(g, op, p->peer, "closed its connection: it exited or aborted the group",
                        err);
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return fail(g, op, p->peer, "is gone (its connection failed while receiving)", err);
    }
    if (k <= 0)
        return 0;
    p->done += (size_t)k;
    if (p->reduce) {
        size_t es = areal_dtype_size(p->t), upto = p->done - p->done % es;
        areal_reduce(p->buf + p->red, p->tmp + p->red, (upto - p->red) / es, p->t, p->op);
        p->red = upto;
    }
    return 1;
}

static int step_shm(areal_pg *g, part *p) {
    size_t k, left = p->n - p->done;
    if (!p->recv)
        k = areal_shm_put(g->shm, p->peer, p->buf + p->done, left);
    else if (p->reduce)
        k = areal_shm_get_reduce(g->shm, p->peer, p->buf + p->done, left, p->t, p->op);
    else
        k = areal_shm_get(g->shm, p->peer, p->buf + p->done, left);
    p->done += k;
    return k > 0;
}

/* 1 when member j's socket shows a hang-up, EOF or stray bytes (the data goes through memory). */
static int peer_gone(areal_pg *g, int j) {
    struct pollfd pf = {.fd = g->fd[j], .events = POLLIN};
    if (poll(&pf, 1, 0) <= 0)
        return 0;
    if (pf.revents & (POLLHUP | POLLERR | POLLNVAL))
        return 1;
    char b;
    ssize_t k = recv(g->fd[j], &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return k >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static int timeout_fail(areal_pg *g, const char *op, const part *p, areal_error *err) {
    char why[128];
    snprintf(why, sizeof why, "did not %s within the %d ms deadline",
             p->recv ? "send its data" : "take our data", g->timeout_ms);
    return fail(g, op, p->peer, why, err);
}

/* Checks the shared-memory peers of the pending parts after an idle slice. */
static int check_shm_peers(areal_pg *g, const char *op, const part *ps, int np, areal_error *err) {
    for (int i = 0; i < np; i++)
        if (ps[i].done < ps[i].n && areal_shm_local(g->shm, ps[i].peer) >= 0 &&
            peer_gone(g, ps[i].peer))
            return fail(g, op, ps[i].peer, "closed its connection: it exited or aborted the group",
                        err);
    return AREAL_OK;
}

void areal_pg_count(areal_pg *g, const char *op, uint64_t sent, uint64_t recv) {
    areal_coll_kind k = areal_coll_kind_of(op);
    if (sent > 0)
        atomic_fetch_add_explicit(&g->sent[k], sent, memory_order_relaxed);
    if (recv > 0)
        atomic_fetch_add_explicit(&g->recv[k], recv, memory_order_relaxed);
}

/* Adds the bytes the parts moved to g's counters. */
static void count_parts(areal_pg *g, const char *op, const part *ps, int np) {
    uint64_t sent = 0, recv = 0;
    for (int i = 0; i < np; i++)
        *(ps[i].recv ? &recv : &sent) += ps[i].done;
    areal_pg_count(g, op, sent, recv);
}

/* Runs every part to completion before the deadline; see the file comment. */
static int run_parts(areal_pg *g, const char *op, part *ps, int np, int64_t deadline,
                     areal_error *err) {
    struct pollfd pfs[2];
    struct pollfd *pf = np <= 2 ? pfs : malloc(sizeof *pf * (size_t)np);
    if (pf == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "group %s: %s: out of memory", g->name, op);
    int rc = AREAL_OK;
    for (;;) {
        uint32_t seen = g->shm != NULL ? areal_shm_bell(g->shm) : 0;
        int progress = 0, on_sock = 0, on_shm = 0, first = -1;
        for (int i = 0; i < np && rc == AREAL_OK; i++) {
            part *p = &ps[i];
            if (p->done >= p->n)
                continue;
            int shm = areal_shm_local(g->shm, p->peer) >= 0;
            int r = shm ? step_shm(g, p) : step_socket(g, op, p, err);
            if (r < 0)
                rc = r;
            progress |= r > 0;
            if (p->done < p->n) {
                on_shm += shm;
                on_sock += !shm;
                first = first < 0 ? i : first;
            }
        }
        if (rc != AREAL_OK || first < 0)
            break;
        if (progress)
            continue;
        if (g->shm != NULL) {
            int who = areal_shm_broken_by(g->shm);
            if (who >= 0 && who != g->me) {
                rc = fail(g, op, who, "aborted the group (an operation failed there)", err);
                break;
            }
        }
        int64_t left = deadline - areal_now_ms();
        if (left <= 0) {
            rc = timeout_fail(g, op, &ps[first], err);
            break;
        }
        if (on_sock == 0) {
            if (areal_shm_wait(g->shm, seen, left < SLICE_MS ? (int)left : SLICE_MS))
                rc = check_shm_peers(g, op, ps, np, err);
            continue;
        }
        int n = 0;
        for (int i = 0; i < np; i++) {
            const part *p = &ps[i];
            if (p->done >= p->n || areal_shm_local(g->shm, p->peer) >= 0)
                continue;
            pf[n++] = (struct pollfd){.fd = g->fd[p->peer], .events = p->recv ? POLLIN : POLLOUT};
        }
        poll(pf, (nfds_t)n, on_shm ? MIXED_MS : (left > 1000000 ? 1000000 : (int)left));
        if (on_shm)
            rc = check_shm_peers(g, op, ps, np, err);
    }
    if (pf != pfs)
        free(pf);
    count_parts(g, op, ps, np);
    return rc;
}

int areal_pg_all_local(const areal_pg *g) {
    for (int j = 0; j < g->n; j++)
        if (j != g->me && areal_shm_local(g->shm, j) < 0)
            return 0;
    return g->shm != NULL;
}

int areal_pg_xfer(areal_pg *g, const char *op, int sp, const void *sbuf, size_t sn, int rp,
                  void *rbuf, size_t rn, int64_t deadline, areal_error *err) {
    part ps[2];
    int np = 0;
    if (sp >= 0 && sn > 0)
        ps[np++] = (part){.peer = sp, .buf = (uint8_t *)(uintptr_t)sbuf, .n = sn};
    if (rp >= 0 && rn > 0)
        ps[np++] = (part){.peer = rp, .recv = 1, .buf = rbuf, .n = rn};
    return np ? run_parts(g, op, ps, np, deadline, err) : AREAL_OK;
}

int areal_pg_xfer_reduce(areal_pg *g, const char *op, int sp, const void *sbuf, size_t sn, int rp,
                         void *rbuf, void *tmp, size_t rn, areal_dtype t, areal_redop rop,
                         int64_t deadline, areal_error *err) {
    part ps[2];
    int np = 0;
    if (sp >= 0 && sn > 0)
        ps[np++] = (part){.peer = sp, .buf = (uint8_t *)(uintptr_t)sbuf, .n = sn};
    if (rp >= 0 && rn > 0)
        ps[np++] = (part){.peer = rp,
                          .recv = 1,
                          .buf = rbuf,
                          .n = rn,
                          .reduce = 1,
                          .t = t,
                          .op = rop,
                          .tmp = tmp};
    return np ? run_parts(g, op, ps, np, deadline, err) : AREAL_OK;
}

int areal_pg_xfer_all(areal_pg *g, const char *op, const uint8_t *const *sb, const size_t *sn,
                      uint8_t *const *rb, const size_t *rn, int64_t deadline, areal_error *err) {
    part *ps = calloc((size_t)g->n * 2, sizeof *ps);
    if (ps == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "group %s: %s: out of memory", g->name, op);
    int np = 0;
    /* receives first: with shared memory, a receive frees ring room that a send may wait for */
    for (int j = 0; j < g->n; j++)
        if (j != g->me && rn[j] > 0)
            ps[np++] = (part){.peer = j, .recv = 1, .buf = rb[j], .n = rn[j]};
    for (int j = 0; j < g->n; j++)
        if (j != g->me && sn[j] > 0)
            ps[np++] = (part){.peer = j, .buf = (uint8_t *)(uintptr_t)sb[j], .n = sn[j]};
    int rc = np ? run_parts(g, op, ps, np, deadline, err) : AREAL_OK;
    free(ps);
    return rc;
}
