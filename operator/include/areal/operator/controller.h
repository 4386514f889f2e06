/*
 * controller.h - the AReaLJob controller: three informers (AReaLJobs, every
 * pod, nodes) feeding local caches, a rate-limited work queue of job keys, and
 * workers that run the reconcile decision (reconcile.h) against the caches and
 * apply its actions through the API.
 *
 * Event routing: a job event queues that job; a pod event queues the job named
 * by its areal.io/job label, and any pod or node change also queues every job
 * that waits for room (Pending or Restarting), so a job that did not fit is
 * placed as soon as nodes are added or pods leave. Informers list once, then
 * watch; on 410 Gone they list again (kube_reflector_run).
 *
 * Threads: one per informer, `workers` reconcile workers; controller_run
 * returns when controller_stop is called (from any thread or a signal
 * handler's helper thread).
 */
#ifndef AREAL_OPERATOR_CONTROLLER_H
#define AREAL_OPERATOR_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>

#include "areal/error.h"
#include "areal/kube/client.h"
#include "areal/operator/cached.h"
#include "areal/operator/desired.h"
#include "areal/http/metrics.h"

typedef struct controller_config {
    const char *ns; /* watch AReaLJobs of this namespace only; NULL: all */
    int workers;    /* reconcile workers (default 2) */
    desired_config desired;
} controller_config;

typedef struct controller controller;

/* A controller on client `kc` (borrowed); registers its metrics in `m` (may be NULL). */
int controller_new(kube_client *kc, const controller_config *cfg, metrics_registry *m,
                   controller **out, areal_error *err);

/* Starts the informers, then (once every cache has listed: controller_synced)
 * the workers, and blocks until controller_stop. */
int controller_run(controller *ctl);

/* Asks controller_run to return; safe from any thread. */
void controller_stop(controller *ctl);

/* True once every informer has listed once. */
bool controller_synced(controller *ctl);

/* Objects in the informers' caches now (any pointer may be NULL). */
void controller_cache_sizes(controller *ctl, size_t *jobs, size_t *pods, size_t *nodes);

/*
 * Calls fn for every pod of the controller's pod cache (under the cache's
 * lock: fn must be quick and must not call back into the controller; the
 * entry is valid only during the call). A narrow view for pieces that act
 * on what the operator already watches (progress.h's targets).
 */
void controller_each_pod(controller *ctl, void (*fn)(void *ud, const cached_pod *pod), void *ud);

/* Pod cache entries handed to readers so far (cache_visits): a reconcile
 * visits only its own job's pods (through the cache's job index), never the
 * cluster's; tests check it against the size of the cache. */
size_t controller_pod_visits(controller *ctl);

void controller_free(controller *ctl);

#endif
