/*
 * engine.h - the rollout engine: continuous batching over the CPU model with
 * a paged KV cache, a prefix cache, admission control, pause / abort /
 * resume and atomic weight swaps. The SGLang-compatible HTTP server
 * (areal/rollout/server.h) is a thin layer over this API; nothing here knows
 * HTTP or JSON.
 *
 * Threads. areal_engine_create starts one scheduler thread (plus the model's
 * pool of cfg.threads - 1 workers). Every other function may be called from
 * any thread. Each scheduler step admits queued requests while the KV budget
 * and max_running allow, runs ONE forward over the prefill chunks of the
 * newcomers and one decode token of every other running sequence, samples,
 * and retires finished sequences at once (their blocks return to the cache).
 *
 * Callbacks (on_token, on_done) run on the scheduler thread, never with an
 * engine lock held. They may call areal_engine_submit / abort / abort_all /
 * stop / get_stats, but must NOT call the blocking functions (pause,
 * continue, flush_cache, swap_model, copy_model, drain, destroy: they wait
 * for the scheduler, which would then wait for itself), and must not block on
 * a thread that may be inside one of those (the HTTP side should copy or
 * queue the data and return). They should be quick: the whole batch waits.
 *
 * Memory. The KV budget (cfg.kv_bytes) is split into fixed blocks of
 * block_tokens positions (keys and values of every layer); nothing is
 * reserved per request for its maximum length. A block table per sequence
 * maps positions to blocks. Full blocks are entered into a prefix cache keyed
 * by a hash of all tokens up to and including the block, with reference
 * counts; unreferenced cached blocks stay reusable until LRU eviction. So the
 * n samples of one prompt, and a prompt + partial output resubmitted after an
 * abort, share the blocks already computed. When the budget runs out while
 * decoding, the most recently admitted sequence is preempted (its blocks
 * released, its generated tokens kept) and later recomputed; a request that
 * could not fit in the whole budget alone is refused at submit.
 *
 * Logprobs are those of the distribution each token was drawn from, exactly
 * areal_sample's definition (areal/model/generate.h): log softmax(logits / T)
 * restricted to the top-k / top-p / min-p set and renormalised; for greedy
 * (temperature 0) log softmax(logits). Sample i of a request draws from the
 * RNG stream (sampling_seed, i), so seeded output does not depend on what
 * else is in the batch, and a 1-sample seeded request equals areal_generate
 * of that prompt with the same seed.
 *
 * Weights. The engine owns the model it serves. areal_engine_swap_model
 * installs a new model of the same architecture between two steps and frees
 * the old one after the swap; the prefix cache is flushed with it, so no KV
 * computed by the old weights is ever reused by a new request. A load that
 * failed never reaches the engine (the caller builds the new model first).
 *
 * Tensor parallelism (t > 1). The server's t ranks form one tp group; member
 * 0 runs this engine (HTTP, scheduler, prefix cache, sampling) on its shard
 * and the others run areal_engine_follow on theirs. Lock-step protocol: at
 * create the engine broadcasts the cache geometry (blocks, block size); at
 * every step, before its own forward, it broadcasts over the group what the
 * followers need to run the identical forward: the step's token ids, each
 * sequence's start position and block table (allocations, frees and prefix
 * sharing are rank 0's bookkeeping: a follower's cache is the same blocks
 * written at the same ids, so it needs the tables only, never the
 * allocator). The forwards then meet in the model's tp reductions. While
 * idle it broadcasts a heartbeat every tp_ping_ms, so a follower waiting for
 * the next step tells a quiet leader from a dead one. Weight swaps by
 * directory (areal_engine_swap_model_dir) make every follower load its shard
 * and switch only if every rank loaded. Pause, abort, stop, flush and drain
 * are rank 0's state only (the followers hold none of it); destroy tells the
 * followers to stop. Failure: a collective error (a follower died, or hung
 * past the group's deadline) ends every live request with ABORT, the engine
 * refuses new work (ESTOPPED naming the failure) and areal_engine_failed
 * says so, so the server's health check fails and its process exits; a
 * follower sees a dead leader as its own collective error and returns it.
 * Rejected: mirroring the scheduler's decisions on every rank (flags, block
 * allocator, prefix cache) and sending only the requests: every piece of
 * state would need to stay bit-identical across processes; the per-step
 * tables are a few hundred bytes beside the step's [T, H] reductions.
 */
#ifndef AREAL_ROLLOUT_ENGINE_H
#define AREAL_ROLLOUT_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/comm/coll.h"
#include "areal/error.h"
#include "areal/model/model.h"

