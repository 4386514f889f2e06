/*
 * httpd.c - see areal/operator/httpd.h: the operator's three endpoints as
 * routes of the shared HTTP server (areal/http/server.h). Each answer is
 * computed on the server's service thread at once (a scrape renders the
 * registry under its lock, so it is consistent); the server writes large
 * bodies in chunks as the socket takes them.
 *
 * Secure metrics: a scrape whose token has a fresh cached decision is
 * answered on the service thread as well; a token to be reviewed (two API
 * calls, up to the client's timeout) goes to the review thread, so the
 * service thread never waits on the API server. One thread is enough: a
 * Prometheus scrapes every 30 s and is then cached for a minute. The queue
 * is bounded (REVIEW_QUEUE_MAX, then 503 Retry-After), so a flood of new
 * tokens cannot grow it.
 */
#include "areal/operator/httpd.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/http/server.h"
#include "areal/log.h"

#define REVIEW_QUEUE_MAX 64

typedef struct review_item {
    areal_http_exchange *x;
    char *authorization;
    struct review_item *next;
} review_item;

struct operator_httpd {
    areal_http_server *srv, *probes; /* probes NULL: on srv */
    httpd_handlers h;
    metrics_auth *auth;
    /* the review thread's queue */
    pthread_t thread;
    bool thread_on;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    review_item *head, *tail;
    int queued;
    bool stopping;
};

static const char *const text_type = "text/plain; charset=utf-8";

static void serve_metrics(operator_httpd *s, areal_http_exchange *x) {
    size_t len = 0;
    char *body = s->h.metrics ? s->h.metrics(s->h.ud, &len) : NULL;
    if (body == NULL) {
        areal_http_respond(x, 500, text_type, NULL, "metrics unavailable\n", 20);
        return;
    }
    areal_http_respond(x, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, body, len);
    free(body);
}

/* Answers x as the filter decided: the metrics, or the refusal and why. */
static void finish(operator_httpd *s, areal_http_exchange *x, const metrics_auth_decision *d) {
    if (d->status == 200) {
        serve_metrics(s, x);
        return;
    }
    if (d->status == 500)
        areal_log(AREAL_LOG_WARN, "httpd", NULL, "/metrics: %s", d->message);
    char body[600];
    int n = snprintf(body, sizeof body, "%s\n", d->message);
    areal_http_header www[] = {{"WWW-Authenticate", "Bearer realm=\"areal-operator\""},
                               {NULL, NULL}};
    areal_http_respond(x, d->status, text_type, d->status == 401 ? www : NULL, body,
                       (size_t)(n < (int)sizeof body ? n : (int)sizeof body - 1));
}

static void *review_main(void *arg) {
    operator_httpd *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->head == NULL && !s->stopping)
            pthread_cond_wait(&s->cond, &s->mu);
        if (s->head == NULL)
            break; /* stopping and drained */
        review_item *it = s->head;
        s->head = it->next;
        if (s->head == NULL)
            s->tail = NULL;
        s->queued--;
        bool stopping = s->stopping;
        pthread_mutex_unlock(&s->mu);
        metrics_auth_decision d = {.status = 503};
        if (stopping)
            snprintf(d.message, sizeof d.message, "the operator is stopping");
        else
            metrics_auth_check(s->auth, it->authorization, "/metrics", "get", &d);
        finish(s, it->x, &d);
        free(it->authorization);
        free(it);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void get_metrics(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    operator_httpd *s = ud;
    if (s->auth == NULL) {
        serve_metrics(s, x);
        return;
    }
    metrics_auth_decision d;
    if (metrics_auth_cached(s->auth, r->authorization, r->path, "get", &d)) {
        finish(s, x, &d);
        return;
    }
    review_item *it = calloc(1, sizeof *it);
    if (it != NULL && (it->authorization = strdup(r->authorization)) == NULL) {
        free(it);
        it = NULL;
    }
    pthread_mutex_lock(&s->mu);
    bool full = s->queued >= REVIEW_QUEUE_MAX || s->stopping;
    if (it != NULL && !full) {
        it->x = x;
        if (s->tail)
            s->tail->next = it;
        else
            s->head = it;
        s->tail = it;
        s->queued++;
        pthread_cond_signal(&s->cond);
    }
    pthread_mutex_unlock(&s->mu);
    if (it == NULL || full) {
        if (it != NULL)
            free(it->authorization);
        free(it);
        areal_http_header retry[] = {{"Retry-After", "1"}, {NULL, NULL}};
        const char *msg = "too many token reviews in flight; retry\n";
        areal_http_respond(x, 503, text_type, retry, msg, strlen(msg));
    }
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

int httpd_start_with(const httpd_config *cfg, const httpd_handlers *h, operator_httpd **out,
                     areal_error *err) {
    *out = NULL;
    bool tls = cfg->tls_cert_pem != NULL || cfg->tls_key_pem != NULL;
    if ((tls || cfg->auth != NULL) && cfg->probe_host == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "secure metrics need a probe address of their own (the kubelet's "
                               "probes carry no token)");
    operator_httpd *s = calloc(1, sizeof *s);
    if (s == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->h = *h;
    s->auth = cfg->auth;
    areal_http_config mc = {.host = cfg->metrics_host,
                            .port = cfg->metrics_port,
                            .max_body = 4096,
                            .tls_cert_pem = cfg->tls_cert_pem,
                            .tls_key_pem = cfg->tls_key_pem};
    areal_http_config pc = {.host = cfg->probe_host, .port = cfg->probe_port, .max_body = 4096};
    int rc = AREAL_OK;
    if ((s->srv = areal_http_new(&mc)) == NULL ||
        (cfg->probe_host != NULL && (s->probes = areal_http_new(&pc)) == NULL))
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    areal_http_server *ps = s->probes ? s->probes : s->srv;
    if (rc == AREAL_OK)
        rc = areal_http_route(s->srv, "GET", "/metrics", get_metrics, s, err);
    if (rc == AREAL_OK)
        rc = areal_http_route(ps, "GET", "/healthz", get_healthz, s, err);
    if (rc == AREAL_OK)
        rc = areal_http_route(ps, "GET", "/readyz", get_readyz, s, err);
    if (rc == AREAL_OK && s->auth != NULL) {
        s->thread_on = pthread_create(&s->thread, NULL, review_main, s) == 0;
        if (!s->thread_on)
            rc = areal_error_set(err, AREAL_ENOMEM, -1, "cannot start the token review thread");
    }
    if (rc == AREAL_OK)
        rc = areal_http_start(s->srv, err);
    if (rc == AREAL_OK && s->probes != NULL)
        rc = areal_http_start(s->probes, err);
    if (rc != AREAL_OK) {
        httpd_stop(s);
        return rc;
    }
    *out = s;
    return AREAL_OK;
}

int httpd_start(const char *addr, int port, const httpd_handlers *h, operator_httpd **out,
                areal_error *err) {
    httpd_config cfg = {.metrics_host = addr, .metrics_port = port};
    return httpd_start_with(&cfg, h, out, err);
}

int httpd_port(const operator_httpd *s) {
    return areal_http_port(s->srv);
}

int httpd_probe_port(const operator_httpd *s) {
    return areal_http_port(s->probes ? s->probes : s->srv);
}

void httpd_stop(operator_httpd *s) {
    if (s == NULL)
        return;
    /* the servers first: no new request queues; then the queue is answered 503 */
    areal_http_stop(s->probes);
    areal_http_stop(s->srv);
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    if (s->thread_on)
        pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
