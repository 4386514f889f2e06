/* clock.c - see areal/clock.h. clock_gettime cannot fail for these two clocks
 * on Linux with a valid pointer, so the readings have no error path. */
#include "areal/clock.h"

#include <time.h>

static struct timespec read_clock(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts;
}

int64_t areal_now_ms(void) {
    struct timespec ts = read_clock(CLOCK_MONOTONIC);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t areal_now_us(void) {
    struct timespec ts = read_clock(CLOCK_MONOTONIC);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

double areal_mono_s(void) {
    struct timespec ts = read_clock(CLOCK_MONOTONIC);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t areal_wall_ms(void) {
    struct timespec ts = read_clock(CLOCK_REALTIME);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t areal_wall_us(void) {
    struct timespec ts = read_clock(CLOCK_REALTIME);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
