/* test_kube_watch.c - the watch loop and the reflector against the scripted loopback
 * server: framing over real chunks, resourceVersion tracking, bookmarks, rewatch after a
 * server timeout or a dropped connection, 410 relist, malformed events, stop. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "areal/kube/client.h"
#include "areal/kube/ratelimit.h"
#include "areal/kube/watch.h"
#include "util/kube_test_server.h"

static const kube_resource PODS = {NULL, "v1", "pods", "default"};

#define EV(type, name, rv)                                                                         \
    "{\"type\":\"" type "\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"" name           \
    "\",\"resourceVersion\":\"" rv "\"}}}\n"
#define GONE_EVENT                                                                                 \
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":"      \
    "\"too old resource version: 5 (90)\",\"reason\":\"Expired\",\"code\":410}}\n"

typedef struct fx {
    kts *srv;
    kube_config cfg;
    kube_client *c;
    kube_watch *w;
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    f->srv = kts_start();
    assert_non_null(f->srv);
    kube_config_init(&f->cfg);
    f->cfg.server = strdup(kts_url(f->srv));
    f->cfg.allow_insecure = 1;
    f->cfg.qps = 0;
    f->cfg.backoff_base_ms = 5;
    f->cfg.backoff_max_ms = 40;
    f->c = kube_client_new(&f->cfg, NULL);
    assert_non_null(f->c);
    f->w = kube_watch_new(f->c, NULL);
    assert_non_null(f->w);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    kube_watch_free(f->w);
    kube_client_free(f->c);
    kube_config_free(&f->cfg);
    kts_stop(f->srv);
    free(f);
    return 0;
}

/* Records events; ends the run (with -100) at the event named `stop_at`. */
typedef struct rec {
    int n;
    char types[16][12];
    char names[16][16];
    char rvs[16][16];
    const char *stop_at;
    kube_watch *stop_watch; /* if set: kube_watch_stop instead of returning -100 */
} rec;

static int on_event(void *ud, const kube_event *ev) {
    rec *r = ud;
    const char *name =
        json_string_value(json_object_get(json_object_get(ev->object, "metadata"), "name"));
    if (r->n < 16) {
        snprintf(r->types[r->n], sizeof r->types[0], "%s", kube_event_type_name(ev->type));
        snprintf(r->names[r->n], sizeof r->names[0], "%s", name ? name : "");
        snprintf(r->rvs[r->n], sizeof r->rvs[0], "%s",
                 ev->resource_version ? ev->resource_version : "");
        r->n++;
    }
    if (r->stop_at && name && strcmp(name, r->stop_at) == 0) {
        if (r->stop_watch) {
            kube_watch_stop(r->stop_watch);
            return KUBE_OK;
        }
        return -100;
    }
    return KUBE_OK;
}

static kts_request req(fx *f, int i) {
    kts_request r;
    if (kts_get(f->srv, i, &r) != 0)
        fail_msg("no request %d (have %d)", i, kts_count(f->srv));
    return r;
}

static void events_arrive_byte_by_byte_with_rv_and_bookmarks(void **state) {
    fx *f = *state;
    kts_push_stream(f->srv,
                    EV("ADDED", "a", "11") EV(
                        "MODIFIED", "a",
                        "12") "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{"
                              "\"resourceVersion\":\"20\"}}}\n" EV("DELETED", "end", "21"),
                    1, 0, KTS_END_HOLD);
    rec r = {.stop_at = "end"};
    kube_watch_opts o = {.label_selector = "app=x", .timeout_seconds = 60};
    kube_error e;
    assert_int_equal(kube_watch_run(f->w, &PODS, &o, "10", on_event, &r, &e), -100);
    assert_int_equal(r.n, 4);
    assert_string_equal(r.types[0], "ADDED");
    assert_string_equal(r.types[2], "BOOKMARK");
    assert_string_equal(r.rvs[2], "20");
    assert_string_equal(r.types[3], "DELETED");
    /* the refused event does not move the resourceVersion; the bookmark did */
    assert_string_equal(kube_watch_resource_version(f->w), "20");
    kube_watch_stats st;
    kube_watch_stats_get(f->w, &st);
    assert_int_equal(st.connections, 1);
    assert_int_equal(st.events, 3);
    assert_int_equal(st.bookmarks, 1);
    assert_string_equal(req(f, 0).target,
                        "/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=60"
                        "&allowWatchBookmarks=true&resourceVersion=10&labelSelector=app%3Dx");
}

