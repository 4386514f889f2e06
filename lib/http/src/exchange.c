/*
 * exchange.c - the answering side of areal/http/server.h: whole responses
 * and chunked streams appended to an exchange's output queue from any
 * thread, and the hand-over to the service thread (the pending list plus
 * lws_cancel_service, the one libwebsockets call that is thread-safe).
 *
 * Chunk framing ("<hex len>\r\n<data>\r\n", "0\r\n\r\n" at the end) is done
 * here rather than by libwebsockets: lws 4.1 only frames chunks for its own
 * file "interpreters", and with no Content-Length it would close the
 * connection after the response, losing keep-alive for streaming clients.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_internal.h"

areal_http_exchange *http_exchange_new(http_hub *hub, struct lws *wsi) {
    areal_http_exchange *x = calloc(1, sizeof *x);
    if (x == NULL)
        return NULL;
    x->hub = hub;
    x->refs = 1;
    x->wsi = wsi;
    x->content_length = -1;
    pthread_mutex_init(&x->hook_mu, NULL);
    pthread_mutex_lock(&hub->mu);
    hub->refs++;
    pthread_mutex_unlock(&hub->mu);
    return x;
}

void http_hub_unref(http_hub *hub) {
    pthread_mutex_lock(&hub->mu);
    int left = --hub->refs;
    pthread_mutex_unlock(&hub->mu);
    if (left == 0) {
        pthread_mutex_destroy(&hub->mu);
        free(hub);
    }
}

void http_exchange_free(areal_http_exchange *x) {
    http_hub *hub = x->hub;
    free(x->path);
    free(x->query);
    free(x->body);
    free(x->authorization);
    free(x->out);
    pthread_mutex_destroy(&x->hook_mu);
    free(x);
    http_hub_unref(hub);
}

bool http_exchange_unref_locked(areal_http_exchange *x) {
    return --x->refs == 0;
}

void http_exchange_unref(areal_http_exchange *x) {
    pthread_mutex_lock(&x->hub->mu);
    bool last = http_exchange_unref_locked(x);
    pthread_mutex_unlock(&x->hub->mu);
    if (last)
        http_exchange_free(x);
}

void http_wake_locked(areal_http_exchange *x) {
    if (x->hub->ctx == NULL || x->wsi == NULL)
        return;
    if (!x->on_pending) {
        x->on_pending = true;
        x->refs++;
        x->next_pending = x->hub->pending;
        x->hub->pending = x;
    }
    lws_cancel_service(x->hub->ctx);
}

void http_exchange_gone(areal_http_exchange *x) {
    pthread_mutex_lock(&x->hub->mu);
    x->gone = true;
    x->wsi = NULL;
    pthread_mutex_unlock(&x->hub->mu);
    pthread_mutex_lock(&x->hook_mu);
    void (*fn)(void *) = x->finished ? NULL : x->hook;
    x->hook = NULL;
    if (fn != NULL)
        fn(x->hook_ud);
    pthread_mutex_unlock(&x->hook_mu);
}

/* Appends n bytes to the queue (hub->mu held); false when out of memory. */
static bool put(areal_http_exchange *x, const void *p, size_t n) {
    if (x->out_len + n > x->out_cap) {
        if (x->out_off > 0) { /* reclaim what was written */
            memmove(x->out, x->out + x->out_off, x->out_len - x->out_off);
            x->out_len -= x->out_off;
            x->out_off = 0;
        }
        size_t cap = x->out_cap ? x->out_cap : 1024;
        while (cap < x->out_len + n)
            cap *= 2;
        if (cap != x->out_cap) {
            char *grown = realloc(x->out, cap);
            if (grown == NULL)
                return false;
            x->out = grown;
            x->out_cap = cap;
        }
    }
    memcpy(x->out + x->out_len, p, n);
    x->out_len += n;
    return true;
}

/*
 * Marks x finished (its hook can no longer run) and drops the holder's
 * reference. The reference goes only after hook_mu is released: the service
 * thread may write the last bytes and drop the connection's reference as
 * soon as `finished` is visible, and x must outlive our unlock.
 */
static void finish(areal_http_exchange *x) {
    pthread_mutex_lock(&x->hook_mu);
    pthread_mutex_lock(&x->hub->mu);
    x->finished = true;
    http_wake_locked(x);
    pthread_mutex_unlock(&x->hub->mu);
    pthread_mutex_unlock(&x->hook_mu);
    http_exchange_unref(x);
}

static void set_type(areal_http_exchange *x, const char *type) {
    snprintf(x->ctype, sizeof x->ctype, "%s", type ? type : "application/json");
}

