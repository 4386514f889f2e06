/*
 * store_server.c - the rendezvous store's server thread; see areal/comm/store.h.
 *
 * One thread polls the listener, a wake-up pipe and every client. A client
 * has one request in flight at a time: its input is decoded only when no
 * answer is pending and it is not parked. A parked get/wait is answered by the
 * write that creates its key or by its deadline. A malformed frame is answered
 * with BADREQ and the connection is closed (its stream position is lost).
 * Keys live in a chained hash table. Rejected: a thread per client (unbounded
 * threads, and parked requests would need cross-thread signalling).
 */
#include "areal/comm/store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "areal/comm/store_proto.h"

#define NBUCKETS 4096

typedef struct entry {
    struct entry *next;
    uint8_t *key;
    uint32_t klen;
    uint8_t *val;
    uint32_t vlen;
} entry;

typedef struct client {
    int fd;
    uint8_t *in;
    size_t in_len, in_cap;
    uint8_t *out;
    size_t out_len, out_off, out_cap;
    int parked; /* a get or wait waiting for its key */
    areal_store_op park_op;
    uint8_t park_key[AREAL_STORE_KEY_MAX];
    uint32_t park_klen;
    int64_t park_deadline;
    int closing; /* close once the output is flushed */
} client;

struct areal_store_server {
    int lfd;
    int wake[2];
    pthread_t thread;
    entry *bucket[NBUCKETS];
    size_t nkeys, nbytes;
    client *cl[AREAL_STORE_MAX_CLIENTS];
    int ncl;
};

static uint32_t hash(const uint8_t *k, uint32_t n) {
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ k[i]) * 16777619u;
    return h % NBUCKETS;
}

static entry **find(areal_store_server *s, const uint8_t *k, uint32_t n) {
    entry **e = &s->bucket[hash(k, n)];
    while (*e != NULL && !((*e)->klen == n && memcmp((*e)->key, k, n) == 0))
        e = &(*e)->next;
    return e;
}

/* Stores a value; returns a status (FULL when a budget is spent). */
static areal_store_status put(areal_store_server *s, const uint8_t *k, uint32_t kn,
                              const uint8_t *v, uint32_t vn) {
    entry **slot = find(s, k, kn);
    entry *e = *slot;
    size_t old = e ? e->vlen : 0;
    size_t grow = e ? 0 : kn;
    if (!e && s->nkeys >= AREAL_STORE_MAX_KEYS)
        return AREAL_STORE_FULL;
    if (s->nbytes - old + vn + grow > AREAL_STORE_MAX_BYTES)
        return AREAL_STORE_FULL;
    uint8_t *nv = malloc(vn ? vn : 1);
    if (nv == NULL)
        return AREAL_STORE_FULL;
    if (vn)
        memcpy(nv, v, vn);
    if (e == NULL) {
        e = calloc(1, sizeof *e);
        uint8_t *nk = malloc(kn);
        if (e == NULL || nk == NULL) {
            free(e);
            free(nk);
            free(nv);
            return AREAL_STORE_FULL;
        }
        memcpy(nk, k, kn);
        e->key = nk;
        e->klen = kn;
        *slot = e;
        s->nkeys++;
    } else {
        free(e->val);
    }
    s->nbytes = s->nbytes - old + vn + grow;
    e->val = nv;
    e->vlen = vn;
    return AREAL_STORE_OK;
}

static int queue(client *c, areal_store_status st, const void *v, uint32_t vn) {
    size_t need = AREAL_STORE_RESP_HDR + vn;
    if (c->out_cap < need) {
        uint8_t *p = realloc(c->out, need);
        if (p == NULL)
            return -1;
        c->out = p;
        c->out_cap = need;
    }
    areal_store_resp r = {.status = st, .val = v, .val_len = vn};
    c->out_len = areal_store_encode_resp(&r, c->out, c->out_cap);
    c->out_off = 0;
    return c->out_len ? 0 : -1;
}

static void queue_msg(client *c, areal_store_status st, const char *msg) {
    queue(c, st, msg, (uint32_t)strlen(msg));
}

/* Answers parked requests for key k now that it exists. */
static void wake_key(areal_store_server *s, const uint8_t *k, uint32_t kn) {
    entry *e = *find(s, k, kn);
    for (int i = 0; i < s->ncl; i++) {
        client *c = s->cl[i];
        if (!c->parked || c->park_klen != kn || memcmp(c->park_key, k, kn) != 0)
            continue;
        c->parked = 0;
        if (c->park_op == AREAL_STORE_GET)
            queue(c, AREAL_STORE_OK, e->val, e->vlen);
        else
            queue(c, AREAL_STORE_OK, NULL, 0);
    }
}