static void server_timeout_rewatches_from_last_rv(void **state) {
    fx *f = *state;
    kts_push_stream(f->srv, EV("ADDED", "a", "11") EV("MODIFIED", "a", "12"), 0, 0, KTS_END_CLEAN);
    kts_push_stream(f->srv, EV("ADDED", "end", "13"), 0, 0, KTS_END_HOLD);
    rec r = {.stop_at = "end"};
    kube_watch_opts o = {.no_bookmarks = 1};
    assert_int_equal(kube_watch_run(f->w, &PODS, &o, "10", on_event, &r, NULL), -100);
    assert_int_equal(r.n, 3);
    assert_int_equal(kts_count(f->srv), 2);
    assert_null(strstr(req(f, 0).target, "allowWatchBookmarks"));
    assert_non_null(strstr(req(f, 1).target, "&resourceVersion=12"));
    /* resuming with the watch's own resourceVersion (the buffer passed back in) */
    kts_push_stream(f->srv, EV("ADDED", "end", "14"), 0, 0, KTS_END_HOLD);
    assert_int_equal(
        kube_watch_run(f->w, &PODS, &o, kube_watch_resource_version(f->w), on_event, &r, NULL),
        -100);
    assert_non_null(strstr(req(f, 2).target, "&resourceVersion=12"));
}

static void dropped_connection_rewatches_and_drops_the_partial_line(void **state) {
    fx *f = *state;
    kts_push_stream(f->srv, EV("ADDED", "a", "11") "{\"type\":\"MODIFIED\",\"object\":{\"kin", 7, 1,
                    KTS_END_DROP);
    kts_push_drop(f->srv); /* the first reconnect fails outright */
    kts_push_stream(f->srv, EV("MODIFIED", "end", "12"), 0, 0, KTS_END_HOLD);
    rec r = {.stop_at = "end"};
    kube_error e;
    assert_int_equal(kube_watch_run(f->w, &PODS, NULL, "10", on_event, &r, &e), -100);
    assert_int_equal(r.n, 2);
    assert_string_equal(r.names[0], "a");
    assert_string_equal(r.names[1], "end");
    assert_int_equal(kts_count(f->srv), 3);
    assert_non_null(strstr(req(f, 1).target, "&resourceVersion=11"));
    assert_non_null(strstr(req(f, 2).target, "&resourceVersion=11"));
    kube_watch_stats st;
    kube_watch_stats_get(f->w, &st);
    assert_int_equal(st.connections, 3);
}

static void gone_as_status_or_as_event(void **state) {
    fx *f = *state;
    kts_push(f->srv, 410, NULL,
             "{\"kind\":\"Status\",\"reason\":\"Expired\",\"message\":\"too old resource "
             "version\",\"code\":410}");
    rec r = {0};
    kube_error e;
    assert_int_equal(kube_watch_run(f->w, &PODS, NULL, "5", on_event, &r, &e), KUBE_EGONE);
    assert_int_equal(e.http_status, 410);
    assert_string_equal(e.reason, "Expired");
    kts_push_stream(f->srv, EV("ADDED", "a", "6") GONE_EVENT EV("ADDED", "never", "7"), 0, 0,
                    KTS_END_HOLD);
    assert_int_equal(kube_watch_run(f->w, &PODS, NULL, "5", on_event, &r, &e), KUBE_EGONE);
    assert_int_equal(r.n, 1);
    assert_int_equal(e.http_status, 410);
    assert_non_null(strstr(e.msg, "too old resource version"));
}

