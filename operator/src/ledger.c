/*
 * ledger.c - the reservation ledger (see areal/operator/ledger.h). Claims are
 * one array plus a pod-key index; replacing a job's claims compacts the array
 * and rebuilds the index (the ledger holds only gangs between plan and
 * observed bind, a few hundred claims at most, and a set happens once per
 * reconcile that plans or binds).
 */
#include "areal/operator/ledger.h"

#include <stdlib.h>
#include <string.h>

void ledger_init(ledger *l) {
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->mu, NULL);
    areal_keyset_init(&l->by_pod);
}

static void claim_free(ledger_claim *c) {
    free(c->pod);
    free(c->job);
    free(c->node);
}

void ledger_free(ledger *l) {
    for (int i = 0; i < l->n; i++)
        claim_free(&l->claims[i]);
    free(l->claims);
    areal_keyset_free(&l->by_pod);
    pthread_mutex_destroy(&l->mu);
    memset(l, 0, sizeof *l);
}

void ledger_lock(ledger *l) {
    pthread_mutex_lock(&l->mu);
}

void ledger_unlock(ledger *l) {
    pthread_mutex_unlock(&l->mu);
}

void ledger_begin(ledger *l) {
    for (int i = 0; i < l->n; i++)
        l->claims[i].seen = false;
}

void ledger_seen(ledger *l, const char *pod_key, const char *node) {
    if (l->n == 0 || node == NULL)
        return;
    long *at = areal_keyset_value(&l->by_pod, pod_key);
    if (at != NULL && strcmp(l->claims[*at].node, node) == 0)
        l->claims[*at].seen = true;
}

void ledger_mark_seen(ledger *l, bool (*counted)(void *ud, const char *pod_key, const char *node),
                      void *ud) {
    for (int i = 0; i < l->n; i++)
        if (!l->claims[i].seen && counted(ud, l->claims[i].pod, l->claims[i].node))
            l->claims[i].seen = true;
}

void ledger_charge(ledger *l, const char *job_key, areal_cluster *c, areal_keyset *node_index) {
    for (int i = 0; i < l->n; i++) {
        const ledger_claim *cl = &l->claims[i];
        if (cl->seen || strcmp(cl->job, job_key) == 0)
            continue;
        long *at = areal_keyset_value(node_index, cl->node);
        if (at == NULL)
            continue;
        areal_node *n = &c->nodes[*at];
        n->gpus_used = n->gpus_used + cl->gpus > n->gpus ? n->gpus : n->gpus_used + cl->gpus;
        n->cpu_used_milli += (long)cl->cpu_milli;
        n->mem_used_bytes += cl->mem_bytes;
    }
}

/* Rebuilds the pod index; false when out of memory. */
static bool reindex(ledger *l) {
    areal_keyset_free(&l->by_pod);
    areal_keyset_init(&l->by_pod);
    for (int i = 0; i < l->n; i++) {
        if (areal_keyset_add(&l->by_pod, l->claims[i].pod) < 0)
            return false;
        *areal_keyset_value(&l->by_pod, l->claims[i].pod) = i;
    }
    return true;
}

int ledger_set(ledger *l, const char *job_key, const ledger_claim *claims, int n) {
    int kept = 0;
    for (int i = 0; i < l->n; i++) {
        if (strcmp(l->claims[i].job, job_key) == 0)
            claim_free(&l->claims[i]);
        else
            l->claims[kept++] = l->claims[i];
    }
    l->n = kept;
    int rc = 0;
    if (l->n + n > l->cap) {
        int cap = l->cap ? l->cap : 16;
        while (cap < l->n + n)
            cap *= 2;
        ledger_claim *grown = realloc(l->claims, (size_t)cap * sizeof *grown);
        if (grown == NULL) {
            n = 0;
            rc = -1;
        } else {
            l->claims = grown;
            l->cap = cap;
        }
    }
    for (int i = 0; i < n; i++) {
        ledger_claim c = {.pod = strdup(claims[i].pod),
                          .job = strdup(job_key),
                          .node = strdup(claims[i].node),
                          .gpus = claims[i].gpus,
                          .cpu_milli = claims[i].cpu_milli,
                          .mem_bytes = claims[i].mem_bytes};
        if (c.pod == NULL || c.job == NULL || c.node == NULL) {
            claim_free(&c);
            rc = -1;
            continue;
        }
        l->claims[l->n++] = c;
    }
    if (!reindex(l)) {
        /* a claim missing from the index cannot be marked seen and is charged
         * twice: room is under-used until the next set, never over-committed */
        rc = -1;
    }
    return rc;
}

void ledger_bound(ledger *l, const char *job_key, long long now_ms) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->claims[i].job, job_key) == 0)
            l->claims[i].bound_ms = now_ms;
}

void ledger_answered(ledger *l, const char *pod_key, bool created, long long now_ms) {
    long *at = l->n ? areal_keyset_value(&l->by_pod, pod_key) : NULL;
    if (at == NULL)
        return;
    if (created)
        l->claims[*at].created_ms = now_ms;
    else
        l->claims[*at].bound_ms = now_ms;
}

int ledger_unobserved(ledger *l, const char *job_key, long long now_ms, long long window_ms,
                      ledger_pod_state (*state)(void *ud, const char *pod_key), void *ud) {
    int n = 0;
    for (int i = 0; i < l->n; i++) {
        const ledger_claim *c = &l->claims[i];
        bool bind = c->bound_ms > 0 && now_ms - c->bound_ms < window_ms;
        bool make = c->created_ms > 0 && now_ms - c->created_ms < window_ms;
        if (!(bind || make) || strcmp(c->job, job_key) != 0)
            continue;
        ledger_pod_state st = state(ud, c->pod);
        n += (bind && st < LEDGER_POD_BOUND) || (make && st < LEDGER_POD_CREATED);
    }
    return n;
}

int ledger_len(const ledger *l) {
    return l->n;
}
