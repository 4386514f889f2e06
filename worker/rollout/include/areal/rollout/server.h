/*
 * server.h - the rollout server: SGLang's HTTP API (and the OpenAI-compatible
 * subset) over the rollout engine (areal/rollout/engine.h), on the shared
 * HTTP server (areal/http/server.h). See worker/rollout/README.md for the
 * endpoints, their fields and the store key convention of registration.
 *
 * Threads: the HTTP service thread parses requests and submits them; the
 * engine's scheduler thread answers generation requests through its
 * callbacks; one control thread runs the blocking operations (pause,
 * continue, flush, weight updates, joining weight-update groups) one at a
 * time in arrival order, so two weight updates can never interleave.
 */
#ifndef AREAL_ROLLOUT_SERVER_H
#define AREAL_ROLLOUT_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "areal/comm/coll.h"
#include "areal/error.h"

typedef struct areal_rollout_server areal_rollout_server;

typedef struct areal_rollout_server_config {
    const char *model_dir;      /* HF directory (config.json, safetensors, tokenizer.json?) */
    const char *host;           /* listen address; NULL: 127.0.0.1 */
    int port;                   /* 0: any (see areal_rollout_server_port) */
    const char *advertise_host; /* address peers dial for weight-update groups; NULL: host */
    size_t kv_bytes;            /* KV budget; 0: 64 MiB */
    int max_running;            /* 0: engine default */
    int max_queued;             /* 0: engine default */
    int threads;                /* model threads; 0: 1 */
    int tensor_parallel;        /* t of the allocation; > 1: tp_group's member 0 (below) */
    /* t > 1: the server's tp group (borrowed, outlives the server); this process is its
     * member 0 and serves HTTP, the others run areal_rollout_follow. The model is loaded
     * as tp shard 0 and kv_bytes is this rank's budget (its 1/t of the KV heads). */
    areal_coll *tp_group;
    const char *weight_version; /* initial version; NULL: "0" */
    const char *served_name;    /* /v1/models id; NULL: the model directory's base name */
    size_t max_body;            /* request body limit; 0: 64 MiB */
    int comm_timeout_ms;        /* weight-update group deadlines; 0: 60000 */
    bool disable_prefix_cache;  /* engine's disable_prefix_cache (SGLang's --disable-radix-cache) */
    bool no_prepack;            /* engine's no_prepack (--no-prepack) */
    /* the engine on the GPU model (engine's gpu; areal_rollout_backend's choice): where the
     * engine refuses it, the server starts a CPU engine and areal_rollout_server_backend_note
     * says why */
    bool gpu;
} areal_rollout_server_config;

/*
 * Loads the model and tokenizer, starts the engine and the HTTP server.
 * AREAL_EINVAL/EIO naming the file or field (a bad model directory, t > 1),
 * AREAL_EIO naming host:port when it cannot listen, AREAL_ENOMEM.
 */
int areal_rollout_server_start(const areal_rollout_server_config *cfg, areal_rollout_server **out,
                               areal_error *err);

int areal_rollout_server_port(const areal_rollout_server *s);

/* One line about the engine's backend when cfg.gpu was asked: that the engine runs on the GPU,
 * or why it stayed on the CPU; "" when the GPU was not asked. Valid while s lives. */
const char *areal_rollout_server_backend_note(const areal_rollout_server *s);

/* The weight version now serving, copied into buf[0..cap). */
void areal_rollout_server_version(areal_rollout_server *s, char *buf, size_t cap);

/*
 * SIGTERM: stop admitting (new generation requests get 503), let running
 * requests finish for up to grace_ms, abort the rest (their clients get
 * finish_reason abort with the partial output), and wait until every answer
 * is written (bounded). The server then only needs areal_rollout_server_stop.
 */
void areal_rollout_server_drain(areal_rollout_server *s, int grace_ms);

/* Stops everything and frees the server; NULL is a no-op. */
void areal_rollout_server_stop(areal_rollout_server *s);

/*
 * Whether the server can no longer serve because its tp group failed (a
 * follower died or hung past the group's deadline); the reason into
 * why[0..cap). /health then answers 503 and the program should exit
 * non-zero. Always false at t = 1.
 */
bool areal_rollout_server_failed(areal_rollout_server *s, char *why, size_t cap);

/*
 * A follower rank (member tp_rank >= 1 of tp_group, of tensor_parallel
 * members) of a t > 1 server: loads its shard of model_dir and runs the
 * engine's follower loop (areal_engine_follow) until the server stops
 * (returns 0) or the group fails (AREAL_EIO: the server died or hung).
 * threads as the server's. AREAL_EINVAL/EIO for a bad model directory or
 * a t that does not divide the model's heads (naming the field).
 */
int areal_rollout_follow(const char *model_dir, areal_coll *tp_group, int threads,
                         areal_error *err);

/*
 * Registration in a job's rendezvous store (areal/comm/store.h): a thread
 * that connects to host:port (retrying with backoff, one log line per
 * failure on `log`), then sets key "rollout/servers/<name>" to
 * {"addr": "<addr>", "version": "<weight version>"} and keeps the version
 * current after each weight update. areal_rollout_register_stop deletes the
 * key (when connected) and joins the thread.
 */
typedef struct areal_rollout_reg areal_rollout_reg;

int areal_rollout_register_start(areal_rollout_server *s, const char *store_host, int store_port,
                                 const char *name, const char *addr, FILE *log,
                                 areal_rollout_reg **out, areal_error *err);
void areal_rollout_register_stop(areal_rollout_reg *r);

#endif
