/*
 * metrics_auth.c - see areal/operator/metrics_auth.h: the bearer token, the
 * TokenReview, the SubjectAccessReview, and the TTL cache of decisions.
 *
 * The cache is a small array searched linearly: its users are a Prometheus
 * or two (one token each), and max_entries bounds it. It keeps the token
 * itself as the key (in this process's memory, as the request had it); a
 * hash alone would let two tokens share a decision on a collision.
 * Rejected: caching the TokenReview and the SubjectAccessReview apart
 * (apiserver's delegating authenticator and authorizer do); for one path and
 * verb a token's final answer is all a scrape needs, and it halves the code.
 */
#include "areal/operator/metrics_auth.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/clock.h"
#include "areal/kube/client.h"

typedef struct entry {
    char *key; /* "VERB PATH TOKEN"; NULL: free slot */
    int64_t expires_ms;
    metrics_auth_decision d;
} entry;

struct metrics_auth {
    metrics_auth_config cfg;
    pthread_mutex_t mu;
    entry *entries;
    long reviews, hits;
};

static int64_t default_now(void) {
    return areal_now_ms();
}

metrics_auth *metrics_auth_new(const metrics_auth_config *cfg) {
    if (cfg == NULL || cfg->review == NULL)
        return NULL;
    metrics_auth *a = calloc(1, sizeof *a);
    if (a == NULL)
        return NULL;
    a->cfg = *cfg;
    if (a->cfg.allow_ttl_ms <= 0)
        a->cfg.allow_ttl_ms = 60000;
    if (a->cfg.deny_ttl_ms <= 0)
        a->cfg.deny_ttl_ms = 10000;
    if (a->cfg.max_entries <= 0)
        a->cfg.max_entries = 256;
    if (a->cfg.now_ms == NULL)
        a->cfg.now_ms = default_now;
    a->entries = calloc((size_t)a->cfg.max_entries, sizeof *a->entries);
    if (a->entries == NULL) {
        free(a);
        return NULL;
    }
    pthread_mutex_init(&a->mu, NULL);
    return a;
}