int areal_http_respond(areal_http_exchange *x, int status, const char *content_type,
                       const areal_http_header *headers, const char *body, size_t len) {
    pthread_mutex_lock(&x->hub->mu);
    bool ok = !x->gone && x->hub->ctx != NULL && x->status == 0;
    if (ok) {
        x->status = status;
        set_type(x, content_type);
        for (int i = 0; headers && headers[i].name && i < HTTP_MAX_EXTRA_HEADERS; i++) {
            snprintf(x->hname[i], sizeof x->hname[i], "%s:", headers[i].name);
            snprintf(x->hval[i], sizeof x->hval[i], "%s", headers[i].value);
            x->n_headers = i + 1;
        }
        x->content_length = (long long)len;
        ok = len == 0 || put(x, body, len);
        if (!ok) { /* out of memory: answer 500 with nothing, and close */
            x->status = 500;
            x->content_length = 0;
            x->close_after = true;
        }
    }
    pthread_mutex_unlock(&x->hub->mu);
    finish(x);
    return ok ? AREAL_OK : AREAL_EIO;
}

int areal_http_respond_error(areal_http_exchange *x, int status, const char *message) {
    const char *type = status == 404   ? "NotFoundError"
                       : status == 503 ? "ServiceUnavailableError"
                       : status >= 500 ? "InternalServerError"
                                       : "BadRequestError";
    json_t *j = json_pack("{s:{s:s,s:s,s:i}}", "error", "message", message ? message : "", "type",
                          type, "code", status);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    int rc = text ? areal_http_respond(x, status, NULL, NULL, text, strlen(text))
                  : areal_http_respond(x, 500, NULL, NULL, "", 0);
    free(text);
    return rc;
}

int areal_http_stream_start(areal_http_exchange *x, int status, const char *content_type) {
    pthread_mutex_lock(&x->hub->mu);
    int rc = x->gone || x->hub->ctx == NULL ? AREAL_EIO : x->status != 0 ? AREAL_EINVAL : AREAL_OK;
    if (rc == AREAL_OK) {
        x->status = status;
        x->chunked = true;
        set_type(x, content_type);
        http_wake_locked(x); /* the headers go out now */
    }
    pthread_mutex_unlock(&x->hub->mu);
    return rc;
}

int areal_http_stream_write(areal_http_exchange *x, const char *data, size_t len) {
    if (len == 0)
        return AREAL_OK; /* an empty chunk would end the stream */
    pthread_mutex_lock(&x->hub->mu);
    int rc = x->gone || x->hub->ctx == NULL ? AREAL_EIO : !x->chunked ? AREAL_EINVAL : AREAL_OK;
    if (rc == AREAL_OK) {
        char head[24];
        int n = snprintf(head, sizeof head, "%zx\r\n", len);
        if (!put(x, head, (size_t)n) || !put(x, data, len) || !put(x, "\r\n", 2)) {
            rc = AREAL_ENOMEM;
            x->close_after = true;
        }
        http_wake_locked(x);
    }
    pthread_mutex_unlock(&x->hub->mu);
    return rc;
}

void areal_http_stream_end(areal_http_exchange *x) {
    pthread_mutex_lock(&x->hub->mu);
    if (x->chunked && !x->gone && !put(x, "0\r\n\r\n", 5))
        x->close_after = true;
    if (x->status == 0) { /* ended without a start: a bare 500 */
        x->status = 500;
        x->content_length = 0;
        x->close_after = true;
    }
    pthread_mutex_unlock(&x->hub->mu);
    finish(x);
}

size_t areal_http_stream_queued(areal_http_exchange *x) {
    pthread_mutex_lock(&x->hub->mu);
    size_t n = x->gone || x->hub->ctx == NULL ? 0 : x->out_len - x->out_off;
    pthread_mutex_unlock(&x->hub->mu);
    return n;
}

bool areal_http_client_gone(areal_http_exchange *x) {
    pthread_mutex_lock(&x->hub->mu);
    bool gone = x->gone || x->hub->ctx == NULL;
    pthread_mutex_unlock(&x->hub->mu);
    return gone;
}

void areal_http_on_close(areal_http_exchange *x, void (*fn)(void *ud), void *ud) {
    pthread_mutex_lock(&x->hook_mu);
    pthread_mutex_lock(&x->hub->mu);
    bool gone = x->gone || x->hub->ctx == NULL;
    pthread_mutex_unlock(&x->hub->mu);
    x->hook = gone ? NULL : fn;
    x->hook_ud = ud;
    if (gone && fn != NULL && !x->finished)
        fn(ud);
    pthread_mutex_unlock(&x->hook_mu);
}
