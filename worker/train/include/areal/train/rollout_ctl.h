/*
 * rollout_ctl.h - the rollout controller: AReaL's workflow executor
 * (areal/infra/workflow_executor.py + remote_inf_engine.py) in C, driving
 * rollout servers over SGLang's HTTP API only (sgl_client.h).
 *
 * What it does, and the AReaL behaviour each part follows:
 *  - Admission. A dispatcher thread takes prompts from the caller's source
 *    while the staleness capacity (areal/rl/staleness.h, areal.md §5.1)
 *    is > 0 at the current policy version: with eta = 0 no prompt of step
 *    v+1 starts before the weights of version v are in place (synchronous
 *    RL), with eta = k at most k versions of lead.
 *  - Requests. Each prompt becomes G requests of n = 1 (AReaL's n_samples is
 *    per request 1), sent to the servers round robin by worker threads.
 *  - Version pinning. The policy version is read immediately before each
 *    HTTP request is sent and every token that request returns is tagged
 *    with it (AReaL PR #1569): a weight update landing mid-request never
 *    relabels tokens with the newer version.
 *  - Interruption. An answer with finish_reason "abort" (a pause or a weight
 *    update) is resubmitted, once the controller is not paused, with input =
 *    prompt + partial output and max_new_tokens reduced by what was already
 *    generated, as AReaL's client loop does.
 *  - Faults. A request that gets no answer (connection refused, timeout,
 *    5xx) is retried on the next server with the partial output kept; a
 *    failed server is skipped for a back-off. With no server reachable the
 *    workers wait, the log says so once, and work resumes when one answers
 *    (or when set_servers adds one). An answer whose weight_version is not
 *    the version its request was pinned to is dropped and sent again (and a
 *    server behind the policy kept out until it syncs). A server that was unreachable may come
 *    back restarted from older weights: before its next request its
 *    GET /get_model_info weight_version is compared with the policy's, and
 *    a different one keeps it out (needs a sync) until a weight update
 *    reaches it. An evaluation falls back to such a server (logged once)
 *    rather than wait for the trainer, which is waiting for it.
 *  - Completion. When a prompt's G samples are done they are scored by the
 *    caller's reward function and the group is queued for the trainer;
 *    the counters move running -> accepted (or rejected by the caller's
 *    filter, DAPO's dynamic sampling).
 *
 * Threads: the controller owns a dispatcher and n_workers threads. The
 * source, reward and log callbacks run on them (never two source calls at
 * once; reward calls may run concurrently on different groups). All public
 * functions are safe to call from one trainer thread.
 */
#ifndef AREAL_TRAIN_ROLLOUT_CTL_H
#define AREAL_TRAIN_ROLLOUT_CTL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/rl/staleness.h"
#include "areal/train/sgl_client.h"

#define AREAL_ROLLOUT_MAX_SERVERS 64

/* One prompt as the source hands it over (the controller copies it). */
typedef struct areal_rollout_prompt {
    const int32_t *ids;
    int n_ids;
    long index; /* the dataset index (kept with the group) */
} areal_rollout_prompt;

/* One sample: prompt + response, in AReaL's rollout convention (§4.1). */
typedef struct areal_traj {
    int32_t *tokens;   /* [n]: prompt then response */
    float *logprobs;   /* [n]: 0 on the prompt, behaviour logprob per response token */
    int32_t *versions; /* [n]: -1 on the prompt, the pinned version per response token */
    int n, n_prompt;
    bool no_eos;    /* ended on the token budget, not a stop token */
    float reward;   /* the caller's reward */
    int n_requests; /* HTTP requests it took (1 + resubmissions + retries) */
} areal_traj;

typedef struct areal_group {
    areal_traj *s; /* [G] */
    int G;
    long index; /* the prompt's dataset index */
    long version_at_submit;
    double t_submit, t_done; /* monotonic seconds */
} areal_group;

void areal_group_free(areal_group *g);

typedef struct areal_rollout_callbacks {
    /* Next prompt into *p (valid until the next call); 0 = none now, -1 = exhausted. */
    int (*next_prompt)(void *ctx, areal_rollout_prompt *p);
    /* Reward of a response (tokens after the prompt) for the prompt of dataset index `index`. */
    float (*reward)(void *ctx, long index, const int32_t *resp, int n);
    /* Whether a scored group is kept (NULL: always). */
    bool (*accept)(void *ctx, const areal_group *g);
    /* One log line, no newline (NULL: silent). */
    void (*log)(void *ctx, const char *line);
    void *ctx;
} areal_rollout_callbacks;

typedef struct areal_rollout_cfg {
    int group_size; /* G >= 1 */
    int n_workers;  /* concurrent HTTP requests, >= 1 */
    areal_sgl_sampling sampling;
    long eta;            /* max_head_offpolicyness >= 0 */
    long max_concurrent; /* max_concurrent_rollouts; <= 0: batch_size */
    long batch_size;     /* consumer_batch_size (prompts per step) >= 1 */
    double request_timeout_s;
    double server_backoff_s; /* how long a failed server is skipped (0: 1 s) */
    long start_version;      /* the policy version at start (a resume: counters recovered) */
    /* Nullable; when it becomes nonzero (a signal handler may set it) waits for servers,
     * for a pause and for an evaluation give up, so a stop is never stuck behind them. */
    volatile sig_atomic_t *cancel;
} areal_rollout_cfg;

