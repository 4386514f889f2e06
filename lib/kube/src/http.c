/*
 * http.c - one request with the client's rate limit and retry policy, and the
 * mapping of answers to kube_error.
 *
 * Retry policy (the loop in kube_http_do):
 *   - 429 Too Many Requests: always retried (the server did not act on it);
 *   - 502/503/504, and 500 only with Retry-After: retried for idempotent verbs
 *     (GET, PUT, DELETE), or for any verb when the server sent Retry-After;
 *   - transport failures: retried for idempotent verbs, and for every verb
 *     when the connection was never made (nothing was sent);
 *   - 401 with a token file: the file is re-read once and the request repeated;
 *   - the delay is Retry-After (seconds, capped at retry_after_max_ms) when
 *     given, else backoff_base_ms * 2^attempt capped at backoff_max_ms, with
 *     up to 25% random jitter so that many clients do not retry in step.
 * A body larger than max_body aborts the transfer (KUBE_ETOOBIG); it is never
 * truncated silently.
 */
#include "client_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct xfer {
    kbuf *body;
    int too_big;
    long retry_after_s; /* -1: none */
} xfer;

static size_t on_write(char *p, size_t size, size_t n, void *ud) {
    xfer *x = ud;
    size_t len = size * n;
    if (kbuf_append(x->body, p, len) != 0) {
        x->too_big = 1;
        return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
    }
    return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
    xfer *x = ud;
    size_t len = size * n;
    static const char name[] = "retry-after:";
    if (len > sizeof name - 1 && strncasecmp(p, name, sizeof name - 1) == 0) {
        char tmp[32];
        size_t vl = len - (sizeof name - 1);
        if (vl >= sizeof tmp)
            vl = sizeof tmp - 1;
        memcpy(tmp, p + sizeof name - 1, vl);
        tmp[vl] = '\0';
        char *end;
        long v = strtol(tmp, &end, 10);
        while (*end == ' ' || *end == '\r' || *end == '\n')
            end++;
        /* Only the delta-seconds form; an HTTP-date falls back to backoff. */
        if (end != tmp && *end == '\0' && v >= 0)
            x->retry_after_s = v;
    }
    return len;
}

long kube_backoff_ms(kube_client *c, int attempt) {
    long d = c->cfg.backoff_base_ms > 0 ? c->cfg.backoff_base_ms : 1;
    for (int i = 0; i < attempt && d < c->cfg.backoff_max_ms; i++)
        d *= 2;
    if (d > c->cfg.backoff_max_ms)
        d = c->cfg.backoff_max_ms;
    pthread_mutex_lock(&c->mu);
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    uint64_t r = c->rng;
    pthread_mutex_unlock(&c->mu);
    long jitter = d / 4 > 0 ? (long)(r % (uint64_t)(d / 4 + 1)) : 0;
    return d + jitter;
}

int kube_transport_error(kube_error *err, const char *method, const char *path, CURLcode cc,
                         const char *detail) {
    if (err == NULL)
        return KUBE_ETRANSPORT;
    kube_error_clear(err);
    err->code = KUBE_ETRANSPORT;
    err->curl_code = (int)cc;
    snprintf(err->msg, sizeof err->msg,
             "%s %s: %s%s%s; check the server address, its CA and "
             "that it is reachable",
             method, path, curl_easy_strerror(cc), detail && detail[0] ? ": " : "",
             detail ? detail : "");
    return KUBE_ETRANSPORT;
}

int kube_status_error(kube_error *err, const char *method, const char *path, long status,
                      const char *body, size_t len) {
    int code = kube_code_for_status(status);
    if (err == NULL)
        return code;
    kube_error_clear(err);
    err->code = code;
    err->http_status = (int)status;
    json_t *st = body && len ? json_loadb(body, len, 0, NULL) : NULL;
    const char *kind = json_string_value(json_object_get(st, "kind"));
    if (kind && strcmp(kind, "Status") == 0) {
        const char *reason = json_string_value(json_object_get(st, "reason"));
        const char *message = json_string_value(json_object_get(st, "message"));
        snprintf(err->reason, sizeof err->reason, "%s", reason ? reason : "");
        snprintf(err->msg, sizeof err->msg, "%s %s: HTTP %ld %s: %s", method, path, status,
                 reason ? reason : "", message ? message : "(no message)");
    } else {
        int shown = len > 200 ? 200 : (int)len;
        snprintf(err->msg, sizeof err->msg, "%s %s: HTTP %ld: %.*s", method, path, status, shown,
                 body ? body : "");
    }
    json_decref(st);
    return code;
}

