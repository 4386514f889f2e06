/*
 * ledger.h - the operator's reservation ledger (kube-scheduler's "assumed
 * pods"): the GPUs, CPU and memory of every planned pod count as used, for
 * every reconcile worker, from the moment its plan is chosen until the pod is
 * observed bound in the pod cache (then the cache counts it) or its job drops
 * the plan (a new plan, a restart, the job gone).
 *
 * Why: two workers planning from the same cache both saw the same free GPUs
 * and bound 8 GPUs on nodes of 4 (issue 11). Planning is serialised through
 * the ledger's lock: a worker holds it from reading the caches until its plan
 * is recorded, so the next worker sees that plan's room as taken.
 * Rejected: one reconcile worker (no concurrency for creates, binds, status
 * writes), and counting only pods the cache shows (the cache lags behind the
 * binds of a plan by a watch round trip).
 *
 * Claims are keyed by pod ("namespace/name"). A claim whose pod the caller saw
 * bound and counted in this pass (ledger_seen) is not charged again, so a pod
 * is never counted twice nor zero times however the cache moves meanwhile.
 * Not thread-safe apart from ledger_lock/ledger_unlock: every other call is
 * made with the lock held.
 */
#ifndef AREAL_OPERATOR_LEDGER_H
#define AREAL_OPERATOR_LEDGER_H

#include <pthread.h>
#include <stdbool.h>

#include "areal/cluster.h"
#include "areal/keyset.h"

typedef struct ledger_claim {
    char *pod;  /* "namespace/name" (owned) */
    char *job;  /* "namespace/name" of its job (owned) */
    char *node; /* the planned node (owned) */
    int gpus;
    long long cpu_milli, mem_bytes;
    bool seen;            /* observed bound (and counted by the caller) in this pass */
    long long bound_ms;   /* when its bind was answered (0: not yet) */
    long long created_ms; /* when its create was answered (0: not yet, or not by this plan) */
} ledger_claim;

/* What the caller's pod cache shows of a pod (ledger_unobserved's question). */
typedef enum ledger_pod_state {
    LEDGER_POD_ABSENT = 0,
    LEDGER_POD_CREATED = 1, /* there, unbound */
    LEDGER_POD_BOUND = 2,
} ledger_pod_state;

typedef struct ledger {
    pthread_mutex_t mu;
    ledger_claim *claims;
    int n, cap;
    areal_keyset by_pod; /* pod key -> index in claims */
} ledger;

void ledger_init(ledger *l);
void ledger_free(ledger *l);

void ledger_lock(ledger *l);
void ledger_unlock(ledger *l);

/* Starts a pass: no claim is seen. */
void ledger_begin(ledger *l);

/* The caller counted pod `pod_key` as using room on node `node`: its claim
 * (if any) is not charged again in this pass - when the claim is on that
 * node. A claim on another node (the cache shows an older version of the pod,
 * planned elsewhere, while a newer plan binds it there) is still charged:
 * counting the pod where the cache puts it does not hold the room the bind
 * will take. */
void ledger_seen(ledger *l, const char *pod_key, const char *node);

/* Marks seen (as ledger_seen) every claim for which `counted(ud, pod_key,
 * node)` says the caller counted its pod on the claim's node this pass. */
void ledger_mark_seen(ledger *l, bool (*counted)(void *ud, const char *pod_key, const char *node),
                      void *ud);

/*
 * Adds the room of every claim not seen in this pass and not of job
 * `job_key` (a job replans over its own claims) to the used counts of the
 * nodes of `c`; `node_index` maps node names to indices in c (claims on
 * nodes not in c are skipped). Counts are capped at the allocatable ones.
 */
void ledger_charge(ledger *l, const char *job_key, areal_cluster *c, areal_keyset *node_index);

/*
 * Replaces every claim of job `job_key` with the n claims given (their
 * strings are copied; `job`, `seen` and `bound_ms` of the entries are ignored). n = 0
 * drops the job's claims. -1 when out of memory (the job then has no claims).
 */
int ledger_set(ledger *l, const char *job_key, const ledger_claim *claims, int n);

/* The binds of job `job_key`'s claims were all answered (at `now_ms`). */
void ledger_bound(ledger *l, const char *job_key, long long now_ms);

/* The create (`created`) or bind (otherwise) of the claim of pod `pod_key`
 * was answered with success at `now_ms` (nothing when it has no claim).
 * Marked pod by pod, so a pass cut short by a failure still expects what it
 * did: chaos seed 52's pass created a gang, failed a bind, and the next pass,
 * on a cache that showed none of the new pods, planned the gang afresh, had
 * its creates answered 409 (taken as done) and bound the pods to another
 * plan's nodes - GPUs over-committed where the first plan's claims had been. */
void ledger_answered(ledger *l, const char *pod_key, bool created, long long now_ms);

/*
 * Expectations (as the ReplicaSet controller's): the number of job
 * `job_key`'s claims whose bind (create) was answered less than `window_ms`
 * ago but that `state(ud, pod_key)` says the caller's cache does not show
 * bound (at all) yet. A pass of the job waits while it is not 0: on a cache
 * that has not caught up with its own writes it would see an unbound or
 * missing gang and plan it again.
 */
int ledger_unobserved(ledger *l, const char *job_key, long long now_ms, long long window_ms,
                      ledger_pod_state (*state)(void *ud, const char *pod_key), void *ud);

/* Number of claims (all jobs). */
int ledger_len(const ledger *l);

#endif
