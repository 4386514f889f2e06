/*
 * test_registry.c - the rollout-server registry over the store: names are
 * listed in order of first announcement with their current values, a
 * deregistered one is left out, a name announced twice is listed once, a
 * reader resumes where it stopped, a slot whose name is not written yet ends
 * the read without losing it, and bad names are refused by length.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "areal/comm/registry.h"
#include "areal/comm/store.h"

typedef struct seen {
    char names[8][AREAL_REGISTRY_NAME_MAX];
    char values[8][64];
    int n;
} seen;

static void collect(void *ctx, const char *name, const char *value) {
    seen *s = ctx;
    assert_true(s->n < 8);
    snprintf(s->names[s->n], sizeof s->names[0], "%s", name);
    snprintf(s->values[s->n], sizeof s->values[0], "%s", value);
    s->n++;
}

static areal_store_server *srv;
static areal_store *st;

static int setup(void **state) {
    (void)state;
    int port = 0;
    areal_error e;
    if (areal_store_server_start("127.0.0.1", 0, &srv, &port, &e) != AREAL_OK)
        return -1;
    return areal_store_connect("127.0.0.1", port, 2000, 5000, &st, &e);
}

static int teardown(void **state) {
    (void)state;
    areal_store_close(st);
    areal_store_server_stop(srv);
    return 0;
}

static seen list(areal_registry_reader *r) {
    seen s = {0};
    areal_error e;
    assert_int_equal(areal_registry_list(st, r, collect, &s, &e), AREAL_OK);
    return s;
}

static void lists_current_registrations(void **state) {
    (void)state;
    areal_registry_reader r = {0};
    areal_error e;
    seen s = list(&r);
    assert_int_equal(s.n, 0); /* an empty store: the counter reads 0 */
    assert_int_equal(areal_registry_announce(st, "job-rollout-0", "{\"v\":0}", &e), AREAL_OK);
    assert_int_equal(areal_registry_announce(st, "job-rollout-1", "{\"v\":1}", &e), AREAL_OK);
    s = list(&r);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.names[0], "job-rollout-0");
    assert_string_equal(s.values[1], "{\"v\":1}");
    /* an update changes the value, not the order */
    assert_int_equal(areal_registry_update(st, "job-rollout-0", "{\"v\":5}", &e), AREAL_OK);
    s = list(&r);
    assert_string_equal(s.values[0], "{\"v\":5}");
    /* deregistered: left out; announced again (a replacement pod): back, listed once */
    assert_int_equal(areal_registry_remove(st, "job-rollout-0", &e), AREAL_OK);
    bool present = true;
    assert_int_equal(areal_registry_present(st, "job-rollout-0", &present, &e), AREAL_OK);
    assert_false(present);
    s = list(&r);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.names[0], "job-rollout-1");
    assert_int_equal(areal_registry_announce(st, "job-rollout-0", "{\"v\":9}", &e), AREAL_OK);
    s = list(&r);
    assert_int_equal(s.n, 2);
    assert_int_equal(r.n, 2);
    assert_string_equal(s.values[0], "{\"v\":9}");
    /* a second reader sees the same set from scratch */
    areal_registry_reader r2 = {0};
    s = list(&r2);
    assert_int_equal(s.n, 2);
    assert_int_equal(r2.read, 3);
    areal_registry_reader_free(&r);
    areal_registry_reader_free(&r2);
}

static void unwritten_slot_waits_for_its_name(void **state) {
    (void)state;
    areal_error e;
    areal_registry_reader r = {0};
    seen s = list(&r);
    long before = r.read;
    /* an announcer between its add and its slot write */
    int64_t n = 0;
    assert_int_equal(areal_store_add(st, AREAL_REGISTRY_INDEX, 1, &n, &e), AREAL_OK);
    assert_int_equal(areal_store_set(st, AREAL_REGISTRY_PREFIX "late", "{}", 2, &e), AREAL_OK);
    s = list(&r);
    assert_int_equal(r.read, before);
    for (int i = 0; i < s.n; i++)
        assert_string_not_equal(s.names[i], "late");
    char slot[64];
    snprintf(slot, sizeof slot, "%s/%lld", AREAL_REGISTRY_INDEX, (long long)n);
    assert_int_equal(areal_store_set(st, slot, "late", 4, &e), AREAL_OK);
    s = list(&r);
    assert_int_equal(r.read, before + 1);
    assert_string_equal(s.names[s.n - 1], "late");
    areal_registry_reader_free(&r);
}

static void bad_names_are_refused(void **state) {
    (void)state;
    areal_error e;
    assert_int_equal(areal_registry_announce(st, "", "{}", &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "1..255 bytes"));
    char long_name[400];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    assert_int_equal(areal_registry_update(st, long_name, "{}", &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "not 399"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lists_current_registrations),
        cmocka_unit_test(unwritten_slot_waits_for_its_name),
        cmocka_unit_test(bad_names_are_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
