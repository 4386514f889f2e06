/*
 * trainer_http.h - the trainer's HTTP endpoints on rank 0 (the contract the
 * operator reads, shared with branch `cluster`):
 *   GET /status  -> 200 application/json, one object: phase, step,
 *                   total_steps, policy_version, reward_mean, eval_accuracy,
 *                   staleness {max, mean, bound}, samples_per_second,
 *                   tokens_per_second, last_weight_sync_seconds,
 *                   rollout_wait_seconds, train_seconds, servers,
 *                   waiting_for_samples, running_ahead, checkpoint_step
 *                   (numbers as JSON numbers, unknown = null);
 *   GET /metrics -> Prometheus text: areal_trainer_step, _policy_version,
 *                   _reward_mean, _eval_accuracy, _staleness_max,
 *                   _samples_per_second, _tokens_per_second, _servers
 *                   (gauges) and _weight_sync_seconds, _rollout_wait_seconds,
 *                   _train_seconds (histograms);
 *   GET /healthz -> 200 "ok".
 * The job loop publishes a snapshot after each step from the same numbers as
 * its JSONL progress line, and the phase as it moves (starting, waiting for
 * servers, training, checkpointing, done, failed). Reads never wait on the
 * loop: a snapshot is copied under a mutex and rendered on the server's
 * thread.
 */
#ifndef AREAL_TRAIN_TRAINER_HTTP_H
#define AREAL_TRAIN_TRAINER_HTTP_H

#include <stdbool.h>

#include "areal/error.h"

typedef enum areal_train_phase {
    AREAL_PHASE_STARTING = 0,
    AREAL_PHASE_WAITING_FOR_SERVERS,
    AREAL_PHASE_TRAINING,
    AREAL_PHASE_CHECKPOINTING,
    AREAL_PHASE_DONE,
    AREAL_PHASE_FAILED,
} areal_train_phase;

/* One snapshot; a has_* false renders its field as null. */
typedef struct areal_train_status {
    areal_train_phase phase;
    long step, total_steps, policy_version;
    bool has_reward;
    double reward_mean;
    bool has_eval;
    double eval_accuracy;
    bool has_staleness; /* a step's tokens were counted */
    long staleness_max;
    double staleness_mean;
    long staleness_bound; /* eta */
    double samples_per_second, tokens_per_second;
    bool has_sync;
    double last_weight_sync_seconds;
    double rollout_wait_seconds, train_seconds; /* of the last step */
    int servers;
    bool waiting_for_samples; /* the last step waited > 10 % of its wall time */
    bool running_ahead;       /* admission blocked by the staleness capacity */
    bool has_checkpoint;
    long checkpoint_step;
} areal_train_status;

typedef struct areal_trainer_http areal_trainer_http;

/*
 * Serves on host:port (host NULL: 127.0.0.1; port 0: the kernel picks one,
 * see areal_trainer_http_port). Returns 0, AREAL_EIO naming the address
 * when it cannot be bound, AREAL_ENOMEM.
 */
int areal_trainer_http_start(const char *host, int port, areal_trainer_http **out,
                             areal_error *err);
int areal_trainer_http_port(const areal_trainer_http *h);

/* Stops serving and frees h (NULL: no-op). */
void areal_trainer_http_stop(areal_trainer_http *h);

/*
 * Replaces the snapshot (h NULL: no-op). `observe_step` adds the step's
 * weight-sync, rollout-wait and train seconds to the histograms (once per
 * step; a phase change alone passes false).
 */
void areal_trainer_http_publish(areal_trainer_http *h, const areal_train_status *s,
                                bool observe_step);

/* The current snapshot (for the loop's own phase changes). */
areal_train_status areal_trainer_http_snapshot(areal_trainer_http *h);

/* "starting", "waiting_for_servers", ... */
const char *areal_train_phase_name(areal_train_phase p);

/* The /status body of s: a new JSON text (caller frees), NULL when out of memory. */
char *areal_train_status_json(const areal_train_status *s);

/* The largest final status the file below holds: Kubernetes' termination message limit. */
#define AREAL_TERMINATION_MESSAGE_MAX 4096

/*
 * Writes s's /status body (compact, as GET /status has it) to path, replacing
 * what was there: the trainer's last words, read back by the kubelet as the
 * container's termination message (terminationMessagePath). Returns 0, or
 * AREAL_EIO naming path and the cause (the caller logs it: never fatal), or
 * AREAL_ERANGE if the body were over AREAL_TERMINATION_MESSAGE_MAX bytes (a
 * truncated object would not parse; it cannot happen with today's fields).
 */
int areal_train_status_write(const char *path, const areal_train_status *s, areal_error *err);

#endif
