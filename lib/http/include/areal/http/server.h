/*
 * server.h - an HTTP/1.1 server on libwebsockets for the project's services
 * (the rollout server's SGLang API, the operator's and the trainer's
 * /metrics): a route table, bounded request bodies, keep-alive, responses
 * that a handler may produce later and from any thread, chunked streaming
 * (SSE `data:` lines) and per-connection timeouts.
 *
 * Model: one service thread runs libwebsockets. When a request is complete
 * (headers and the whole body) the route's handler is called on that thread
 * with an exchange `x`. The handler (or whatever thread it hands `x` to: the
 * rollout engine answers from its scheduler thread) then finishes `x` with
 * exactly one of
 *   areal_http_respond()                        one whole response, or
 *   areal_http_stream_start() .. _write() .. areal_http_stream_end()
 *                                               a chunked response.
 * Those calls only append to the exchange's output queue under a lock and
 * wake the service thread (lws_cancel_service); the socket is only ever
 * touched by the service thread. Handlers must not block the service thread
 * for long: hand slow work to another thread.
 *
 * Client gone: when the connection closes before the exchange finished
 * (client disconnect, timeout, server stop), the exchange's on-close hook
 * runs once (on the service thread, or at once from areal_http_on_close if
 * already gone), and later writes return AREAL_EIO; the holder must still
 * finish `x` (respond or stream_end) to release it. Exchanges may outlive the
 * server: after areal_http_stop every call on them returns AREAL_EIO.
 *
 * Errors of the server itself (no route, wrong method, body over the limit,
 * malformed length) are answered with a JSON body {"error": {"message",
 * "type", "code"}} (the OpenAI/SGLang style), so clients see one error shape.
 *
 * Timeouts: a client that does not finish its headers or body in
 * header_timeout_s, an idle keep-alive connection after idle_timeout_s, and
 * a client that stops reading a response (no progress for write_timeout_s)
 * are disconnected. While a handler computes, no timeout runs.
 */
#ifndef AREAL_HTTP_SERVER_H
#define AREAL_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "areal/error.h"

typedef struct areal_http_server areal_http_server;
typedef struct areal_http_exchange areal_http_exchange;

/* The request as the handler sees it; valid until the exchange is finished. */
typedef struct areal_http_request {
    const char *method; /* "GET", "POST", ... */
    const char *path;   /* without the query: "/generate" */
    const char *query;  /* after '?', "" when none (fragments joined by '&') */
    const char *body;   /* NUL-terminated copy of the body ("" when none) */
    size_t body_len;
    const char *authorization; /* the Authorization header's value, "" when none */
} areal_http_request;

/* A route's handler: must (eventually) finish x. Runs on the service thread. */
typedef void (*areal_http_handler)(areal_http_exchange *x, const areal_http_request *r, void *ud);

typedef struct areal_http_config {
    const char *host;     /* IPv4 address to listen on; NULL = "127.0.0.1" */
    int port;             /* 0: the kernel picks one (see areal_http_port) */
    size_t max_body;      /* larger bodies get 413; 0 = 16 MiB */
    int header_timeout_s; /* headers and body must arrive within; 0 = 10 */
    int idle_timeout_s;   /* idle keep-alive connections close after; 0 = 60 */
    int write_timeout_s;  /* a client making no read progress is dropped; 0 = 30 */
    int max_connections;  /* concurrent connections; 0 = 4096 */
    /* TLS: both set = HTTPS only (TLS 1.2+, OpenSSL), both NULL = plain HTTP.
     * PEM text (copied): the certificate (then its chain) and an unencrypted
     * private key of any type; areal/http/tls.h makes or checks them. */
    const char *tls_cert_pem, *tls_key_pem;
} areal_http_config;

/*
 * A new server (not yet listening) with an empty route table; NULL when out
 * of memory. cfg is copied (host too).
 */
areal_http_server *areal_http_new(const areal_http_config *cfg);

/*
 * Adds a route: requests with this exact method and path go to fn. Only
 * before areal_http_start. A path with another method answers 405, an
 * unknown path 404. AREAL_EINVAL for a duplicate or bad route; AREAL_ENOMEM.
 */
int areal_http_route(areal_http_server *s, const char *method, const char *path,
                     areal_http_handler fn, void *ud, areal_error *err);

/*
 * Binds and starts the service thread. AREAL_EIO naming host:port when the
 * address cannot be bound (in use, not local), AREAL_EINVAL for a malformed
 * address or a TLS pair that does not parse or match, AREAL_ENOMEM.
 */
int areal_http_start(areal_http_server *s, areal_error *err);

/* The port it listens on (after start), or -1. */
int areal_http_port(const areal_http_server *s);

/*
 * Stops serving: closes every connection (running their on-close hooks),
 * joins the thread and frees the server; s NULL is a no-op. Exchanges still
 * held elsewhere stay valid (calls on them then return AREAL_EIO) until
 * they are finished.
 */
void areal_http_stop(areal_http_server *s);

/* ---- answering (any thread) ----------------------------------------------- */

/* One extra response header; arrays of them end with {NULL, NULL}. */
typedef struct areal_http_header {
    const char *name, *value;
} areal_http_header;

/*
 * Finishes x with a whole response: status, content type (NULL:
 * "application/json"), extra headers (NULL for none) and body[0..len)
 * (copied). Returns AREAL_OK, or AREAL_EIO when the client is gone (x is
 * released either way and must not be used again).
 */
int areal_http_respond(areal_http_exchange *x, int status, const char *content_type,
                       const areal_http_header *headers, const char *body, size_t len);

/* areal_http_respond with a JSON error body {"error": {"message", "type", "code"}}. */
int areal_http_respond_error(areal_http_exchange *x, int status, const char *message);

/*
 * Starts a chunked response (Transfer-Encoding: chunked; the connection
 * stays open for the next request). Then any number of stream_write calls
 * (each a chunk of len > 0 bytes, copied) and one stream_end, which releases
 * x. Writes return AREAL_EIO when the client is gone, AREAL_EINVAL when
 * called out of order.
 */
int areal_http_stream_start(areal_http_exchange *x, int status, const char *content_type);
int areal_http_stream_write(areal_http_exchange *x, const char *data, size_t len);
void areal_http_stream_end(areal_http_exchange *x);

/*
 * Bytes of x's response queued but not yet handed to the socket (0 once the
 * client is gone). A producer of a large stream (the rollout server's
 * weights) writes a piece, then waits while this is above its window, so the
 * queue never holds the whole body: stream_write itself never blocks.
 */
size_t areal_http_stream_queued(areal_http_exchange *x);

/* Whether the client has gone (then nothing more will be delivered). */
bool areal_http_client_gone(areal_http_exchange *x);

/*
 * Registers fn(ud) to run once when the client goes before x is finished
 * (replacing an earlier hook). Runs on the service thread, or before this
 * call returns when the client is already gone. Never runs after x is
 * finished. fn must not finish x itself (the holder does).
 */
void areal_http_on_close(areal_http_exchange *x, void (*fn)(void *ud), void *ud);

#endif
