/*
 * client.h - a Kubernetes API client over libcurl and jansson.
 *
 * What: a kube_client talks to one API server with one identity. It owns a
 * pool of libcurl easy handles (each keeps its connection alive, so sequential
 * requests reuse one TCP+TLS connection; handles share TLS sessions and DNS
 * through a curl share object), a token bucket (config qps/burst), the bearer
 * token (re-read from its file when the file changes, and once more on a 401),
 * and the retry policy: 429 and 502/503/504 are retried with exponential,
 * jittered backoff (base doubling to max), honouring Retry-After (capped), as
 * are transport failures of requests that are safe to repeat. Bodies are
 * bounded (max_body) and every request has a timeout (watches excepted; see
 * watch.h).
 * Objects are jansson values. Ownership follows jansson: inputs are borrowed,
 * `json_t **out` receives a new reference the caller must json_decref (NULL on
 * failure); `out` may be NULL to discard the answer.
 * Thread-safety: every function may be called from several threads on one
 * client at once; kube_client_free must not race with them.
 *
 * How an informer is built on this (the operator's next step):
 *   kube_list  -> the full set + the list's resourceVersion (pages merged);
 *   kube_watch_run (watch.h) from that resourceVersion -> events, each one
 *                 moving the resourceVersion forward (bookmarks too);
 *   KUBE_EGONE -> list again and replace the cache.
 * kube_reflector_run in watch.h is exactly that loop, with callbacks for
 * "replace everything" and "apply one event"; a cache keyed by namespace/name
 * and a work queue sit behind those callbacks.
 *
 * Rejected: generated typed models per kind (1,400 files in the official C
 * client) - the operator needs a handful of fields per kind and reads them
 * from JSON; an easy handle per request (a TLS handshake per call); a curl
 * multi loop shared by all requests (simpler blocking calls on pooled handles
 * suffice for a controller's request rate, and each watch owns its own multi
 * handle so it can be woken and stopped).
 */
#ifndef AREAL_KUBE_CLIENT_H
#define AREAL_KUBE_CLIENT_H

#include <stddef.h>

#include <jansson.h>

#include "areal/kube/config.h"
#include "areal/kube/error.h"

typedef struct kube_client kube_client;

/* Which collection a call addresses. All strings are borrowed for the call. */
typedef struct kube_resource {
    const char *group;    /* API group ("apps", "areal.io"); NULL or "" for core */
    const char *version;  /* "v1", "v1alpha1" */
    const char *resource; /* plural, lower case: "pods", "arealjobs" */
    const char *ns;       /* namespace; NULL for cluster-scoped kinds or all namespaces */
} kube_resource;

typedef struct kube_list_opts {
    const char *label_selector; /* NULL: none */
    const char *field_selector; /* NULL: none */
    long limit;                 /* page size (limit=); 0: one unpaginated request */
    size_t max_items;           /* refuse lists longer than this (0: 1,000,000) */
} kube_list_opts;

typedef enum kube_patch_type {
    KUBE_PATCH_MERGE,     /* application/merge-patch+json (RFC 7386) */
    KUBE_PATCH_JSON,      /* application/json-patch+json (RFC 6902): an array of ops */
    KUBE_PATCH_STRATEGIC, /* application/strategic-merge-patch+json (built-in kinds only) */
} kube_patch_type;

typedef struct kube_delete_opts {
    const char *uid;                /* precondition: only delete this incarnation; NULL: none */
    const char *resource_version;   /* precondition on resourceVersion; NULL: none */
    const char *propagation_policy; /* "Foreground", "Background", "Orphan"; NULL: server default */
    long grace_period_seconds;      /* < 0: server default */
} kube_delete_opts;

typedef struct kube_client_stats {
    unsigned long requests;      /* HTTP attempts sent (retries included, watches excluded) */
    unsigned long retries;       /* attempts that were retries */
    unsigned long token_reloads; /* times the token file was (re)read */
    unsigned long handles;       /* easy handles created over the client's life */
} kube_client_stats;

/*
 * Creates a client from `cfg` (copied; the caller keeps its own). Refuses an
 * http:// server or insecure_skip_verify unless cfg->allow_insecure, and a
 * config without a server. Returns NULL with `err` filled on failure.
 */
kube_client *kube_client_new(const kube_config *cfg, kube_error *err);

/* Frees the client, its handles and connections. NULL is allowed. */
void kube_client_free(kube_client *c);

