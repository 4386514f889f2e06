/*
 * reflector.c - kube_reflector_run: list, replace, watch, and list again when
 * the watch's resourceVersion is gone.
 *
 * How: this is client-go's Reflector.ListAndWatch without the DeltaFIFO: the
 * caller's `replace` receives the whole list (the cache swaps its contents)
 * and `event` each change. Bookmarks only advance the resourceVersion inside
 * kube_watch_run and are not passed on. A 410 relists at once (that is the
 * protocol); a watch that gave up after its failures, or a failed list, waits
 * a backoff first so a down API server is not hammered. Permanent errors
 * (bad arguments, 401/403/404, a server that does not send lists) end the
 * loop: retrying cannot fix them and the caller must report them.
 */
#include <string.h>

#include "client_int.h"
#include "watch_int.h"

typedef struct rctx {
    const kube_reflector_fns *fns;
} rctx;

static int forward(void *ud, const kube_event *ev) {
    rctx *r = ud;
    if (ev->type == KUBE_EVENT_BOOKMARK || r->fns->event == NULL)
        return KUBE_OK;
    return r->fns->event(r->fns->ud, ev);
}

/* A callback's code is returned as it is; this marks it apart from list errors. */
#define KUBE_ECALLBACK_ 1

typedef struct page_ctx {
    const kube_reflector_fns *fns;
    int cb_rc; /* the page callback's code, when it ended the list */
} page_ctx;

static int page_to_user(void *ud, const json_t *items) {
    page_ctx *p = ud;
    int rc = p->fns->list_page(p->fns->ud, items);
    if (rc != KUBE_OK)
        p->cb_rc = rc;
    return rc;
}

/*
 * One list handed to the callbacks, whole or page by page. Returns KUBE_OK
 * with the list's resourceVersion in rv, a list error (in e), or
 * KUBE_ECALLBACK_ with the callback's code in e->code.
 */
static int list_once(kube_client *c, const kube_resource *res, const kube_list_opts *lo,
                     const kube_reflector_fns *fns, char rv[KUBE_RV_MAX], kube_error *e) {
    int rc;
    if (fns->list_page != NULL) {
        page_ctx p = {fns, KUBE_OK};
        if (fns->list_begin)
            fns->list_begin(fns->ud);
        rc = kube_list_pages(c, res, lo, page_to_user, &p, rv, KUBE_RV_MAX, e);
        if (fns->list_end)
            fns->list_end(fns->ud, rc == KUBE_OK);
        if (p.cb_rc != KUBE_OK) {
            kube_error_set(e, p.cb_rc, "the informer's page callback failed");
            return KUBE_ECALLBACK_;
        }
        return rc;
    }
    json_t *list = NULL;
    rc = kube_list(c, res, lo, &list, e);
    if (rc != KUBE_OK)
        return rc;
    const char *v =
        json_string_value(json_object_get(json_object_get(list, "metadata"), "resourceVersion"));
    snprintf(rv, KUBE_RV_MAX, "%s", v ? v : "");
    rc = fns->replace ? fns->replace(fns->ud, list) : KUBE_OK;
    json_decref(list);
    if (rc != KUBE_OK) {
        kube_error_set(e, rc, "the informer's replace callback failed");
        return KUBE_ECALLBACK_;
    }
    return KUBE_OK;
}

/* Failures worth a relist after a backoff; everything else ends the loop. */
static int transient(int rc, const kube_error *e) {
    if (rc == KUBE_ETRANSPORT || rc == KUBE_EGONE)
        return 1;
    return rc == KUBE_EHTTP && (e->http_status == 429 || e->http_status >= 500);
}

int kube_reflector_run(kube_watch *w, const kube_resource *res, const kube_watch_opts *opts,
                       const kube_reflector_fns *fns, kube_error *err) {
    kube_watch_opts o = {0};
    if (opts)
        o = *opts;
    kube_list_opts lo = {o.label_selector, o.field_selector, o.list_limit > 0 ? o.list_limit : 500,
                         0};
    rctx r = {fns};
    kube_client *c = kube_watch_client_(w);
    int failures = 0;
    for (int round = 0;; round++) {
        if (kube_watch_stopped_(w))
            return kube_error_set(err, KUBE_ESTOPPED, "the reflector was stopped");
        if (round > 0)
            kube_watch_count_relist_(w);
        kube_error e;
        kube_error_clear(&e);
        char rvbuf[KUBE_RV_MAX];
        int rc = list_once(c, res, &lo, fns, rvbuf, &e);
        if (rc == KUBE_ECALLBACK_) {
            if (err)
                *err = e;
            return e.code;
        }
        if (rc == KUBE_OK) {
            failures = 0;
            rc = kube_watch_run(w, res, &o, rvbuf, forward, &r, &e);
            if (rc == KUBE_EGONE)
                continue; /* the resourceVersion was compacted: relist now */
        }
        if (rc == KUBE_ESTOPPED || kube_watch_stopped_(w))
            return kube_error_set(err, KUBE_ESTOPPED, "the reflector was stopped");
        if (!transient(rc, &e)) {
            if (err)
                *err = e;
            return rc;
        }
        if (fns->transient_error != NULL && rc != KUBE_EGONE)
            fns->transient_error(fns->ud, &e, failures + 1);
        if (kube_watch_sleep_(w, kube_backoff_ms(c, failures++)))
            return kube_error_set(err, KUBE_ESTOPPED, "the reflector was stopped");
        if (failures > 30)
            failures = 30;
    }
}
