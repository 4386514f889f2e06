/*
 * progress_targets.h - the progress poller's targets from the controller's
 * pod cache (progress_targets.c).
 */
#ifndef AREAL_OPERATOR_PROGRESS_TARGETS_H
#define AREAL_OPERATOR_PROGRESS_TARGETS_H

#include <stddef.h>

#include "areal/operator/controller.h"
#include "areal/operator/progress.h"

/*
 * A progress_targets_fn over `ctl` (a controller *): the running, undeleted
 * trainer rank-0 pods (label areal.io/master=true) that have a pod IP, one
 * per job, at most `cap`. Returns how many it wrote.
 */
size_t progress_targets_of_controller(void *ctl, progress_target *out, size_t cap);

#endif
