/*
 * loop_status.c - the job loop's /status snapshot (see loop_status.h).
 *
 * running_ahead is the staleness term of AReaL's capacity formula,
 * (eta + v + 1) x B - (accepted + running) <= 0: the rollouts are as far
 * ahead of the trainer as eta allows (the max_concurrent term is a
 * throughput cap, not a lead). waiting_for_samples: the step waited for
 * rollouts more than 10 % of its wall time.
 */
#include <string.h>

#include "loop_status.h"

void loop_status_init(loop_status *s, areal_trainer_http *http, long total_steps, long B, long eta,
                      int n_servers) {
    memset(s, 0, sizeof *s);
    s->http = http;
    s->batch_size = B;
    s->eta = eta;
    s->st.phase = AREAL_PHASE_STARTING;
    s->st.total_steps = total_steps;
    s->st.staleness_bound = eta;
    s->st.servers = n_servers;
    areal_trainer_http_publish(s->http, &s->st, false);
}

void loop_status_phase(loop_status *s, areal_train_phase phase, long step, long version) {
    s->st.phase = phase;
    s->st.step = step;
    s->st.policy_version = version;
    areal_trainer_http_publish(s->http, &s->st, false);
}

static void servers_of(loop_status *s, areal_rollout_ctl *ctl, int *up) {
    int known = 0;
    *up = 0;
    areal_rollout_ctl_servers(ctl, &known, up);
    s->st.servers = *up;
    areal_staleness c = areal_rollout_ctl_counters(ctl);
    long v = areal_rollout_ctl_version(ctl);
    s->st.running_ahead = (s->eta + v + 1) * s->batch_size - (c.accepted + c.running) <= 0;
}

void loop_status_waiting(loop_status *s, areal_rollout_ctl *ctl) {
    int up;
    servers_of(s, ctl, &up);
    areal_train_phase ph = up == 0 ? AREAL_PHASE_WAITING_FOR_SERVERS : AREAL_PHASE_TRAINING;
    s->st.phase = ph;
    s->st.waiting_for_samples = true; /* a whole wait timeout passed without a batch */
    areal_trainer_http_publish(s->http, &s->st, false);
}

void loop_status_step(loop_status *s, areal_rollout_ctl *ctl, const areal_step_stats *st, long step,
                      long version, double t_wait, double t_train, double sync_s) {
    int up;
    servers_of(s, ctl, &up);
    areal_train_status *o = &s->st;
    o->phase = AREAL_PHASE_TRAINING;
    o->step = step;
    o->policy_version = version;
    o->has_reward = true;
    o->reward_mean = st->reward_mean;
    long n = 0;
    double lag = 0;
    for (int i = 0; i < AREAL_STALENESS_BUCKETS; i++) {
        n += st->staleness[i];
        lag += (double)i * (double)st->staleness[i]; /* the last bucket counts as its floor */
    }
    o->has_staleness = n > 0;
    o->staleness_max = st->max_staleness;
    o->staleness_mean = n > 0 ? lag / (double)n : 0;
    double wall = t_wait + t_train + 1e-9; /* as the progress line's tokens_per_s */
    o->samples_per_second = (double)st->n_seqs / wall;
    o->tokens_per_second = (double)st->n_tokens / wall;
    o->has_sync = true;
    o->last_weight_sync_seconds = sync_s;
    o->rollout_wait_seconds = t_wait;
    o->train_seconds = t_train;
    o->waiting_for_samples = t_wait > 0.1 * (t_wait + t_train + sync_s);
    areal_trainer_http_publish(s->http, o, true);
}

void loop_status_eval(loop_status *s, double accuracy) {
    s->st.has_eval = true;
    s->st.eval_accuracy = accuracy;
    areal_trainer_http_publish(s->http, &s->st, false);
}

void loop_status_checkpoint(loop_status *s, long step) {
    s->st.has_checkpoint = true;
    s->st.checkpoint_step = step;
    areal_trainer_http_publish(s->http, &s->st, false);
}
