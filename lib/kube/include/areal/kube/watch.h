/*
 * watch.h - streaming watch: the event framer, one watch loop that survives
 * server timeouts and dropped connections, and a reflector (list + watch +
 * relist on 410) for informers to build on.
 *
 * Framing: a watch answer is newline-delimited JSON, one event per line, cut
 * into TCP segments and HTTP chunks at arbitrary bytes. kube_framer keeps only
 * the unfinished tail of the last line in a bounded buffer (max_line) and
 * scans each byte once: a line that arrives whole inside one chunk is handed
 * over in place without copying. The official C client instead re-tokenises
 * its whole buffer on every chunk and stalls when an event is split.
 *
 * resourceVersion rules (kube_watch_run):
 *   - the watch starts from the caller's resourceVersion (normally the list's);
 *   - every ADDED/MODIFIED/DELETED/BOOKMARK event moves it to the event
 *     object's metadata.resourceVersion, *after* the callback accepted it;
 *   - when the server ends the stream (its timeoutSeconds) or the connection
 *     drops, the watch reconnects from the last resourceVersion; a partial
 *     line from the dead connection is discarded (the server resends it);
 *   - 410 Gone (as the HTTP status or as an ERROR event with code 410) means
 *     that resourceVersion has been compacted away: kube_watch_run returns
 *     KUBE_EGONE and the caller must list again (kube_reflector_run does);
 *   - 429 and 5xx answers are retried; a 401 is retried once the token file
 *     has been re-read (the token may have rotated); other 4xx are returned;
 *   - reconnects after failures back off exponentially (client backoff
 *     settings); a healthy connection resets the count; after max_failures
 *     consecutive failures the last error is returned.
 * Stopping: kube_watch_stop may be called from any thread; it wakes the
 * watch's curl multi handle, so a blocked kube_watch_run or reflector returns
 * KUBE_ESTOPPED promptly (a list request in flight finishes first, bounded by
 * the client's timeout).
 * Rejected: blocking curl_easy_perform for watches (cannot be woken from
 * another thread except by a progress callback polled about once a second).
 */
#ifndef AREAL_KUBE_WATCH_H
#define AREAL_KUBE_WATCH_H

#include <stddef.h>

#include <jansson.h>

#include "areal/kube/client.h"
#include "areal/kube/error.h"

/* ---- framing and decoding ------------------------------------------------ */

typedef struct kube_framer kube_framer;

/* Called for each complete line (without "\n" or a trailing "\r"; empty lines
 * are skipped). `line` is valid only during the call. Return 0 to go on, or a
 * non-zero value to stop: kube_framer_feed returns it and drops the rest of
 * its input. */
typedef int (*kube_line_fn)(void *ud, const char *line, size_t len);

/* A framer whose lines may be at most `max_line` bytes. NULL when out of memory. */
kube_framer *kube_framer_new(size_t max_line);

/* Frees the framer. NULL is allowed. */
void kube_framer_free(kube_framer *f);

/* Forgets a partial line (after a connection ends). */
void kube_framer_reset(kube_framer *f);

/* Bytes of an unfinished line held. */
size_t kube_framer_pending(const kube_framer *f);

/*
 * Feeds `len` bytes, calling `fn` for each line they complete. Returns KUBE_OK,
 * the callback's non-zero value, KUBE_ETOOBIG (a line longer than max_line;
 * the framer is reset) or KUBE_ENOMEM, with `err` filled for the last two.
 */
int kube_framer_feed(kube_framer *f, const char *data, size_t len, kube_line_fn fn, void *ud,
                     kube_error *err);

typedef enum kube_event_type {
    KUBE_EVENT_ADDED,
    KUBE_EVENT_MODIFIED,
    KUBE_EVENT_DELETED,
    KUBE_EVENT_BOOKMARK,
    KUBE_EVENT_ERROR, /* object is a Status */
} kube_event_type;

typedef struct kube_event {
    kube_event_type type;
    json_t *object;               /* owned by the event (kube_event_clear releases it) */
    const char *resource_version; /* object's metadata.resourceVersion (borrowed) or NULL */
} kube_event;

/*
 * Decodes one watch line {"type": ..., "object": {...}}. Returns KUBE_OK with
 * `ev` filled, or KUBE_EDECODE naming what is wrong (not JSON, no type, an
 * unknown type, object not an object); `ev` is cleared on failure.
 */
int kube_event_decode(const char *line, size_t len, kube_event *ev, kube_error *err);

/* Releases the event's object and clears it. */
void kube_event_clear(kube_event *ev);

/* "ADDED", "MODIFIED", ... */
const char *kube_event_type_name(kube_event_type t);

