/*
 * autoscale.c - the rollout autoscaling policy (see areal/operator/autoscale.h).
 *
 * How: each signal keeps the time its current unbroken run of true samples
 * began; a sample without the signal ends the run. The decision order is:
 * bounds, then a scale still in progress, then the cooldown, then up before
 * down (a trainer that waits for samples is losing time now; rollouts that
 * run ahead only waste GPUs). After a change both runs restart, so the next
 * change needs a full window of fresh evidence; samples taken while the
 * trainer's servers have not reached the last decision count for nothing
 * (they describe the capacity before it).
 */
#include "areal/operator/autoscale.h"

#include <stddef.h>

static double or_default(double v, double d) {
    return v > 0 ? v : d;
}

int autoscale_decide(const autoscale_policy *p, autoscale_state *st, const autoscale_sample *s,
                     int current, autoscale_reason *why) {
    autoscale_reason r = AUTOSCALE_HOLD;
    int want = current;
    if (p->min_replicas < 0 || p->max_replicas < p->min_replicas) {
        if (why)
            *why = r;
        return current;
    }
    double up_w = or_default(p->up_window_s, 20), down_w = or_default(p->down_window_s, 60);
    double cool = or_default(p->cooldown_s, 30);
    if (!st->started) {
        st->started = true;
        st->up_since_s = st->down_since_s = st->last_change_s = -1;
        st->decided = current;
    }
    /* the runs of evidence */
    if (s->waiting_for_samples && !s->running_ahead) {
        if (st->up_since_s < 0)
            st->up_since_s = s->t_s;
    } else {
        st->up_since_s = -1;
    }
    if (s->running_ahead && !s->waiting_for_samples) {
        if (st->down_since_s < 0)
            st->down_since_s = s->t_s;
    } else {
        st->down_since_s = -1;
    }
    if (current < p->min_replicas || current > p->max_replicas) {
        want = current < p->min_replicas ? p->min_replicas : p->max_replicas;
        r = AUTOSCALE_BOUNDED;
    } else if (s->servers >= 0 && st->decided == current && s->servers != current) {
        /* what the trainer sees now is about the old capacity: no evidence */
        r = AUTOSCALE_IN_PROGRESS;
        st->up_since_s = st->down_since_s = -1;
    } else if (st->last_change_s >= 0 && s->t_s - st->last_change_s < cool) {
        r = AUTOSCALE_COOLDOWN;
    } else if (st->up_since_s >= 0 && s->t_s - st->up_since_s >= up_w &&
               current < p->max_replicas) {
        want = current + 1;
        r = AUTOSCALE_UP;
    } else if (st->down_since_s >= 0 && s->t_s - st->down_since_s >= down_w &&
               current > p->min_replicas) {
        want = current - 1;
        r = AUTOSCALE_DOWN;
    }
    if (want != current) {
        st->last_change_s = s->t_s;
        st->up_since_s = st->down_since_s = -1;
    }
    st->decided = want;
    if (why)
        *why = r;
    return want;
}

const char *autoscale_reason_name(autoscale_reason r) {
    static const char *const names[] = {"hold",     "scale-up",    "scale-down",
                                        "cooldown", "in-progress", "bounded"};
    return (size_t)r < sizeof names / sizeof names[0] ? names[r] : "unknown";
}