void metrics_auth_free(metrics_auth *a) {
    if (a == NULL)
        return;
    for (int i = 0; i < a->cfg.max_entries; i++)
        free(a->entries[i].key);
    free(a->entries);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

static void decide(metrics_auth_decision *out, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void decide(metrics_auth_decision *out, int status, const char *fmt, ...) {
    out->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->message, sizeof out->message, fmt, ap);
    va_end(ap);
}

/* The token of "Bearer TOKEN" (scheme case-insensitive) into tok and len, or false. */
static bool bearer(const char *h, const char **tok, size_t *len) {
    if (h == NULL || strncasecmp(h, "bearer ", 7) != 0)
        return false;
    const char *t = h + 7;
    while (*t == ' ')
        t++;
    size_t n = strlen(t);
    while (n > 0 && t[n - 1] == ' ')
        n--;
    for (size_t i = 0; i < n; i++)
        if (isspace((unsigned char)t[i]) || !isprint((unsigned char)t[i]))
            return false;
    *tok = t;
    *len = n;
    return n > 0;
}

static char *cache_key(const char *verb, const char *path, const char *tok, size_t len) {
    size_t n = strlen(verb) + strlen(path) + len + 3;
    char *k = malloc(n);
    if (k != NULL)
        snprintf(k, n, "%s %s %.*s", verb, path, (int)len, tok);
    return k;
}

/* With a->mu held: the fresh entry of key, or NULL. */
static entry *lookup(metrics_auth *a, const char *key, int64_t now) {
    for (int i = 0; i < a->cfg.max_entries; i++) {
        entry *e = &a->entries[i];
        if (e->key != NULL && e->expires_ms > now && strcmp(e->key, key) == 0)
            return e;
    }
    return NULL;
}

/* With a->mu held: stores key's decision (takes key), replacing its old entry,
 * else a free or expired slot, else the one that expires soonest. */
static void store(metrics_auth *a, char *key, const metrics_auth_decision *d, int64_t expires,
                  int64_t now) {
    entry *slot = NULL;
    for (int i = 0; i < a->cfg.max_entries && slot == NULL; i++)
        if (a->entries[i].key != NULL && strcmp(a->entries[i].key, key) == 0)
            slot = &a->entries[i];
    for (int i = 0; i < a->cfg.max_entries && slot == NULL; i++)
        if (a->entries[i].key == NULL || a->entries[i].expires_ms <= now)
            slot = &a->entries[i];
    if (slot == NULL) { /* full of fresh entries: the soonest to expire goes */
        slot = &a->entries[0];
        for (int i = 1; i < a->cfg.max_entries; i++)
            if (a->entries[i].expires_ms < slot->expires_ms)
                slot = &a->entries[i];
    }
    free(slot->key);
    slot->key = key;
    slot->expires_ms = expires;
    slot->d = *d;
}

bool metrics_auth_cached(metrics_auth *a, const char *authorization, const char *path,
                         const char *verb, metrics_auth_decision *out) {
    const char *tok;
    size_t len;
    if (authorization == NULL || authorization[0] == '\0') {
        decide(out, 401,
               "Unauthorized: send a bearer token (Authorization: Bearer TOKEN) of an "
               "account allowed to get %s",
               path);
        return true;
    }
    if (!bearer(authorization, &tok, &len)) {
        decide(out, 401, "Unauthorized: the Authorization header is not 'Bearer TOKEN'");
        return true;
    }
    char *key = cache_key(verb, path, tok, len);
    if (key == NULL)
        return false;
    pthread_mutex_lock(&a->mu);
    entry *e = lookup(a, key, a->cfg.now_ms());
    if (e != NULL) {
        *out = e->d;
        a->hits++;
    }
    pthread_mutex_unlock(&a->mu);
    free(key);
    return e != NULL;
}

static const char *str_at(const json_t *o, const char *a, const char *b) {
    const json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

static int review(metrics_auth *a, const char *resource, json_t *body, json_t **out,
                  areal_error *err) {
    *out = NULL;
    pthread_mutex_lock(&a->mu);
    a->reviews++;
    pthread_mutex_unlock(&a->mu);
    int rc = body ? a->cfg.review(a->cfg.review_ud, resource, body, out, err)
                  : areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    json_decref(body);
    if (rc == AREAL_OK && !json_is_object(json_object_get(*out, "status"))) {
        json_decref(*out);
        *out = NULL;
        rc = areal_error_set(err, AREAL_EINVAL, -1, "the %s answer has no status", resource);
    }
    return rc;
}

/* TokenReview then SubjectAccessReview: fills *out; true when the decision may be cached. */
static bool ask(metrics_auth *a, const char *tok, size_t len, const char *path, const char *verb,
                metrics_auth_decision *out) {
    areal_error err;
    json_t *tr = NULL, *sar = NULL;
    json_t *body = json_pack("{s:s,s:s,s:{s:s%}}", "apiVersion", "authentication.k8s.io/v1", "kind",
                             "TokenReview", "spec", "token", tok, len);
    if (review(a, "tokenreviews", body, &tr, &err) != AREAL_OK) {
        decide(out, 500, "Internal error: the TokenReview failed (%s); try again", err.msg);
        return false;
    }
    const json_t *st = json_object_get(tr, "status");
    const json_t *authn = json_object_get(st, "authenticated");
    const char *user = str_at(st, "user", "username");
    bool cacheable = true;
    if (authn != NULL && !json_is_boolean(authn)) {
        decide(out, 500,
               "Internal error: the TokenReview answer's status.authenticated is not a "
               "boolean");
        cacheable = false;
    } else if (!json_is_true(authn)) {
        const char *why = str_at(st, "error", NULL);
        decide(out, 401, "Unauthorized: the API server does not accept the token%s%s",
               why ? ": " : "", why ? why : "");
    } else if (user == NULL || user[0] == '\0') {
        decide(out, 500, "Internal error: the TokenReview authenticated a token without a user");
        cacheable = false;
    } else {
        const json_t *u = json_object_get(st, "user");
        json_t *spec = json_pack("{s:s,s:{s:s,s:s}}", "user", user, "nonResourceAttributes", "path",
                                 path, "verb", verb);
        const char *uid = str_at(u, "uid", NULL);
        if (spec != NULL && uid != NULL)
            json_object_set_new(spec, "uid", json_string(uid));
        if (spec != NULL && json_is_array(json_object_get(u, "groups")))
            json_object_set(spec, "groups", json_object_get(u, "groups"));
        if (spec != NULL && json_is_object(json_object_get(u, "extra")))
            json_object_set(spec, "extra", json_object_get(u, "extra"));
        body = spec ? json_pack("{s:s,s:s,s:o}", "apiVersion", "authorization.k8s.io/v1", "kind",
                                "SubjectAccessReview", "spec", spec)
                    : NULL;
        if (review(a, "subjectaccessreviews", body, &sar, &err) != AREAL_OK) {
            decide(out, 500,
                   "Internal error: the SubjectAccessReview for %s failed (%s); try "
                   "again",
                   user, err.msg);
            cacheable = false;
        } else {
            const json_t *ss = json_object_get(sar, "status");
            const json_t *allowed = json_object_get(ss, "allowed");
            const char *reason = str_at(ss, "reason", NULL);
            if (!json_is_boolean(allowed)) {
                decide(out, 500,
                       "Internal error: the SubjectAccessReview answer's "
                       "status.allowed is not a boolean");
                cacheable = false;
            } else if (json_is_true(allowed)) {
                decide(out, 200, "allowed: %s may %s %s", user, verb, path);
            } else {
                decide(out, 403,
                       "Forbidden: %s may not %s %s%s%s; bind it to a ClusterRole with "
                       "nonResourceURLs [\"%s\"] verbs [\"%s\"] (the chart's "
                       "<release>-metrics-reader)",
                       user, verb, path, reason && reason[0] ? ": " : "", reason ? reason : "",
                       path, verb);
            }
        }
    }
    json_decref(tr);
    json_decref(sar);
    return cacheable;
}

void metrics_auth_check(metrics_auth *a, const char *authorization, const char *path,
                        const char *verb, metrics_auth_decision *out) {
    if (metrics_auth_cached(a, authorization, path, verb, out))
        return;
    const char *tok;
    size_t len;
    bearer(authorization, &tok, &len); /* cached() refused every header this fails */
    if (!ask(a, tok, len, path, verb, out))
        return;
    char *key = cache_key(verb, path, tok, len);
    if (key == NULL)
        return;
    pthread_mutex_lock(&a->mu);
    int64_t now = a->cfg.now_ms();
    store(a, key, out, now + (out->status == 200 ? a->cfg.allow_ttl_ms : a->cfg.deny_ttl_ms), now);
    pthread_mutex_unlock(&a->mu);
}

void metrics_auth_counts(metrics_auth *a, long *reviews, long *hits) {
    pthread_mutex_lock(&a->mu);
    if (reviews)
        *reviews = a->reviews;
    if (hits)
        *hits = a->hits;
    pthread_mutex_unlock(&a->mu);
}

int metrics_auth_review_kube(void *kube_client_ptr, const char *resource, const json_t *body,
                             json_t **out, areal_error *err) {
    const char *group =
        strcmp(resource, "tokenreviews") == 0 ? "authentication.k8s.io" : "authorization.k8s.io";
    kube_resource res = {group, "v1", resource, NULL};
    kube_error kerr;
    if (kube_create(kube_client_ptr, &res, body, out, &kerr) != KUBE_OK)
        return areal_error_set(err, AREAL_EIO, -1, "%s", kerr.msg);
    return AREAL_OK;
}
