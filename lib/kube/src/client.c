/*
 * client.c - kube_client life cycle, the easy-handle pool, TLS and token setup.
 *
 * How: handles are pooled LIFO under the client mutex; a returned handle is
 * curl_easy_reset, which keeps its live connection, so the next request on it
 * skips TCP and TLS setup. At most KUBE_POOL_MAX idle handles are kept; extra
 * ones (after a burst of concurrent calls) are closed. All handles share TLS
 * sessions and DNS through one CURLSH (locks below), so even a new handle
 * resumes TLS instead of a full handshake.
 * The bearer token is re-read when stat() of the token file shows another
 * inode, size or mtime (the kubelet swaps projected tokens atomically through
 * a symlink, which changes the inode), or when the server answered 401.
 * Rejected: re-reading the token on a timer (a rotated token would be used
 * late or an expired one kept), and CURL_LOCK_DATA_CONNECT (a shared
 * connection cache across handles; pooled handles already keep theirs, and
 * the shared cache has had thread-safety bugs in older libcurl).
 */
#include "client_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *dup_or_null(const char *s) {
    return s ? strdup(s) : NULL;
}

static char *memdup_or_null(const char *s, size_t n) {
    if (s == NULL)
        return NULL;
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

static int copy_config(kube_config *dst, const kube_config *src) {
    *dst = *src;
    dst->server = dup_or_null(src->server);
    dst->ca_pem = memdup_or_null(src->ca_pem, src->ca_len);
    dst->ca_file = dup_or_null(src->ca_file);
    dst->cert_pem = memdup_or_null(src->cert_pem, src->cert_len);
    dst->cert_file = dup_or_null(src->cert_file);
    dst->key_pem = memdup_or_null(src->key_pem, src->key_len);
    dst->key_file = dup_or_null(src->key_file);
    dst->token = dup_or_null(src->token);
    dst->token_file = dup_or_null(src->token_file);
    dst->ns = dup_or_null(src->ns);
    if ((src->server && !dst->server) || (src->ca_pem && !dst->ca_pem) ||
        (src->ca_file && !dst->ca_file) || (src->cert_pem && !dst->cert_pem) ||
        (src->cert_file && !dst->cert_file) || (src->key_pem && !dst->key_pem) ||
        (src->key_file && !dst->key_file) || (src->token && !dst->token) ||
        (src->token_file && !dst->token_file) || (src->ns && !dst->ns))
        return -1;
    return 0;
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ud) {
    (void)h;
    (void)access;
    kube_client *c = ud;
    pthread_mutex_lock(&c->share_mu[(unsigned)data % KUBE_SHARE_LOCKS]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ud) {
    (void)h;
    kube_client *c = ud;
    pthread_mutex_unlock(&c->share_mu[(unsigned)data % KUBE_SHARE_LOCKS]);
}

kube_client *kube_client_new(const kube_config *cfg, kube_error *err) {
    if (cfg == NULL || cfg->server == NULL || cfg->server[0] == '\0') {
        kube_error_set(err, KUBE_EINVAL,
                       "the client config has no server; load a kubeconfig or "
                       "the in-cluster config first");
        return NULL;
    }
    int https = strncmp(cfg->server, "https://", 8) == 0;
    int http = strncmp(cfg->server, "http://", 7) == 0;
    if (!https && !http) {
        kube_error_set(err, KUBE_EINVAL, "server '%s' must start with https://", cfg->server);
        return NULL;
    }
    if ((http || cfg->insecure_skip_verify) && !cfg->allow_insecure) {
        kube_error_set(err, KUBE_EINVAL,
                       "server '%s' would be reached without TLS verification; use https:// "
                       "with the cluster's CA (allow_insecure is for tests only)",
                       cfg->server);
        return NULL;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        kube_error_set(err, KUBE_ETRANSPORT, "libcurl failed to initialise");
        return NULL;
    }
    kube_client *c = calloc(1, sizeof *c);
    if (c == NULL) {
        curl_global_cleanup();
        kube_error_set(err, KUBE_ENOMEM, "out of memory creating the client");
        return NULL;
    }
    int ok = copy_config(&c->cfg, cfg) == 0;
    size_t sl = c->cfg.server ? strlen(c->cfg.server) : 0;
    while (sl > 0 && c->cfg.server[sl - 1] == '/')
        c->cfg.server[--sl] = '\0';
    pthread_mutex_init(&c->mu, NULL);
    for (int i = 0; i < KUBE_SHARE_LOCKS; i++)
        pthread_mutex_init(&c->share_mu[i], NULL);
    kube_ratelimit_init(&c->rl, cfg->qps, cfg->burst);
    c->rng = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)c << 16) ^ 0x9e3779b97f4a7c15ull;
    c->share = curl_share_init();
    if (!ok || c->share == NULL) {
        kube_client_free(c);
        kube_error_set(err, KUBE_ENOMEM, "out of memory creating the client");
        return NULL;
    }
    curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(c->share, CURLSHOPT_USERDATA, c);
    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    return c;
}

