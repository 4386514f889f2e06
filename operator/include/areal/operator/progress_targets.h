/*
 * progress_targets.h - the progress poller's targets from the controller's
 * pod cache (progress_targets.c).
 */
#ifndef AREAL_OPERATOR_PROGRESS_TARGETS_H
#define AREAL_OPERATOR_PROGRESS_TARGETS_H

#include <stdbool.h>
#include <stddef.h>

#include "areal/operator/controller.h"
#include "areal/operator/progress.h"

#include "areal/operator/cached.h"

/*
 * The target of one cached pod, into *t: true for an undeleted master pod of a
 * job that runs with a pod IP (a live target, final_message NULL) or has
 * terminated (Succeeded or Failed) with a termination message (a final target,
 * t->final_message a malloc'd copy the caller frees). False for every other
 * pod, and when out of memory (the next round tries again).
 */
bool progress_target_of_pod(const cached_pod *p, progress_target *t);

/*
 * A progress_targets_fn over `ctl` (a controller *): the running, undeleted
 * trainer rank-0 pods (label areal.io/master=true) that have a pod IP, and
 * the terminated ones with a final message (progress_target_of_pod) of jobs
 * without a running one (a restarted gang's new rank 0 speaks for the job, its
 * old one's last words would be older), at most `cap`. Returns how many it wrote.
 */
size_t progress_targets_of_controller(void *ctl, progress_target *out, size_t cap);

#endif
