/*
 * comm.c - joining a job and connecting process groups; see areal/comm/comm.h.
 *
 * Each rank has one listening socket. To connect a group, a member dials
 * every member of lower global rank (address from the store) and sends a
 * hello {magic, its rank, group size, group name}; it accepts from every
 * member of higher rank. Connections for groups this rank has not reached
 * yet are parked in a pending list, so members may create groups in any
 * order without deadlock (dialling never waits for the peer to accept: the
 * kernel completes the handshake into the listen backlog). Rejected: one
 * mesh shared by all groups with tagged messages (a receiver thread and
 * copies, and concurrent groups would contend for one stream).
 */
#include "areal/comm/comm.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "areal/comm/net.h"
#include "pg_internal.h"
#include "shm.h"

#define HELLO_MAGIC   0x47504c41u /* "ALPG" */
#define HELLO_BYTES   (16 + AREAL_COMM_GROUP_NAME_MAX)
#define PENDING_MAX   4096
#define ADDR_KEY_FMT  "areal/%s/addr/%d"
#define LOCAL_KEY_FMT "areal/%s/local/%d"
#define PREFIX_MAX    64

typedef struct pending {
    int fd;
    int from;
    int size;     /* the group size the dialling rank announced */
    int via_unix; /* it came through the pod's Unix-domain listener */
    char name[AREAL_COMM_GROUP_NAME_MAX];
} pending;

struct areal_comm {
    int rank, world;
    int timeout_ms, connect_timeout_ms;
    areal_store_server *server;
    areal_store *store;
    int lfd;
    int ulfd;                /* Unix-domain listener, -1 without a local id */
    char local_id[128];      /* "" = TCP only */
    int shm_off;             /* local members use their sockets, not shared memory */
    char prefix[PREFIX_MAX]; /* store namespace of this world */
    pthread_mutex_t mu;      /* the pending list and group creation */
    pending *pend;
    int npend;
};

static int check_config(const areal_comm_config *cfg, areal_error *err) {
    if (cfg->world < 1 || cfg->world > AREAL_COMM_MAX_WORLD)
        return areal_error_set(err, AREAL_EINVAL, -1, "WORLD_SIZE %d is outside 1..%d", cfg->world,
                               AREAL_COMM_MAX_WORLD);
    if (cfg->rank < 0 || cfg->rank >= cfg->world)
        return areal_error_set(err, AREAL_EINVAL, -1, "RANK %d is outside 0..%d", cfg->rank,
                               cfg->world - 1);
    if (cfg->store_host == NULL || cfg->store_host[0] == '\0')
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "no store address: set MASTER_ADDR to the rank-0 host");
    if (cfg->store_port < (cfg->host_store ? 0 : 1) || cfg->store_port > 65535)
        return areal_error_set(err, AREAL_EINVAL, -1, "MASTER_PORT %d is outside 1..65535",
                               cfg->store_port);
    if (cfg->key_prefix != NULL && strlen(cfg->key_prefix) >= PREFIX_MAX)
        return areal_error_set(err, AREAL_EINVAL, -1, "key prefix '%s' is longer than %d bytes",
                               cfg->key_prefix, PREFIX_MAX - 1);
    if (cfg->timeout_ms <= 0 || cfg->connect_timeout_ms <= 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "comm timeouts must be positive (got %d, %d)",
                               cfg->timeout_ms, cfg->connect_timeout_ms);
    return AREAL_OK;
}

