/*
 * forbidden.h - the slow retry of jobs whose creates or binds the API server
 * refused as Forbidden (HTTP 403).
 *
 * A 400 or 422 is the spec's fault and waits for a new spec; a 403 is the
 * operator's RBAC, which an admin fixes without touching the job. So a
 * Forbidden job is tried again after 30 s, then 60 s, 120 s ... at most every
 * 10 minutes (the delays configurable for tests), and at once when its spec
 * changes: a fixed rule heals the job within the delay, and a rule never
 * fixed costs one attempt per 10 minutes (the operator stays idle between).
 * The gate lives in the operator's memory: a restarted operator tries once
 * at start, then backs off again.
 *
 * Thread-safe (one mutex); the caller passes the monotonic clock.
 */
#ifndef AREAL_OPERATOR_FORBIDDEN_H
#define AREAL_OPERATOR_FORBIDDEN_H

#include <pthread.h>
#include <stdint.h>

#include "areal/keyset.h"

#define FORBIDDEN_FIRST_MS 30000L
#define FORBIDDEN_MAX_MS   600000L

typedef struct forbidden_gate {
    pthread_mutex_t mu;
    long first_ms, max_ms;
    areal_keyset gen, attempts, retry_at; /* job key -> generation, refusals, ms */
} forbidden_gate;

/* An empty gate; first_ms/max_ms <= 0 take FORBIDDEN_FIRST_MS/FORBIDDEN_MAX_MS. */
void forbidden_init(forbidden_gate *g, long first_ms, long max_ms);
void forbidden_free(forbidden_gate *g);

/*
 * Job `key` at generation `gen` was refused Forbidden at now_ms: returns the
 * delay before the next attempt (first_ms doubling per refusal of the same
 * generation, at most max_ms) and its ordinal in *attempt (1 for the first
 * refusal; NULL allowed).
 */
long forbidden_refused(forbidden_gate *g, const char *key, int64_t gen, int64_t now_ms,
                       int *attempt);

/*
 * The ms job `key` at generation `gen` must still wait (> 0), or 0: go - it
 * was never refused, its delay is over, or its spec changed since (which
 * forgets the refusals).
 */
long forbidden_wait(forbidden_gate *g, const char *key, int64_t gen, int64_t now_ms);

/* Forgets `key` (its attempt went through, or the job is gone). */
void forbidden_clear(forbidden_gate *g, const char *key);

#endif