/*
 * Engine-specific return codes, beside the AREAL_E* ones of error.h. They
 * sit far below error.h's range so that codes appended there never collide.
 */
enum {
    /* the queue bound is reached: retry later (HTTP 503 + Retry-After) */
    AREAL_ENGINE_EFULL = -100,
    AREAL_ENGINE_ESTOPPED = -101, /* the engine is draining or shutting down (HTTP 503) */
    AREAL_ENGINE_ENOENT = -102,   /* no live request has that rid (abort / stop) */
};

#define AREAL_ENGINE_RID_MAX     128 /* bytes of a rid, NUL included */
#define AREAL_ENGINE_VERSION_MAX 64  /* bytes of a weight version string, NUL included */

typedef struct areal_engine areal_engine;

typedef struct areal_engine_config {
    size_t kv_bytes;     /* KV cache budget in bytes (keys + values of all layers); required */
    int block_tokens;    /* positions per KV block; 0: 16 */
    int max_running;     /* sequences in the running batch at most; 0: 64 */
    int max_queued;      /* queued sequences (samples) at most before submit says EFULL; 0: 1024 */
    int max_step_tokens; /* new tokens per forward (prefill is chunked to fit); 0: 2048 */
    int threads;         /* threads of the model's pool (the scheduler is one of them); 0: 1 */
    /* t of the server's allocation; 0 or 1: one process. > 1: the model is a tp-only shard
     * (tp_rank 0) and tp_group its tensor-parallel group, whose other members run
     * areal_engine_follow (see "Tensor parallelism" above) */
    int tensor_parallel;
    areal_coll *tp_group;         /* borrowed; outlives the engine; this process is member 0 */
    int tp_ping_ms;               /* idle heartbeat to the followers; 0: 1000 (must be below the
                                   * group's deadline, which bounds how fast a dead peer is seen) */
    const int32_t *eos_token_ids; /* end a sample unless ignore_eos (copied); may be NULL */
    int n_eos_token_ids;
    const char *weight_version; /* the initial version string (copied); NULL: "0" */
    /* ids >= vocab_limit (the padding rows of a padded vocabulary past the
     * tokenizer's) are never drawn and count as -inf in every logprob, as
     * areal_sampling.vocab_limit; 0: all ids */
    int vocab_limit;
    bool disable_prefix_cache; /* no block is shared or reused (SGLang's --disable-radix-cache;
                                * for benchmarks and debugging) */
    /* serve without the packed twin of the linear weights (areal_model_infer_pack): saves
     * one copy of them, at ~0.6x the decode speed; the same tokens and logprobs either way */
    bool no_prepack;
    /* run the forward on the GPU model (areal/rollout/backend.h: the server's choice); refused
     * by areal_engine_create with AREAL_EINVAL and the reason where it cannot (a build without
     * the GPU model, tensor_parallel > 1, a model the GPU model does not run): the caller logs
     * it and creates a CPU engine instead */
    bool gpu;
} areal_engine_config;

/* SGLang's sampling_params plus the logprob options of /generate. */
typedef struct areal_engine_params {
    int max_new_tokens; /* >= 0; prompt + max_new_tokens must fit the model's context */
    float temperature;  /* >= 0; 0 is greedy */
    float top_p;        /* (0, 1]; callers pass 1 for "off" */
    int top_k;          /* >= 0; 0 or -1 (SGLang's "off") mean all tokens */
    float min_p;        /* [0, 1); 0 is off: keep tokens with p >= min_p * p_max */
    /* end a sample after any of these (kept in the output); copied */
    const int32_t *stop_token_ids;
    int n_stop_token_ids;
    bool ignore_eos; /* do not end on cfg.eos_token_ids (stop_token_ids still end) */
    int n;           /* samples of this prompt, >= 1; 0 means 1 */
    bool has_seed;   /* sampling_seed given; else the engine draws a seed per request */
    uint64_t sampling_seed;
    bool return_logprob;   /* fill output_logprobs (and the top lists) */
    int logprob_start_len; /* with return_logprob: input logprobs from this position; -1: none */
    /* with return_logprob: also the k best (logprob, id) per position, under the
     * unfiltered log softmax(logits / T) (T 0: raw logits), best first */
    int top_logprobs_num;
} areal_engine_params;

/* Fills p with SGLang's defaults: max_new_tokens 128, temperature 1, top_p 1,
 * top_k 0, min_p 0, n 1, logprob_start_len -1, the rest zero. */
