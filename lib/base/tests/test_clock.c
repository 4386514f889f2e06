/* test_clock.c - the clocks of lib/base (areal/clock.h): monotonic readings
 * never go back and agree with each other; wall readings agree with time(). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "areal/clock.h"

static void test_monotonic(void **state) {
    (void)state;
    int64_t ms = areal_now_ms(), us = areal_now_us();
    double s = areal_mono_s();
    /* the three read the same clock, a few microseconds apart */
    assert_true(us / 1000 - ms >= 0 && us / 1000 - ms < 1000);
    assert_true(s * 1000.0 - (double)ms >= 0 && s * 1000.0 - (double)ms < 1000.0);
    int64_t prev = areal_now_us();
    for (int i = 0; i < 100000; i++) {
        int64_t t = areal_now_us();
        assert_true(t >= prev);
        prev = t;
    }
    struct timespec d = {0, 20 * 1000 * 1000};
    int64_t before = areal_now_ms();
    nanosleep(&d, NULL);
    assert_true(areal_now_ms() - before >= 20);
}

static void test_wall(void **state) {
    (void)state;
    int64_t t = (int64_t)time(NULL);
    int64_t ms = areal_wall_ms(), us = areal_wall_us();
    assert_true(ms / 1000 - t >= 0 && ms / 1000 - t <= 1);
    assert_true(us / 1000 - ms >= 0 && us / 1000 - ms < 1000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_monotonic),
        cmocka_unit_test(test_wall),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
