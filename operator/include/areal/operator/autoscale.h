/*
 * autoscale.h - the built-in rollout autoscaling policy (spec.rollout.target):
 * how many rollout servers a job should have, from what its trainer says.
 *
 * What: a pure function over the trainer's /status samples
 * (waiting_for_samples: the last step waited for rollouts; running_ahead:
 * admission is blocked by the staleness bound; servers: the servers it uses).
 * One more server when the trainer has waited for samples in every sample of
 * the scale-up window; one fewer when rollouts have run ahead in every sample
 * of the (longer) scale-down window; always within [min, max]. It never
 * flaps: a change needs its signal to hold for a whole window, the windows
 * restart after every change, nothing changes while the trainer's server
 * count has not reached the last decision (a scale still in progress), and a
 * cooldown follows each change.
 * Rejected: a proportional rule on a metric (the HPA's): the trainer's two
 * signals already say which way to go, and one server at a time keeps each
 * step's effect observable; the HPA on the scale subresource remains for
 * users who want a metric target.
 */
#ifndef AREAL_OPERATOR_AUTOSCALE_H
#define AREAL_OPERATOR_AUTOSCALE_H

#include <stdbool.h>

typedef struct autoscale_policy {
    int min_replicas, max_replicas; /* bounds (min >= 0, max >= min) */
    double up_window_s;             /* waiting_for_samples must hold this long (default 20) */
    double down_window_s;           /* running_ahead must hold this long (default 60) */
    double cooldown_s;              /* no change this long after a change (default 30) */
} autoscale_policy;

/* One /status reading: `t_s` seconds on any monotonic clock. */
typedef struct autoscale_sample {
    double t_s;
    bool waiting_for_samples, running_ahead;
    int servers; /* -1: the trainer did not say */
} autoscale_sample;

/* What the policy remembers between samples (zero it to start). */
typedef struct autoscale_state {
    bool started;
    double up_since_s, down_since_s; /* start of the current run; < 0: none */
    double last_change_s;            /* < 0: never */
    int decided;                     /* the last decision; 0 before the first */
} autoscale_state;

/* Why a decision is what it is (for Events and logs). */
typedef enum autoscale_reason {
    AUTOSCALE_HOLD,        /* no signal held for its window */
    AUTOSCALE_UP,          /* +1: the trainer waited for samples for the window */
    AUTOSCALE_DOWN,        /* -1: rollouts ran ahead for the window */
    AUTOSCALE_COOLDOWN,    /* a change was made less than cooldown ago */
    AUTOSCALE_IN_PROGRESS, /* the trainer's servers have not reached the last decision */
    AUTOSCALE_BOUNDED,     /* `current` was outside [min, max]: brought inside */
} autoscale_reason;

/*
 * Feeds one sample and returns the replicas the job should have, given that
 * it has `current` now (spec.rollout.replicas). Samples must come in time
 * order. A policy with max < min or negative bounds returns `current`
 * unchanged (*why = AUTOSCALE_HOLD). `why` may be NULL.
 */
int autoscale_decide(const autoscale_policy *p, autoscale_state *st, const autoscale_sample *s,
                     int current, autoscale_reason *why);

/* "hold", "scale-up", ... */
const char *autoscale_reason_name(autoscale_reason r);

#endif
