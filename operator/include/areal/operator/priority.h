/*
 * priority.h - the order among AReaLJobs waiting for GPUs (spec.priority).
 *
 * A job "waits for GPUs" from its creation until its trainer gang is placed
 * (condition Scheduled=True), and again while its gang restarts; a suspended,
 * finished, failed or deleting job does not wait. Waiting jobs are ranked by
 * spec.priority (higher first, default 0), then creationTimestamp (older
 * first), then namespace/name, a total order.
 *
 * The guarantee the controller gives with it (no preemption): while a job
 * waits, no job of strictly lower priority is given GPUs it does not hold
 * already - no new trainer gang, no added or replaced rollout server; such a
 * job stays Pending with condition Scheduled=False reason Queued naming the
 * job it waits behind. So the room the higher job waits for is never taken
 * by a lower one, however often room frees and however the work queue orders
 * the passes. Jobs of equal priority do not hold each other (a younger one
 * that fits is placed while an older one that does not fit waits: no
 * head-of-line blocking within a level); when room frees, every waiting job
 * is queued in rank order (the work queue is FIFO), so the older one usually
 * plans first - best effort only: two workers may take them in either order.
 * Rejected: strict FIFO across equal priorities too (one job
 * too wide for the free room would stop every other job of the cluster), and
 * backfilling lower priorities into room a higher job's plan leaves free
 * (that needs the higher job's plan before its own pass makes it).
 * Known limit: a waiting job that can never fit (wider than the cluster)
 * holds every lower-priority job until it is deleted, suspended or given a
 * lower priority; its condition says why it does not fit.
 */
#ifndef AREAL_OPERATOR_PRIORITY_H
#define AREAL_OPERATOR_PRIORITY_H

#include <stdbool.h>

#include <jansson.h>

/* spec.priority of AReaLJob `job`, clamped to the CRD's [-1000, 1000]; 0 when unset. */
int job_spec_priority(const json_t *job);

/* True when `job` waits for GPUs (see above), from its metadata, spec and status. */
bool job_waits_for_gpus(const json_t *job);

/* < 0 when `a` ranks before `b` (planned first), > 0 after, 0 the same job. */
int job_rank_cmp(const json_t *a, const json_t *b);

#endif
