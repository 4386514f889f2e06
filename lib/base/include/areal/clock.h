/*
 * clock.h - the project's clocks: monotonic time for deadlines, timeouts and
 * rates, and wall time for what is written into objects and logs.
 *
 * Monotonic readings (CLOCK_MONOTONIC) never go back and are only ever
 * compared with each other; wall readings (CLOCK_REALTIME) may jump and are
 * only ever shown or stored (a Lease's renewTime, an Event's timestamp). One
 * header, so no component keeps a private now_ms() of its own again.
 * Rejected: gettimeofday (wall only, obsolescent) and CLOCK_MONOTONIC_RAW
 * (not slewed by NTP, so its seconds drift from the kernel's timers).
 */
#ifndef AREAL_CLOCK_H
#define AREAL_CLOCK_H

#include <stdint.h>

/* Monotonic milliseconds / microseconds since an arbitrary origin. */
int64_t areal_now_ms(void);
int64_t areal_now_us(void);

/* Monotonic seconds as a double (rates, benchmarks, token buckets). */
double areal_mono_s(void);

/* Wall-clock milliseconds / microseconds since the Unix epoch. */
int64_t areal_wall_ms(void);
int64_t areal_wall_us(void);

#endif
