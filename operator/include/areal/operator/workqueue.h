/*
 * workqueue.h - the controller's rate-limited work queue (client-go's shape).
 *
 * Invariants, under one mutex:
 *   - a key is in `dirty` iff it is waiting to be processed (queued, or to be
 *     queued again when its current processing ends);
 *   - a key is in `processing` while a worker holds it; a key is never handed
 *     to two workers at once;
 *   - adding a key that is already dirty does nothing, so a burst of events
 *     for one object collapses into one reconcile;
 *   - adding a key that is being processed marks it dirty; done() queues it
 *     again, so the latest change is always seen.
 * Delayed adds wait in a min-heap ordered by due time (earliest wins for a
 * key); a worker blocked in get() wakes for the next due time, so no timer
 * thread is needed. add_rate_limited() delays by base * 2^failures (capped)
 * until forget() resets the key.
 *
 * Ownership: the queue copies every key; get() copies into the caller's buffer.
 * Thread-safe: any thread may call any function; free only after shutdown and
 * after every worker has returned from get().
 */
#ifndef AREAL_OPERATOR_WORKQUEUE_H
#define AREAL_OPERATOR_WORKQUEUE_H

#include <stddef.h>

#define WORKQUEUE_KEY_MAX 320 /* namespace (63) + '/' + name (253) + NUL, rounded */

typedef struct workqueue workqueue;

typedef struct workqueue_config {
    long base_delay_ms; /* first rate-limited retry delay (default 5) */
    long max_delay_ms;  /* cap of the exponential delay (default 300000) */
} workqueue_config;

/* A new queue (cfg may be NULL for defaults); 0, or -1 when out of memory. */
int workqueue_new(const workqueue_config *cfg, workqueue **out);

/* Frees the queue and every key it holds. */
void workqueue_free(workqueue *q);

/*
 * Adds `key` now. 0 on success (also when it was already waiting), -1 when out
 * of memory, -2 when the key is empty or too long, -3 after shutdown.
 */
int workqueue_add(workqueue *q, const char *key);

/* Adds `key` once `delay_ms` has passed (<= 0: now). Same results as add. */
int workqueue_add_after(workqueue *q, const char *key, long delay_ms);

/* Adds `key` after its rate-limit delay and counts one more failure. */
int workqueue_add_rate_limited(workqueue *q, const char *key);

/* Forgets the failures of `key` (after a successful reconcile). */
void workqueue_forget(workqueue *q, const char *key);

/* Failures counted for `key` since the last forget. */
int workqueue_failures(workqueue *q, const char *key);

/*
 * Waits up to `timeout_ms` (< 0: forever) for a key and copies it to `buf`
 * (`cap` >= WORKQUEUE_KEY_MAX). Returns 1 with a key the caller now holds and
 * must pass to done(), 0 once the queue is shut down and drained, -1 on timeout.
 */
int workqueue_get(workqueue *q, char *buf, size_t cap, long timeout_ms);

/* Ends the processing of `key`; queues it again if it was added meanwhile. */
void workqueue_done(workqueue *q, const char *key);

/*
 * Stops the queue: adds fail, delayed keys are dropped, get() returns the
 * keys still queued and then 0. Workers finish what they hold.
 */
void workqueue_shutdown(workqueue *q);

/* Keys queued now (not counting delayed or in-flight ones). */
size_t workqueue_len(workqueue *q);

#endif
