/*
 * server.c - the libwebsockets side of areal/http/server.h: the context and
 * its service thread, request intake (method, path, query, bounded body),
 * routing, and writing queued output as the socket becomes writable.
 *
 * Every libwebsockets call except lws_cancel_service happens on the service
 * thread. Producers on other threads put their exchange on the hub's pending
 * list and cancel the service wait; LWS_CALLBACK_EVENT_WAIT_CANCELLED then
 * asks for a writable callback on each pending connection still open.
 *
 * The road not taken: a thread per connection (simple, but a rollout server
 * holds hundreds of waiting generation requests) and lws's own threadpool
 * (it owns the work, whereas here the rollout engine's scheduler already has
 * a thread and only needs a thread-safe way to answer).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "areal/http/tls.h"
#include "http_internal.h"

#define WRITE_CHUNK 16384

typedef struct route {
    char method[8];
    char *path;
    areal_http_handler fn;
    void *ud;
} route;

struct areal_http_server {
    areal_http_config cfg;
    char host[64];
    char *tls_cert, *tls_key; /* PEM (owned), both NULL for plain HTTP */
    http_hub *hub;
    struct lws_context *ctx;
    struct lws_vhost *vhost;
    route *routes;
    int n_routes, cap_routes;
    bool started;
    atomic_int stopping;
};

/* Per connection (libwebsockets allocates and zeroes it, and keeps it across keep-alive). */
typedef struct session {
    areal_http_exchange *x; /* the exchange of the request in progress */
    bool dispatched;
    bool served;     /* a request was answered on this connection (keep-alive idle) */
    bool timer_on;   /* the tick runs */
    long long since; /* ms: start of the current phase (waiting, body) or last write */
} session;

/*
 * Every connection has a tick (TICK_MS) that enforces the timeouts, because
 * lws 4.1's own do not cover a client that sends half its headers: waiting
 * for headers or between keep-alive requests, receiving a body, and writing
 * a response the client does not read. While a handler computes, the tick
 * peeks at the socket, so a client that has gone (EOF) is noticed and its
 * exchange's on-close hook runs (lws does not read while a request is open).
 */
#define TICK_MS 200

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

areal_http_server *areal_http_new(const areal_http_config *cfg) {
    areal_http_server *s = calloc(1, sizeof *s);
    http_hub *hub = calloc(1, sizeof *hub);
    if (s == NULL || hub == NULL) {
        free(s);
        free(hub);
        return NULL;
    }
    if (cfg != NULL)
        s->cfg = *cfg;
    snprintf(s->host, sizeof s->host, "%s", s->cfg.host ? s->cfg.host : "127.0.0.1");
    s->cfg.host = s->host;
    if (s->cfg.tls_cert_pem != NULL || s->cfg.tls_key_pem != NULL) {
        /* one of the two alone is refused at start, with a message */
        s->tls_cert = strdup(s->cfg.tls_cert_pem ? s->cfg.tls_cert_pem : "");
        s->tls_key = strdup(s->cfg.tls_key_pem ? s->cfg.tls_key_pem : "");
        if (s->tls_cert == NULL || s->tls_key == NULL) {
            free(s->tls_cert);
            free(s->tls_key);
            free(s);
            free(hub);
            return NULL;
        }
    }
    s->cfg.tls_cert_pem = s->tls_cert;
    s->cfg.tls_key_pem = s->tls_key;
    if (s->cfg.max_body == 0)
        s->cfg.max_body = 16u << 20;
    if (s->cfg.header_timeout_s <= 0)
        s->cfg.header_timeout_s = 10;
    if (s->cfg.idle_timeout_s <= 0)
        s->cfg.idle_timeout_s = 60;
    if (s->cfg.write_timeout_s <= 0)
        s->cfg.write_timeout_s = 30;
    if (s->cfg.max_connections <= 0)
        s->cfg.max_connections = 4096;
    pthread_mutex_init(&hub->mu, NULL);
    hub->refs = 1;
    s->hub = hub;
    return s;
}

