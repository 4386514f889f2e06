/*
 * pg_xfer.c - the one data mover of the CPU backend: a simultaneous send to
 * one member and receive from another, non-blocking, under a deadline.
 *
 * Ring and pairwise steps need both directions at once: if every rank first
 * sent a large block and then received, all would block on full socket
 * buffers. So both sides progress in one poll loop. Errors name the group,
 * the operation and the peer's global rank, and break the group (see
 * areal_pg_break) so the failure reaches the other members quickly.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "areal/comm/net.h"
#include "pg_internal.h"

static int fail(areal_pg *g, const char *op, int peer, const char *why, areal_error *err) {
    areal_error e;
    areal_error_set(&e, AREAL_EIO, -1, "group %s: %s failed: rank %d (member %d) %s", g->name, op,
                    g->ranks[peer], peer, why);
    areal_pg_break(g, &e);
    if (err != NULL)
        *err = e;
    return AREAL_EIO;
}

int areal_pg_xfer(areal_pg *g, const char *op, int sp, const void *sbuf, size_t sn, int rp,
                  void *rbuf, size_t rn, int64_t deadline, areal_error *err) {
    size_t so = 0, ro = 0;
    if (sp < 0)
        sn = 0;
    if (rp < 0)
        rn = 0;
    const uint8_t *s = sbuf;
    uint8_t *r = rbuf;
    while (so < sn || ro < rn) {
        int progress = 0;
        if (so < sn) {
            ssize_t k = send(g->fd[sp], s + so, sn - so, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k > 0) {
                so += (size_t)k;
                progress = 1;
            } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return fail(g, op, sp, "is gone (its connection failed while sending)", err);
            }
        }
        if (ro < rn) {
            ssize_t k = recv(g->fd[rp], r + ro, rn - ro, MSG_DONTWAIT);
            if (k > 0) {
                ro += (size_t)k;
                progress = 1;
            } else if (k == 0) {
                return fail(g, op, rp, "closed its connection: it exited or aborted the group",
                            err);
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return fail(g, op, rp, "is gone (its connection failed while receiving)", err);
            }
        }
        if (progress)
            continue;
        int64_t left = deadline - areal_now_ms();
        if (left <= 0) {
            int who = ro < rn ? rp : sp;
            char why[128];
            snprintf(why, sizeof why, "did not %s within the %d ms deadline",
                     ro < rn ? "send its data" : "take our data", g->timeout_ms);
            return fail(g, op, who, why, err);
        }
        struct pollfd pf[2];
        int np = 0;
        if (so < sn)
            pf[np++] = (struct pollfd){.fd = g->fd[sp], .events = POLLOUT};
        if (ro < rn)
            pf[np++] = (struct pollfd){.fd = g->fd[rp], .events = POLLIN};
        poll(pf, (nfds_t)np, left > 1000000 ? 1000000 : (int)left);
    }
    return AREAL_OK;
}

int areal_pg_xfer_all(areal_pg *g, const char *op, const uint8_t *const *sb, const size_t *sn,
                      uint8_t *const *rb, const size_t *rn, int64_t deadline, areal_error *err) {
    int n = g->n;
    size_t *so = calloc((size_t)n * 2, sizeof *so), *ro = so + n;
    struct pollfd *pf = calloc((size_t)n, sizeof *pf);
    int *who = calloc((size_t)n, sizeof *who);
    if (so == NULL || pf == NULL || who == NULL) {
        free(so);
        free(pf);
        free(who);
        return areal_error_set(err, AREAL_ENOMEM, -1, "group %s: %s: out of memory", g->name, op);
    }
    int rc = AREAL_OK;
    for (;;) {
        int progress = 0, pending = 0;
        for (int j = 0; j < n && rc == AREAL_OK; j++) {
            if (j == g->me)
                continue;
            if (so[j] < sn[j]) {
                ssize_t k =
                    send(g->fd[j], sb[j] + so[j], sn[j] - so[j], MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k > 0) {
                    so[j] += (size_t)k;
                    progress = 1;
                } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                    rc = fail(g, op, j, "is gone (its connection failed while sending)", err);
                }
            }
            if (rc == AREAL_OK && ro[j] < rn[j]) {
                ssize_t k = recv(g->fd[j], rb[j] + ro[j], rn[j] - ro[j], MSG_DONTWAIT);
                if (k > 0) {
                    ro[j] += (size_t)k;
                    progress = 1;
                } else if (k == 0) {
                    rc = fail(g, op, j, "closed its connection: it exited or aborted the group",
                              err);
                } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                    rc = fail(g, op, j, "is gone (its connection failed while receiving)", err);
                }
            }
            pending += so[j] < sn[j] || ro[j] < rn[j];
        }
        if (rc != AREAL_OK || pending == 0)
            break;
        if (progress)
            continue;
        int64_t left = deadline - areal_now_ms();
        int np = 0;
        for (int j = 0; j < n; j++) {
            if (j == g->me || (so[j] >= sn[j] && ro[j] >= rn[j]))
                continue;
            short ev = (short)((so[j] < sn[j] ? POLLOUT : 0) | (ro[j] < rn[j] ? POLLIN : 0));
            pf[np] = (struct pollfd){.fd = g->fd[j], .events = ev};
            who[np++] = j;
        }
        if (left <= 0) {
            int j = who[0];
            char why[128];
            snprintf(why, sizeof why, "did not %s within the %d ms deadline",
                     ro[j] < rn[j] ? "send its data" : "take our data", g->timeout_ms);
            rc = fail(g, op, j, why, err);
            break;
        }
        poll(pf, (nfds_t)np, left > 1000000 ? 1000000 : (int)left);
    }
    free(so);
    free(pf);
    free(who);
    return rc;
}
