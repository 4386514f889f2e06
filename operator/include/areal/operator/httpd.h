/*
 * httpd.h - the operator's HTTP endpoints: /metrics (Prometheus text),
 * /healthz and /readyz, as routes of the shared HTTP server
 * (areal/http/server.h, libwebsockets on a thread of its own).
 *
 * Plain (httpd_start): the three on one address. Secure (httpd_start_with a
 * TLS pair and a metrics_auth): /metrics alone over HTTPS, each request's
 * bearer token authenticated and authorised by the API server
 * (areal/operator/metrics_auth.h), and /healthz and /readyz on a plain
 * address of their own, because a kubelet's probes carry no token
 * (controller-runtime's split too: metrics :8443, probes :8081).
 *
 * The handlers are called on a server thread and must be thread-safe. The
 * metrics handler returns a malloc'd body that the server frees.
 */
#ifndef AREAL_OPERATOR_HTTPD_H
#define AREAL_OPERATOR_HTTPD_H

#include <stdbool.h>
#include <stddef.h>

#include "areal/error.h"
#include "areal/operator/metrics_auth.h"

typedef struct httpd_handlers {
    char *(*metrics)(void *ud, size_t *len); /* NULL result: 500 */
    bool (*healthy)(void *ud);               /* /healthz: 200 "ok" or 503 */
    bool (*ready)(void *ud);                 /* /readyz: 200 "ok" or 503 */
    void *ud;
} httpd_handlers;

typedef struct httpd_config {
    const char *metrics_host; /* an IPv4 address: "127.0.0.1", "0.0.0.0" */
    int metrics_port;         /* 0: the kernel picks one (httpd_port) */
    /* /healthz and /readyz on a server of their own at probe_host:probe_port;
     * probe_host NULL: on the metrics server (allowed only when it is plain) */
    const char *probe_host;
    int probe_port;
    /* both set: /metrics over HTTPS with this PEM pair; both NULL: plain */
    const char *tls_cert_pem, *tls_key_pem;
    /* set: /metrics answers only tokens this filter allows (not owned; it must
     * outlive httpd_stop); NULL: anyone may read it */
    metrics_auth *auth;
} httpd_config;

typedef struct operator_httpd operator_httpd;

/*
 * Starts the endpoints of cfg and serves until httpd_stop. AREAL_EIO with the
 * address in the message when one cannot bind, AREAL_EINVAL for a TLS pair
 * that does not parse or match, or probes on an HTTPS metrics server.
 */
int httpd_start_with(const httpd_config *cfg, const httpd_handlers *h, operator_httpd **out,
                     areal_error *err);

/* httpd_start_with: the three endpoints, plain HTTP, on addr:port. */
int httpd_start(const char *addr, int port, const httpd_handlers *h, operator_httpd **out,
                areal_error *err);

/* The port /metrics listens on, and the one of the probes (the same when shared). */
int httpd_port(const operator_httpd *s);
int httpd_probe_port(const operator_httpd *s);

/* Stops serving (a request waiting for its review is answered 503), joins the
 * threads and frees everything. NULL is ignored. */
void httpd_stop(operator_httpd *s);

#endif
