/*
 * watch.c - kube_watch_run: one watch connection after another until stopped,
 * 410 Gone, or too many consecutive failures (rules in areal/kube/watch.h).
 *
 * How: the watch owns a curl multi handle with a single easy handle; the loop
 * is curl_multi_perform + curl_multi_poll, so kube_watch_stop (an atomic flag
 * plus curl_multi_wakeup) interrupts it at once, and the backoff sleeps are
 * curl_multi_poll calls too, equally interruptible. Bytes go from the write
 * callback to the framer and each line to kube_event_decode; the user's
 * callback runs on the watching thread. The HTTP status is checked on the
 * first body bytes: a non-200 body is kept (bounded) for the error message
 * instead of being framed. Each connection has a client-side time limit of
 * timeoutSeconds + 30 s, so a connection that silently died is noticed.
 */
#include "areal/kube/watch.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"
#include "watch_int.h"

#define WATCH_ERRBODY_MAX 65536

struct kube_watch {
    kube_client *c;
    CURLM *multi;
    CURL *easy;
    atomic_int stop;
    kube_framer *fr;
    char rv[KUBE_RV_MAX];
    kube_watch_stats stats;
};

typedef struct conn {
    kube_watch *w;
    kube_event_fn fn;
    void *ud;
    int status_checked;
    long status;
    kbuf errbody;
    int rc;      /* why the transfer was aborted (0: it was not) */
    int from_cb; /* rc came from the user's callback */
    unsigned long events;
    kube_error lerr; /* details of a line-level failure */
} conn;

kube_watch *kube_watch_new(kube_client *c, kube_error *err) {
    kube_watch *w = calloc(1, sizeof *w);
    if (w == NULL) {
        kube_error_set(err, KUBE_ENOMEM, "out of memory creating a watch");
        return NULL;
    }
    w->c = c;
    atomic_init(&w->stop, 0);
    w->multi = curl_multi_init();
    w->easy = curl_easy_init();
    w->fr = kube_framer_new(c->cfg.max_line);
    if (w->multi == NULL || w->easy == NULL || w->fr == NULL) {
        kube_watch_free(w);
        kube_error_set(err, KUBE_ENOMEM, "out of memory creating a watch");
        return NULL;
    }
    return w;
}

void kube_watch_free(kube_watch *w) {
    if (w == NULL)
        return;
    if (w->easy)
        curl_easy_cleanup(w->easy);
    if (w->multi)
        curl_multi_cleanup(w->multi);
    kube_framer_free(w->fr);
    free(w);
}

void kube_watch_stop(kube_watch *w) {
    atomic_store(&w->stop, 1);
    curl_multi_wakeup(w->multi);
}

int kube_watch_stopped_(kube_watch *w) {
    return atomic_load(&w->stop);
}

const char *kube_watch_resource_version(const kube_watch *w) {
    return w->rv;
}

void kube_watch_stats_get(const kube_watch *w, kube_watch_stats *out) {
    *out = w->stats;
}

kube_client *kube_watch_client_(kube_watch *w) {
    return w->c;
}

void kube_watch_count_relist_(kube_watch *w) {
    w->stats.relists++;
}

int kube_watch_sleep_(kube_watch *w, long ms) {
    double end = kube_now() + (double)ms / 1000.0;
    while (!atomic_load(&w->stop)) {
        double left = end - kube_now();
        if (left <= 0)
            return 0;
        curl_multi_poll(w->multi, NULL, 0, (int)(left * 1000.0) + 1, NULL);
    }
    return 1;
}

