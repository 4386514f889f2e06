/*
 * test_forbidden.c - the Forbidden retry gate (areal/operator/forbidden.h)
 * on explicit clocks: the delays double from the first to the cap, a job
 * waits exactly its delay, a new generation goes at once and starts afresh,
 * clearing forgets, and jobs are independent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "areal/operator/forbidden.h"

static void delays_double_to_the_cap(void **state) {
    (void)state;
    forbidden_gate g;
    forbidden_init(&g, 0, 0);
    assert_int_equal(g.first_ms, 30000);
    assert_int_equal(g.max_ms, 600000);
    const long want[] = {30000, 60000, 120000, 240000, 480000, 600000, 600000, 600000};
    int64_t now = 1000;
    for (int i = 0; i < 8; i++) {
        int attempt = 0;
        long d = forbidden_refused(&g, "ns/a", 1, now, &attempt);
        assert_int_equal(d, want[i]);
        assert_int_equal(attempt, i + 1);
        assert_int_equal(forbidden_wait(&g, "ns/a", 1, now), d);
        assert_int_equal(forbidden_wait(&g, "ns/a", 1, now + d - 1), 1);
        assert_int_equal(forbidden_wait(&g, "ns/a", 1, now + d), 0); /* its time: go */
        now += d;
    }
    forbidden_free(&g);
}

static void new_spec_goes_at_once_and_afresh(void **state) {
    (void)state;
    forbidden_gate g;
    forbidden_init(&g, 100, 250);
    forbidden_refused(&g, "ns/a", 3, 0, NULL);
    forbidden_refused(&g, "ns/a", 3, 100, NULL);
    assert_int_equal(forbidden_refused(&g, "ns/a", 3, 300, NULL), 250); /* 400 capped */
    assert_true(forbidden_wait(&g, "ns/a", 3, 310) > 0);
    assert_int_equal(forbidden_wait(&g, "ns/a", 4, 310), 0); /* a new spec */
    int attempt = 0;
    assert_int_equal(forbidden_refused(&g, "ns/a", 4, 320, &attempt), 100);
    assert_int_equal(attempt, 1);
    /* refused at another generation without a wait in between: afresh too */
    assert_int_equal(forbidden_refused(&g, "ns/a", 5, 330, &attempt), 100);
    assert_int_equal(attempt, 1);
    /* others are untouched; clear forgets */
    assert_int_equal(forbidden_wait(&g, "ns/b", 1, 330), 0);
    forbidden_refused(&g, "ns/b", 1, 330, NULL);
    forbidden_clear(&g, "ns/a");
    assert_int_equal(forbidden_wait(&g, "ns/a", 5, 331), 0);
    assert_int_equal(forbidden_refused(&g, "ns/a", 5, 331, &attempt), 100);
    assert_int_equal(attempt, 1);
    assert_int_equal(forbidden_wait(&g, "ns/b", 1, 331), 99);
    forbidden_free(&g);
    forbidden_init(&g, 500, 100); /* a cap below the first delay: the first */
    assert_int_equal(forbidden_refused(&g, "k", 1, 0, NULL), 500);
    assert_int_equal(forbidden_refused(&g, "k", 1, 0, NULL), 500);
    forbidden_free(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(delays_double_to_the_cap),
        cmocka_unit_test(new_spec_goes_at_once_and_afresh),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
