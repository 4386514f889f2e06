/* test_kube_framer.c - watch-stream framing at every byte boundary, and event decoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "areal/kube/watch.h"

/* A recorded stream: what a pods watch with bookmarks sends (one event per line). */
static const char STREAM[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
    "\"trainer-0\",\"namespace\":\"default\",\"uid\":\"0b1c\",\"resourceVersion\":\"101\","
    "\"labels\":{\"areal.io/job\":\"demo\"}},\"spec\":{\"nodeName\":\"\"},\"status\":{\"phase\":"
    "\"Pending\"}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"
    "\"name\":\"trainer-0\",\"namespace\":\"default\",\"resourceVersion\":\"102\"},\"spec\":{"
    "\"nodeName\":\"node-a\"},\"status\":{\"phase\":\"Running\",\"message\":\"line\\nbreak "
    "\\u00e9 {\\\"q\\\"}\"}}}\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"
    "\"resourceVersion\":\"150\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n"
    "{\"type\":\"DELETED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"
    "\"name\":\"trainer-0\",\"namespace\":\"default\",\"resourceVersion\":\"151\"}}}\r\n"
    "\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
    "\"Failure\",\"message\":\"too old resource version: 1 (151)\",\"reason\":\"Expired\","
    "\"code\":410}}\n";

static const char *const WANT_TYPES[] = {"ADDED", "MODIFIED", "BOOKMARK", "DELETED", "ERROR"};
static const char *const WANT_RV[] = {"101", "102", "150", "151", NULL};
#define NWANT 5

typedef struct seen {
    int n;
    int types[8];
    char rv[8][32];
    size_t lens[8];
    int bad;
} seen;

static int on_line(void *ud, const char *line, size_t len) {
    seen *s = ud;
    kube_event ev;
    kube_error e;
    if (kube_event_decode(line, len, &ev, &e) != KUBE_OK || s->n >= 8) {
        s->bad++;
        return 0;
    }
    s->types[s->n] = (int)ev.type;
    snprintf(s->rv[s->n], sizeof s->rv[0], "%s", ev.resource_version ? ev.resource_version : "");
    s->lens[s->n] = len;
    s->n++;
    kube_event_clear(&ev);
    return 0;
}

static void check_seen(const seen *s) {
    assert_int_equal(s->bad, 0);
    assert_int_equal(s->n, NWANT);
    for (int i = 0; i < NWANT; i++) {
        assert_string_equal(kube_event_type_name((kube_event_type)s->types[i]), WANT_TYPES[i]);
        assert_string_equal(s->rv[i], WANT_RV[i] ? WANT_RV[i] : "");
    }
}

static void feed_split(kube_framer *f, const size_t *cuts, int ncuts, seen *s) {
    size_t n = sizeof STREAM - 1, prev = 0;
    for (int i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : n;
        assert_int_equal(kube_framer_feed(f, STREAM + prev, end - prev, on_line, s, NULL), KUBE_OK);
        prev = end;
    }
    assert_int_equal(kube_framer_pending(f), 0);
}

static void whole_stream_in_one_chunk(void **state) {
    (void)state;
    kube_framer *f = kube_framer_new(4096);
    seen s = {0};
    feed_split(f, NULL, 0, &s);
    check_seen(&s);
    /* the trailing \r of the DELETED line is not part of the line */
    assert_int_equal(STREAM[0], '{');
    kube_framer_free(f);
}

static void split_at_every_byte_offset(void **state) {
    (void)state;
    kube_framer *f = kube_framer_new(4096);
    for (size_t cut = 0; cut <= sizeof STREAM - 1; cut++) {
        seen s = {0};
        feed_split(f, &cut, 1, &s);
        check_seen(&s);
    }
    kube_framer_free(f);
}

static void split_at_every_pair_of_offsets_near_line_ends(void **state) {
    (void)state;
    /* every pair (a, b) with a within 2 bytes of a line end, b anywhere after it */
    kube_framer *f = kube_framer_new(4096);
    size_t n = sizeof STREAM - 1;
    long runs = 0;
    for (size_t a = 0; a <= n; a++) {
        int near = 0;
        for (size_t d = 0; d <= 2 && !near; d++)
            near = (a + d < n && STREAM[a + d] == '\n') || (a >= d && STREAM[a - d] == '\n');
        if (!near)
            continue;
        for (size_t b = a; b <= n; b++) {
            size_t cuts[2] = {a, b};
            seen s = {0};
            feed_split(f, cuts, 2, &s);
            check_seen(&s);
            runs++;
        }
    }
    assert_true(runs > 1000);
    kube_framer_free(f);
}

static void one_byte_at_a_time_and_random_chunks(void **state) {
    (void)state;
    kube_framer *f = kube_framer_new(4096);
    size_t n = sizeof STREAM - 1;
    seen s = {0};
    for (size_t i = 0; i < n; i++)
        assert_int_equal(kube_framer_feed(f, STREAM + i, 1, on_line, &s, NULL), KUBE_OK);
    check_seen(&s);
    uint32_t x = 12345;
    for (int round = 0; round < 200; round++) {
        size_t cuts[16];
        int nc = 0;
        size_t at = 0;
        while (nc < 16) {
            x = x * 1103515245u + 12345u;
            at += 1 + (x >> 16) % 97;
            if (at >= n)
                break;
            cuts[nc++] = at;
        }
        seen r = {0};
        feed_split(f, cuts, nc, &r);
        check_seen(&r);
    }
    kube_framer_free(f);
}

static void line_longer_than_the_bound_is_refused(void **state) {
    (void)state;
    kube_framer *f = kube_framer_new(64);
    char big[200];
    memset(big, 'x', sizeof big);
    seen s = {0};
    kube_error e;
    /* split: the bound is hit while buffering */
    assert_int_equal(kube_framer_feed(f, big, 50, on_line, &s, &e), KUBE_OK);
    assert_int_equal(kube_framer_feed(f, big, 50, on_line, &s, &e), KUBE_ETOOBIG);
    assert_non_null(strstr(e.msg, "max_line"));
    assert_int_equal(kube_framer_pending(f), 0);
    /* whole: a complete line in one chunk over the bound */
    big[100] = '\n';
    assert_int_equal(kube_framer_feed(f, big, 101, on_line, &s, &e), KUBE_ETOOBIG);
    /* after the error the framer works again */
    const char ok[] = "{\"type\":\"ADDED\",\"object\":{}}\n";
    assert_int_equal(kube_framer_feed(f, ok, sizeof ok - 1, on_line, &s, &e), KUBE_OK);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.bad, 0);
    kube_framer_free(f);
}