int areal_http_route(areal_http_server *s, const char *method, const char *path,
                     areal_http_handler fn, void *ud, areal_error *err) {
    if (s->started || method == NULL || strlen(method) >= sizeof(((route *)0)->method) ||
        path == NULL || path[0] != '/' || fn == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "bad route %s %s: a method, a path starting with '/' and a "
                               "handler, before areal_http_start",
                               method ? method : "(null)", path ? path : "(null)");
    for (int i = 0; i < s->n_routes; i++)
        if (strcmp(s->routes[i].method, method) == 0 && strcmp(s->routes[i].path, path) == 0)
            return areal_error_set(err, AREAL_EINVAL, -1, "route %s %s is already registered",
                                   method, path);
    if (s->n_routes == s->cap_routes) {
        int cap = s->cap_routes ? 2 * s->cap_routes : 16;
        route *grown = realloc(s->routes, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
        s->routes = grown;
        s->cap_routes = cap;
    }
    route *r = &s->routes[s->n_routes];
    snprintf(r->method, sizeof r->method, "%s", method);
    if ((r->path = strdup(path)) == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    r->fn = fn;
    r->ud = ud;
    s->n_routes++;
    return AREAL_OK;
}

/* ---- request intake ------------------------------------------------------ */

static const struct {
    enum lws_token_indexes tok;
    const char *name;
} methods[] = {
    {WSI_TOKEN_GET_URI, "GET"},     {WSI_TOKEN_POST_URI, "POST"},
    {WSI_TOKEN_PUT_URI, "PUT"},     {WSI_TOKEN_DELETE_URI, "DELETE"},
    {WSI_TOKEN_PATCH_URI, "PATCH"}, {WSI_TOKEN_OPTIONS_URI, "OPTIONS"},
    {WSI_TOKEN_HEAD_URI, "HEAD"},
};

static const char *method_of(struct lws *wsi) {
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (lws_hdr_total_length(wsi, methods[i].tok) > 0)
            return methods[i].name;
    return "";
}

/* The query string: lws splits it into fragments at '&'; join them back. */
static char *query_of(struct lws *wsi) {
    int total = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_URI_ARGS);
    char *q = malloc((size_t)(total > 0 ? total : 0) * 2 + 2);
    if (q == NULL)
        return NULL;
    size_t len = 0;
    q[0] = '\0';
    char frag[1024];
    for (int i = 0; total > 0; i++) {
        int n = lws_hdr_copy_fragment(wsi, frag, sizeof frag, WSI_TOKEN_HTTP_URI_ARGS, i);
        if (n < 0)
            break;
        if (len > 0)
            q[len++] = '&';
        memcpy(q + len, frag, (size_t)n);
        len += (size_t)n;
        q[len] = '\0';
    }
    return q;
}

/* Answers x itself (404, 405, 413, ...): takes a holder reference and responds. */
static void answer(areal_http_exchange *x, int status, const char *msg, bool close_after) {
    pthread_mutex_lock(&x->hub->mu);
    x->refs++;
    x->close_after = x->close_after || close_after;
    pthread_mutex_unlock(&x->hub->mu);
    areal_http_respond_error(x, status, msg);
}

static void dispatch(areal_http_server *srv, session *ss, struct lws *wsi) {
    areal_http_exchange *x = ss->x;
    ss->dispatched = true;
    ss->since = now_ms();
    lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0); /* the handler may take minutes */
    x->req = (areal_http_request){.method = x->method,
                                  .path = x->path,
                                  .query = x->query ? x->query : "",
                                  .body = x->body ? x->body : "",
                                  .body_len = x->body_len,
                                  .authorization = x->authorization ? x->authorization : ""};
    bool path_known = false;
    for (int i = 0; i < srv->n_routes; i++) {
        route *r = &srv->routes[i];
        if (strcmp(r->path, x->path) != 0)
            continue;
        path_known = true;
        if (strcmp(r->method, x->method) != 0)
            continue;
        pthread_mutex_lock(&x->hub->mu);
        x->refs++; /* the holder's */
        pthread_mutex_unlock(&x->hub->mu);
        r->fn(x, &x->req, r->ud);
        return;
    }
    char msg[1024];
    if (path_known) {
        snprintf(msg, sizeof msg, "method %s is not allowed on %.200s", x->method, x->path);
        answer(x, 405, msg, false);
        return;
    }
    /* name the endpoints, so a typo is one look away from its fix */
    int n = snprintf(msg, sizeof msg, "no endpoint %.200s; the endpoints are", x->path);
    for (int i = 0; i < srv->n_routes && n > 0 && (size_t)n < sizeof msg; i++)
        n += snprintf(msg + n, sizeof msg - (size_t)n, "%s %s %s", i ? "," : "",
                      srv->routes[i].method, srv->routes[i].path);
    answer(x, 404, msg, false);
}

