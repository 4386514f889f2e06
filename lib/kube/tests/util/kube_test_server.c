/* kube_test_server.c - see kube_test_server.h. */
#include "kube_test_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define KTS_MAX_STEPS 512
#define KTS_MAX_REQS  512
#define KTS_MAX_CONNS 128
#define KTS_HDR_MAX   16384

typedef enum { STEP_PLAIN, STEP_STREAM, STEP_DROP } step_kind;

typedef struct step {
    step_kind kind;
    int status;
    char *headers;
    char *body;
    size_t len;
    size_t piece;
    int delay_ms;
    int end;
} step;

typedef struct connarg {
    kts *s;
    int fd;
    int num;
    int slot; /* its index in conns */
} connarg;

struct kts {
    int lfd;
    char url[64];
    pthread_t acceptor;
    atomic_int stop;
    pthread_mutex_t mu;
    step steps[KTS_MAX_STEPS];
    int nsteps, next;
    kts_request reqs[KTS_MAX_REQS];
    int nreqs;
    int accepts;
    kts_handler handler;
    void *handler_ud;
    pthread_t conns[KTS_MAX_CONNS];
    int conn_ok[KTS_MAX_CONNS];
    atomic_int conn_done[KTS_MAX_CONNS]; /* its thread has returned: the slot can be reused */
    int nconns;
};

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Waits until fd is readable: 1 ready, 0 stop, -1 error. */
static int wait_readable(kts *s, int fd) {
    while (!atomic_load(&s->stop)) {
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, 20);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return -1;
    }
    return 0;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void header_value(const char *hdrs, const char *name, char *out, size_t cap) {
    out[0] = '\0';
    size_t nl = strlen(name);
    for (const char *line = hdrs; line && *line;) {
        const char *eol = strstr(line, "\r\n");
        if (eol == NULL)
            break;
        if ((size_t)(eol - line) > nl && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (*v == ' ')
                v++;
            size_t vl = (size_t)(eol - v);
            if (vl >= cap)
                vl = cap - 1;
            memcpy(out, v, vl);
            out[vl] = '\0';
            return;
        }
        line = eol + 2;
    }
}

static const char *reason_of(int status) {
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 429:
        return "Too Many Requests";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    default:
        return "Status";
    }
}

/* Serves one step; returns 0 to keep the connection, -1 to close it. */
static int serve(kts *s, int fd, const step *st) {
    char head[1024];
    if (st->kind == STEP_DROP)
        return -1;
    if (st->kind == STEP_PLAIN) {
        int n =
            snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n%s\r\n",
                     st->status, reason_of(st->status), st->len, st->headers ? st->headers : "");
        if (send_all(fd, head, (size_t)n) != 0 || send_all(fd, st->body ? st->body : "", st->len))
            return -1;
        return 0;
    }
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n");
    if (send_all(fd, head, (size_t)n) != 0)
        return -1;
    size_t piece = st->piece ? st->piece : (st->len ? st->len : 1);
    for (size_t off = 0; off < st->len && !atomic_load(&s->stop); off += piece) {
        size_t k = st->len - off < piece ? st->len - off : piece;
        if (st->delay_ms)
            sleep_ms(st->delay_ms);
        n = snprintf(head, sizeof head, "%zx\r\n", k);
        if (send_all(fd, head, (size_t)n) != 0 || send_all(fd, st->body + off, k) != 0 ||
            send_all(fd, "\r\n", 2) != 0)
            return -1;
    }
    if (st->end == KTS_END_CLEAN)
        return send_all(fd, "0\r\n\r\n", 5) == 0 ? 0 : -1;
    if (st->end == KTS_END_DROP)
        return -1;
    /* HOLD: wait until the client closes or the server stops */
    for (;;) {
        if (wait_readable(s, fd) != 1)
            return -1;
        char tmp[256];
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r <= 0)
            return -1;
    }
}