static int stop_at_second(void *ud, const char *line, size_t len) {
    (void)line;
    (void)len;
    int *n = ud;
    return ++*n == 2 ? 7 : 0;
}

static void callback_can_stop_the_feed(void **state) {
    (void)state;
    kube_framer *f = kube_framer_new(4096);
    int n = 0;
    assert_int_equal(kube_framer_feed(f, STREAM, sizeof STREAM - 1, stop_at_second, &n, NULL), 7);
    assert_int_equal(n, 2);
    kube_framer_free(f);
}

static void reset_forgets_a_partial_line(void **state) {
    (void)state;
    kube_framer *f = kube_framer_new(4096);
    seen s = {0};
    assert_int_equal(kube_framer_feed(f, "{\"type\":\"ADD", 12, on_line, &s, NULL), KUBE_OK);
    assert_int_equal(kube_framer_pending(f), 12);
    kube_framer_reset(f);
    feed_split(f, NULL, 0, &s);
    check_seen(&s);
    kube_framer_free(f);
}

static void decode_rejects_malformed_events(void **state) {
    (void)state;
    const struct {
        const char *line;
        const char *needle;
    } cases[] = {
        {"{\"type\":\"ADDED\",\"object\":{\"a\":", "not valid JSON"},
        {"not json at all", "not valid JSON"},
        {"[1,2,3]", "no \"type\""},
        {"{\"object\":{}}", "no \"type\""},
        {"{\"type\":7,\"object\":{}}", "no \"type\""},
        {"{\"type\":\"EXPLODED\",\"object\":{}}", "unknown type \"EXPLODED\""},
        {"{\"type\":\"ADDED\"}", "no \"object\""},
        {"{\"type\":\"ADDED\",\"object\":\"pod\"}", "no \"object\""},
        {"{\"type\":\"ADDED\",\"object\":{}} trailing", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kube_event ev;
        kube_error e;
        kube_error_clear(&e);
        int rc = kube_event_decode(cases[i].line, strlen(cases[i].line), &ev, &e);
        assert_int_equal(rc, KUBE_EDECODE);
        assert_int_equal(e.code, KUBE_EDECODE);
        assert_null(ev.object);
        if (strstr(e.msg, cases[i].needle) == NULL)
            fail_msg("case %zu: message '%s' lacks '%s'", i, e.msg, cases[i].needle);
    }
}

static void decode_keeps_object_and_resource_version(void **state) {
    (void)state;
    const char *l = "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\","
                    "\"resourceVersion\":\"42\"}}}";
    kube_event ev;
    assert_int_equal(kube_event_decode(l, strlen(l), &ev, NULL), KUBE_OK);
    assert_int_equal(ev.type, KUBE_EVENT_MODIFIED);
    assert_string_equal(ev.resource_version, "42");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(ev.object, "metadata"), "name")), "a");
    kube_event_clear(&ev);
    assert_null(ev.object);
    assert_string_equal(kube_event_type_name((kube_event_type)99), "UNKNOWN");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(whole_stream_in_one_chunk),
        cmocka_unit_test(split_at_every_byte_offset),
        cmocka_unit_test(split_at_every_pair_of_offsets_near_line_ends),
        cmocka_unit_test(one_byte_at_a_time_and_random_chunks),
        cmocka_unit_test(line_longer_than_the_bound_is_refused),
        cmocka_unit_test(callback_can_stop_the_feed),
        cmocka_unit_test(reset_forgets_a_partial_line),
        cmocka_unit_test(decode_rejects_malformed_events),
        cmocka_unit_test(decode_keeps_object_and_resource_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