/* Answers a request refused at intake; its body (if any) is then read and dropped, never
 * dispatched (without the flag, BODY_COMPLETION would run the handler on it too). */
static void reject(session *ss, areal_http_exchange *x, int status, const char *msg) {
    ss->dispatched = true;
    answer(x, status, msg, true);
}

/* LWS_CALLBACK_HTTP: headers are in. Returns the callback's result. */
static int on_request(areal_http_server *srv, session *ss, struct lws *wsi, const char *uri) {
    areal_http_exchange *x = http_exchange_new(srv->hub, wsi);
    if (x == NULL)
        return -1;
    ss->x = x;
    ss->dispatched = false;
    ss->since = now_ms();
    snprintf(x->method, sizeof x->method, "%s", method_of(wsi));
    x->path = strdup(uri ? uri : "/");
    x->query = query_of(wsi);
    int alen = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_AUTHORIZATION);
    x->authorization = malloc(alen > 0 ? (size_t)alen + 1 : 1);
    if (x->path == NULL || x->query == NULL || x->authorization == NULL)
        return -1;
    x->authorization[0] = '\0';
    if (alen > 0 && lws_hdr_copy(wsi, x->authorization, alen + 1, WSI_TOKEN_HTTP_AUTHORIZATION) < 0)
        x->authorization[0] = '\0';
    char len_text[32] = "";
    bool has_len = lws_hdr_copy(wsi, len_text, sizeof len_text, WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0;
    if (lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH) >= (int)sizeof len_text) {
        reject(ss, x, 400, "Content-Length is malformed");
        return 0;
    }
    if (!has_len) {
        if (lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING) > 0) {
            reject(ss, x, 411,
                   "send the body with a Content-Length (chunked request bodies are "
                   "not accepted)");
            return 0;
        }
        dispatch(srv, ss, wsi);
        return 0;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long n = strtoull(len_text, &end, 10);
    if (errno != 0 || end == len_text || *end != '\0' || len_text[0] == '-') {
        reject(ss, x, 400, "Content-Length is malformed");
        return 0;
    }
    if (n > srv->cfg.max_body) {
        char msg[160];
        snprintf(msg, sizeof msg, "request body of %llu bytes exceeds the limit of %zu bytes", n,
                 srv->cfg.max_body);
        reject(ss, x, 413, msg);
        return 0;
    }
    x->body_want = (size_t)n;
    x->body_cap = (size_t)n + 1;
    x->body = malloc(x->body_cap);
    if (x->body == NULL)
        return -1;
    x->body[0] = '\0';
    if (n == 0)
        dispatch(srv, ss, wsi);
    return 0;
}

static void on_body(session *ss, const void *in, size_t len) {
    areal_http_exchange *x = ss->x;
    if (x == NULL || ss->dispatched || x->body == NULL)
        return;
    if (x->body_len + len > x->body_want) {
        x->body_overflow = true;
        return;
    }
    memcpy(x->body + x->body_len, in, len);
    x->body_len += len;
    x->body[x->body_len] = '\0';
}

/* ---- writing ------------------------------------------------------------- */

