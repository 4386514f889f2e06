/*
 * server_internal.h - what the rollout server's files share: the server
 * struct, the control thread's job queue, the weight-update groups and the
 * JSON reply helpers. Not installed.
 *
 *   server.c           lifecycle, routes, model loading, drain
 *   server_generate.c  /generate and the OpenAI endpoints (engine callbacks)
 *   server_control.c   pause / continue / abort / health / info / metrics
 *   server_weights.c   update_weights_from_disk / _distributed, groups
 *   server_wslice.c    a sharded sender's slices: per-root groups, assembly (server_wslice.h)
 *   server_peer.c      GET /get_weights_safetensors, update_weights_from_peer
 *   server_req.c       request parsing (server_req.h)
 *   register.c         registration in the job's store
 */
#ifndef AREAL_ROLLOUT_SERVER_INTERNAL_H
#define AREAL_ROLLOUT_SERVER_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "areal/comm/comm.h"
#include "areal/http/metrics.h"
#include "areal/http/server.h"
#include "areal/model/tokenizer.h"
#include "areal/rollout/engine.h"
#include "areal/rollout/server.h"
#include "server_req.h"

typedef struct ctl_job ctl_job;
typedef void (*ctl_fn)(areal_rollout_server *s, areal_http_exchange *x,
                       const areal_http_request *r);
struct ctl_job {
    ctl_fn fn;
    areal_http_exchange *x;
    const areal_http_request *r;
    ctl_job *next;
};

#define WG_MAX 4

/* A joined weight-update group and the staging copy of an update in progress. */
typedef struct wgroup {
    char name[AREAL_COMM_GROUP_NAME_MAX];
    areal_comm *comm;
    areal_pg *pg;
    areal_pg **src; /* [n_src]: a sharded sender's per-root groups (server_wslice.c), lazily */
    int n_src;
} wgroup;

struct areal_rollout_server {
    areal_rollout_server_config cfg;
    char backend_note[AREAL_ERROR_MSG_MAX + 64]; /* areal_rollout_server_backend_note */
    char model_dir[4096], host[64], advertise[256], served_name[256];
    areal_engine *eng;
    areal_tokenizer *tok;
    areal_chat_template chat; /* the directory's template, else ChatML */
    areal_model_config mcfg;
    rr_limits lim;
    areal_http_server *http;
    long long created; /* unix seconds */

    /* control thread */
    pthread_t ctl;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ctl_job *head, *tail;
    bool ctl_stop;

    /* weight updates (control thread only) */
    wgroup groups[WG_MAX];
    areal_model staging; /* update_weights_from_distributed in progress */
    bool staging_on;
    unsigned char *staging_seen; /* per spec: received in this update */
    struct wslice_state *wslice; /* slices received per spec (server_wslice.c), or NULL */

    /* weight streams to peers (server_peer.c) */
    pthread_mutex_t smu;
    pthread_cond_t scv;
    int n_streams;     /* streaming threads alive */
    bool streams_stop; /* set by stop: streams end early, new ones get 503 */

    atomic_bool draining;
    atomic_int open_gens;   /* generation requests not yet answered */
    atomic_ullong rid_seq;  /* for rids the client did not give */
    atomic_int version_seq; /* bumped after each weight update (registration watches it) */

    /* /metrics */
    pthread_mutex_t mmu;
    metrics_registry *reg;
    metrics_family *m_running, *m_queued, *m_usage, *m_tput, *m_version, *m_blocks_shared,
        *m_blocks_used, *m_cache_hit, *m_prompt, *m_gen, *m_reqs, *m_aborted, *m_updates, *m_packed,
        *m_preempt, *m_e2e;
    areal_engine_stats last; /* counters already published */
};

/* Queues fn(s, x, r) on the control thread (x stays with it until fn finishes x). */
void srv_ctl(areal_rollout_server *s, ctl_fn fn, areal_http_exchange *x,
             const areal_http_request *r);

/* Responds with j (consumed) as JSON. */
void srv_json(areal_http_exchange *x, int status, json_t *j);

/* The body of r as a JSON object (an empty body is {}), or NULL after answering 400 itself. */
json_t *srv_body(areal_http_exchange *x, const areal_http_request *r);

/* Checks that the object's keys are all in known (NULL-terminated); else answers 400. */
bool srv_known(areal_http_exchange *x, json_t *j, const char *endpoint, const char *const *known);

/* Decodes ids as valid UTF-8 (invalid bytes become U+FFFD; partial: a trailing
 * incomplete character is held back). Returns a new string or NULL. */
char *srv_decode(areal_rollout_server *s, const int32_t *ids, int n, bool skip_special,
                 bool partial);

/* Route installers of the endpoint files. */
int srv_routes_generate(areal_rollout_server *s, areal_error *err);

/* ---- server_tp.c */
/* Loads dir as tp rank tp_rank's shard (tp > 1) or whole (tp <= 1). */
int srv_load_model(const char *dir, int tp, int tp_rank, areal_model *m, areal_error *err);
/* At t > 1: answers 400 naming endpoint (a weight path not served at t > 1) and returns true. */
bool srv_tp_unsupported(areal_rollout_server *s, areal_http_exchange *x, const char *endpoint);
int srv_routes_control(areal_rollout_server *s, areal_error *err);
int srv_routes_weights(areal_rollout_server *s, areal_error *err);
int srv_routes_peer(areal_rollout_server *s, areal_error *err);

/* Ends the weight streams (early) and waits for their threads (before the engine goes). */
void srv_peer_stop(areal_rollout_server *s);
int srv_metrics_init(areal_rollout_server *s);

/* Frees the weight-update groups and the staging copy (control thread or stop). */
void srv_weights_free(areal_rollout_server *s);

#endif