static void *conn_main(void *arg) {
    connarg a = *(connarg *)arg;
    free(arg);
    kts *s = a.s;
    char *buf = malloc(KTS_HDR_MAX + 1);
    size_t have = 0;
    while (buf) {
        /* read one request head */
        char *end = NULL;
        while ((end = have ? strstr(buf, "\r\n\r\n") : NULL) == NULL) {
            if (have >= KTS_HDR_MAX || wait_readable(s, a.fd) != 1)
                goto out;
            ssize_t r = recv(a.fd, buf + have, KTS_HDR_MAX - have, 0);
            if (r <= 0)
                goto out;
            have += (size_t)r;
            buf[have] = '\0';
        }
        size_t head_len = (size_t)(end - buf) + 4;
        kts_request rq;
        memset(&rq, 0, sizeof rq);
        rq.conn = a.num;
        sscanf(buf, "%15s %4095s", rq.method, rq.target);
        char *hdrs = strstr(buf, "\r\n");
        char clen[32];
        header_value(hdrs ? hdrs + 2 : "", "Authorization", rq.auth, sizeof rq.auth);
        header_value(hdrs ? hdrs + 2 : "", "Content-Type", rq.content_type, sizeof rq.content_type);
        header_value(hdrs ? hdrs + 2 : "", "Content-Length", clen, sizeof clen);
        size_t blen = (size_t)strtoul(clen, NULL, 10);
        if (blen > (1u << 24))
            goto out;
        rq.body = malloc(blen + 1);
        if (rq.body == NULL)
            goto out;
        size_t got = have - head_len < blen ? have - head_len : blen;
        memcpy(rq.body, buf + head_len, got);
        size_t rest = have - head_len - got; /* pipelined bytes after the body */
        memmove(buf, buf + head_len + got, rest);
        have = rest;
        buf[have] = '\0';
        while (got < blen) {
            if (wait_readable(s, a.fd) != 1) {
                free(rq.body);
                goto out;
            }
            ssize_t r = recv(a.fd, rq.body + got, blen - got, 0);
            if (r <= 0) {
                free(rq.body);
                goto out;
            }
            got += (size_t)r;
        }
        rq.body[blen] = '\0';
        rq.body_len = blen;

        kts_answer ans;
        memset(&ans, 0, sizeof ans);
        pthread_mutex_lock(&s->mu);
        kts_handler handler = s->handler;
        void *handler_ud = s->handler_ud;
        pthread_mutex_unlock(&s->mu);
        if (handler != NULL && handler(handler_ud, &rq, &ans)) {
            step hs = {ans.stream ? STEP_STREAM : STEP_PLAIN,
                       ans.status,
                       NULL,
                       ans.body,
                       ans.body ? ans.len : 0,
                       0,
                       ans.delay_ms,
                       ans.end};
            pthread_mutex_lock(&s->mu);
            if (s->nreqs < KTS_MAX_REQS)
                s->reqs[s->nreqs++] = rq;
            else
                free(rq.body);
            pthread_mutex_unlock(&s->mu);
            int served = serve(s, a.fd, &hs);
            free(ans.body);
            if (served != 0)
                goto out;
            continue;
        }
        step st = {STEP_PLAIN, 500, "Connection: close\r\n", "kts: script exhausted", 21, 0, 0, 0};
        pthread_mutex_lock(&s->mu);
        if (s->nreqs < KTS_MAX_REQS)
            s->reqs[s->nreqs++] = rq;
        else
            free(rq.body);
        int exhausted = s->next >= s->nsteps;
        if (!exhausted)
            st = s->steps[s->next++];
        pthread_mutex_unlock(&s->mu);
        if (serve(s, a.fd, &st) != 0 || exhausted)
            goto out;
    }
out:
    free(buf);
    close(a.fd);
    atomic_store(&s->conn_done[a.slot], 1);
    return NULL;
}

/* A slot whose connection has ended (its thread joined), or -1. Acceptor only:
 * a server that outlives KTS_MAX_CONNS connections (operators restarted,
 * watches broken and redialled) keeps accepting instead of closing every new
 * one - which a client sees as an API server gone for good. */