static void handle(areal_store_server *s, client *c, const areal_store_req *r, int64_t now) {
    entry **slot = find(s, r->key, r->key_len);
    entry *e = *slot;
    switch (r->op) {
    case AREAL_STORE_SET: {
        areal_store_status st = put(s, r->key, r->key_len, r->val, r->val_len);
        queue(c, st, NULL, 0);
        if (st == AREAL_STORE_OK)
            wake_key(s, r->key, r->key_len);
        return;
    }
    case AREAL_STORE_GET:
    case AREAL_STORE_WAIT:
        if (e != NULL) {
            if (r->op == AREAL_STORE_GET)
                queue(c, AREAL_STORE_OK, e->val, e->vlen);
            else
                queue(c, AREAL_STORE_OK, NULL, 0);
            return;
        }
        c->parked = 1;
        c->park_op = r->op;
        memcpy(c->park_key, r->key, r->key_len);
        c->park_klen = r->key_len;
        c->park_deadline = now + r->timeout_ms;
        return;
    case AREAL_STORE_ADD: {
        int64_t cur = 0;
        if (e != NULL) {
            char tmp[32];
            if (e->vlen == 0 || e->vlen >= sizeof tmp) {
                queue_msg(c, AREAL_STORE_BADREQ, "add: the key holds a value that is no counter");
                return;
            }
            memcpy(tmp, e->val, e->vlen);
            tmp[e->vlen] = '\0';
            char *end = NULL;
            errno = 0;
            cur = strtoll(tmp, &end, 10);
            if (*end != '\0' || errno != 0) {
                queue_msg(c, AREAL_STORE_BADREQ, "add: the key holds a value that is no counter");
                return;
            }
        }
        int64_t d = (int64_t)areal_get_u64(r->val);
        if ((d > 0 && cur > INT64_MAX - d) || (d < 0 && cur < INT64_MIN - d)) {
            queue_msg(c, AREAL_STORE_BADREQ, "add: the counter would overflow 64 bits");
            return;
        }
        cur += d;
        char txt[32];
        int n = snprintf(txt, sizeof txt, "%" PRId64, cur);
        areal_store_status st = put(s, r->key, r->key_len, (const uint8_t *)txt, (uint32_t)n);
        uint8_t le[8];
        areal_put_u64(le, (uint64_t)cur);
        queue(c, st, le, st == AREAL_STORE_OK ? 8 : 0);
        if (st == AREAL_STORE_OK)
            wake_key(s, r->key, r->key_len);
        return;
    }
    case AREAL_STORE_CAS: {
        int match = e == NULL ? r->val_len == 0
                              : (e->vlen == r->val_len &&
                                 (r->val_len == 0 || memcmp(e->val, r->val, r->val_len) == 0));
        if (!match) {
            queue(c, AREAL_STORE_OK, e ? e->val : NULL, e ? e->vlen : 0);
            return;
        }
        areal_store_status st = put(s, r->key, r->key_len, r->val2, r->val2_len);
        queue(c, st, r->val2, st == AREAL_STORE_OK ? r->val2_len : 0);
        if (st == AREAL_STORE_OK)
            wake_key(s, r->key, r->key_len);
        return;
    }
    case AREAL_STORE_DEL:
        if (e == NULL) {
            queue(c, AREAL_STORE_NOTFOUND, NULL, 0);
            return;
        }
        *slot = e->next;
        s->nkeys--;
        s->nbytes -= e->klen + e->vlen;
        free(e->key);
        free(e->val);
        free(e);
        queue(c, AREAL_STORE_OK, NULL, 0);
        return;
    case AREAL_STORE_CHECK:
        queue(c, e ? AREAL_STORE_OK : AREAL_STORE_NOTFOUND, NULL, 0);
        return;
    }
}

static void drop(areal_store_server *s, int i) {
    client *c = s->cl[i];
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
    s->cl[i] = s->cl[--s->ncl];
}

/* Reads what is there and handles one complete request; returns -1 to drop. */
static int on_readable(client *c) {
    if (c->in_len == c->in_cap && c->in_cap < AREAL_STORE_FRAME_MAX) {
        size_t cap = c->in_cap ? c->in_cap * 2 : 4096; /* small until a big frame comes */
        if (cap > AREAL_STORE_FRAME_MAX)
            cap = AREAL_STORE_FRAME_MAX;
        uint8_t *p = realloc(c->in, cap);
        if (p == NULL)
            return -1;
        c->in = p;
        c->in_cap = cap;
    }
    if (c->in_len < c->in_cap) {
        ssize_t k = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (k == 0)
            return -1;
        if (k < 0)
            return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
        c->in_len += (size_t)k;
    }
    return 0;
}

static void process_input(areal_store_server *s, client *c, int64_t now) {
    if (c->parked || c->out_len > c->out_off || c->closing || c->in_len == 0)
        return;
    areal_store_req r;
    size_t used = 0;
    areal_error e;
    areal_error_clear(&e);
    int rc = areal_store_decode_req(c->in, c->in_len, &r, &used, &e);
    if (rc == 0)
        return;
    if (rc < 0) {
        queue_msg(c, AREAL_STORE_BADREQ, e.msg);
        c->closing = 1;
        c->in_len = 0;
        return;
    }
    handle(s, c, &r, now);
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
}