/* ---- the watch loop ------------------------------------------------------- */

#define KUBE_RV_MAX 256 /* longest resourceVersion kept */

typedef struct kube_watch kube_watch;

typedef struct kube_watch_opts {
    const char *label_selector; /* NULL: none */
    const char *field_selector; /* NULL: none */
    long timeout_seconds;       /* server-side end of each watch connection (0: 300) */
    int no_bookmarks;           /* 1: do not ask for BOOKMARK events */
    int max_failures;           /* consecutive failed connections before giving up (0: 10) */
    long list_limit;            /* reflector: page size of its lists (0: 500) */
} kube_watch_opts;

typedef struct kube_watch_stats {
    unsigned long connections; /* watch connections opened */
    unsigned long events;      /* events delivered (bookmarks included) */
    unsigned long bookmarks;   /* BOOKMARK events */
    unsigned long relists;     /* reflector lists after the first */
} kube_watch_stats;

/*
 * Called for each event. `ev` and its object are valid during the call (take a
 * reference with json_incref to keep the object). Return KUBE_OK to go on, or
 * a negative code to end kube_watch_run, which returns that code.
 */
typedef int (*kube_event_fn)(void *ud, const kube_event *ev);

/* A watch on client `c` (borrowed; must outlive the watch). NULL with err on failure. */
kube_watch *kube_watch_new(kube_client *c, kube_error *err);

/* Frees the watch. Not while kube_watch_run runs on it. NULL is allowed. */
void kube_watch_free(kube_watch *w);

/* Makes a running (or the next) kube_watch_run / kube_reflector_run return
 * KUBE_ESTOPPED. Thread-safe; the watch stays stopped. */
void kube_watch_stop(kube_watch *w);

/* The last resourceVersion seen ("" before any). Only from the watching thread. */
const char *kube_watch_resource_version(const kube_watch *w);

/* Copies the counters. Only from the watching thread or after it returned. */
void kube_watch_stats_get(const kube_watch *w, kube_watch_stats *out);

/*
 * Watches `res` from resourceVersion `from_rv` (NULL or "": the server's
 * choice, "most recent"), calling `fn` per event, rewatching across server
 * timeouts and dropped connections as described at the top. Returns only with
 * KUBE_ESTOPPED, KUBE_EGONE (list again), the callback's code, or an error
 * (max_failures reached, or a 4xx answer that retrying cannot fix), `err`
 * filled for errors.
 */
int kube_watch_run(kube_watch *w, const kube_resource *res, const kube_watch_opts *opts,
                   const char *from_rv, kube_event_fn fn, void *ud, kube_error *err);

/* ---- reflector: list + watch ----------------------------------------------- */

typedef struct kube_reflector_fns {
    /* The full current list (borrowed; items merged across pages): replace the
     * cache with its items. Called first and after every relist. */
    int (*replace)(void *ud, json_t *list);
    /* One ADDED/MODIFIED/DELETED event (bookmarks are absorbed). */
    int (*event)(void *ud, const kube_event *ev);
    void *ud;
    /* Optional; when list_page is set it is used instead of `replace`, so a
     * long list is never held whole: list_begin before the first page,
     * list_page with each page's items (borrowed, valid during the call; NULL
     * for an empty page), list_end(ok = 1) after the last page, or
     * list_end(ok = 0) when the list failed part way (drop what its pages
     * brought; it will be listed again). */
    void (*list_begin)(void *ud);
    int (*list_page)(void *ud, const json_t *items);
    void (*list_end)(void *ud, int ok);
    /* Optional: a transient failure (`e` says why, with the transport's cause:
     * "SSL peer certificate or SSH remote key was not OK", "Couldn't connect
     * to server", an HTTP 5xx), called before the backoff that follows it;
     * `failures` counts them since the last good list (1 the first time).
     * Without it the retries are silent: a wrong CA would show only as a cache
     * that never syncs. */
    void (*transient_error)(void *ud, const kube_error *e, int failures);
} kube_reflector_fns;

/*
 * Lists `res`, hands the list to fns->replace (or page by page to
 * fns->list_page), watches from its
 * resourceVersion handing events to fns->event, and lists again on KUBE_EGONE
 * (or after a watch gives up, with backoff). Transient list failures are
 * retried with backoff until stopped. Returns KUBE_ESTOPPED after
 * kube_watch_stop, a callback's code, or a permanent error (bad arguments, 401,
 * 403, 404, malformed lists).
 */
int kube_reflector_run(kube_watch *w, const kube_resource *res, const kube_watch_opts *opts,
                       const kube_reflector_fns *fns, kube_error *err);

#endif