void areal_engine_params_default(areal_engine_params *p);

/* One (logprob, id) entry of a top-logprobs list, best first. */
typedef struct areal_engine_top {
    float logprob;
    int32_t id;
} areal_engine_top;

typedef enum areal_engine_finish {
    AREAL_FINISH_STOP = 1,   /* a stop token / EOS (matched_token), or the caller's stop */
    AREAL_FINISH_LENGTH = 2, /* max_new_tokens, or the model's context is full */
    AREAL_FINISH_ABORT = 3,  /* abort, pause(abort), swap with abort, drain, destroy */
} areal_engine_finish;

typedef struct areal_engine_sample {
    int index;                    /* 0 .. n-1 */
    int32_t *output_ids;          /* [n_output] */
    float *output_logprobs;       /* [n_output] with return_logprob, else NULL */
    areal_engine_top *output_top; /* [n_output * top_logprobs_num] with return_logprob, else NULL */
    int n_output;
    areal_engine_finish finish;
    int32_t matched_token; /* the stop token that ended it, or -1 (length, abort, caller's stop) */
    int cached_tokens;     /* prompt tokens served from the prefix cache (SGLang's cached_tokens) */
} areal_engine_sample;

typedef struct areal_engine_result {
    char rid[AREAL_ENGINE_RID_MAX];
    int n;                        /* samples */
    areal_engine_sample *samples; /* [n], by index */
    int prompt_tokens;
    /* Prompt scoring (return_logprob and logprob_start_len >= 0): entry j is
     * position logprob_start_len + j: log p(input[pos] | input[< pos]) under
     * log softmax(logits / temperature) (temperature 0: of the raw logits),
     * no top-k/top-p; NaN at position 0 (SGLang's null). */
    float *input_logprobs;       /* [n_input_logprobs] or NULL */
    areal_engine_top *input_top; /* [n_input_logprobs * top_logprobs_num] or NULL */
    int n_input_logprobs;
    int top_logprobs_num;
    char weight_version[AREAL_ENGINE_VERSION_MAX]; /* version serving when the request finished */
    double queue_s, e2e_s; /* seconds from submit to first admission, and to the end */
} areal_engine_result;

/* Frees a result handed to on_done (NULL is a no-op). */
void areal_engine_result_free(areal_engine_result *r);

/* One generated token, for streaming and for stop strings. */
typedef struct areal_engine_token {
    int sample;   /* which sample */
    int position; /* 0-based index in that sample's output */
    int32_t id;
    float logprob;               /* always filled */
    const areal_engine_top *top; /* [n_top] with return_logprob and top_logprobs_num, else NULL */
    int n_top;
} areal_engine_token;

/*
 * Called once per generated token (before on_done). Return 0 to continue, or
 * 1 to end this sample now with finish STOP (the token is kept; matched_token
 * -1): this is how the HTTP layer ends a request on a `stop` string. The
 * pointers are valid only during the call.
 */
typedef int (*areal_engine_token_fn)(void *user, const areal_engine_token *tok);

/*
 * Called exactly once per accepted request, when its last sample ends, with
 * a result the callee owns (free with areal_engine_result_free; NULL only
 * when the result itself could not be allocated). Every sample's tokens are
 * complete when it runs. The rid is free for reuse (a resubmission) as soon
 * as on_done starts.
 */
typedef void (*areal_engine_done_fn)(void *user, areal_engine_result *res);

typedef struct areal_engine_request {
    const int32_t *input_ids; /* [n_input] >= 1, each in [0, vocab); copied */
    int n_input;
    areal_engine_params params;
    const char *rid;                /* copied; NULL or "": the engine makes one ("req-<n>") */
    areal_engine_done_fn on_done;   /* required */
    areal_engine_token_fn on_token; /* optional */
    void *user;
} areal_engine_request;

/*
 * Starts an engine serving *model with cfg. On success the engine owns the
 * model's contents (*model is zeroed; the engine sets the model's pool to its
 * own) and *out is the engine. Returns 0, AREAL_EINVAL (a bad setting, naming
 * the field: kv_bytes smaller than one block, block_tokens outside [1, 1024],
 * negative counts; tensor_parallel > 1 without a tp_group of that size whose
 * member 0 this is, or with a model that is not its tp-only shard 0), the
 * first broadcast's error (AREAL_EIO: a follower is missing) or AREAL_ENOMEM
 * (the KV budget could not be allocated, or a thread could not start). At
 * t > 1 kv_bytes is this rank's budget, for its 1/t of the key/value heads.
 * On failure the caller still owns *model.
 */