static void *loop(void *arg) {
    areal_store_server *s = arg;
    struct pollfd *pf = calloc(AREAL_STORE_MAX_CLIENTS + 2, sizeof *pf);
    if (pf == NULL)
        return NULL;
    for (;;) {
        int64_t now = areal_now_ms(), next = now + 1000;
        for (int i = 0; i < s->ncl; i++) {
            client *c = s->cl[i];
            if (c->parked && c->park_deadline <= now) {
                c->parked = 0;
                queue(c, AREAL_STORE_TIMEOUT, NULL, 0);
            }
            process_input(s, c, now);
            if (c->parked && c->park_deadline < next)
                next = c->park_deadline;
        }
        pf[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
        pf[1] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
        for (int i = 0; i < s->ncl; i++) {
            client *c = s->cl[i];
            short ev = c->out_len > c->out_off ? POLLOUT : 0;
            if (!c->closing && c->in_len < AREAL_STORE_FRAME_MAX)
                ev |= POLLIN;
            pf[2 + i] = (struct pollfd){.fd = c->fd, .events = ev};
        }
        int nfds = 2 + s->ncl;
        int wait = (int)(next - now);
        if (poll(pf, (nfds_t)nfds, wait < 0 ? 0 : wait) < 0 && errno != EINTR)
            break;
        if (pf[0].revents)
            break;
        now = areal_now_ms();
        for (int i = s->ncl - 1; i >= 0; i--) {
            client *c = s->cl[i];
            short rv = pf[2 + i].revents;
            int bad = 0;
            if (rv & POLLOUT) {
                ssize_t k = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
                if (k > 0)
                    c->out_off += (size_t)k;
                else if (k < 0 && errno != EAGAIN && errno != EINTR)
                    bad = 1;
                if (c->out_off == c->out_len) {
                    c->out_len = c->out_off = 0;
                    if (c->closing)
                        bad = 1;
                }
            }
            if (!bad && (rv & (POLLIN | POLLHUP | POLLERR)))
                bad = on_readable(c) < 0;
            if (bad)
                drop(s, i);
        }
        if (pf[1].revents & POLLIN) {
            int fd;
            while (areal_net_accept(s->lfd, 0, &fd, NULL) == AREAL_OK) {
                client *c = s->ncl < AREAL_STORE_MAX_CLIENTS ? calloc(1, sizeof *c) : NULL;
                if (c == NULL) {
                    /* best effort: tell the client why before closing */
                    static const char why[] = "the store has too many clients";
                    uint8_t f[AREAL_STORE_RESP_HDR + sizeof why];
                    areal_store_resp r = {.status = AREAL_STORE_FULL,
                                          .val = (const uint8_t *)why,
                                          .val_len = sizeof why - 1};
                    size_t fn = areal_store_encode_resp(&r, f, sizeof f);
                    (void)send(fd, f, fn, MSG_NOSIGNAL | MSG_DONTWAIT);
                    close(fd);
                    continue;
                }
                c->fd = fd;
                s->cl[s->ncl++] = c;
            }
        }
    }
    free(pf);
    return NULL;
}

int areal_store_server_start(const char *host, int port, areal_store_server **out, int *port_out,
                             areal_error *err) {
    areal_store_server *s = calloc(1, sizeof *s);
    if (s == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for the store server");
    int rc = areal_net_listen(host, port, &s->lfd, port_out, err);
    if (rc != AREAL_OK) {
        free(s);
        return rc;
    }
    if (pipe2(s->wake, O_CLOEXEC) != 0) {
        close(s->lfd);
        free(s);
        return areal_error_set(err, AREAL_EIO, -1, "store server: pipe: %s", strerror(errno));
    }
    if (pthread_create(&s->thread, NULL, loop, s) != 0) {
        close(s->lfd);
        close(s->wake[0]);
        close(s->wake[1]);
        free(s);
        return areal_error_set(err, AREAL_ENOMEM, -1, "store server: cannot start its thread");
    }
    *out = s;
    return AREAL_OK;
}

void areal_store_server_stop(areal_store_server *s) {
    if (s == NULL)
        return;
    char b = 1;
    while (write(s->wake[1], &b, 1) < 0 && errno == EINTR) {
    }
    pthread_join(s->thread, NULL);
    while (s->ncl > 0)
        drop(s, s->ncl - 1);
    for (int i = 0; i < NBUCKETS; i++) {
        entry *e = s->bucket[i];
        while (e != NULL) {
            entry *n = e->next;
            free(e->key);
            free(e->val);
            free(e);
            e = n;
        }
    }
    close(s->lfd);
    close(s->wake[0]);
    close(s->wake[1]);
    free(s);
}