int kube_decode_body(const char *method, const char *path, const kbuf *body, json_t **out,
                     kube_error *err) {
    if (body->len == 0) {
        *out = json_null();
        return KUBE_OK;
    }
    json_error_t je;
    *out = json_loadb(body->data, body->len, JSON_DECODE_ANY, &je);
    if (*out == NULL)
        return kube_error_set(err, KUBE_EDECODE,
                              "%s %s: the server's answer is not valid JSON (line %d, column %d: "
                              "%s)",
                              method, path, je.line, je.column, je.text);
    return KUBE_OK;
}

static int verb_idempotent(const char *method) {
    return strcmp(method, "GET") == 0 || strcmp(method, "PUT") == 0 ||
           strcmp(method, "DELETE") == 0 || strcmp(method, "HEAD") == 0;
}

int kube_http_do(kube_client *c, const char *method, const char *path_query, const char *body,
                 size_t body_len, const char *content_type, int idempotent, kbuf *resp,
                 long *status, kube_error *err) {
    int force_token = 0, retried_401 = 0;
    for (int attempt = 0;; attempt++) {
        kbuf_free(resp);
        kube_ratelimit_take(&c->rl);
        CURL *h = kube_handle_get(c);
        if (h == NULL)
            return kube_error_set(err, KUBE_ENOMEM, "out of memory creating a curl handle");
        struct curl_slist *hdrs = NULL;
        int rc = kube_handle_setup(c, h, path_query, c->cfg.timeout_ms,
                                   body ? (content_type ? content_type : "application/json") : NULL,
                                   force_token, &hdrs, err);
        if (rc != KUBE_OK) {
            kube_handle_put(c, h);
            return rc;
        }
        force_token = 0;
        xfer x = {resp, 0, -1};
        char errbuf[CURL_ERROR_SIZE] = "";
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
        if (strcmp(method, "GET") == 0) {
            curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        } else {
            if (strcmp(method, "POST") != 0)
                curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
            if (body) {
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
            } else if (strcmp(method, "POST") == 0) {
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
            }
        }
        pthread_mutex_lock(&c->mu);
        c->stats.requests++;
        if (attempt > 0)
            c->stats.retries++;
        pthread_mutex_unlock(&c->mu);
        CURLcode cc = curl_easy_perform(h);
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        curl_slist_free_all(hdrs);
        kube_handle_put(c, h);

        int can_retry = attempt < c->cfg.max_retries;
        if (x.too_big)
            return kube_error_set(err, KUBE_ETOOBIG,
                                  "%s %s: the answer is larger than max_body (%zu bytes); narrow "
                                  "the request (selectors, limit) or raise max_body",
                                  method, path_query, c->cfg.max_body);
        if (cc != CURLE_OK) {
            int unsent = cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST;
            if (can_retry && (idempotent || unsent)) {
                kube_sleep_ms(kube_backoff_ms(c, attempt));
                continue;
            }
            return kube_transport_error(err, method, path_query, cc, errbuf);
        }
        *status = code;
        if (code >= 200 && code < 300)
            return KUBE_OK;
        if (code == 401 && c->cfg.token_file && !retried_401) {
            retried_401 = 1;
            force_token = 1;
            continue;
        }
        int retry_status =
            code == 429 || ((code == 502 || code == 503 || code == 504 || code == 500) &&
                            (x.retry_after_s >= 0 || (idempotent && code != 500)));
        if (can_retry && retry_status) {
            long ms = kube_backoff_ms(c, attempt);
            if (x.retry_after_s >= 0) {
                ms = x.retry_after_s * 1000;
                if (ms > c->cfg.retry_after_max_ms)
                    ms = c->cfg.retry_after_max_ms;
            }
            kube_sleep_ms(ms);
            continue;
        }
        return kube_status_error(err, method, path_query, code, resp->data, resp->len);
    }
}

int kube_request(kube_client *c, const char *method, const char *path_query, const json_t *body,
                 const char *content_type, json_t **out, kube_error *err) {
    if (out)
        *out = NULL;
    if (c == NULL || method == NULL || path_query == NULL || path_query[0] != '/')
        return kube_error_set(err, KUBE_EINVAL,
                              "kube_request needs a client, a method and a "
                              "path starting with '/'");
    char *text = NULL;
    if (body) {
        text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
        if (text == NULL)
            return kube_error_set(err, KUBE_ENOMEM, "%s %s: cannot encode the body", method,
                                  path_query);
    }
    kbuf resp;
    kbuf_init(&resp, c->cfg.max_body);
    long status = 0;
    int rc = kube_http_do(c, method, path_query, text, text ? strlen(text) : 0, content_type,
                          verb_idempotent(method), &resp, &status, err);
    free(text);
    if (rc == KUBE_OK && out) {
        rc = kube_decode_body(method, path_query, &resp, out, err);
    }
    kbuf_free(&resp);
    return rc;
}