/* The client's configuration (read-only, valid until kube_client_free). */
const kube_config *kube_client_config(const kube_client *c);

/* Copies the counters (thread-safe). */
void kube_client_stats_get(kube_client *c, kube_client_stats *out);

/*
 * One request with retries: `method` ("GET", "POST", ...), `path_query`
 * ("/api/v1/namespaces/x/pods?limit=5", already escaped), an optional JSON
 * `body` sent with `content_type` (NULL: application/json). On 2xx, *out
 * receives the decoded body (JSON null for an empty body). Returns KUBE_OK or
 * a KUBE_E* code with `err` filled (see error.h for how codes split).
 */
int kube_request(kube_client *c, const char *method, const char *path_query, const json_t *body,
                 const char *content_type, json_t **out, kube_error *err);

/*
 * Builds the path of `res` (and of object `name`, and `subresource`, both
 * optional) into a new string the caller frees, segments percent-escaped.
 * Returns NULL (err filled) for a missing version/resource or out of memory.
 */
char *kube_resource_path(const kube_resource *res, const char *name, const char *subresource,
                         kube_error *err);

/* GET one object. 404 -> KUBE_ENOTFOUND. */
int kube_get(kube_client *c, const kube_resource *res, const char *name, json_t **out,
             kube_error *err);

/*
 * LIST, following `continue` tokens until the last page and merging the pages'
 * items into one list object: *out is the last page's object with every page's
 * items, metadata.resourceVersion that of the list (watch from it) and no
 * continue token. A 410 in the middle (continue token expired) -> KUBE_EGONE:
 * list again from the start. `opts` may be NULL.
 */
int kube_list(kube_client *c, const kube_resource *res, const kube_list_opts *opts, json_t **out,
              kube_error *err);

/* Receives the items array of one page (borrowed: valid during the call;
 * NULL for a page without items). Return KUBE_OK to go on, or a code that
 * ends the list. */
typedef int (*kube_page_fn)(void *ud, const json_t *items);

/*
 * LIST page by page: as kube_list, but each page's items go to `fn` as the
 * page arrives, and the page is freed before the next is fetched, so at most
 * one page is held. `rv` (rv_cap bytes, may be NULL) receives the list's
 * resourceVersion after the last page. A 410 in the middle -> KUBE_EGONE (the
 * pages already handed over belong to a list that must be read again); `fn`'s
 * code is returned as it is.
 */
int kube_list_pages(kube_client *c, const kube_resource *res, const kube_list_opts *opts,
                    kube_page_fn fn, void *ud, char *rv, size_t rv_cap, kube_error *err);

/* POST `obj` to the collection. 409 (AlreadyExists) -> KUBE_ECONFLICT. */
int kube_create(kube_client *c, const kube_resource *res, const json_t *obj, json_t **out,
                kube_error *err);

/*
 * PUT `obj` (its metadata.name and, for optimistic concurrency,
 * metadata.resourceVersion). A stale resourceVersion -> KUBE_ECONFLICT with
 * reason "Conflict": re-read the object, re-apply the change, try again.
 */
int kube_update(kube_client *c, const kube_resource *res, const json_t *obj, json_t **out,
                kube_error *err);

/* PUT `obj` to its /status subresource; as kube_update. */
int kube_update_status(kube_client *c, const kube_resource *res, const json_t *obj, json_t **out,
                       kube_error *err);

/*
 * PATCH object `name` (or its `subresource`, e.g. "status"; NULL for the
 * object) with `patch` of the given type (an object for merge patches, an
 * array of operations for JSON patch; checked).
 */
int kube_patch(kube_client *c, const kube_resource *res, const char *name, kube_patch_type type,
               const json_t *patch, const char *subresource, json_t **out, kube_error *err);

/*
 * DELETE object `name` with optional preconditions and propagation policy
 * (`opts` may be NULL). A failed precondition -> KUBE_ECONFLICT.
 */
int kube_delete(kube_client *c, const kube_resource *res, const char *name,
                const kube_delete_opts *opts, json_t **out, kube_error *err);

/*
 * Binds pod `ns`/`pod` to `node` through the pods/binding subresource (what a
 * scheduler does). `pod_uid` (optional) guards against binding a recreated pod
 * of the same name. 409 -> KUBE_ECONFLICT (already bound).
 */
int kube_bind_pod(kube_client *c, const char *ns, const char *pod, const char *pod_uid,
                  const char *node, kube_error *err);

#endif
