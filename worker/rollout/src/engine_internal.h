/*
 * engine_internal.h - the rollout engine's state (internal to engine*.c).
 *
 * Locking: one mutex `mu` guards the waiting list, the live-request list,
 * every request's abort / stop flags, the command slot, the flags and the
 * published stats. The running list, the block manager, the KV floats, the
 * sequences' token arrays and the model belong to the scheduler thread
 * alone; it takes `mu` only to plan a step and to publish its results, and
 * never holds it during the forward or a callback. Blocking calls
 * (pause, swap, ...) are serialised by `cmd_mu` and handed to the scheduler
 * through the command slot, which it serves between two steps.
 */
#ifndef AREAL_ROLLOUT_ENGINE_INTERNAL_H
#define AREAL_ROLLOUT_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "areal/model/generate.h"
#include "areal/model/paged.h"
#include "areal/rollout/engine.h"
#include "kv_blocks.h"

typedef enum seq_state { SEQ_WAITING, SEQ_RUNNING, SEQ_DONE } seq_state;

typedef struct eng_req eng_req;

typedef struct eng_seq {
    eng_req *req;
    int index;
    int32_t *tok; /* prompt then output; n_tok of cap */
    int n_tok, cap;
    float *lp;             /* [max_new] output logprobs */
    areal_engine_top *top; /* [max_new * top_n] */
    int n_out;
    int n_computed; /* positions whose keys and values are in the table's blocks */
    int32_t *table; /* block ids */
    int n_table;
    uint64_t *chain; /* chain hash of each full block so far */
    int n_chained;
    areal_rng rng;
    seq_state state;
    areal_engine_finish finish;
    int32_t matched;
    int cached_tokens;
    bool admitted_once;
    uint64_t admit_order, epoch;
    int chunk;                   /* tokens fed in the step being built; 0: not in it */
    struct eng_seq *prev, *next; /* waiting or running list */
} eng_seq;

struct eng_req {
    char rid[AREAL_ENGINE_RID_MAX];
    int32_t *input;
    int n_input;
    areal_engine_params p; /* p.stop_token_ids points at stop_ids */
    int32_t *stop_ids;
    areal_engine_done_fn on_done;
    areal_engine_token_fn on_token;
    void *user;
    int n, n_live;
    eng_seq *seqs;
    float *in_lp; /* prompt scoring: positions [score_from, n_input) */
    areal_engine_top *in_top;
    int score_from, score_next; /* score_next: next position to score */
    bool abort_flag, stop_flag;
    bool prompt_done; /* some sample computed the whole prompt: siblings may share it */
    bool any_abort;
    double t_submit, t_admit;
    areal_engine_result *res; /* built at retirement, handed to on_done */
    eng_req *prev, *next;     /* live list */
    eng_req *done_next;       /* the scheduler's list of finished requests */
};

typedef struct seq_list {
    eng_seq *head, *tail;
    int n;
} seq_list;

/* A model lent by areal_engine_hold_model (under mu); freed at its last
 * release once a swap has replaced it. */
typedef struct eng_lent {
    areal_model *m;
    int refs;
    struct eng_lent *next;
} eng_lent;

/* The engine's model backend (areal/rollout/backend.h): the one call of a step that touches
 * the model. step runs the planned step e->batch[0..nb) already packed into e->step_tok, e->cu,
 * e->pseq and e->out_rows[0..n_out), writing e->logits (areal_model_step_paged's contract), on
 * the scheduler thread outside mu; release frees be_state (NULL: none). */
typedef struct eng_backend {
    const char *name;
    int (*step)(areal_engine *e, int nb, int n_out, areal_error *err);
    void (*release)(areal_engine *e);
} eng_backend;

typedef enum eng_cmd { CMD_NONE, CMD_PAUSE, CMD_CONTINUE, CMD_FLUSH, CMD_SWAP } eng_cmd;

