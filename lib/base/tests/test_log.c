/*
 * test_log.c - structured log records (areal/log.h): a message and fields full
 * of quotes, newlines, control bytes and invalid UTF-8 stay one line that
 * jansson parses back to the same text (invalid bytes as U+FFFD); random
 * bytes likewise; an oversized record is cut, still valid and marked; the
 * text form is one line; records below the level are dropped; the
 * environment picks the format.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "areal/log.h"

static char rec[AREAL_LOG_LINE_MAX];

/* Parses one record: exactly one line, a JSON object (caller decrefs). */
static json_t *parse_one_line(const char *s, size_t n) {
    assert_true(n > 0);
    assert_int_equal(s[n - 1], '\n');
    assert_null(memchr(s, '\n', n - 1));
    assert_null(memchr(s, '\0', n));
    json_error_t je;
    json_t *j = json_loadb(s, n, 0, &je);
    if (j == NULL)
        fail_msg("not JSON (%s at %d): %s", je.text, je.position, s);
    assert_true(json_is_object(j));
    return j;
}

static const char *str(json_t *o, const char *key) {
    const char *v = json_string_value(json_object_get(o, key));
    if (v == NULL)
        fail_msg("no string field %s", key);
    return v;
}

#define FFFD "\xef\xbf\xbd"

static void hostile_message_is_one_valid_line(void **state) {
    (void)state;
    const char *msg = "pods \"x\" already exists\nsecond line\r\ttab \\ back \x01\x1b[31m"
                      " bad \xff lone \xc3 overlong \xc0\xaf surrogate \xed\xa0\x80 ok \xc3\xa9 "
                      "\xf0\x9f\x98\x80 del \x7f end";
    const char *want = "pods \"x\" already exists\nsecond line\r\ttab \\ back \x01\x1b[31m"
                       " bad " FFFD " lone " FFFD " overlong " FFFD FFFD
                       " surrogate " FFFD FFFD FFFD " ok \xc3\xa9 \xf0\x9f\x98\x80 del \x7f end";
    size_t n = areal_log_format_record(
        rec, sizeof rec, AREAL_LOG_JSON, AREAL_LOG_WARN, "contr\"oller",
        AREAL_FIELDS({"job", "ns/\"quoted\"\n"}, {"bad\xffkey", "\xfe"}, {"none", NULL}), msg);
    json_t *j = parse_one_line(rec, n);
    assert_string_equal(str(j, "msg"), want);
    assert_string_equal(str(j, "level"), "warn");
    assert_string_equal(str(j, "component"), "contr\"oller");
    assert_string_equal(str(j, "job"), "ns/\"quoted\"\n");
    assert_string_equal(str(j, "bad" FFFD "key"), FFFD);
    assert_true(json_is_null(json_object_get(j, "none")));
    assert_null(json_object_get(j, "truncated"));
    const char *ts = str(j, "ts"); /* 2026-12-01T10:40:00.123Z */
    assert_int_equal(strlen(ts), 24);
    assert_int_equal(ts[10], 'T');
    assert_int_equal(ts[23], 'Z');
    /* no control byte in the line itself: nothing a terminal or a log shipper could choke on */
    for (size_t i = 0; i + 1 < n; i++)
        assert_true((unsigned char)rec[i] >= 0x20 && rec[i] != 0x7f);
    json_decref(j);
}

static void random_bytes_stay_valid(void **state) {
    (void)state;
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    char msg[300], val[100];
    for (int it = 0; it < 3000; it++) {
        size_t ml = 0, vl = 0;
        for (; ml < sizeof msg - 1; ml++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            msg[ml] = (char)(x % 255 + 1); /* no NUL: messages are C strings */
            if (x % 97 == 0)
                break;
        }
        msg[ml] = '\0';
        for (; vl < sizeof val - 1 && (x >> 8) % 31 != 0; vl++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            val[vl] = (char)(x % 255 + 1);
        }
        val[vl] = '\0';
        size_t n = areal_log_format_record(rec, sizeof rec, AREAL_LOG_JSON, AREAL_LOG_INFO, "fuzz",
                                           AREAL_FIELDS({val, msg}, {"v", val}), msg);
        json_decref(parse_one_line(rec, n));
        n = areal_log_format_record(rec, sizeof rec, AREAL_LOG_TEXT, AREAL_LOG_INFO, "fuzz",
                                    AREAL_FIELDS({"v", val}), msg);
        assert_int_equal(rec[n - 1], '\n');
        assert_null(memchr(rec, '\n', n - 1));
    }
}

