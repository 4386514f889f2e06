/*
 * lease.h - leader election on a coordination.k8s.io/v1 Lease, so that of
 * several operator replicas exactly one acts.
 *
 * A candidate takes the Lease when it is free or its holder has not renewed it
 * within leaseDurationSeconds, then renews it every retry period. Writes use
 * the Lease's resourceVersion, so two candidates can never both win a round
 * (the loser gets a conflict). A leader that cannot renew within the renew
 * deadline reports the loss and must stop acting (the operator exits and is
 * restarted as a candidate), always before its Lease can expire for others:
 * renew deadline < lease duration.
 */
#ifndef AREAL_OPERATOR_LEASE_H
#define AREAL_OPERATOR_LEASE_H

#include <stdbool.h>

#include "areal/error.h"
#include "areal/kube/client.h"

typedef struct lease_config {
    const char *ns;       /* the Lease's namespace */
    const char *name;     /* the Lease's name */
    const char *identity; /* this candidate (pod name + random suffix) */
    int duration_s;       /* leaseDurationSeconds (15) */
    int renew_deadline_s; /* give up leading after failing to renew this long (10) */
    int retry_period_s;   /* between attempts (2) */
} lease_config;

typedef struct leader_elector leader_elector;

/*
 * Starts campaigning on a thread. `on_started` runs (on that thread) once the
 * Lease is won, `on_lost` once leadership is lost; both may be NULL.
 */
int leader_elector_start(kube_client *kc, const lease_config *cfg, void (*on_started)(void *),
                         void (*on_lost)(void *), void *ud, leader_elector **out, areal_error *err);

bool leader_elector_is_leader(leader_elector *le);

/* Stops campaigning; a leader gives the Lease up so a successor need not wait. */
void leader_elector_stop(leader_elector *le);

#endif