static int write_headers(areal_http_server *srv, struct lws *wsi, areal_http_exchange *x) {
    (void)srv;
    unsigned char buf[LWS_PRE + 1024], *start = &buf[LWS_PRE], *p = start, *end = buf + sizeof buf;
    if (lws_add_http_header_status(wsi, (unsigned)x->status, &p, end) ||
        lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, (unsigned char *)x->ctype,
                                     (int)strlen(x->ctype), &p, end))
        return -1;
    for (int i = 0; i < x->n_headers; i++)
        if (lws_add_http_header_by_name(wsi, (unsigned char *)x->hname[i],
                                        (unsigned char *)x->hval[i], (int)strlen(x->hval[i]), &p,
                                        end))
            return -1;
    if (x->chunked) {
        if (lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING,
                                         (unsigned char *)"chunked", 7, &p, end) ||
            lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CACHE_CONTROL,
                                         (unsigned char *)"no-cache", 8, &p, end))
            return -1;
    } else if (lws_add_http_header_content_length(wsi, (lws_filepos_t)x->content_length, &p, end)) {
        return -1;
    }
    if (x->close_after && lws_add_http_header_by_token(wsi, WSI_TOKEN_CONNECTION,
                                                       (unsigned char *)"close", 5, &p, end))
        return -1;
    if (lws_finalize_write_http_header(wsi, start, &p, end))
        return -1;
    x->headers_sent = true;
    return 0;
}