static void oversized_record_is_cut_and_marked(void **state) {
    (void)state;
    static char big[100000];
    memset(big, '"', sizeof big - 1); /* every byte doubles when escaped */
    big[sizeof big - 1] = '\0';
    areal_log_field fields[64];
    for (int i = 0; i < 63; i++)
        fields[i] = (areal_log_field){"field", big + 1000};
    fields[63] = (areal_log_field){NULL, NULL};
    size_t n =
        areal_log_format_record(rec, sizeof rec, AREAL_LOG_JSON, AREAL_LOG_ERROR, "c", fields, big);
    assert_true(n <= AREAL_LOG_LINE_MAX);
    json_t *j = parse_one_line(rec, n);
    assert_true(json_is_true(json_object_get(j, "truncated")));
    assert_true(strlen(str(j, "msg")) > 1000);
    json_decref(j);
    /* escapes are never split: a cut inside a run of \u0001 */
    memset(big, 1, 5000);
    big[5000] = '\0';
    n = areal_log_format_record(rec, sizeof rec, AREAL_LOG_JSON, AREAL_LOG_ERROR, NULL, NULL, big);
    json_decref(parse_one_line(rec, n));
}

static void text_form_is_one_escaped_line(void **state) {
    (void)state;
    size_t n =
        areal_log_format_record(rec, sizeof rec, AREAL_LOG_TEXT, AREAL_LOG_WARN, "controller",
                                AREAL_FIELDS({"job", "ns/x"}, {"why", "a b\n"}),
                                "create failed:\npods \"x\" already exists");
    assert_int_equal(rec[n - 1], '\n');
    assert_null(memchr(rec, '\n', n - 1));
    assert_non_null(strstr(rec, " WARN  controller: create failed:\\npods \"x\" already exists "
                                "job=ns/x why=\"a b\\n\"\n"));
}

static void level_filters_and_sink(void **state) {
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    areal_log_configure(f, AREAL_LOG_JSON, AREAL_LOG_INFO);
    assert_false(areal_log_enabled(AREAL_LOG_DEBUG));
    areal_log(AREAL_LOG_DEBUG, "t", NULL, "hidden %d", 1);
    areal_log(AREAL_LOG_INFO, "t", AREAL_FIELDS({"k", "v"}), "shown %d", 2);
    areal_log(AREAL_LOG_ERROR, NULL, NULL, "also %s", "shown");
    fflush(f);
    assert_null(strstr(buf, "hidden"));
    char *second = strchr(buf, '\n') + 1;
    json_t *j = parse_one_line(buf, (size_t)(second - buf));
    assert_string_equal(str(j, "msg"), "shown 2");
    assert_string_equal(str(j, "k"), "v");
    json_decref(j);
    j = parse_one_line(second, strlen(second));
    assert_string_equal(str(j, "level"), "error");
    assert_null(json_object_get(j, "component"));
    json_decref(j);
    fclose(f);
    free(buf);
    areal_log_configure(NULL, AREAL_LOG_JSON, AREAL_LOG_INFO);
}

static void environment_picks_format_and_level(void **state) {
    (void)state;
    setenv("AREAL_LOG_FORMAT", "text", 1);
    setenv("AREAL_LOG_LEVEL", "error", 1);
    areal_log_setup();
    assert_false(areal_log_enabled(AREAL_LOG_WARN));
    assert_true(areal_log_enabled(AREAL_LOG_ERROR));
    setenv("AREAL_LOG_FORMAT", "json", 1);
    setenv("AREAL_LOG_LEVEL", "debug", 1);
    areal_log_setup();
    assert_true(areal_log_enabled(AREAL_LOG_DEBUG));
    unsetenv("AREAL_LOG_FORMAT");
    unsetenv("AREAL_LOG_LEVEL");
    areal_log_configure(NULL, AREAL_LOG_JSON, AREAL_LOG_INFO);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hostile_message_is_one_valid_line),
        cmocka_unit_test(random_bytes_stay_valid),
        cmocka_unit_test(oversized_record_is_cut_and_marked),
        cmocka_unit_test(text_form_is_one_escaped_line),
        cmocka_unit_test(level_filters_and_sink),
        cmocka_unit_test(environment_picks_format_and_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
