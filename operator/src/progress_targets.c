/*
 * progress_targets.c - which pods the progress poller asks: the running
 * trainer rank-0 pod (label areal.io/master=true) of each job, from the
 * controller's pod cache (see areal/operator/progress.h).
 *
 * Why the master pod: the trainer's rank 0 serves /status (CONTRACTS.md);
 * other ranks serve nothing. A pod being deleted or without an IP yet is
 * skipped (a restarting gang's old rank 0 must not report for the new one).
 */
#include <stdio.h>
#include <string.h>

#include "areal/operator/progress.h"
#include "areal/operator/progress_targets.h"

typedef struct collect {
    progress_target *out;
    size_t cap, n;
} collect;

static void add(void *ud, const cached_pod *p) {
    collect *c = ud;
    if (c->n == c->cap || !p->master || p->phase != CACHED_PHASE_RUNNING || p->job == NULL ||
        p->pod_ip == NULL || p->pod_ip[0] == '\0' || p->deletion_timestamp != NULL || p->ns == NULL)
        return;
    progress_target *t = &c->out[c->n++];
    snprintf(t->ns, sizeof t->ns, "%s", p->ns);
    snprintf(t->job, sizeof t->job, "%s", p->job);
    snprintf(t->pod_ip, sizeof t->pod_ip, "%s", p->pod_ip);
}

size_t progress_targets_of_controller(void *ctl, progress_target *out, size_t cap) {
    collect c = {out, cap, 0};
    controller_each_pod(ctl, add, &c);
    return c.n;
}