int areal_comm_init(const areal_comm_config *cfg, areal_comm **out, areal_error *err) {
    int rc = check_config(cfg, err);
    if (rc != AREAL_OK)
        return rc;
    areal_comm *c = calloc(1, sizeof *c);
    pending *pend = calloc(PENDING_MAX, sizeof *pend);
    if (c == NULL || pend == NULL) {
        free(c);
        free(pend);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory joining the job");
    }
    c->pend = pend;
    snprintf(c->prefix, sizeof c->prefix, "%s",
             cfg->key_prefix && cfg->key_prefix[0] ? cfg->key_prefix : "job");
    c->rank = cfg->rank;
    c->world = cfg->world;
    c->timeout_ms = cfg->timeout_ms;
    c->connect_timeout_ms = cfg->connect_timeout_ms;
    c->lfd = -1;
    c->ulfd = -1;
    c->shm_off = cfg->shm_off;
    pthread_mutex_init(&c->mu, NULL);
    int port = cfg->store_port;
    if (cfg->host_store) {
        rc = areal_store_server_start(cfg->bind_host, cfg->store_port, &c->server, &port, err);
        if (rc != AREAL_OK)
            goto fail;
    }
    rc = areal_store_connect(cfg->store_host, port, cfg->connect_timeout_ms, cfg->timeout_ms,
                             &c->store, err);
    if (rc != AREAL_OK)
        goto fail;
    int myport = 0;
    rc = areal_net_listen(cfg->bind_host, 0, &c->lfd, &myport, err);
    if (rc != AREAL_OK)
        goto fail;
    char host[AREAL_HOST_MAX];
    if (cfg->advertise_host != NULL && cfg->advertise_host[0] != '\0') {
        snprintf(host, sizeof host, "%s", cfg->advertise_host);
    } else if (gethostname(host, sizeof host) != 0) {
        rc = areal_error_set(err, AREAL_EIO, -1, "gethostname failed: %s", strerror(errno));
        goto fail;
    }
    host[sizeof host - 1] = '\0';
    char key[128], val[AREAL_HOST_MAX + 160];
    if (cfg->local_id != NULL && cfg->local_id[0] != '\0') {
        if (strlen(cfg->local_id) >= sizeof c->local_id || strchr(cfg->local_id, '|')) {
            rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "local id '%s' must be shorter than %zu bytes, without '|'",
                                 cfg->local_id, sizeof c->local_id);
            goto fail;
        }
        char uname[64];
        /* unique per process and per comm object (one process may join twice) */
        snprintf(uname, sizeof uname, "areal-comm-%d-%" PRIxPTR, (int)getpid(), (uintptr_t)c);
        rc = areal_net_listen_unix(uname, &c->ulfd, err);
        if (rc != AREAL_OK)
            goto fail;
        snprintf(c->local_id, sizeof c->local_id, "%s", cfg->local_id);
        snprintf(key, sizeof key, LOCAL_KEY_FMT, c->prefix, c->rank);
        int ln = snprintf(val, sizeof val, "%s|%s", c->local_id, uname);
        /* published before the address, so a peer that sees the address sees this too */
        rc = areal_store_set(c->store, key, val, (size_t)ln, err);
        if (rc != AREAL_OK)
            goto fail;
    }
    snprintf(key, sizeof key, ADDR_KEY_FMT, c->prefix, c->rank);
    int vn = snprintf(val, sizeof val, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, myport);
    rc = areal_store_set(c->store, key, val, (size_t)vn, err);
    if (rc != AREAL_OK)
        goto fail;
    *out = c;
    return AREAL_OK;
fail:
    areal_comm_destroy(c);
    return rc;
}

void areal_comm_destroy(areal_comm *c) {
    if (c == NULL)
        return;
    for (int i = 0; i < c->npend; i++)
        close(c->pend[i].fd);
    if (c->lfd >= 0)
        close(c->lfd);
    if (c->ulfd >= 0)
        close(c->ulfd);
    areal_store_close(c->store);
    areal_store_server_stop(c->server);
    pthread_mutex_destroy(&c->mu);
    free(c->pend);
    free(c);
}

areal_store *areal_comm_store(areal_comm *c) {
    return c->store;
}

int areal_comm_rank(const areal_comm *c) {
    return c->rank;
}

int areal_comm_world(const areal_comm *c) {
    return c->world;
}

/*
 * Dials global rank `to` for group g and introduces this rank; *via_unix
 * tells whether it went through the pod's Unix-domain socket.
 */
