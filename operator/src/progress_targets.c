/*
 * progress_targets.c - which pods the progress poller asks: the running
 * trainer rank-0 pod (label areal.io/master=true) of each job, from the
 * controller's pod cache (see areal/operator/progress_targets.h), and the
 * terminated ones that left their final /status as a termination message.
 *
 * Why the master pod: the trainer's rank 0 serves /status (CONTRACTS.md);
 * other ranks serve nothing. A pod being deleted or without an IP yet is
 * skipped (a restarting gang's old rank 0 must not report for the new one).
 * Why the terminated one: a trainer that ends within a poll period (5 s) is
 * gone before the next GET; its termination message is the only copy of its
 * last step (rejected: polling faster, which only narrows the window).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/operator/progress.h"
#include "areal/operator/progress_targets.h"

bool progress_target_of_pod(const cached_pod *p, progress_target *t) {
    if (!p->master || p->job == NULL || p->deletion_timestamp != NULL || p->ns == NULL)
        return false;
    bool live = p->phase == CACHED_PHASE_RUNNING && p->pod_ip != NULL && p->pod_ip[0] != '\0';
    bool final = (p->phase == CACHED_PHASE_SUCCEEDED || p->phase == CACHED_PHASE_FAILED) &&
                 p->termination_message != NULL && p->uid != NULL;
    if (!live && !final)
        return false;
    memset(t, 0, sizeof *t);
    snprintf(t->ns, sizeof t->ns, "%s", p->ns);
    snprintf(t->job, sizeof t->job, "%s", p->job);
    snprintf(t->uid, sizeof t->uid, "%s", p->uid ? p->uid : "");
    if (live) {
        snprintf(t->pod_ip, sizeof t->pod_ip, "%s", p->pod_ip);
        return true;
    }
    t->final_message = strdup(p->termination_message);
    return t->final_message != NULL;
}

typedef struct collect {
    progress_target *out;
    size_t cap, n;
} collect;

static void add(void *ud, const cached_pod *p) {
    collect *c = ud;
    if (c->n < c->cap && progress_target_of_pod(p, &c->out[c->n]))
        c->n++;
}

static bool has_live(const progress_target *ts, size_t n, const progress_target *t) {
    for (size_t i = 0; i < n; i++)
        if (ts[i].final_message == NULL && strcmp(ts[i].ns, t->ns) == 0 &&
            strcmp(ts[i].job, t->job) == 0)
            return true;
    return false;
}

size_t progress_targets_of_controller(void *ctl, progress_target *out, size_t cap) {
    collect c = {out, cap, 0};
    controller_each_pod(ctl, add, &c);
    /* a job's running rank 0 wins over an older one's last words (quadratic in
     * the final targets only, which are few: terminated master pods). Marked
     * first (job emptied: it matches no job), compacted after. */
    for (size_t i = 0; i < c.n; i++)
        if (out[i].final_message != NULL && has_live(out, c.n, &out[i])) {
            free(out[i].final_message);
            out[i].final_message = NULL;
            out[i].job[0] = '\0';
        }
    size_t k = 0;
    for (size_t i = 0; i < c.n; i++)
        if (out[i].job[0] != '\0')
            out[k++] = out[i];
    return k;
}
