/*
 * http_internal.h - what server.c (the libwebsockets side, service thread)
 * and exchange.c (the answering side, any thread) share: the hub and the
 * exchange. Not installed.
 *
 * Locking: one mutex per hub guards every exchange's state and the pending
 * list; contention is low (an exchange's producer appends a chunk, the
 * service thread takes it), and one lock makes the connection-closed versus
 * response-finished race easy to reason about. The on-close hook runs under
 * the exchange's own hook_mu, which finishing takes too, so a hook never runs
 * after (or while) its exchange is finished and its context freed.
 *
 * Lifetimes: the hub is shared by the server and every exchange (refcount),
 * so exchanges outlive areal_http_stop. An exchange has one reference for
 * its connection (dropped when the response is written or the connection
 * closes), one for its holder (dropped by respond/stream_end) and one while
 * it sits on the pending list.
 */
#ifndef AREAL_HTTP_INTERNAL_H
#define AREAL_HTTP_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <libwebsockets.h>

#include "areal/http/server.h"

#define HTTP_MAX_EXTRA_HEADERS 4

typedef struct http_hub {
    pthread_mutex_t mu;
    int refs;
    struct lws_context *ctx; /* NULL once stopped: nothing can be delivered */
    pthread_t thread;        /* the service thread */
    areal_http_exchange *pending;
} http_hub;

struct areal_http_exchange {
    http_hub *hub;
    int refs;
    struct lws *wsi; /* NULL once the connection is gone */
    bool gone, finished, on_pending, close_after;
    areal_http_exchange *next_pending;

    /* the request */
    char method[8];
    char *path, *query, *body, *authorization;
    size_t body_len, body_cap, body_want;
    bool body_overflow;
    areal_http_request req;

    /* the response */
    int status;        /* 0 until respond / stream_start */
    bool chunked;      /* stream */
    bool headers_sent; /* service thread only */
    long long content_length;
    char ctype[96];
    char hname[HTTP_MAX_EXTRA_HEADERS][40], hval[HTTP_MAX_EXTRA_HEADERS][96];
    int n_headers;
    char *out; /* queued bytes out[out_off .. out_len) */
    size_t out_len, out_cap, out_off;

    pthread_mutex_t hook_mu;
    void (*hook)(void *);
    void *hook_ud;
};

/* A new exchange with one reference (the connection's); NULL when out of memory. */
areal_http_exchange *http_exchange_new(http_hub *hub, struct lws *wsi);

/* Drops one reference (hub->mu NOT held); frees at zero, dropping its hub reference. */
void http_exchange_unref(areal_http_exchange *x);

/* With hub->mu held: drops one reference; true when it was the last (then free x
 * with http_exchange_free after unlocking: freeing drops a hub reference, which locks). */
bool http_exchange_unref_locked(areal_http_exchange *x);

/* Frees x (no reference left; hub->mu NOT held). */
void http_exchange_free(areal_http_exchange *x);

/* Drops one hub reference (hub->mu NOT held); frees the hub at zero. */
void http_hub_unref(http_hub *hub);

/*
 * Marks the connection gone and runs the hook if the exchange is not
 * finished (service thread; hub->mu NOT held). Does not drop a reference.
 */
void http_exchange_gone(areal_http_exchange *x);

/*
 * Puts the PEM pair into a TLS server's SSL_CTX (an OpenSSL SSL_CTX *; tls.c):
 * the leaf, its chain and the key, TLS 1.2 at least. 0, or -1 when OpenSSL
 * refuses it.
 */
int http_tls_install(void *ssl_ctx, const char *cert_pem, const char *key_pem);

/* With hub->mu held: puts x on the pending list (unless there) and wakes the service thread. */
void http_wake_locked(areal_http_exchange *x);

#endif
