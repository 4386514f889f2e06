/*
 * progress.h - RL progress in the job's status: the operator reads the
 * trainer rank-0 pod's `GET /status` (the contract between the trainer and
 * the operator, no credentials: the endpoint serves only numbers) and writes
 * status.progress, Events when the trainer's phase changes, and areal_job_*
 * metrics.
 *
 * Pieces: progress_parse (the /status JSON -> trainer_status, pure),
 * progress_json (trainer_status -> the status.progress object, pure),
 * progress_http_get (one bounded GET on loopback or a pod IP), and the poller
 * (progress_poller_*: a thread that asks every master pod the controller's
 * cache knows each period and patches the job's status subresource).
 * Rejected: polling inside reconcile passes (a slow trainer would hold a
 * reconcile worker; progress is not a decision input of the gang logic), and
 * the trainer writing its own status (worker pods would need API credentials
 * and RBAC on arealjobs/status).
 */
#ifndef AREAL_OPERATOR_PROGRESS_H
#define AREAL_OPERATOR_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "areal/error.h"
#include "areal/http/metrics.h"
#include "areal/kube/client.h"

/* What GET /status says; has_* false where the trainer said null or nothing. */
typedef struct trainer_status {
    char phase[24]; /* "starting", "waiting_for_servers", "training", ... */
    bool has_step, has_total, has_version, has_reward, has_staleness, has_sps, has_sync,
        has_servers;
    long long step, total_steps, policy_version;
    double reward_mean, staleness_max, samples_per_second, last_weight_sync_seconds;
    int servers;
    bool waiting_for_samples, running_ahead;
} trainer_status;

/*
 * Parses a /status body (`len` bytes). Unknown keys are ignored, null values
 * leave has_* false. AREAL_EINVAL naming the field when the body is not a
 * JSON object, `phase` is missing or not one of the contract's phases, or a
 * field has the wrong type (e.g. "step": "12").
 */
int progress_parse(const char *body, size_t len, trainer_status *st, areal_error *err);

/*
 * The status.progress object of `st`: step, totalSteps, policyVersion,
 * rewardMean, staleness (= staleness.max), samplesPerSecond,
 * lastWeightSyncSeconds, servers, trainerPhase, updateTime (`now`, RFC 3339).
 * Fields the trainer did not report are left out. New reference, NULL when
 * out of memory.
 */
json_t *progress_json(const trainer_status *st, const char *now);

/*
 * GET http://ip:port`path` with HTTP/1.1 and Connection: close, everything
 * bounded by `timeout_ms` (connect, send, receive). On 200 *body gets the
 * NUL-terminated body (caller frees), *len its length. AREAL_EIO naming the
 * address and the step (connect refused, timeout, status line, a non-200
 * status, a body over 256 KiB); AREAL_EINVAL for a malformed address.
 */
int progress_http_get(const char *ip, int port, const char *path, int timeout_ms, char **body,
                      size_t *len, areal_error *err);

/* ---- the poller (progress_poll.c) ---------------------------------------- */

/*
 * One trainer to ask: the job and its rank-0 pod's IP (strings copied); or,
 * when final_message is set, a rank-0 pod that has terminated and left its
 * final /status as its termination message (CONTRACTS.md, "The trainer's
 * final status"): nothing is asked, the message is the answer, written once
 * per pod uid.
 */
typedef struct progress_target {
    char ns[254], job[254], pod_ip[48];
    char uid[64];        /* the pod's metadata.uid (final targets: the once-key) */
    char *final_message; /* malloc'd by the targets function, freed by the poller; NULL: live */
} progress_target;

/* Fills up to `cap` targets, returns how many (the caller's view of the
 * running master pods and the terminated ones with a final message, e.g. the
 * controller's pod cache). */
typedef size_t (*progress_targets_fn)(void *ud, progress_target *out, size_t cap);

typedef struct progress_config {
    int port;        /* the trainer's HTTP port (AREAL_TRAINER_HTTP_PORT; default 8090) */
    int interval_ms; /* between rounds (default 5000) */
    int timeout_ms;  /* per GET (default 1000) */
} progress_config;

typedef struct progress_poller progress_poller;

/*
 * Starts the poller thread: every interval it asks `targets` for the running
 * master pods, GETs each one's /status, patches status.progress of its job
 * (merge patch of the status subresource: nothing else of the status is
 * touched), records a Normal Event "TrainerPhase" when the trainer's phase
 * changes, and publishes the gauges areal_job_step, areal_job_policy_version,
 * areal_job_reward_mean, areal_job_staleness, areal_job_samples_per_second,
 * areal_job_weight_sync_seconds {namespace, job} (jobs no longer polled drop
 * out) and the counter areal_job_status_errors_total {namespace, job}. A
 * trainer that does not answer yet (starting up, or not serving /status) is
 * counted and skipped; its job's status is left as it is. A final target's
 * message is parsed and written like a live answer, once per pod uid (later
 * rounds skip it while it stays a target; a message that does not parse is
 * logged and counted once). A job with
 * spec.rollout.target and spec.rollout.replicas set gets the built-in
 * autoscaling policy (autoscale.h) on each sample taken while its trainer
 * trains: a change is merge-patched into spec.rollout.replicas with an Event
 * "Autoscaled". `m` may be NULL.
 * AREAL_ENOMEM / AREAL_EIO when the thread cannot start; AREAL_EINVAL when
 * `m` already has these families.
 */
int progress_poller_start(kube_client *kc, const progress_config *cfg, progress_targets_fn targets,
                          void *ud, metrics_registry *m, progress_poller **out, areal_error *err);

/* Runs one round now, on the caller's thread (tests); the thread keeps its
 * own schedule. */
void progress_poller_round(progress_poller *p);

/* Stops and joins the thread and frees the poller (NULL is a no-op). */
void progress_poller_stop(progress_poller *p);

#endif