static void malformed_events_rewatch_then_give_up(void **state) {
    fx *f = *state;
    kts_push_stream(f->srv, EV("ADDED", "a", "11") "{\"type\":\"ADDED\",\"object\":[}\n", 0, 0,
                    KTS_END_HOLD);
    kts_push_stream(f->srv, "garbage\n", 0, 0, KTS_END_HOLD);
    kts_push_stream(f->srv, "{\"type\":\"WHAT\",\"object\":{}}\n", 0, 0, KTS_END_HOLD);
    rec r = {0};
    kube_watch_opts o = {.max_failures = 2};
    kube_error e;
    assert_int_equal(kube_watch_run(f->w, &PODS, &o, "10", on_event, &r, &e), KUBE_EDECODE);
    assert_int_equal(r.n, 1);
    assert_non_null(strstr(e.msg, "unknown type \"WHAT\""));
    assert_non_null(strstr(e.msg, "after 3 attempts"));
    assert_int_equal(kts_count(f->srv), 3);
    for (int i = 1; i < 3; i++)
        assert_non_null(strstr(req(f, i).target, "&resourceVersion=11"));
}

static void http_errors_retry_or_return(void **state) {
    fx *f = *state;
    kts_push(f->srv, 503, NULL, "{\"kind\":\"Status\",\"code\":503}");
    kts_push(f->srv, 429, NULL, "{\"kind\":\"Status\",\"code\":429}");
    kts_push_stream(f->srv, EV("ADDED", "end", "2"), 0, 0, KTS_END_HOLD);
    rec r = {.stop_at = "end"};
    assert_int_equal(kube_watch_run(f->w, &PODS, NULL, "1", on_event, &r, NULL), -100);
    assert_int_equal(kts_count(f->srv), 3);
    kts_push(f->srv, 403, NULL,
             "{\"kind\":\"Status\",\"reason\":\"Forbidden\",\"message\":\"pods is forbidden: "
             "User cannot watch resource\",\"code\":403}");
    kube_error e;
    assert_int_equal(kube_watch_run(f->w, &PODS, NULL, "1", on_event, &r, &e), KUBE_EHTTP);
    assert_int_equal(e.http_status, 403);
    assert_string_equal(e.reason, "Forbidden");
    assert_int_equal(kts_count(f->srv), 4);
}

static void *stopper(void *arg) {
    kube_sleep_ms(150);
    kube_watch_stop(arg);
    return NULL;
}

static void stop_from_another_thread(void **state) {
    fx *f = *state;
    kts_push_stream(f->srv, EV("ADDED", "a", "11"), 0, 0, KTS_END_HOLD);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stopper, f->w), 0);
    rec r = {0};
    double t0 = kube_now();
    kube_error e;
    assert_int_equal(kube_watch_run(f->w, &PODS, NULL, "10", on_event, &r, &e), KUBE_ESTOPPED);
    double dt = kube_now() - t0;
    pthread_join(t, NULL);
    assert_int_equal(r.n, 1);
    assert_true(dt >= 0.1);
    assert_true(dt < 0.9); /* woken at once, not at the next poll timeout */
    /* a stopped watch stays stopped */
    assert_int_equal(kube_watch_run(f->w, &PODS, NULL, "10", on_event, &r, &e), KUBE_ESTOPPED);
    assert_int_equal(kts_count(f->srv), 1);
}