struct areal_engine {
    areal_engine_config cfg; /* defaults filled; eos ids owned */
    areal_model *model;      /* owned; replaced by swaps (scheduler thread, under cmd_mu) */
    areal_model_config mcfg; /* its config, stable across swaps: read by any thread */
    areal_pool *pool;
    areal_paged_kv kv;
    kv_blocks blocks;
    size_t block_bytes;
    int max_context;
    int v_draw;     /* ids a draw, a logprob or a top list may use: cfg.vocab_limit or all */
    uint64_t epoch; /* bumped by every swap */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the scheduler waits here */
    pthread_cond_t cmd_cv, idle_cv;
    pthread_mutex_t cmd_mu;
    /* under mu */
    seq_list waiting;
    eng_req *live_head;
    int n_live;
    bool paused, draining, shutdown, any_flag;
    eng_cmd cmd;
    areal_engine_pause_mode cmd_mode;
    areal_model *cmd_model;
    const char *cmd_version;
    const char *cmd_dir; /* CMD_SWAP at t > 1: the followers load their shards of it */
    bool cmd_abort;
    int cmd_rc; /* the served command's result (CMD_SWAP at t > 1), cmd_err its message */
    areal_error cmd_err;
    /* tensor parallelism (engine_tp.c): the group (NULL at t = 1) and its state */
    areal_coll *tp;
    bool tp_failed; /* under mu: a collective failed; nothing is served any more */
    char tp_why[640];
    int32_t *tp_buf; /* the step message (scheduler only) */
    size_t tp_cap;
    uint64_t next_rid, seed_state;
    char version[AREAL_ENGINE_VERSION_MAX];
    eng_lent *lent;        /* models held by readers */
    areal_engine_stats st; /* published counters */
    /* scheduler only */
    seq_list running;
    uint64_t admit_counter;
    double win_t0;
    uint64_t win_gen0;
    /* step buffers, sized at create */
    eng_seq **batch;         /* [max_running] */
    int32_t *step_tok, *cu;  /* [max_step_tokens], [max_running + 1] */
    areal_paged_seq *pseq;   /* [max_running] */
    int32_t *out_rows;       /* [max_running + SCORE_ROWS] */
    float *logits, *scratch; /* [(max_running + SCORE_ROWS) * V], [2 V] */
    const eng_backend *be;   /* eng_cpu_backend, or the GPU's (eng_gpu_attach) */
    void *be_state;
};

/* ---- backend.c / gpu/src/engine_gpu.c: the step's backend */
/* Today's step: areal_model_step_paged on the CPU model and e->kv. */
extern const eng_backend eng_cpu_backend;
/* Moves e's steps onto the GPU model (a copy of e->model's weights, a paged cache of
 * e->blocks' geometry, CUDA graphs where the model has no MoE layer); re-uploads the weights
 * at the first step after each swap. AREAL_EINVAL with the reason where it cannot. */
int eng_gpu_attach(areal_engine *e, areal_error *err);

/* Prompt-scoring rows per step at most (bounds the logits buffer). */
#define SCORE_ROWS 64

/* ---- engine_seq.c: requests, sequences, results */
void seq_list_push_back(seq_list *l, eng_seq *s);
void seq_list_push_front(seq_list *l, eng_seq *s);
void seq_list_remove(seq_list *l, eng_seq *s);
/* A request from r with its n sequences waiting-ready; NULL on no memory. */
eng_req *req_new(const areal_engine_request *r, int n, int block_tokens, uint64_t seed,
                 const char *rid);
void req_free(eng_req *q);
/* Moves q's outputs into a new result (q keeps the rest); NULL on no memory. */
areal_engine_result *req_result(eng_req *q, const char *version);

/* ---- engine_sample.c: next-token choice and logprobs */
/* Draws the next token for p from logits [V] (scratch 2 V floats) as
 * areal_sample does, plus min_p; writes its logprob. */
int32_t eng_sample(const float *logits, int V, const areal_engine_params *p, areal_rng *rng,
                   float *scratch, float *logprob);
/* log softmax(logits / T) (T <= 0: raw logits) over ids [0, V) at id (-inf
 * for id >= V), and the k best (best first, padded with id -1) into top[k]
 * when k > 0. */
float eng_logprob(const float *logits, int V, float temperature, int32_t id, int k,
                  areal_engine_top *top);

/* Whether m is lent (under mu): then a swap must not free it. */
bool eng_model_lent(const areal_engine *e, const areal_model *m);

/* ---- engine_tp.c: the leader's side of the lock-step protocol (scheduler thread) */
/* The model's reduction hook over tp group ctx (an areal_coll). */
int eng_tp_reduce(void *ctx, areal_reduce_point point, int layer, float *buf, size_t count,
                  areal_error *err);
/* Broadcasts the cache geometry (at create, before the scheduler starts). */
int eng_tp_hello(areal_engine *e, areal_error *err);
/* Broadcasts the planned step (before the leader's own forward). */
int eng_tp_step(areal_engine *e, int nb, areal_error *err);
/* The idle heartbeat, and the stop message of destroy. */
int eng_tp_ping(areal_engine *e, areal_error *err);
int eng_tp_stop(areal_engine *e, areal_error *err);
/* Every follower loads its shard of dir; AREAL_OK when every rank (this one: self_rc) did. */
int eng_tp_load(areal_engine *e, const char *dir, int self_rc, areal_error *err);
/* Marks the engine failed (takes mu): live requests abort, nothing new is admitted. */
void eng_tp_fail(areal_engine *e, const areal_error *why);

/* ---- engine_sched.c: the scheduler thread */
void *eng_scheduler(void *arg);
double eng_now(void);

#endif