int areal_engine_create(areal_model *model, const areal_engine_config *cfg, areal_engine **out,
                        areal_error *err);

/*
 * Aborts every request (on_done fires with finish ABORT for each), stops the
 * scheduler and frees everything, the model included. NULL is a no-op.
 */
void areal_engine_destroy(areal_engine *e);

/*
 * Queues a request (non-blocking). Returns 0 (on_done will fire exactly
 * once), AREAL_EINVAL (a bad request: the message names the field, e.g.
 * input_ids out of the vocabulary, max_new_tokens past the context, a
 * duplicate live rid, a request larger than the whole KV budget),
 * AREAL_ENGINE_EFULL (the queue bound: queued samples + n > max_queued),
 * AREAL_ENGINE_ESTOPPED (draining) or AREAL_ENOMEM. On any error no callback
 * fires. A paused engine accepts requests; they wait in the queue.
 */
int areal_engine_submit(areal_engine *e, const areal_engine_request *req, areal_error *err);

/*
 * Ends the live request `rid` (queued or running) with finish ABORT and the
 * partial output so far; on_done fires from the scheduler. Returns 0 or
 * AREAL_ENGINE_ENOENT. Non-blocking.
 */
int areal_engine_abort(areal_engine *e, const char *rid);

/* Aborts every live request (SGLang's abort_all). Non-blocking; returns how many. */
int areal_engine_abort_all(areal_engine *e);

/*
 * Ends the live request `rid` with finish STOP (matched_token -1), e.g. when
 * the HTTP layer sees a stop string outside on_token. Tokens generated before
 * the scheduler sees it stay in the output. Returns 0 or AREAL_ENGINE_ENOENT.
 */
int areal_engine_stop(areal_engine *e, const char *rid);

typedef enum areal_engine_pause_mode {
    AREAL_PAUSE_ABORT = 0,    /* every live request ends now with ABORT and its partial output */
    AREAL_PAUSE_IN_PLACE = 1, /* running requests are held with their KV and continue later */
} areal_engine_pause_mode;

/*
 * Pauses generation. Blocks until the scheduler is between steps and, for
 * ABORT, every live request's on_done has run. While paused nothing is
 * admitted or stepped; new submissions queue. Pausing a paused engine is
 * fine (ABORT then still aborts what is held). Returns 0.
 */
int areal_engine_pause(areal_engine *e, areal_engine_pause_mode mode);

/* Resumes a paused engine (no-op if running). Returns 0. */
int areal_engine_continue(areal_engine *e);

/*
 * Drops every unreferenced block of the prefix cache and forgets the hashes
 * of referenced ones. Blocks until between steps. Returns 0.
 */
int areal_engine_flush_cache(areal_engine *e);

/*
 * Installs *model (same architecture: every tensor name and shape equal) as
 * the served weights under `version` (copied; NULL keeps the current
 * version string, as SGLang does without weight_version). Blocks until the scheduler is
 * between steps, swaps, flushes the prefix cache and frees the old model.
 * With abort_live, every live request first ends with ABORT (AReaL's
 * abort_all_requests); otherwise running requests continue on the new
 * weights with the KV they hold (SGLang's in-place behaviour). On success
 * the engine owns the model's contents (*model zeroed). Returns 0 or
 * AREAL_EINVAL (another architecture, naming the first differing tensor;
 * then the caller still owns *model and the old weights keep serving).
 */
int areal_engine_swap_model(areal_engine *e, areal_model *model, const char *version,
                            bool abort_live, areal_error *err);

/*
 * As areal_engine_swap_model for weights loaded from HF directory dir
 * (*model is this rank's part of it). At t > 1 every follower loads its own
 * shard of dir on this command, and the version switches on every rank at
 * the same step only if every rank loaded; otherwise every rank keeps the old
 * weights and AREAL_EINVAL names the rank and its reason (the caller still
 * owns *model); a collective failure (AREAL_EIO) fails the engine as a
 * step's would. At t = 1 the same as areal_engine_swap_model.
 */
int areal_engine_swap_model_dir(areal_engine *e, areal_model *model, const char *dir,
                                const char *version, bool abort_live, areal_error *err);

/* The follower side of a t > 1 engine (see "Tensor parallelism"). */
typedef struct areal_engine_follow_config {
    areal_coll *tp_group; /* borrowed; this process is member tp_rank (>= 1) */
    int threads;          /* threads of the model's pool; 0: 1 */
} areal_engine_follow_config;