static int reap_slot(kts *s) {
    for (int i = 0; i < s->nconns; i++)
        if (s->conn_ok[i] && atomic_load(&s->conn_done[i])) {
            pthread_join(s->conns[i], NULL);
            s->conn_ok[i] = 0;
            return i;
        }
    return -1;
}

static void *accept_main(void *arg) {
    kts *s = arg;
    while (wait_readable(s, s->lfd) == 1) {
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        connarg *a = malloc(sizeof *a);
        pthread_mutex_lock(&s->mu);
        int num = ++s->accepts;
        int slot = s->nconns < KTS_MAX_CONNS ? s->nconns++ : -1;
        pthread_mutex_unlock(&s->mu);
        if (slot < 0)
            slot = reap_slot(s);
        if (a == NULL || slot < 0) {
            free(a);
            close(fd);
            continue;
        }
        a->s = s;
        a->fd = fd;
        a->num = num;
        a->slot = slot;
        atomic_store(&s->conn_done[slot], 0);
        if (pthread_create(&s->conns[slot], NULL, conn_main, a) != 0) {
            free(a);
            close(fd);
        } else {
            s->conn_ok[slot] = 1; /* read by kts_stop only after this thread is joined */
        }
    }
    return NULL;
}

kts *kts_start(void) {
    kts *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(s->lfd, 64) != 0 || getsockname(s->lfd, (struct sockaddr *)&sa, &sl) != 0) {
        if (s->lfd >= 0)
            close(s->lfd);
        free(s);
        return NULL;
    }
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", ntohs(sa.sin_port));
    pthread_mutex_init(&s->mu, NULL);
    atomic_init(&s->stop, 0);
    if (pthread_create(&s->acceptor, NULL, accept_main, s) != 0) {
        close(s->lfd);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return NULL;
    }
    return s;
}

void kts_stop(kts *s) {
    if (s == NULL)
        return;
    atomic_store(&s->stop, 1);
    pthread_join(s->acceptor, NULL);
    for (int i = 0; i < s->nconns; i++)
        if (s->conn_ok[i])
            pthread_join(s->conns[i], NULL);
    close(s->lfd);
    for (int i = 0; i < s->nsteps; i++) {
        free(s->steps[i].headers);
        free(s->steps[i].body);
    }
    for (int i = 0; i < s->nreqs; i++)
        free(s->reqs[i].body);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void kts_set_handler(kts *s, kts_handler fn, void *ud) {
    pthread_mutex_lock(&s->mu);
    s->handler = fn;
    s->handler_ud = ud;
    pthread_mutex_unlock(&s->mu);
}

const char *kts_url(kts *s) {
    return s->url;
}

static void push(kts *s, step st) {
    pthread_mutex_lock(&s->mu);
    if (s->nsteps < KTS_MAX_STEPS) {
        s->steps[s->nsteps++] = st;
    } else {
        free(st.headers);
        free(st.body);
    }
    pthread_mutex_unlock(&s->mu);
}

void kts_push(kts *s, int status, const char *headers, const char *body) {
    step st = {STEP_PLAIN,
               status,
               headers ? strdup(headers) : NULL,
               strdup(body ? body : ""),
               body ? strlen(body) : 0,
               0,
               0,
               0};
    push(s, st);
}

void kts_push_stream(kts *s, const char *body, size_t piece, int delay_ms, int end) {
    step st = {STEP_STREAM, 200, NULL, strdup(body), strlen(body), piece, delay_ms, end};
    push(s, st);
}

void kts_push_drop(kts *s) {
    step st = {STEP_DROP, 0, NULL, NULL, 0, 0, 0, 0};
    push(s, st);
}

int kts_count(kts *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->nreqs;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int kts_get(kts *s, int i, kts_request *out) {
    pthread_mutex_lock(&s->mu);
    int ok = i >= 0 && i < s->nreqs;
    if (ok)
        *out = s->reqs[i];
    pthread_mutex_unlock(&s->mu);
    return ok ? 0 : -1;
}

int kts_accepts(kts *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->accepts;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int kts_pending(kts *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->nsteps - s->next;
    pthread_mutex_unlock(&s->mu);
    return n;
}
