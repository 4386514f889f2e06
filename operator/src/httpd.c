/*
 * httpd.c - see areal/operator/httpd.h: the operator's three endpoints as
 * routes of the shared HTTP server (areal/http/server.h). Each answer is
 * computed on the server's service thread at once (a scrape renders the
 * registry under its lock, so it is consistent); the server writes large
 * bodies in chunks as the socket takes them.
 */
#include "areal/operator/httpd.h"

#include <stdlib.h>
#include <string.h>

#include "areal/http/server.h"

struct operator_httpd {
    areal_http_server *srv;
    httpd_handlers h;
};

static const char *const text_type = "text/plain; charset=utf-8";

static void get_metrics(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    operator_httpd *s = ud;
    size_t len = 0;
    char *body = s->h.metrics ? s->h.metrics(s->h.ud, &len) : NULL;
    if (body == NULL) {
        areal_http_respond(x, 500, text_type, NULL, "metrics unavailable\n", 20);
        return;
    }
    areal_http_respond(x, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, body, len);
    free(body);
}

static void check(areal_http_exchange *x, bool (*fn)(void *), void *ud) {
    bool ok = fn == NULL || fn(ud);
    const char *body = ok ? "ok\n" : "not ready\n";
    areal_http_respond(x, ok ? 200 : 503, text_type, NULL, body, strlen(body));
}

static void get_healthz(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    operator_httpd *s = ud;
    check(x, s->h.healthy, s->h.ud);
}

static void get_readyz(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    operator_httpd *s = ud;
    check(x, s->h.ready, s->h.ud);
}

int httpd_start(const char *addr, int port, const httpd_handlers *h, operator_httpd **out,
                areal_error *err) {
    *out = NULL;
    operator_httpd *s = calloc(1, sizeof *s);
    areal_http_config cfg = {.host = addr, .port = port, .max_body = 4096};
    if (s == NULL || (s->srv = areal_http_new(&cfg)) == NULL) {
        free(s);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    }
    s->h = *h;
    int rc = areal_http_route(s->srv, "GET", "/metrics", get_metrics, s, err);
    if (rc == AREAL_OK)
        rc = areal_http_route(s->srv, "GET", "/healthz", get_healthz, s, err);
    if (rc == AREAL_OK)
        rc = areal_http_route(s->srv, "GET", "/readyz", get_readyz, s, err);
    if (rc == AREAL_OK)
        rc = areal_http_start(s->srv, err);
    if (rc != AREAL_OK) {
        areal_http_stop(s->srv);
        free(s);
        return rc;
    }
    *out = s;
    return AREAL_OK;
}

int httpd_port(const operator_httpd *s) {
    return areal_http_port(s->srv);
}

void httpd_stop(operator_httpd *s) {
    if (s == NULL)
        return;
    areal_http_stop(s->srv);
    free(s);
}