static void stop_during_backoff(void **state) {
    fx *f = *state;
    kube_config cfg;
    kube_config_init(&cfg);
    cfg.server = strdup(kts_url(f->srv));
    cfg.allow_insecure = 1;
    cfg.backoff_base_ms = 5000; /* a long backoff that the stop must cut short */
    cfg.backoff_max_ms = 5000;
    kube_client *c = kube_client_new(&cfg, NULL);
    kube_watch *w = kube_watch_new(c, NULL);
    kts_push_drop(f->srv);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stopper, w), 0);
    double t0 = kube_now();
    assert_int_equal(kube_watch_run(w, &PODS, NULL, "1", NULL, NULL, NULL), KUBE_ESTOPPED);
    assert_true(kube_now() - t0 < 2.0);
    pthread_join(t, NULL);
    kube_watch_free(w);
    kube_client_free(c);
    kube_config_free(&cfg);
}

/* reflector: a tiny cache of names */
typedef struct cache {
    int replaces;
    size_t last_size;
    rec events;
    int transients, last_failures, last_status; /* the transient_error callback */
} cache;

static void on_transient(void *ud, const kube_error *e, int failures) {
    cache *c = ud;
    c->transients++;
    c->last_failures = failures;
    c->last_status = e->http_status;
}

static int on_replace(void *ud, json_t *list) {
    cache *c = ud;
    c->replaces++;
    c->last_size = json_array_size(json_object_get(list, "items"));
    return KUBE_OK;
}

static int on_cache_event(void *ud, const kube_event *ev) {
    cache *c = ud;
    return on_event(&c->events, ev);
}

static void reflector_relists_on_gone(void **state) {
    fx *f = *state;
    kts_push(f->srv, 200, NULL,
             "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"100\"},\"items\":["
             "{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}");
    kts_push_stream(f->srv,
                    EV("ADDED", "c", "101") "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{"
                                            "\"resourceVersion\":\"150\"}}}\n" GONE_EVENT,
                    0, 0, KTS_END_HOLD);
    kts_push(f->srv, 200, NULL,
             "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"200\"},\"items\":["
             "{\"metadata\":{\"name\":\"c\"}}]}");
    kts_push_stream(f->srv, EV("DELETED", "end", "201"), 0, 0, KTS_END_HOLD);
    cache c = {0};
    c.events.stop_at = "end";
    c.events.stop_watch = f->w; /* the callback stops the reflector through the watch */
    kube_reflector_fns fns = {.replace = on_replace, .event = on_cache_event, .ud = &c};
    kube_watch_opts o = {.list_limit = 50};
    kube_error e;
    assert_int_equal(kube_reflector_run(f->w, &PODS, &o, &fns, &e), KUBE_ESTOPPED);
    assert_int_equal(c.replaces, 2);
    assert_int_equal(c.last_size, 1);
    assert_int_equal(c.events.n, 2); /* the bookmark is absorbed */
    assert_string_equal(c.events.types[0], "ADDED");
    assert_string_equal(c.events.types[1], "DELETED");
    kube_watch_stats st;
    kube_watch_stats_get(f->w, &st);
    assert_int_equal(st.relists, 1);
    assert_int_equal(kts_count(f->srv), 4);
    assert_string_equal(req(f, 0).target, "/api/v1/namespaces/default/pods?limit=50");
    assert_non_null(strstr(req(f, 1).target, "&resourceVersion=100"));
    assert_non_null(strstr(req(f, 3).target, "&resourceVersion=200"));
}

typedef struct pager {
    int begins, pages, ends_ok, ends_failed;
    size_t items;
    rec events;
} pager;

static void on_begin(void *ud) {
    ((pager *)ud)->begins++;
}

static int on_page(void *ud, const json_t *items) {
    pager *p = ud;
    p->pages++;
    p->items += json_array_size(items);
    return KUBE_OK;
}

static void on_end(void *ud, int ok) {
    pager *p = ud;
    if (ok)
        p->ends_ok++;
    else
        p->ends_failed++;
}

static int on_pager_event(void *ud, const kube_event *ev) {
    return on_event(&((pager *)ud)->events, ev);
}

