/*
 * shm_setup.c - agreeing on a group's shared-memory segment while the group
 * is created; see shm.h.
 *
 * The local members of a group are this rank and the members it reached
 * through the pod's Unix-domain socket (same local id, so every local member
 * sees the same set). The first of them in member order (the leader) creates
 * a memfd, maps it and sends {magic, ok, length, k} with the descriptor
 * (SCM_RIGHTS) to every other local member; each maps it and answers one
 * byte (1 mapped, 0 not); the leader answers every member with the verdict
 * (1 only when all mapped). So either every local pair uses shared memory
 * or none does, even when a rank turned it off (AREAL_COMM_SHM=0 in its
 * config) or ran out of memory. Rejected: a named POSIX shm_open segment (a
 * crash between open and unlink leaves a file in /dev/shm).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "areal/comm/net.h"
#include "pg_internal.h"
#include "shm.h"

#define OFFER_MAGIC 0x46464f53u /* "SOFF" */
#define OFFER_BYTES 24

static int setup_fail(areal_pg *g, int j, const char *what, areal_error *err) {
    return areal_error_set(err, AREAL_EIO, -1,
                           "group %s: shared-memory setup with rank %d (member %d) failed: %s",
                           g->name, g->ranks[j], j, what);
}

/* Sends the offer to member j, with the segment's descriptor when fd >= 0. */
static int send_offer(areal_pg *g, int j, const uint8_t *msg, int fd, int64_t deadline,
                      areal_error *err) {
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = (void *)(uintptr_t)msg, .iov_len = OFFER_BYTES};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof ctl.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    for (;;) {
        ssize_t k = sendmsg(g->fd[j], &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k == OFFER_BYTES)
            return AREAL_OK;
        if (k >= 0 || (errno != EAGAIN && errno != EINTR))
            return setup_fail(g, j, "could not send the segment", err);
        int64_t left = deadline - areal_now_ms();
        struct pollfd pf = {.fd = g->fd[j], .events = POLLOUT};
        if (left <= 0 || poll(&pf, 1, (int)(left > 100000 ? 100000 : left)) < 0)
            return setup_fail(g, j, "timed out sending the segment", err);
    }
}

/* Receives the offer from member j; *fd gets the passed descriptor or -1. */
static int recv_offer(areal_pg *g, int j, uint8_t *msg, int *fd, int64_t deadline,
                      areal_error *err) {
    size_t got = 0;
    *fd = -1;
    while (got < OFFER_BYTES) {
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(int))];
        } ctl;
        struct iovec iov = {.iov_base = msg + got, .iov_len = OFFER_BYTES - got};
        struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl};
        ssize_t k = recvmsg(g->fd[j], &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (k > 0) {
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
                    c->cmsg_len == CMSG_LEN(sizeof(int)) && *fd < 0)
                    memcpy(fd, CMSG_DATA(c), sizeof *fd);
            }
            got += (size_t)k;
            continue;
        }
        if (k == 0 || (errno != EAGAIN && errno != EINTR))
            break;
        int64_t left = deadline - areal_now_ms();
        struct pollfd pf = {.fd = g->fd[j], .events = POLLIN};
        if (left <= 0 || poll(&pf, 1, (int)(left > 100000 ? 100000 : left)) < 0)
            break;
    }
    if (got == OFFER_BYTES)
        return AREAL_OK;
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
    return setup_fail(g, j, "no segment offer arrived", err);
}

static int byte_xchg(areal_pg *g, int j, int send, uint8_t *b, int64_t deadline, areal_error *err) {
    char what[128];
    snprintf(what, sizeof what, "rank %d of group %s (shared-memory setup)", g->ranks[j], g->name);
    return send ? areal_net_send_all(g->fd[j], b, 1, deadline, what, err)
                : areal_net_recv_all(g->fd[j], b, 1, deadline, what, err);
}

/* The leader: create, offer, collect answers, send the verdict. */
static int lead(areal_pg *g, const int *loc, int k, int enable, int64_t deadline,
                areal_error *err) {
    size_t len = areal_shm_segment_bytes(k);
    int fd = enable ? memfd_create("areal-comm", MFD_CLOEXEC) : -1;
    areal_shm *s = NULL;
    if (fd >= 0 && ftruncate(fd, (off_t)len) == 0)
        s = areal_shm_map(fd, len, k, 0, loc, g->n, 1);
    uint8_t msg[OFFER_BYTES] = {0};
    areal_put_u32(msg, OFFER_MAGIC);
    areal_put_u32(msg + 4, s != NULL);
    areal_put_u64(msg + 8, len);
    areal_put_u32(msg + 16, (uint32_t)k);
    int rc = AREAL_OK;
    uint8_t all = s != NULL;
    for (int j = 0; j < g->n && rc == AREAL_OK; j++)
        if (loc[j] > 0)
            rc = send_offer(g, j, msg, s != NULL ? fd : -1, deadline, err);
    if (fd >= 0)
        close(fd); /* the mappings keep the memory; nothing has a name to unlink */
    for (int j = 0; j < g->n && rc == AREAL_OK; j++) {
        uint8_t b = 0;
        if (loc[j] > 0 && (rc = byte_xchg(g, j, 0, &b, deadline, err)) == AREAL_OK && b != 1)
            all = 0;
    }
    for (int j = 0; j < g->n && rc == AREAL_OK; j++)
        if (loc[j] > 0)
            rc = byte_xchg(g, j, 1, &all, deadline, err);
    if (rc == AREAL_OK && all)
        g->shm = s;
    else
        areal_shm_close(s);
    return rc;
}

static int follow(areal_pg *g, const int *loc, int k, int leader, int enable, int64_t deadline,
                  areal_error *err) {
    uint8_t msg[OFFER_BYTES];
    int fd = -1;
    int rc = recv_offer(g, leader, msg, &fd, deadline, err);
    if (rc != AREAL_OK)
        return rc;
    areal_shm *s = NULL;
    if (enable && fd >= 0 && areal_get_u32(msg) == OFFER_MAGIC && areal_get_u32(msg + 4) == 1 &&
        areal_get_u32(msg + 16) == (uint32_t)k)
        s = areal_shm_map(fd, (size_t)areal_get_u64(msg + 8), k, loc[g->me], loc, g->n, 0);
    if (fd >= 0)
        close(fd);
    uint8_t b = s != NULL;
    rc = byte_xchg(g, leader, 1, &b, deadline, err);
    if (rc == AREAL_OK)
        rc = byte_xchg(g, leader, 0, &b, deadline, err);
    if (rc == AREAL_OK && b == 1)
        g->shm = s;
    else
        areal_shm_close(s);
    return rc;
}

int areal_pg_shm_setup(areal_pg *g, const uint8_t *via_unix, int enable, int64_t deadline,
                       areal_error *err) {
    int *loc = malloc(sizeof *loc * (size_t)g->n), k = 0, leader = -1;
    if (loc == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for group %s", g->name);
    for (int j = 0; j < g->n; j++) {
        loc[j] = j == g->me || via_unix[j] ? k++ : -1;
        if (loc[j] == 0)
            leader = j;
    }
    int rc = AREAL_OK;
    /* too many local members: every one of them sees the same k and skips */
    if (k >= 2 && k <= AREAL_SHM_MAX_LOCAL)
        rc = leader == g->me ? lead(g, loc, k, enable, deadline, err)
                             : follow(g, loc, k, leader, enable, deadline, err);
    free(loc);
    return rc;
}