static int dial(areal_comm *c, areal_pg *g, int to, int64_t deadline, int *fd, uint8_t *via_unix,
                areal_error *err) {
    char key[128], addr[AREAL_HOST_MAX + 16], host[AREAL_HOST_MAX];
    size_t n = 0;
    snprintf(key, sizeof key, ADDR_KEY_FMT, c->prefix, to);
    int64_t left = deadline - areal_now_ms();
    areal_error se;
    areal_error_clear(&se);
    int rc =
        areal_store_get(c->store, key, left > 0 ? (int)left : 0, addr, sizeof addr - 1, &n, &se);
    if (rc != AREAL_OK)
        return areal_error_set(err, AREAL_EIO, -1,
                               "group %s: rank %d never published its address (is it running?): "
                               "%s",
                               g->name, to, se.msg);
    addr[n] = '\0';
    int port = 0;
    rc = areal_net_split_hostport(addr, host, &port, err);
    if (rc != AREAL_OK)
        return rc;
    char what[96];
    snprintf(what, sizeof what, "rank %d of group %s", to, g->name);
    char local[192];
    size_t ln = 0;
    char *bar = NULL;
    if (c->local_id[0] != '\0') {
        snprintf(key, sizeof key, LOCAL_KEY_FMT, c->prefix, to);
        /* set before the address we already read: present now or never */
        if (areal_store_get(c->store, key, 0, local, sizeof local - 1, &ln, NULL) == AREAL_OK) {
            local[ln] = '\0';
            bar = strchr(local, '|');
        }
    }
    if (bar != NULL && (size_t)(bar - local) == strlen(c->local_id) &&
        strncmp(local, c->local_id, (size_t)(bar - local)) == 0) {
        *via_unix = 1;
        rc = areal_net_connect_unix(bar + 1, deadline, what, fd, err);
    } else {
        rc = areal_net_connect(host, port, deadline, true, what, fd, err);
    }
    if (rc != AREAL_OK)
        return rc;
    uint8_t hello[HELLO_BYTES] = {0};
    areal_put_u32(hello, HELLO_MAGIC);
    areal_put_u32(hello + 4, (uint32_t)c->rank);
    areal_put_u32(hello + 8, (uint32_t)g->n);
    areal_put_u32(hello + 12, (uint32_t)strlen(g->name));
    memcpy(hello + 16, g->name, strlen(g->name));
    rc = areal_net_send_all(*fd, hello, sizeof hello, deadline, what, err);
    if (rc != AREAL_OK) {
        close(*fd);
        *fd = -1;
    }
    return rc;
}

/* Accepts one connection and parks it in the pending list (bad hellos are dropped). */
static int accept_one(areal_comm *c, int64_t deadline, areal_error *err) {
    int fd;
    struct pollfd pf[2] = {{.fd = c->lfd, .events = POLLIN}, {.fd = c->ulfd, .events = POLLIN}};
    int64_t left = deadline - areal_now_ms();
    if (left <= 0 || poll(pf, c->ulfd >= 0 ? 2 : 1, left > 1000000 ? 1000000 : (int)left) <= 0)
        return areal_error_set(err, AREAL_EIO, -1, "timed out waiting for a connection");
    int via_unix = pf[0].revents == 0;
    int rc = areal_net_accept(via_unix ? c->ulfd : c->lfd, deadline, &fd, err);
    if (rc != AREAL_OK)
        return rc;
    uint8_t hello[HELLO_BYTES];
    int64_t hd = areal_now_ms() + 2000;
    rc = areal_net_recv_all(fd, hello, sizeof hello, hd < deadline ? hd : deadline,
                            "a connecting peer", NULL);
    uint32_t nl = areal_get_u32(hello + 12);
    if (rc != AREAL_OK || areal_get_u32(hello) != HELLO_MAGIC || nl == 0 ||
        nl >= AREAL_COMM_GROUP_NAME_MAX || c->npend >= PENDING_MAX) {
        close(fd);
        return AREAL_OK;
    }
    pending *p = &c->pend[c->npend++];
    p->fd = fd;
    p->from = (int)areal_get_u32(hello + 4);
    p->size = (int)areal_get_u32(hello + 8);
    p->via_unix = via_unix;
    memcpy(p->name, hello + 16, nl);
    p->name[nl] = '\0';
    return AREAL_OK;
}

/*
 * Takes the parked connection of rank `from` for group `name`: its fd, -1
 * when none is there yet, or -2 (connection closed, *size set) when that
 * rank announced a different group size. *via_unix tells its listener.
 */
static int take_pending(areal_comm *c, const char *name, int from, int n, int *size,
                        uint8_t *via_unix) {
    for (int i = 0; i < c->npend; i++) {
        if (c->pend[i].from == from && strcmp(c->pend[i].name, name) == 0) {
            int fd = c->pend[i].fd;
            *size = c->pend[i].size;
            *via_unix = (uint8_t)c->pend[i].via_unix;
            c->pend[i] = c->pend[--c->npend];
            if (*size != n) {
                close(fd);
                return -2;
            }
            return fd;
        }
    }
    return -1;
}

