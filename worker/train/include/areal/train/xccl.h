/*
 * xccl.h - AReaL's `xccl` weight-update mode for the trainer loop
 * (areal.md §5.2) over the controller's rollout servers:
 *
 *   start:    one POST /init_weights_update_group per server; the trainer's
 *             source rank is rank 0 of a comm-runtime group (wsync.h), server
 *             i is rank 1 + i of 1 + n.
 *   per step: (the loop pauses) -> the model's tensors in buckets of at most
 *             bucket_bytes (a larger tensor goes alone): per bucket ONE
 *             POST /update_weights_from_distributed to every server, sent
 *             concurrently, and ONE broadcast of the bucket's bytes -> (the
 *             loop sets the version and resumes).
 *
 * Every bucket names weight_version explicitly, so a server that joined late
 * or restarted serves exactly the trainer's version, not its own count.
 *
 * Faults. Before each update the servers are asked GET /health; one that
 * does not answer is left out of the group and marked in the controller as
 * needing a sync (it gets no requests). A group whose members changed is
 * rebuilt. A bucket that fails (a server died mid-bucket: its POST has no
 * answer, or the broadcast breaks) closes the group at once, so no rank is
 * left waiting on a dead peer past the comm timeout; the trainer logs one
 * line naming the server and the bucket, rebuilds the group over the
 * servers that still answer and resends the whole update once (the servers
 * drop a half-received update themselves). A second failure is returned.
 * catch_up() sends the current weights, outside any pause, to servers that
 * missed updates and answer again (restarted), over a one-off group of
 * their own, leaving the main group alone.
 *
 * Threads: one trainer thread calls these; each POST runs on a short-lived
 * thread of its own so that every server can be waiting in the broadcast.
 */
#ifndef AREAL_TRAIN_XCCL_H
#define AREAL_TRAIN_XCCL_H

#include <stdbool.h>
#include <stddef.h>

#include "areal/error.h"
#include "areal/model/model.h"
#include "areal/train/rollout_ctl.h"

typedef struct areal_xccl_cfg {
    const char *host;      /* the address servers reach the trainer at; NULL: 127.0.0.1 */
    size_t bucket_bytes;   /* 0: 1 GiB (AReaL's weight_chunked_mem_mb default, 1024) */
    int timeout_ms;        /* group join and each broadcast; 0: 30000 */
    double http_timeout_s; /* each POST; 0: 120 */
    const char *group;     /* NULL: "update_weight_group" (AReaL's name) */
    /* Nullable test hook: bucket b's POSTs are out, its broadcast not yet sent. */
    void (*on_bucket)(void *ctx, int bucket);
    void *hook_ctx;
    void (*log)(void *ctx, const char *line); /* nullable */
    void *log_ctx;
} areal_xccl_cfg;

typedef struct areal_xccl_stats {
    double seconds; /* the whole update, health checks and group rebuilds included */
    size_t bytes;   /* tensor bytes broadcast (one copy; every server receives them) */
    int buckets;
    int servers;  /* servers that took the update */
    int attempts; /* 1, or 2 after a retry */
} areal_xccl_stats;

typedef struct areal_xccl areal_xccl;

/*
 * Copies cfg (strings included) and builds the group over the controller's
 * servers that answer /health now (none answering: the first update builds
 * it). Returns 0, AREAL_EIO (a server that answers refused to join, named)
 * or AREAL_ENOMEM. *out is freed with areal_xccl_close.
 */
int areal_xccl_open(const areal_xccl_cfg *cfg, areal_rollout_ctl *ctl, areal_xccl **out,
                    areal_error *err);

/*
 * Sends m's tensors as version `version` to every server that answers (see
 * the faults above); abort_all is the buckets' abort_all_requests. st is
 * nullable. Returns 0 (also when no server answers: they are marked to
 * catch up), or AREAL_EIO after the retry failed too.
 */
int areal_xccl_update(areal_xccl *x, areal_rollout_ctl *ctl, const areal_model *m, long version,
                      bool abort_all, areal_xccl_stats *st, areal_error *err);

/* Sends m as `version` to the servers marked as needing a sync that answer /health again. */
int areal_xccl_catch_up(areal_xccl *x, areal_rollout_ctl *ctl, const areal_model *m, long version,
                        areal_error *err);

/* Leaves the group and stops its store; NULL is a no-op. */
void areal_xccl_close(areal_xccl *x);

#endif
