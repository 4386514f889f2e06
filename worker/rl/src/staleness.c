/*
 * staleness.c - AReaL's staleness capacity formula and its counters
 * (areal/infra/staleness_manager.py), see staleness.h.
 */
#include "areal/rl/staleness.h"

void areal_staleness_init(areal_staleness *s, long max_concurrent, long batch_size, long eta) {
    s->batch_size = batch_size;
    /* AReaL's InferenceEngineConfig: max_concurrent_rollouts None -> consumer_batch_size. */
    s->max_concurrent = max_concurrent > 0 ? max_concurrent : batch_size;
    s->eta = eta < 0 ? 0 : eta;
    s->enqueued = s->running = s->accepted = s->rejected = 0;
}

static long at_least_one(long v) {
    return v < 1 ? 1 : v;
}

long areal_staleness_capacity(const areal_staleness *s, long version) {
    long concurrency = at_least_one(s->max_concurrent) - s->running;
    long bs = at_least_one(s->batch_size);
    /* (eta + v + 1) * B - (accepted + running); eta may be "unbounded" (1e12), so
     * saturate instead of overflowing the product. */
    long factor = s->eta + version + 1;
    long max_samples;
    if (factor > 0 && bs > 0 && factor > __LONG_MAX__ / bs)
        max_samples = __LONG_MAX__ / 2;
    else
        max_samples = factor * bs;
    long staleness = max_samples - (s->accepted + s->running);
    return concurrency < staleness ? concurrency : staleness;
}

bool areal_staleness_can_submit(const areal_staleness *s, long version) {
    return areal_staleness_capacity(s, version) > 0;
}

long areal_staleness_pending_limit(const areal_staleness *s) {
    return (s->eta + 1) * s->batch_size;
}

void areal_staleness_on_enqueued(areal_staleness *s) {
    s->enqueued++;
}

void areal_staleness_on_submitted(areal_staleness *s) {
    s->enqueued--;
    s->running++;
}

void areal_staleness_on_accepted(areal_staleness *s) {
    s->running--;
    s->accepted++;
}

void areal_staleness_on_rejected(areal_staleness *s) {
    s->running--;
    s->rejected++;
}

void areal_staleness_on_version_recovered(areal_staleness *s, long version) {
    s->accepted = version * at_least_one(s->batch_size);
}
