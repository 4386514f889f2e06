/*
 * httpd.h - the operator's HTTP endpoints: /metrics (Prometheus text),
 * /healthz and /readyz, as routes of the shared HTTP server
 * (areal/http/server.h, libwebsockets on a thread of its own).
 *
 * The handlers are called on the server thread and must be thread-safe. The
 * metrics handler returns a malloc'd body that the server frees.
 */
#ifndef AREAL_OPERATOR_HTTPD_H
#define AREAL_OPERATOR_HTTPD_H

#include <stdbool.h>
#include <stddef.h>

#include "areal/error.h"

typedef struct httpd_handlers {
    char *(*metrics)(void *ud, size_t *len); /* NULL result: 500 */
    bool (*healthy)(void *ud);               /* /healthz: 200 "ok" or 503 */
    bool (*ready)(void *ud);                 /* /readyz: 200 "ok" or 503 */
    void *ud;
} httpd_handlers;

typedef struct operator_httpd operator_httpd;

/*
 * Listens on `addr` (an IPv4 address such as "127.0.0.1" or "0.0.0.0") and
 * `port` (0: the kernel picks one; see httpd_port) and serves until
 * httpd_stop. AREAL_EIO with the address in the message when it cannot bind.
 */
int httpd_start(const char *addr, int port, const httpd_handlers *h, operator_httpd **out,
                areal_error *err);

/* The port it listens on. */
int httpd_port(const operator_httpd *s);

/* Stops serving, joins the thread and frees everything. NULL is ignored. */
void httpd_stop(operator_httpd *s);

#endif
