/*
 * staleness.h - AReaL's staleness manager (areal/infra/staleness_manager.py)
 * as a small state machine over counters of rollouts (one rollout = one
 * prompt's G samples):
 *
 *   capacity = min(max_concurrent - running,
 *                  (eta + version + 1) * B - (accepted + running))
 *
 * with eta = rollout.max_head_offpolicyness, B = consumer_batch_size and
 * version = completed weight updates. New rollouts may start while
 * capacity > 0; eta = 0 is synchronous RL. After recovery from a checkpoint
 * at version v, accepted = v * B (AReaL #1345), so the bound is not blown by
 * the version jump. Not thread-safe: the caller serialises the calls (the
 * rollout controller holds its own lock around them).
 */
#ifndef AREAL_RL_STALENESS_H
#define AREAL_RL_STALENESS_H

#include <stdbool.h>

/* eta for evaluation rollouts, which AReaL runs unbounded. */
#define AREAL_STALENESS_UNBOUNDED 1000000000000L

typedef struct areal_staleness {
    long max_concurrent; /* as given; <= 0 counts as 1 (AReaL max(1, .)) */
    long batch_size;     /* B; <= 0 counts as 1 */
    long eta;            /* >= 0 */
    long enqueued;       /* waiting in the input queue */
    long running;        /* submitted, not finished */
    long accepted;       /* finished and kept */
    long rejected;       /* finished and dropped (filtered, failed) */
} areal_staleness;

/*
 * Starts with all counters at 0. max_concurrent <= 0 means AReaL's None:
 * the consumer batch size.
 */
void areal_staleness_init(areal_staleness *s, long max_concurrent, long batch_size, long eta);

/* The capacity formula at policy `version`; may be negative. */
long areal_staleness_capacity(const areal_staleness *s, long version);

/* Whether one more rollout may start now: capacity > 0. */
bool areal_staleness_can_submit(const areal_staleness *s, long version);

/* AReaL's pending-input limit (eta + 1) * B. */
long areal_staleness_pending_limit(const areal_staleness *s);

/* Counter moves, one per event, as AReaL's on_rollout_* callbacks. */
void areal_staleness_on_enqueued(areal_staleness *s);  /* enqueued++ */
void areal_staleness_on_submitted(areal_staleness *s); /* enqueued--, running++ */
void areal_staleness_on_accepted(areal_staleness *s);  /* running--, accepted++ */
void areal_staleness_on_rejected(areal_staleness *s);  /* running--, rejected++ */

/* After restoring a checkpoint at `version`: accepted = version * B. */
void areal_staleness_on_version_recovered(areal_staleness *s, long version);

#endif
