/*
 * loop_status.h - private to the job loop: its /status snapshot (trainer_http.h)
 * kept and published as the loop moves, from the numbers of the progress
 * line. Kept out of train_loop.c so the loop reads as AReaL's step order.
 */
#ifndef AREAL_TRAIN_LOOP_STATUS_H
#define AREAL_TRAIN_LOOP_STATUS_H

#include "areal/train/rollout_ctl.h"
#include "areal/train/trainer.h"
#include "areal/train/trainer_http.h"

typedef struct loop_status {
    areal_trainer_http *http; /* nullable: nothing is published */
    areal_train_status st;
    long batch_size, eta;
} loop_status;

void loop_status_init(loop_status *s, areal_trainer_http *http, long total_steps, long B, long eta,
                      int n_servers);

/* A phase change (with the current step / version). */
void loop_status_phase(loop_status *s, areal_train_phase phase, long step, long version);

/* The servers' state while the loop waits for rollouts (none up: waiting_for_servers). */
void loop_status_waiting(loop_status *s, areal_rollout_ctl *ctl);

/* A finished step: the same numbers as its progress line. */
void loop_status_step(loop_status *s, areal_rollout_ctl *ctl, const areal_step_stats *st, long step,
                      long version, double t_wait, double t_train, double sync_s);

void loop_status_eval(loop_status *s, double accuracy);
void loop_status_checkpoint(loop_status *s, long step);

#endif