static void reflector_hands_over_pages(void **state) {
    fx *f = *state;
    /* first list: its continue token expires after page 1 -> dropped, listed again */
    kts_push(f->srv, 200, NULL,
             "{\"metadata\":{\"continue\":\"t1\"},\"items\":["
             "{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}");
    kts_push(f->srv, 410, NULL, "{\"kind\":\"Status\",\"reason\":\"Expired\",\"code\":410}");
    kts_push(f->srv, 200, NULL,
             "{\"metadata\":{\"continue\":\"t2\"},\"items\":["
             "{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}");
    kts_push(f->srv, 200, NULL,
             "{\"metadata\":{\"resourceVersion\":\"300\"},\"items\":["
             "{\"metadata\":{\"name\":\"c\"}}]}");
    kts_push_stream(f->srv, EV("DELETED", "end", "301"), 0, 0, KTS_END_HOLD);
    pager p = {0};
    p.events.stop_at = "end";
    p.events.stop_watch = f->w;
    kube_reflector_fns fns = {.event = on_pager_event,
                              .ud = &p,
                              .list_begin = on_begin,
                              .list_page = on_page,
                              .list_end = on_end};
    kube_watch_opts o = {.list_limit = 2};
    kube_error e;
    assert_int_equal(kube_reflector_run(f->w, &PODS, &o, &fns, &e), KUBE_ESTOPPED);
    assert_int_equal(p.begins, 2);
    assert_int_equal(p.ends_failed, 1);
    assert_int_equal(p.ends_ok, 1);
    assert_int_equal(p.pages, 3); /* a, b | a, b | c */
    assert_int_equal(p.items, 5);
    assert_int_equal(p.events.n, 1);
    assert_int_equal(kts_count(f->srv), 5);
    assert_non_null(strstr(req(f, 1).target, "continue=t1"));
    assert_non_null(strstr(req(f, 3).target, "continue=t2"));
    assert_non_null(strstr(req(f, 4).target, "&resourceVersion=300"));
}

static void reflector_returns_permanent_errors(void **state) {
    fx *f = *state;
    kts_push(f->srv, 503, NULL, "{\"kind\":\"Status\",\"code\":503}"); /* retried */
    kts_push(f->srv, 403, NULL,
             "{\"kind\":\"Status\",\"reason\":\"Forbidden\",\"message\":\"no list\","
             "\"code\":403}");
    cache c = {0};
    kube_reflector_fns fns = {.replace = on_replace, .event = on_cache_event, .ud = &c};
    kube_error e;
    assert_int_equal(kube_reflector_run(f->w, &PODS, NULL, &fns, &e), KUBE_EHTTP);
    assert_int_equal(e.http_status, 403);
    assert_int_equal(c.replaces, 0);
    assert_int_equal(kts_count(f->srv), 2);
}

/* A list that fails past the client's own retries (5 by default) is retried
 * by the reflector, which reports each such failure, with its cause, to
 * transient_error before its backoff (the operator logs it). */
static void reflector_reports_transient_failures(void **state) {
    fx *f = *state;
    for (int i = 0; i < 6; i++)
        kts_push(f->srv, 503, NULL, "{\"kind\":\"Status\",\"code\":503}");
    kts_push(f->srv, 403, NULL,
             "{\"kind\":\"Status\",\"reason\":\"Forbidden\",\"message\":\"no list\","
             "\"code\":403}");
    cache c = {0};
    kube_reflector_fns fns = {
        .replace = on_replace, .event = on_cache_event, .ud = &c, .transient_error = on_transient};
    kube_error e;
    assert_int_equal(kube_reflector_run(f->w, &PODS, NULL, &fns, &e), KUBE_EHTTP);
    assert_int_equal(e.http_status, 403);
    assert_int_equal(kts_count(f->srv), 7);
    assert_int_equal(c.transients, 1);
    assert_int_equal(c.last_failures, 1);
    assert_int_equal(c.last_status, 503);
}