static int on_line(void *ud, const char *line, size_t len) {
    conn *k = ud;
    kube_watch *w = k->w;
    kube_event ev;
    int rc = kube_event_decode(line, len, &ev, &k->lerr);
    if (rc != KUBE_OK)
        return rc;
    if (ev.type == KUBE_EVENT_ERROR) {
        json_int_t code = json_integer_value(json_object_get(ev.object, "code"));
        const char *msg = json_string_value(json_object_get(ev.object, "message"));
        const char *reason = json_string_value(json_object_get(ev.object, "reason"));
        rc = code == 410 ? KUBE_EGONE : KUBE_EHTTP;
        kube_error_set(&k->lerr, rc, "watch ERROR event: %lld %s: %s", (long long)code,
                       reason ? reason : "", msg ? msg : "(no message)");
        k->lerr.http_status = (int)code;
        snprintf(k->lerr.reason, sizeof k->lerr.reason, "%s", reason ? reason : "");
        kube_event_clear(&ev);
        return rc;
    }
    rc = k->fn ? k->fn(k->ud, &ev) : KUBE_OK;
    if (rc != KUBE_OK) {
        k->from_cb = 1;
        kube_event_clear(&ev);
        return rc;
    }
    if (ev.resource_version && strlen(ev.resource_version) < sizeof w->rv)
        snprintf(w->rv, sizeof w->rv, "%s", ev.resource_version);
    w->stats.events++;
    if (ev.type == KUBE_EVENT_BOOKMARK)
        w->stats.bookmarks++;
    k->events++;
    kube_event_clear(&ev);
    return KUBE_OK;
}

static size_t on_data(char *p, size_t size, size_t n, void *ud) {
    conn *k = ud;
    size_t len = size * n;
    if (!k->status_checked) {
        curl_easy_getinfo(k->w->easy, CURLINFO_RESPONSE_CODE, &k->status);
        k->status_checked = 1;
    }
    if (atomic_load(&k->w->stop))
        return 0;
    if (k->status != 200) {
        size_t room = WATCH_ERRBODY_MAX - k->errbody.len;
        kbuf_append(&k->errbody, p, len < room ? len : room);
        return len;
    }
    int rc = kube_framer_feed(k->w->fr, p, len, on_line, k, &k->lerr);
    if (rc != 0) {
        k->rc = rc;
        return 0;
    }
    return len;
}

static char *watch_path(kube_watch *w, const kube_resource *res, const kube_watch_opts *o,
                        kube_error *err) {
    char *base = kube_resource_path(res, NULL, NULL, err);
    if (base == NULL)
        return NULL;
    kbuf q;
    kbuf_init(&q, KUBE_PATH_MAX);
    int bad = kbuf_printf(&q, "%s?watch=1&timeoutSeconds=%ld", base, o->timeout_seconds);
    if (!bad && !o->no_bookmarks)
        bad = kbuf_puts(&q, "&allowWatchBookmarks=true");
    if (!bad && w->rv[0])
        bad = kbuf_puts(&q, "&resourceVersion=") || kbuf_put_escaped(&q, w->rv);
    if (!bad && o->label_selector)
        bad = kbuf_puts(&q, "&labelSelector=") || kbuf_put_escaped(&q, o->label_selector);
    if (!bad && o->field_selector)
        bad = kbuf_puts(&q, "&fieldSelector=") || kbuf_put_escaped(&q, o->field_selector);
    free(base);
    if (bad) {
        kbuf_free(&q);
        kube_error_set(err, KUBE_EINVAL, "the watch query is longer than %d bytes", KUBE_PATH_MAX);
        return NULL;
    }
    return q.data;
}

/* One connection. Returns the transfer result; `k` says what happened. */
static CURLcode one_connection(kube_watch *w, const char *path, long timeout_s, int force_token,
                               conn *k, kube_error *err, int *setup_rc) {
    kube_client *c = w->c;
    kube_ratelimit_take(&c->rl);
    curl_easy_reset(w->easy);
    struct curl_slist *hdrs = NULL;
    *setup_rc = kube_handle_setup(c, w->easy, path, (timeout_s + 30) * 1000L, NULL, force_token,
                                  &hdrs, err);
    if (*setup_rc != KUBE_OK)
        return CURLE_OK;
    curl_easy_setopt(w->easy, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, k);
    kube_framer_reset(w->fr);
    w->stats.connections++;
    CURLcode result = CURLE_OK;
    if (curl_multi_add_handle(w->multi, w->easy) != CURLM_OK) {
        curl_slist_free_all(hdrs);
        return CURLE_OUT_OF_MEMORY;
    }
    int running = 1;
    while (running && !atomic_load(&w->stop)) {
        if (curl_multi_perform(w->multi, &running) != CURLM_OK)
            break;
        if (running)
            curl_multi_poll(w->multi, NULL, 0, 1000, NULL);
    }
    int left;
    CURLMsg *m;
    while ((m = curl_multi_info_read(w->multi, &left)) != NULL)
        if (m->msg == CURLMSG_DONE)
            result = m->data.result;
    if (!k->status_checked)
        curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &k->status);
    curl_multi_remove_handle(w->multi, w->easy);
    curl_slist_free_all(hdrs);
    return result;
}

