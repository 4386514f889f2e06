/*
 * metrics_auth.h - who may read the operator's /metrics, decided by the API
 * server, as controller-runtime's secure metrics do
 * (filters.WithAuthenticationAndAuthorization): the request's bearer token is
 * sent in a TokenReview (authentication.k8s.io/v1); the user and groups it
 * names go in a SubjectAccessReview (authorization.k8s.io/v1) for the
 * nonResourceAttributes {path, verb} of the request ("/metrics", "get"). No
 * or an unknown token: 401; authenticated but not allowed: 403; the API
 * server not answering (or answering nonsense): 500, never an allow.
 *
 * Decisions are cached per token (and path and verb) for a short TTL, so a
 * scraper costs two API calls per TTL rather than per scrape: allowed for
 * allow_ttl_ms (default 60 s: a revoked binding is honoured within that),
 * refused for deny_ttl_ms (default 10 s: a token hammering the endpoint costs
 * little, a binding just added works soon). Failures are never cached. The
 * cache holds at most max_entries tokens (default 256; the soonest to expire
 * makes room), so random tokens cannot grow it. controller-runtime caches
 * authentication 1 min and authorisation 5 min (30 s refused); one decision
 * per token with a 1 min allow means a removed binding is honoured within a
 * minute rather than five.
 *
 * Thread-safe. metrics_auth_check blocks on the API calls; the HTTP handler
 * (httpd.c) first asks metrics_auth_cached, which never blocks, and hands a
 * miss to a thread of its own.
 */
#ifndef AREAL_OPERATOR_METRICS_AUTH_H
#define AREAL_OPERATOR_METRICS_AUTH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"

/*
 * Creates one review: POST `body` as a new `resource` ("tokenreviews" of
 * authentication.k8s.io/v1 or "subjectaccessreviews" of
 * authorization.k8s.io/v1) and return the API server's answer in *out (a new
 * reference). AREAL_OK, or an error with the reason in err (transport, HTTP
 * status: all become 500).
 */
typedef int (*metrics_auth_review_fn)(void *ud, const char *resource, const json_t *body,
                                      json_t **out, areal_error *err);

typedef struct metrics_auth_config {
    metrics_auth_review_fn review; /* required */
    void *review_ud;
    int64_t allow_ttl_ms;    /* 0: 60000 */
    int64_t deny_ttl_ms;     /* 0: 10000 */
    int max_entries;         /* 0: 256 */
    int64_t (*now_ms)(void); /* NULL: areal_now_ms (monotonic); tests pass a fake clock */
} metrics_auth_config;

typedef struct metrics_auth_decision {
    int status;        /* 200 allowed, 401, 403 or 500 */
    char message[512]; /* for the response body and the log: why (never the token) */
} metrics_auth_decision;

typedef struct metrics_auth metrics_auth;

/* A new filter (cfg copied); NULL when out of memory or cfg->review is NULL. */
metrics_auth *metrics_auth_new(const metrics_auth_config *cfg);

/* Frees it; NULL is a no-op. */
void metrics_auth_free(metrics_auth *a);

/*
 * Never blocks: true with *out filled when the request is decided without
 * the API server - no or a malformed Authorization header (401), or a fresh
 * cached decision for this token, path and verb. False: call
 * metrics_auth_check.
 */
bool metrics_auth_cached(metrics_auth *a, const char *authorization, const char *path,
                         const char *verb, metrics_auth_decision *out);

/*
 * Decides the request (cache first, else a TokenReview and, for an
 * authenticated token, a SubjectAccessReview) and caches the result unless
 * it is a failure (500). Blocks on the API calls.
 */
void metrics_auth_check(metrics_auth *a, const char *authorization, const char *path,
                        const char *verb, metrics_auth_decision *out);

/*
 * The review function of the operator: kube_create of the review on the
 * kube_client `kube_client_ptr` (cluster-scoped; the chart's ClusterRole
 * grants create on tokenreviews and subjectaccessreviews, nothing else).
 */
int metrics_auth_review_kube(void *kube_client_ptr, const char *resource, const json_t *body,
                             json_t **out, areal_error *err);

/* Counters for tests and logs: reviews sent (both kinds) and cache hits. */
void metrics_auth_counts(metrics_auth *a, long *reviews, long *hits);

#endif