/* LWS_CALLBACK_HTTP_WRITEABLE. */
static int on_writable(areal_http_server *srv, session *ss, struct lws *wsi) {
    areal_http_exchange *x = ss->x;
    if (x == NULL)
        return 0;
    unsigned char buf[LWS_PRE + WRITE_CHUNK];
    pthread_mutex_lock(&x->hub->mu);
    int status = x->status;
    bool headers = !x->headers_sent && status != 0;
    pthread_mutex_unlock(&x->hub->mu);
    if (status == 0)
        return 0; /* woken before the handler answered */
    if (headers) {
        if (write_headers(srv, wsi, x) != 0)
            return -1;
        lws_callback_on_writable(wsi); /* the body goes in a callback of its own */
        ss->since = now_ms();
        return 0;
    }
    pthread_mutex_lock(&x->hub->mu);
    size_t n = x->out_len - x->out_off;
    if (n > WRITE_CHUNK)
        n = WRITE_CHUNK;
    if (n > 0)
        memcpy(&buf[LWS_PRE], x->out + x->out_off, n);
    x->out_off += n;
    bool drained = x->out_off == x->out_len;
    bool last = drained && x->finished;
    bool close_after = x->close_after;
    pthread_mutex_unlock(&x->hub->mu);
    if (n > 0 || last) {
        enum lws_write_protocol wp = last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP;
        if (lws_write(wsi, &buf[LWS_PRE], n, wp) != (int)n)
            return -1;
    }
    ss->since = now_ms();
    if (!last) {
        if (!drained)
            lws_callback_on_writable(wsi);
        return 0;
    }
    ss->x = NULL;
    ss->served = true;
    /* x may still sit on the pending list (a producer's last wake came after this writable
     * was asked for); once this connection closes, libwebsockets frees it, so on_wake must
     * not ask it for a writable callback through x */
    pthread_mutex_lock(&x->hub->mu);
    x->wsi = NULL;
    pthread_mutex_unlock(&x->hub->mu);
    http_exchange_unref(x); /* the connection's reference */
    if (close_after)
        return -1;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* Whether the peer has closed its side (EOF readable); pipelined bytes do not count. */
static bool peer_closed(struct lws *wsi) {
    char c;
    ssize_t n = recv(lws_get_socket_fd(wsi), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* LWS_CALLBACK_TIMER: the connection's timeouts. Returns -1 to close it. */
static int on_tick(areal_http_server *srv, session *ss, struct lws *wsi) {
    long long age = now_ms() - ss->since;
    areal_http_exchange *x = ss->x;
    if (x == NULL) { /* waiting for a request */
        int limit = ss->served ? srv->cfg.idle_timeout_s : srv->cfg.header_timeout_s;
        if (age > (long long)limit * 1000)
            return -1;
    } else if (!ss->dispatched) { /* receiving the body */
        if (age > (long long)srv->cfg.header_timeout_s * 1000)
            return -1;
    } else {
        pthread_mutex_lock(&x->hub->mu);
        bool writing = x->status != 0 && (!x->headers_sent || x->out_off < x->out_len);
        pthread_mutex_unlock(&x->hub->mu);
        if (writing && age > (long long)srv->cfg.write_timeout_s * 1000)
            return -1; /* the client stopped reading */
        if (!writing) {
            if (peer_closed(wsi))
                return -1;
            ss->since = now_ms(); /* a computing handler is never timed out */
        }
    }
    lws_set_timer_usecs(wsi, (lws_usec_t)TICK_MS * 1000);
    return 0;
}

static void on_closed(session *ss) {
    areal_http_exchange *x = ss->x;
    if (x == NULL)
        return;
    ss->x = NULL;
    http_exchange_gone(x);
    http_exchange_unref(x);
}

/*
 * The pending exchanges: ask for a writable callback on each open connection
 * and drop the list's references, all under hub->mu. The references must go
 * under the lock: once on_pending is false a producer may queue x again,
 * which rewrites x->next_pending, so a walk of the detached list after
 * unlocking would follow the hub's new list instead, dropping references
 * that list still holds (the exchange freed under its producer: the heap
 * corruption and tpp.c mutex assertions the rollout server showed under load).
 * Only exchanges whose last reference went are freed after unlocking; no one
 * else can reach those, so their next_pending is ours to chain them.
 */
static void on_wake(http_hub *hub) {
    areal_http_exchange *dead = NULL;
    pthread_mutex_lock(&hub->mu);
    areal_http_exchange *x = hub->pending;
    hub->pending = NULL;
    while (x != NULL) {
        areal_http_exchange *next = x->next_pending;
        x->on_pending = false;
        if (x->wsi != NULL)
            lws_callback_on_writable(x->wsi);
        if (http_exchange_unref_locked(x)) {
            x->next_pending = dead;
            dead = x;
        }
        x = next;
    }
    pthread_mutex_unlock(&hub->mu);
    while (dead != NULL) {
        areal_http_exchange *next = dead->next_pending;
        http_exchange_free(dead);
        dead = next;
    }
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len) {
    session *ss = user;
    struct lws_context *ctx = lws_get_context(wsi);
    areal_http_server *srv = ctx ? lws_context_user(ctx) : NULL;
    switch (reason) {
    case LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED:
        /* no session yet: the first tick comes when the headers are overdue */
        lws_set_timer_usecs(wsi, (lws_usec_t)srv->cfg.header_timeout_s * 1000000);
        return 0;
    case LWS_CALLBACK_HTTP_BIND_PROTOCOL:
        if (ss != NULL && !ss->timer_on) {
            ss->timer_on = true;
            ss->since = now_ms();
            lws_set_timer_usecs(wsi, (lws_usec_t)TICK_MS * 1000);
        }
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    case LWS_CALLBACK_TIMER:
        return ss != NULL ? on_tick(srv, ss, wsi) : -1; /* still no headers */
    case LWS_CALLBACK_HTTP:
        if (ss != NULL && !ss->timer_on) {
            ss->timer_on = true;
            lws_set_timer_usecs(wsi, (lws_usec_t)TICK_MS * 1000);
        }
        if (ss->x != NULL) /* a new request before the last was answered */
            on_closed(ss);
        return on_request(srv, ss, wsi, in);
    case LWS_CALLBACK_HTTP_BODY:
        on_body(ss, in, len);
        return 0;
    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
        if (ss->x != NULL && !ss->dispatched) {
            if (ss->x->body_overflow || ss->x->body_len != ss->x->body_want) {
                ss->dispatched = true;
                answer(ss->x, 400, "the request body does not match its Content-Length", true);
            } else {
                dispatch(srv, ss, wsi);
            }
        }
        return 0;
    case LWS_CALLBACK_HTTP_WRITEABLE:
        return on_writable(srv, ss, wsi);
    case LWS_CALLBACK_CLOSED_HTTP:
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
        if (ss != NULL)
            on_closed(ss);
        return 0;
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
        if (srv != NULL)
            on_wake(srv->hub);
        return 0;
    case LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS:
        /* user: the vhost's SSL_CTX (LWS_SERVER_OPTION_CREATE_VHOST_SSL_CTX); the
         * pair was checked in areal_http_start, so a failure here is OpenSSL's */
        if (srv != NULL && srv->tls_cert != NULL)
            return http_tls_install(user, srv->tls_cert, srv->tls_key) == 0 ? 0 : 1;
        return 0;
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}

static const struct lws_protocols protocols[] = {
    {"http", callback, sizeof(session), 0, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

static void *serve(void *arg) {
    areal_http_server *s = arg;
    while (!atomic_load(&s->stopping))
        if (lws_service(s->ctx, 0) < 0)
            break;
    return NULL;
}

/*
 * Checks that host:port can be bound before libwebsockets tries: its failure
 * path logs noise, and this gives a message that names the address.
 */
static int probe_bind(const char *host, int port, areal_error *err) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (port < 0 || port > 65535 || inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "listen address %s:%d is not an IPv4 address and port", host, port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1, rc = AREAL_OK;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0)
        rc = areal_error_set(err, AREAL_EIO, -1,
                             "cannot listen on %s:%d: %s; choose another address or port", host,
                             port, strerror(errno));
    if (fd >= 0)
        close(fd);
    return rc;
}

int areal_http_start(areal_http_server *s, areal_error *err) {
    if (s->started)
        return areal_error_set(err, AREAL_EINVAL, -1, "the server is already started");
    int rc = probe_bind(s->host, s->cfg.port, err);
    if (rc == AREAL_OK && s->tls_cert != NULL)
        rc = areal_http_tls_check(s->tls_cert, s->tls_key, "the HTTPS certificate and key", err);
    if (rc != AREAL_OK)
        return rc;
    lws_set_log_level(LLL_ERR, NULL);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = s->cfg.port;
    info.iface = s->host;
    info.protocols = protocols;
    info.user = s;
    info.options = LWS_SERVER_OPTION_DISABLE_IPV6;
    info.timeout_secs = (unsigned)s->cfg.header_timeout_s;
    info.keepalive_timeout = s->cfg.idle_timeout_s;
    info.fd_limit_per_thread = (unsigned)s->cfg.max_connections + 16;
    info.count_threads = 1;
    /* a bearer token (a projected ServiceAccount token is ~1-2 KB) must fit */
    info.max_http_header_data = 16384;
    if (s->tls_cert != NULL) {
        /* the certificate goes in through the SSL_CTX callback (tls.c says why);
         * HTTP/1.1 only: the exchange model here is HTTP/1.1's (no h2 streams) */
        info.options |=
            LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT | LWS_SERVER_OPTION_CREATE_VHOST_SSL_CTX;
        info.alpn = "http/1.1";
    }
    s->ctx = lws_create_context(&info);
    if (s->ctx == NULL)
        return areal_error_set(err, AREAL_EIO, -1,
                               "cannot listen on %s:%d (address in use or not local); choose "
                               "another address or port",
                               s->host, s->cfg.port);
    s->vhost = lws_get_vhost_by_name(s->ctx, "default");
    pthread_mutex_lock(&s->hub->mu);
    s->hub->ctx = s->ctx;
    pthread_mutex_unlock(&s->hub->mu);
    s->started = true;
    if (pthread_create(&s->hub->thread, NULL, serve, s) != 0) {
        pthread_mutex_lock(&s->hub->mu);
        s->hub->ctx = NULL;
        pthread_mutex_unlock(&s->hub->mu);
        lws_context_destroy(s->ctx);
        s->ctx = NULL;
        s->started = false;
        return areal_error_set(err, AREAL_ENOMEM, -1, "cannot start the HTTP service thread");
    }
    return AREAL_OK;
}

int areal_http_port(const areal_http_server *s) {
    return s && s->vhost ? lws_get_vhost_listen_port(s->vhost) : -1;
}

void areal_http_stop(areal_http_server *s) {
    if (s == NULL)
        return;
    if (s->started) {
        atomic_store(&s->stopping, 1);
        lws_cancel_service(s->ctx);
        pthread_join(s->hub->thread, NULL);
        /* no producer may wake a dead context: mark it before destroying */
        pthread_mutex_lock(&s->hub->mu);
        s->hub->ctx = NULL;
        pthread_mutex_unlock(&s->hub->mu);
        lws_context_destroy(s->ctx); /* closes connections: their exchanges go */
        on_wake(s->hub);             /* drop the references of anything left pending */
    }
    for (int i = 0; i < s->n_routes; i++)
        free(s->routes[i].path);
    free(s->routes);
    free(s->tls_cert);
    free(s->tls_key);
    http_hub_unref(s->hub);
    free(s);
}