void kube_client_free(kube_client *c) {
    if (c == NULL)
        return;
    for (int i = 0; i < c->npool; i++)
        curl_easy_cleanup(c->pool[i]);
    if (c->share)
        curl_share_cleanup(c->share);
    kube_ratelimit_destroy(&c->rl);
    for (int i = 0; i < KUBE_SHARE_LOCKS; i++)
        pthread_mutex_destroy(&c->share_mu[i]);
    pthread_mutex_destroy(&c->mu);
    free(c->token);
    kube_config_free(&c->cfg);
    free(c);
    curl_global_cleanup();
}

const kube_config *kube_client_config(const kube_client *c) {
    return &c->cfg;
}

void kube_client_stats_get(kube_client *c, kube_client_stats *out) {
    pthread_mutex_lock(&c->mu);
    *out = c->stats;
    pthread_mutex_unlock(&c->mu);
}

CURL *kube_handle_get(kube_client *c) {
    pthread_mutex_lock(&c->mu);
    CURL *h = c->npool > 0 ? c->pool[--c->npool] : NULL;
    if (h == NULL)
        c->stats.handles++;
    pthread_mutex_unlock(&c->mu);
    return h ? h : curl_easy_init();
}

void kube_handle_put(kube_client *c, CURL *h) {
    if (h == NULL)
        return;
    curl_easy_reset(h);
    pthread_mutex_lock(&c->mu);
    if (c->npool < KUBE_POOL_MAX) {
        c->pool[c->npool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    if (h)
        curl_easy_cleanup(h);
}

static int same_file(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Builds "Authorization: Bearer ..." into a new string, re-reading the token file if needed. */
static int auth_header(kube_client *c, int force, char **out, kube_error *err) {
    *out = NULL;
    int rc = KUBE_OK;
    pthread_mutex_lock(&c->mu);
    if (c->cfg.token_file != NULL) {
        struct stat st;
        if (stat(c->cfg.token_file, &st) != 0) {
            if (c->token == NULL) /* else mid-rotation: keep the previous token */
                rc = kube_error_set(err, KUBE_EIO,
                                    "cannot stat token file %s; mount the service account "
                                    "token or fix tokenFile",
                                    c->cfg.token_file);
        } else if (force || !c->tok_valid || !same_file(&st, &c->tok_st)) {
            char *text = NULL;
            rc = kube_read_file(c->cfg.token_file, KUBE_TOKEN_MAX, &text, NULL, err);
            if (rc == KUBE_OK) {
                size_t l = strlen(text);
                while (l > 0 && (text[l - 1] == '\n' || text[l - 1] == '\r' || text[l - 1] == ' '))
                    text[--l] = '\0';
                free(c->token);
                c->token = text;
                c->tok_st = st;
                c->tok_valid = 1;
                c->stats.token_reloads++;
            } else if (c->token != NULL) {
                rc = KUBE_OK; /* mid-rotation: keep the previous token */
            }
        }
    } else if (c->token == NULL && c->cfg.token != NULL) {
        c->token = strdup(c->cfg.token);
        if (c->token == NULL)
            rc = kube_error_set(err, KUBE_ENOMEM, "out of memory copying the token");
    }
    if (rc == KUBE_OK && c->token != NULL) {
        for (const char *p = c->token; *p; p++) {
            if (*p == '\r' || *p == '\n') {
                rc = kube_error_set(
                    err, KUBE_EINVAL, "the bearer token contains a line break; fix the token%s%s",
                    c->cfg.token_file ? " file " : "", c->cfg.token_file ? c->cfg.token_file : "");
                break;
            }
        }
        if (rc == KUBE_OK) {
            size_t n = strlen(c->token) + 32;
            *out = malloc(n);
            if (*out == NULL)
                rc = kube_error_set(err, KUBE_ENOMEM, "out of memory building a header");
            else
                snprintf(*out, n, "Authorization: Bearer %s", c->token);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int kube_handle_setup(kube_client *c, CURL *h, const char *path_query, long timeout_ms,
                      const char *content_type, int force_token, struct curl_slist **hdrs,
                      kube_error *err) {
    *hdrs = NULL;
    kbuf url;
    kbuf_init(&url, KUBE_PATH_MAX + strlen(c->cfg.server));
    if (kbuf_puts(&url, c->cfg.server) != 0 || kbuf_puts(&url, path_query) != 0) {
        kbuf_free(&url);
        return kube_error_set(err, KUBE_EINVAL, "request path is longer than %d bytes",
                              KUBE_PATH_MAX);
    }
    curl_easy_setopt(h, CURLOPT_URL, url.data); /* libcurl copies strings */
    kbuf_free(&url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_SHARE, c->share);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->cfg.connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 0L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    long verify = c->cfg.insecure_skip_verify && c->cfg.allow_insecure ? 0L : 1L;
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, verify);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, verify ? 2L : 0L);
    if (c->cfg.ca_pem) {
        struct curl_blob b = {c->cfg.ca_pem, c->cfg.ca_len, CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
    } else if (c->cfg.ca_file) {
        curl_easy_setopt(h, CURLOPT_CAINFO, c->cfg.ca_file);
    }
    if (c->cfg.cert_pem) {
        struct curl_blob b = {c->cfg.cert_pem, c->cfg.cert_len, CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &b);
        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    } else if (c->cfg.cert_file) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, c->cfg.cert_file);
    }
    if (c->cfg.key_pem) {
        struct curl_blob b = {c->cfg.key_pem, c->cfg.key_len, CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &b);
        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    } else if (c->cfg.key_file) {
        curl_easy_setopt(h, CURLOPT_SSLKEY, c->cfg.key_file);
    }
    char *auth = NULL;
    int rc = auth_header(c, force_token, &auth, err);
    if (rc != KUBE_OK)
        return rc;
    struct curl_slist *l = curl_slist_append(NULL, "Accept: application/json");
    if (l && auth) {
        struct curl_slist *n = curl_slist_append(l, auth);
        l = n ? n : (curl_slist_free_all(l), NULL);
    }
    if (l && content_type) {
        char ct[128];
        snprintf(ct, sizeof ct, "Content-Type: %s", content_type);
        struct curl_slist *n = curl_slist_append(l, ct);
        l = n ? n : (curl_slist_free_all(l), NULL);
    }
    if (auth) {
        memset(auth, 0, strlen(auth));
        free(auth);
    }
    if (l == NULL)
        return kube_error_set(err, KUBE_ENOMEM, "out of memory building request headers");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
    *hdrs = l;
    return KUBE_OK;
}