static int check_members(const areal_comm *c, const char *name, const int *ranks, int n, int *me,
                         areal_error *err) {
    if (name == NULL || name[0] == '\0' || strlen(name) >= AREAL_COMM_GROUP_NAME_MAX)
        return areal_error_set(err, AREAL_EINVAL, -1, "group name must have 1..%d bytes",
                               AREAL_COMM_GROUP_NAME_MAX - 1);
    if (ranks == NULL || n < 1 || n > c->world)
        return areal_error_set(err, AREAL_EINVAL, -1, "group %s: size %d is outside 1..%d", name, n,
                               c->world);
    *me = -1;
    for (int j = 0; j < n; j++) {
        if (ranks[j] < 0 || ranks[j] >= c->world)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "group %s: member %d is rank %d, outside 0..%d", name, j,
                                   ranks[j], c->world - 1);
        for (int k = 0; k < j; k++)
            if (ranks[k] == ranks[j])
                return areal_error_set(err, AREAL_EINVAL, -1, "group %s: rank %d listed twice",
                                       name, ranks[j]);
        if (ranks[j] == c->rank)
            *me = j;
    }
    if (*me < 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "group %s does not contain this rank (%d); only members create it",
                               name, c->rank);
    return AREAL_OK;
}

int areal_comm_group(areal_comm *c, const char *name, const int *ranks, int n, areal_pg **out,
                     areal_error *err) {
    int me = -1;
    int rc = check_members(c, name, ranks, n, &me, err);
    if (rc != AREAL_OK)
        return rc;
    areal_pg *g = calloc(1, sizeof *g);
    int *rk = malloc(sizeof *rk * (size_t)n), *fd = malloc(sizeof *fd * (size_t)n);
    uint8_t *via = calloc((size_t)n, 1);
    if (g == NULL || rk == NULL || fd == NULL || via == NULL) {
        free(g);
        free(rk);
        free(fd);
        free(via);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for group %s", name);
    }
    snprintf(g->name, sizeof g->name, "%s", name);
    g->n = n;
    g->me = me;
    g->ranks = rk;
    g->fd = fd;
    g->timeout_ms = c->timeout_ms;
    areal_error_clear(&g->broken);
    pthread_mutex_init(&g->mu, NULL);
    pthread_mutex_init(&g->qmu, NULL);
    pthread_cond_init(&g->qcv, NULL);
    memcpy(rk, ranks, sizeof *rk * (size_t)n);
    for (int j = 0; j < n; j++)
        fd[j] = -1;
    int64_t deadline = areal_now_ms() + c->connect_timeout_ms;
    pthread_mutex_lock(&c->mu);
    for (int j = 0; j < n && rc == AREAL_OK; j++)
        if (rk[j] < c->rank)
            rc = dial(c, g, rk[j], deadline, &fd[j], &via[j], err);
    for (int j = 0; j < n && rc == AREAL_OK; j++) {
        if (rk[j] <= c->rank)
            continue;
        int theirs = 0;
        while ((fd[j] = take_pending(c, name, rk[j], n, &theirs, &via[j])) < 0) {
            if (fd[j] == -2) {
                rc = areal_error_set(err, AREAL_EINVAL, -1,
                                     "group %s: rank %d creates it with %d members, this rank "
                                     "(%d) with %d; every member must pass the same list",
                                     name, rk[j], theirs, c->rank, n);
                fd[j] = -1;
                break;
            }
            rc = accept_one(c, deadline, err);
            if (rc != AREAL_OK) {
                rc = areal_error_set(err, AREAL_EIO, -1,
                                     "group %s: rank %d did not connect within %d ms (is it "
                                     "running, and creating the same group?)",
                                     name, rk[j], c->connect_timeout_ms);
                break;
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (rc == AREAL_OK)
        rc = areal_pg_shm_setup(g, via, !c->shm_off, deadline, err);
    free(via);
    if (rc != AREAL_OK) {
        areal_pg_destroy(g);
        return rc;
    }
    *out = g;
    return AREAL_OK;
}