/*
 * Runs the follower loop of tensor-parallel rank areal_coll_rank(tp_group)
 * until the leader's engine is destroyed (returns 0) or a collective fails
 * (the leader died or hung past the group's deadline: AREAL_EIO naming the
 * group and peer). *model is this rank's shard (tp = the group's size,
 * tp_rank = its rank), borrowed during the call; weight loads replace its
 * contents (the caller frees *model after the call, whatever it returns).
 * AREAL_EINVAL for a model that is not such a shard, AREAL_ENOMEM.
 */
int areal_engine_follow(areal_model *model, const areal_engine_follow_config *cfg,
                        areal_error *err);

/*
 * Whether the engine stopped serving because its tp group failed; the reason
 * is copied into why[0..cap) (when not NULL). Always false at t = 1.
 */
bool areal_engine_failed(areal_engine *e, char *why, size_t cap);

/*
 * Initialises *dst as a copy of the served model (config and parameters;
 * gradients zero), e.g. as the staging copy that update_weights_from_distributed
 * fills bucket by bucket before areal_engine_swap_model. Safe while serving.
 * Returns 0 or AREAL_ENOMEM (then *dst is empty).
 */
int areal_engine_copy_model(areal_engine *e, areal_model *dst, areal_error *err);

/*
 * Lends the served model, read-only, with the version it serves under
 * (copied into version[cap]): the pair is consistent, and the model stays
 * valid (a swap meanwhile installs the new one but frees the lent one only
 * at its last release) until areal_engine_release_model(e, m). For a reader
 * that must not copy the weights nor block swaps and pauses while it works
 * (the server streaming its weights to a peer). Every hold must be released
 * before areal_engine_destroy. Returns the model, or NULL when out of memory
 * (then nothing is held).
 */
const areal_model *areal_engine_hold_model(areal_engine *e, char *version, size_t cap);

/* Returns a model lent by areal_engine_hold_model (once per hold). */
void areal_engine_release_model(areal_engine *e, const areal_model *m);

/* The served model's configuration (stable: swaps keep the architecture). */
const areal_model_config *areal_engine_model_config(const areal_engine *e);

/* The effective engine configuration (defaults filled in; eos_token_ids is
 * the engine's copy; weight_version is NULL: the current version is in the
 * stats). Valid until destroy. */
const areal_engine_config *areal_engine_get_config(const areal_engine *e);

/*
 * Stops admitting new submissions (they get AREAL_ENGINE_ESTOPPED), lifts a
 * pause (held requests must be able to finish), then waits until no request
 * is live (every on_done has returned); with abort_live the live ones are
 * aborted first, else they finish. For SIGTERM handling. Irreversible.
 * Returns 0.
 */
int areal_engine_drain(areal_engine *e, bool abort_live);

/* A snapshot for /metrics, /get_server_info and tests. */
typedef struct areal_engine_stats {
    int running;       /* sequences in the running batch */
    int running_peak;  /* the largest running batch so far */
    int queued;        /* sequences waiting (including preempted ones) */
    int live_requests; /* accepted requests whose on_done has not run */
    bool paused;
    int block_tokens, blocks_total;
    int blocks_used;           /* referenced by at least one sequence */
    int blocks_shared;         /* referenced by two or more sequences */
    int blocks_cached;         /* unreferenced but kept by the prefix cache (evictable) */
    int blocks_used_peak;      /* the most blocks_used ever seen */
    size_t kv_bytes_budget;    /* cfg.kv_bytes */
    size_t kv_bytes_allocated; /* blocks_total * block bytes (never above the budget) */
    double token_usage;        /* blocks_used / blocks_total (SGLang's token_usage) */
    uint64_t requests_total, requests_finished, requests_aborted;
    uint64_t prompt_tokens_total; /* prompt tokens of admitted samples */
    uint64_t cached_tokens_total; /* of those, served from the prefix cache */
    uint64_t generated_tokens_total;
    uint64_t preemptions;
    uint64_t steps;
    uint64_t mixed_steps;    /* steps whose one forward held prefill and decode tokens */
    double gen_throughput;   /* generated tokens per second over the last few seconds */
    uint64_t weight_updates; /* successful swaps */
    bool weights_packed; /* the served weights have their packed twin (areal_model_infer_pack) */
    char weight_version[AREAL_ENGINE_VERSION_MAX];
} areal_engine_stats;

void areal_engine_get_stats(areal_engine *e, areal_engine_stats *st);

#endif
