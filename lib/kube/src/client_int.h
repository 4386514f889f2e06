/*
 * client_int.h - the kube_client struct and the HTTP core shared by the verb,
 * list and watch files (internal).
 */
#ifndef KUBE_CLIENT_INT_H
#define KUBE_CLIENT_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

#include <curl/curl.h>

#include "areal/kube/client.h"
#include "areal/kube/ratelimit.h"
#include "kbuf.h"

#define KUBE_POOL_MAX    8     /* idle easy handles kept (each with its connection) */
#define KUBE_PATH_MAX    8192  /* longest path+query we build */
#define KUBE_TOKEN_MAX   65536 /* largest token file */
#define KUBE_SHARE_LOCKS 8     /* > CURL_LOCK_DATA_LAST of any libcurl we build with */

struct kube_client {
    kube_config cfg;           /* deep copy of the caller's */
    pthread_mutex_t mu;        /* guards pool, token, rng, stats */
    CURL *pool[KUBE_POOL_MAX]; /* idle handles, used LIFO so the warmest connection goes first */
    int npool;
    CURLSH *share; /* TLS sessions and DNS shared by every handle */
    pthread_mutex_t share_mu[KUBE_SHARE_LOCKS];
    kube_ratelimit rl;
    char *token;        /* current bearer token or NULL */
    struct stat tok_st; /* token file's identity when last read */
    int tok_valid;      /* tok_st is meaningful */
    uint64_t rng;       /* xorshift state for backoff jitter */
    kube_client_stats stats;
};

/* Takes an idle easy handle (or makes one); NULL when out of memory. */
CURL *kube_handle_get(kube_client *c);

/* Returns a handle to the pool (curl_easy_reset keeps its live connection). */
void kube_handle_put(kube_client *c, CURL *h);

/*
 * Sets the options every request shares on `h`: URL (server + path_query),
 * TLS trust and client identity, timeouts (timeout_ms 0: none), the share,
 * and headers (Accept, Authorization, `content_type` when non-NULL). *hdrs
 * receives the header list to free after the transfer.
 */
int kube_handle_setup(kube_client *c, CURL *h, const char *path_query, long timeout_ms,
                      const char *content_type, int force_token, struct curl_slist **hdrs,
                      kube_error *err);

/* The delay before retry number `attempt` (0-based): base*2^attempt, capped, with jitter. */
long kube_backoff_ms(kube_client *c, int attempt);

/*
 * Fills `err` for a non-2xx answer: code from the status, Status reason and
 * message when `body` is a Status, else the first bytes of the body.
 * Returns the code.
 */
int kube_status_error(kube_error *err, const char *method, const char *path, long status,
                      const char *body, size_t len);

/* Fills `err` for a transport failure. Returns KUBE_ETRANSPORT. */
int kube_transport_error(kube_error *err, const char *method, const char *path, CURLcode cc,
                         const char *detail);

/*
 * Sends one request with the rate limit and retry policy. On KUBE_OK, `resp`
 * holds the body of the 2xx answer (bounded by max_body) and *status its
 * status. `idempotent` allows retrying after 5xx and transport failures.
 */
int kube_http_do(kube_client *c, const char *method, const char *path_query, const char *body,
                 size_t body_len, const char *content_type, int idempotent, kbuf *resp,
                 long *status, kube_error *err);

/* Decodes a response body (empty -> JSON null). KUBE_EDECODE names the request. */
int kube_decode_body(const char *method, const char *path, const kbuf *body, json_t **out,
                     kube_error *err);

#endif