typedef struct areal_rollout_ctl areal_rollout_ctl;

/*
 * Starts the controller over servers addrs[0..n) ("host:port"; n may be 0,
 * set_servers adds them later). Prompts start flowing at once (version 0).
 * Returns 0, AREAL_EINVAL (a bad field, named) or AREAL_ENOMEM.
 */
int areal_rollout_ctl_start(const areal_rollout_cfg *cfg, const char *const *addrs, int n,
                            const areal_rollout_callbacks *cb, areal_rollout_ctl **out,
                            areal_error *err);

/* Stops the threads (in-flight requests finish or fail) and frees everything. */
void areal_rollout_ctl_stop(areal_rollout_ctl *c);

/* Replaces the server list (known servers keep their state; one new to the list, or
 * back in it, has its weight version checked before its first request). */
int areal_rollout_ctl_set_servers(areal_rollout_ctl *c, const char *const *addrs, int n,
                                  areal_error *err);

/*
 * The same with each server's registered weight version (versions[k], nullable
 * entries): a server new to the list whose version is a number other than the
 * policy's is kept out (needs a sync) until a weight update reaches it, decided
 * under the controller's lock so no set_version can slip in between. *n_stale
 * (nullable) gets how many were kept out.
 */
int areal_rollout_ctl_set_registered(areal_rollout_ctl *c, const char *const *addrs,
                                     const char *const *versions, int n, int *n_stale,
                                     areal_error *err);

/*
 * Waits for n finished groups and moves them into out[0..n) (caller frees
 * each with areal_group_free). Returns 0, AREAL_ERANGE when timeout_s
 * passed first (the groups already taken stay queued), or AREAL_EINVAL
 * when the source is exhausted and fewer than n can ever come.
 */
int areal_rollout_ctl_wait(areal_rollout_ctl *c, areal_group *out, int n, double timeout_s,
                           areal_error *err);

/*
 * Pause: no new request is sent, and every server gets POST
 * /pause_generation (in-flight requests come back "abort" and wait).
 * Resume: POST /continue_generation everywhere, then requests flow again.
 */
int areal_rollout_ctl_pause(areal_rollout_ctl *c, areal_error *err);
int areal_rollout_ctl_resume(areal_rollout_ctl *c, areal_error *err);

/* The policy version requests are pinned to from now on (after a weight update). */
void areal_rollout_ctl_set_version(areal_rollout_ctl *c, long version);
long areal_rollout_ctl_version(areal_rollout_ctl *c);

/* A copy of the staleness counters (for checkpoints and /status). */
areal_staleness areal_rollout_ctl_counters(areal_rollout_ctl *c);
/* After a resume from a checkpoint at `version`: AReaL's accepted = version * B. */
void areal_rollout_ctl_recover(areal_rollout_ctl *c, long version);

/*
 * Runs a server-wide call on every server: POST path with body (borrowed).
 * A server that cannot be reached is marked as needing a sync and gets no
 * request until a weight update (a path starting /update_weights) reaches
 * it; it does not fail the call. Returns the first refusal (a 4xx or a bad
 * answer), after trying every server.
 */
int areal_rollout_ctl_broadcast(areal_rollout_ctl *c, const char *path, json_t *body,
                                areal_error *err);

/* The same call, only to the servers that need a sync (a restarted server catching up). */
int areal_rollout_ctl_sync_stale(areal_rollout_ctl *c, const char *path, json_t *body,
                                 areal_error *err);

/*
 * Evaluation: generates one sample of each prompt under sampling s,
 * outside the staleness bound (AReaL evaluates unbounded), through the same
 * workers and servers, and writes the scores into rewards[0..n). Blocks.
 */
int areal_rollout_ctl_eval(areal_rollout_ctl *c, const areal_rollout_prompt *prompts, int n,
                           const areal_sgl_sampling *s, float *rewards, areal_error *err);

/*
 * Answers that came from a server behind the policy (their weight_version is a
 * number other than the policy's): each was dropped and its request sent again,
 * and the server kept out until a weight update reached it. 0 in a healthy run.
 */
long areal_rollout_ctl_stale_answers(areal_rollout_ctl *c);

/* Number of servers currently known, and of those not in back-off. */
void areal_rollout_ctl_servers(areal_rollout_ctl *c, int *known, int *up);

/*
 * For weight sync outside the server-wide calls (xccl.h): copies up to cap
 * present servers' addresses into addrs (and whether each needs a sync
 * into stale, nullable); returns how many. mark_synced records the outcome
 * of an update that bypassed broadcast(): synced true lets the server take
 * requests again, false keeps it out until an update reaches it (logged
 * once, like broadcast's).
 */
int areal_rollout_ctl_addrs(areal_rollout_ctl *c, char (*addrs)[128], bool *stale, int cap);
void areal_rollout_ctl_mark_synced(areal_rollout_ctl *c, const char *addr, bool synced,
                                   const char *why);

#endif