static void many_reconnects_keep_the_resource_version(void **state) {
    fx *f = *state;
    /* a long watch: 200 connections that each end after one event (server timeout);
     * the sanitized build's leak checker sees every connection's allocations */
    char ev[160];
    for (int i = 0; i < 200; i++) {
        snprintf(ev, sizeof ev,
                 "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"p\","
                 "\"resourceVersion\":\"%d\"}}}\n",
                 1000 + i);
        kts_push_stream(f->srv, ev, 0, 0, KTS_END_CLEAN);
    }
    kts_push_stream(f->srv, EV("DELETED", "end", "5000"), 0, 0, KTS_END_HOLD);
    rec r = {.stop_at = "end"};
    assert_int_equal(kube_watch_run(f->w, &PODS, NULL, "999", on_event, &r, NULL), -100);
    kube_watch_stats st;
    kube_watch_stats_get(f->w, &st);
    assert_int_equal(st.connections, 201);
    assert_int_equal(st.events, 200);
    for (int i = 0; i < 201; i++) {
        char want[48];
        snprintf(want, sizeof want, "&resourceVersion=%d", 999 + i);
        if (strstr(req(f, i).target, want) == NULL)
            fail_msg("connection %d: '%s' lacks %s", i, req(f, i).target, want);
    }
    assert_true(kts_accepts(f->srv) <= 2); /* the connection itself is reused */
}

static void unauthorized_watch_rereads_the_token(void **state) {
    fx *f = *state;
    char dir[] = "/tmp/kube-wtok-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/token", dir);
    FILE *fp = fopen(path, "w");
    fputs("old1", fp);
    fclose(fp);
    kube_config cfg;
    kube_config_init(&cfg);
    cfg.server = strdup(kts_url(f->srv));
    cfg.allow_insecure = 1;
    cfg.backoff_base_ms = 5;
    cfg.token_file = strdup(path);
    kube_client *c = kube_client_new(&cfg, NULL);
    kube_watch *w = kube_watch_new(c, NULL);
    kts_push(f->srv, 200, NULL, "{}");
    assert_int_equal(kube_get(c, &PODS, "p", NULL, NULL), KUBE_OK); /* caches "old1" */
    /* rotate in place with the same size and mtime: only a 401 can reveal it */
    struct stat before;
    assert_int_equal(stat(path, &before), 0);
    fp = fopen(path, "r+");
    fputs("NEW1", fp);
    fclose(fp);
    struct timespec times[2] = {before.st_atim, before.st_mtim};
    assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
    kts_push(f->srv, 401, NULL, "{\"kind\":\"Status\",\"reason\":\"Unauthorized\",\"code\":401}");
    kts_push_stream(f->srv, EV("ADDED", "end", "2"), 0, 0, KTS_END_HOLD);
    rec r = {.stop_at = "end"};
    assert_int_equal(kube_watch_run(w, &PODS, NULL, "1", on_event, &r, NULL), -100);
    assert_int_equal(kts_count(f->srv), 3);
    assert_string_equal(req(f, 1).auth, "Bearer old1");
    assert_string_equal(req(f, 2).auth, "Bearer NEW1");
    kube_watch_free(w);
    kube_client_free(c);
    kube_config_free(&cfg);
    unlink(path);
    rmdir(dir);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(events_arrive_byte_by_byte_with_rv_and_bookmarks),
        T(server_timeout_rewatches_from_last_rv),
        T(dropped_connection_rewatches_and_drops_the_partial_line),
        T(gone_as_status_or_as_event),
        T(malformed_events_rewatch_then_give_up),
        T(http_errors_retry_or_return),
        T(stop_from_another_thread),
        T(stop_during_backoff),
        T(reflector_relists_on_gone),
        T(many_reconnects_keep_the_resource_version),
        T(unauthorized_watch_rereads_the_token),
        T(reflector_hands_over_pages),
        T(reflector_reports_transient_failures),
        T(reflector_returns_permanent_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