int kube_watch_run(kube_watch *w, const kube_resource *res, const kube_watch_opts *opts,
                   const char *from_rv, kube_event_fn fn, void *ud, kube_error *err) {
    kube_watch_opts o = {0};
    if (opts)
        o = *opts;
    if (o.timeout_seconds <= 0)
        o.timeout_seconds = 300;
    if (o.max_failures <= 0)
        o.max_failures = 10;
    if (from_rv && strlen(from_rv) >= sizeof w->rv)
        return kube_error_set(err, KUBE_EINVAL, "resourceVersion is longer than %d bytes",
                              KUBE_RV_MAX - 1);
    if (from_rv != w->rv) /* the caller may pass kube_watch_resource_version(w) */
        snprintf(w->rv, sizeof w->rv, "%s", from_rv ? from_rv : "");
    int failures = 0, force_token = 0;
    kube_error last;
    kube_error_clear(&last);
    for (;;) {
        if (atomic_load(&w->stop))
            return kube_error_set(err, KUBE_ESTOPPED, "the watch was stopped");
        char *path = watch_path(w, res, &o, err);
        if (path == NULL)
            return err ? err->code : KUBE_EINVAL;
        conn k;
        memset(&k, 0, sizeof k);
        k.w = w;
        k.fn = fn;
        k.ud = ud;
        kbuf_init(&k.errbody, WATCH_ERRBODY_MAX);
        kube_error_clear(&k.lerr);
        int setup_rc = KUBE_OK;
        double started = kube_now();
        CURLcode cc = one_connection(w, path, o.timeout_seconds, force_token, &k, err, &setup_rc);
        force_token = 0;
        double lasted = kube_now() - started;
        int transient = 0, rc = KUBE_OK;
        if (setup_rc != KUBE_OK) {
            rc = setup_rc;
        } else if (atomic_load(&w->stop)) {
            rc = kube_error_set(err, KUBE_ESTOPPED, "the watch was stopped");
        } else if (k.rc != 0 && k.from_cb) {
            rc = k.rc;
        } else if (k.rc == KUBE_EGONE || k.rc == KUBE_ETOOBIG || k.rc == KUBE_ENOMEM) {
            rc = k.rc;
            if (err)
                *err = k.lerr;
        } else if (k.rc != 0) { /* malformed event or a non-410 ERROR event */
            transient = 1;
            last = k.lerr;
        } else if (k.status != 0 && k.status != 200) {
            kube_error tmp;
            int code =
                kube_status_error(&tmp, "WATCH", path, k.status, k.errbody.data, k.errbody.len);
            if (k.status == 429 || k.status >= 500 ||
                (k.status == 401 && w->c->cfg.token_file != NULL)) {
                transient = 1; /* a 401 re-reads the token file: it may have rotated */
                force_token = k.status == 401;
                last = tmp;
            } else {
                rc = code;
                if (err)
                    *err = tmp;
            }
        } else if (cc != CURLE_OK) { /* refused, reset, dropped mid-stream, timed out */
            transient = 1;
            kube_transport_error(&last, "WATCH", path, cc, NULL);
        } else if (k.events == 0 && lasted < 1.0) { /* closed at once: do not spin */
            transient = 1;
            kube_error_set(&last, KUBE_ETRANSPORT,
                           "WATCH %s: the server ended the watch at once without events", path);
        }
        /* else: the server ended the watch (its timeout): rewatch at once */
        free(path);
        kbuf_free(&k.errbody);
        if (rc != KUBE_OK)
            return rc;
        if (k.events > 0)
            failures = 0; /* that connection was healthy */
        if (!transient)
            continue;
        if (++failures > o.max_failures) {
            if (err) {
                *err = last;
                snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
                         " (after %d attempts)", failures);
            }
            return last.code ? last.code : KUBE_ETRANSPORT;
        }
        if (kube_watch_sleep_(w, kube_backoff_ms(w->c, failures - 1)))
            return kube_error_set(err, KUBE_ESTOPPED, "the watch was stopped");
    }
}
