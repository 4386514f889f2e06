/*
 * httpd.c - see areal/operator/httpd.h. One libwebsockets context with one
 * vhost and one HTTP protocol; a request computes its whole body at once
 * (metrics are rendered under the registry lock, so a scrape is consistent),
 * then the body is written in chunks as the socket becomes writable, so a
 * large scrape never blocks the service loop. The service loop runs on a
 * thread of its own; httpd_stop wakes it with lws_cancel_service.
 */
#include "areal/operator/httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <libwebsockets.h>

#define CHUNK 16384

struct operator_httpd {
    struct lws_context *ctx;
    struct lws_vhost *vhost;
    pthread_t thread;
    atomic_bool stopping;
    httpd_handlers h;
    char iface[64];
};

typedef struct session {
    char *body;
    size_t len, off;
} session;

static int respond(struct lws *wsi, session *s, unsigned code, const char *type) {
    unsigned char buf[LWS_PRE + 512], *start = &buf[LWS_PRE], *p = start, *end = buf + sizeof buf;
    if (lws_add_http_common_headers(wsi, code, type, (lws_filepos_t)s->len, &p, end) ||
        lws_finalize_write_http_header(wsi, start, &p, end))
        return -1;
    lws_callback_on_writable(wsi);
    return 0;
}

static char *copy_text(const char *t, size_t *len) {
    *len = strlen(t);
    return strdup(t);
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len) {
    session *s = user;
    operator_httpd *srv = lws_context_user(lws_get_context(wsi));
    (void)len;
    switch (reason) {
    case LWS_CALLBACK_HTTP: {
        const char *path = in;
        unsigned code = 200;
        const char *type = "text/plain; charset=utf-8";
        s->off = 0;
        if (strcmp(path, "/metrics") == 0) {
            s->body = srv->h.metrics ? srv->h.metrics(srv->h.ud, &s->len) : NULL;
            type = "text/plain; version=0.0.4; charset=utf-8";
            if (s->body == NULL) {
                code = 500;
                s->body = copy_text("metrics unavailable\n", &s->len);
            }
        } else if (strcmp(path, "/healthz") == 0 || strcmp(path, "/readyz") == 0) {
            bool (*check)(void *) = path[1] == 'h' ? srv->h.healthy : srv->h.ready;
            bool ok = check == NULL || check(srv->h.ud);
            code = ok ? 200 : 503;
            s->body = copy_text(ok ? "ok\n" : "not ready\n", &s->len);
        } else {
            code = 404;
            s->body =
                copy_text("not found: the endpoints are /metrics, /healthz, /readyz\n", &s->len);
        }
        if (s->body == NULL)
            return -1;
        return respond(wsi, s, code, type);
    }
    case LWS_CALLBACK_HTTP_WRITEABLE: {
        if (s->body == NULL)
            return -1;
        unsigned char buf[LWS_PRE + CHUNK];
        size_t n = s->len - s->off < CHUNK ? s->len - s->off : CHUNK;
        memcpy(&buf[LWS_PRE], s->body + s->off, n);
        s->off += n;
        bool last = s->off == s->len;
        if (lws_write(wsi, &buf[LWS_PRE], n, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) !=
            (int)n)
            return -1;
        if (!last) {
            lws_callback_on_writable(wsi);
            return 0;
        }
        free(s->body);
        s->body = NULL;
        return lws_http_transaction_completed(wsi) ? -1 : 0;
    }
    case LWS_CALLBACK_CLOSED_HTTP:
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
        if (s != NULL) {
            free(s->body);
            s->body = NULL;
        }
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
    operator_httpd *s = arg;
    while (!atomic_load(&s->stopping))
        if (lws_service(s->ctx, 0) < 0)
            break;
    return NULL;
}

/*
 * Checks that addr:port can be bound before libwebsockets tries: its failure
 * path logs noise and leaks, and this gives a message that names the address.
 */
static int probe_bind(const char *addr, int port, areal_error *err) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (port < 0 || port > 65535 || inet_pton(AF_INET, addr, &a.sin_addr) != 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "listen address %s:%d is not an IPv4 address and port", addr, port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1, rc = AREAL_OK;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0)
        rc = areal_error_set(err, AREAL_EIO, -1,
                             "cannot listen on %s:%d: %s; choose another address or port", addr,
                             port, strerror(errno));
    if (fd >= 0)
        close(fd);
    return rc;
}

int httpd_start(const char *addr, int port, const httpd_handlers *h, operator_httpd **out,
                areal_error *err) {
    *out = NULL;
    int rc = probe_bind(addr, port, err);
    if (rc != AREAL_OK)
        return rc;
    operator_httpd *s = calloc(1, sizeof *s);
    if (s == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    s->h = *h;
    snprintf(s->iface, sizeof s->iface, "%s", addr);
    lws_set_log_level(LLL_ERR, NULL);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = port;
    info.iface = s->iface;
    info.protocols = protocols;
    info.user = s;
    info.options = LWS_SERVER_OPTION_DISABLE_IPV6;
    s->ctx = lws_create_context(&info);
    if (s->ctx == NULL) {
        free(s);
        return areal_error_set(err, AREAL_EIO, -1,
                               "cannot listen on %s:%d (address in use or not local); choose "
                               "another --metrics-address",
                               addr, port);
    }
    s->vhost = lws_get_vhost_by_name(s->ctx, "default");
    if (pthread_create(&s->thread, NULL, serve, s) != 0) {
        lws_context_destroy(s->ctx);
        free(s);
        return areal_error_set(err, AREAL_ENOMEM, -1, "cannot start the HTTP thread");
    }
    *out = s;
    return AREAL_OK;
}

int httpd_port(const operator_httpd *s) {
    return s->vhost ? lws_get_vhost_listen_port(s->vhost) : -1;
}

void httpd_stop(operator_httpd *s) {
    if (s == NULL)
        return;
    atomic_store(&s->stopping, true);
    lws_cancel_service(s->ctx);
    pthread_join(s->thread, NULL);
    lws_context_destroy(s->ctx);
    free(s);
}
