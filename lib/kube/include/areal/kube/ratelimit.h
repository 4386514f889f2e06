/*
 * ratelimit.h - a token bucket: `qps` tokens per second, at most `burst` saved.
 *
 * What: the client takes one token before every request it sends (retries
 * included), so an operator in a hot loop cannot flood the API server; the
 * work queue will reuse it for per-key pacing.
 * How: tokens are a double refilled from CLOCK_MONOTONIC on every take, under a
 * mutex; a take that finds less than one token reserves it (the count goes
 * negative) and sleeps outside the lock for the deficit, so concurrent takers
 * queue up fairly instead of spinning.
 * Rejected: a fixed-interval ticker thread (a thread per client for nothing).
 */
#ifndef AREAL_KUBE_RATELIMIT_H
#define AREAL_KUBE_RATELIMIT_H

#include <pthread.h>

typedef struct kube_ratelimit {
    pthread_mutex_t mu;
    double qps;    /* <= 0: unlimited */
    double burst;  /* bucket size, >= 1 */
    double tokens; /* may go negative: reserved by sleepers */
    double last;   /* monotonic seconds of the last refill */
} kube_ratelimit;

/* Initialises a full bucket. burst < 1 is taken as 1. Returns 0, or -1 if the mutex failed. */
int kube_ratelimit_init(kube_ratelimit *rl, double qps, int burst);

/* Releases the mutex. */
void kube_ratelimit_destroy(kube_ratelimit *rl);

/*
 * Takes one token, sleeping until it is available. Returns the seconds it
 * waited (0 when a token was ready). Thread-safe.
 */
double kube_ratelimit_take(kube_ratelimit *rl);

/* Monotonic clock in seconds (shared helper). */
double kube_now(void);

/* Sleeps `ms` milliseconds (restarting after signals). */
void kube_sleep_ms(long ms);

#endif
