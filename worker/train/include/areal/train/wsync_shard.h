/*
 * wsync_shard.h - the sharded form of update_weights_from_distributed: every
 * trainer rank that holds a slice of the policy (a tensor-parallel row or
 * column block, a pipeline stage's layers, an expert-parallel rank's
 * experts) broadcasts its own slices straight to the rollout servers; no
 * rank gathers the whole model (areal.md §5.3's "each shard sent by the
 * rank that holds it"; rl-systems-2026.md 2.2's one control message and one
 * transfer per bucket).
 *
 * The world: trainer ranks 0..S-1 (S = n_senders, rank 0 hosts the store,
 * areal_wsync_listen) and the servers S..world-1 (server i is rank S + i:
 * /init_weights_update_group's rank_offset). Every member builds the group
 * of the whole world (the server's init does, unchanged); sender r and the
 * servers also build, at r's first bucket, the group "<group>.src<r>" of
 * {r, S, ..., world-1}, over which r is the root of its buckets. A sender
 * with nothing to send never builds one, and no trainer rank takes part in
 * another rank's transfer.
 *
 * The plan (areal_wsync_plan_build) is a pure function of the model config,
 * every sender's shard (areal/model/shard.h) and the bucket size, so each
 * rank computes the same plan without exchanging it: per HF tensor the
 * slices the shards hold, a replicated copy (tp for norms, dp replicas, the
 * tied embedding of the last stage) taken once, from the lowest rank
 * holding it (the dp-rank-0 copy); then buckets formed per owner (each
 * bucket has one root) of at most bucket_bytes (a larger slice goes alone),
 * in HF tensor order. Rejected: one group of all trainer ranks and servers
 * with the bucket's owner as root (every other trainer rank would sit in
 * each chain and receive every byte), and gathering over the trainer's own
 * groups first (the "through rank 0" form this replaces; the bench measures
 * both).
 *
 * Per bucket, trainer rank 0 (which knows the plan) sends ONE POST
 * /update_weights_from_distributed to every server with
 * areal_wsync_plan_bucket_json: today's {names, dtypes, shapes (the slices'
 * shapes, what the wire carries), group_name, ...} plus src_rank (the root),
 * n_senders, and per tensor slice_dims (-1 whole, 0 rows, 1 columns),
 * slice_offsets and full_shapes (the HF tensor's). The root's broadcast
 * carries the slices' bytes packed as in wsync.h. A request without the
 * extra fields is the full-tensor form from rank 0 (SGLang's, AReaL's).
 *
 * Ordering: rank 0 posts bucket b+1 only after every server answered bucket
 * b, and each root broadcasts its buckets in plan order, so the servers take
 * the buckets in one order and each root's transfers meet them in turn. A
 * root may wait for other roots' buckets before its next one: the group
 * timeout must cover a whole update, not one bucket.
 */
#ifndef AREAL_TRAIN_WSYNC_SHARD_H
#define AREAL_TRAIN_WSYNC_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/dtype.h"
#include "areal/error.h"
#include "areal/model/config.h"
#include "areal/model/shard.h"
#include "areal/train/wsync.h"

/* One slice of one HF tensor, as the plan sends it. */
typedef struct areal_wsync_piece {
    const char *name;   /* HF name (points into the plan) */
    int ndim;           /* 1 or 2 */
    int64_t full[2];    /* the HF tensor's shape */
    int64_t local[2];   /* the slice's shape (what the wire carries) */
    int dim;            /* -1 whole, 0 rows, 1 columns */
    int64_t offset;     /* first row / column of the slice along dim (0 when whole) */
    int owner;          /* the trainer rank that sends it */
    size_t local_index; /* its index in the owner's areal_model_shard_tensors list */
} areal_wsync_piece;

typedef struct areal_wsync_bucket {
    int root;        /* the owner of every piece in it */
    size_t first, n; /* pieces[first .. first + n) */
    size_t bytes;
} areal_wsync_bucket;

typedef struct areal_wsync_plan {
    int n_senders;
    areal_dtype dtype;        /* of every piece on the wire */
    areal_tensor_spec *specs; /* the HF tensors (areal_model_expected_tensors) */
    size_t n_specs;
    areal_wsync_piece *pieces; /* in bucket order */
    size_t n_pieces;
    areal_wsync_bucket *buckets;
    size_t n_buckets;
    size_t bytes; /* all pieces: the model once */
} areal_wsync_plan;

/*
 * Builds the plan for n_senders trainer ranks, rank r holding shards[r]
 * (dp replicas repeat a shard), on the wire in dtype (F32, BF16 or F16),
 * buckets of at most bucket_bytes (0: 1 GiB). AREAL_EINVAL naming the field
 * for a shard areal_model_shard_check refuses, or naming the tensor and the
 * missing rows/columns when the shards do not cover the model; AREAL_ENOMEM.
 * *out is freed with areal_wsync_plan_free.
 */
int areal_wsync_plan_build(const areal_model_config *cfg, const areal_model_shard *shards,
                           int n_senders, areal_dtype dtype, size_t bucket_bytes,
                           areal_wsync_plan **out, areal_error *err);

/*
 * The same plan with every HF tensor whole and owned by rank 0: the gather-
 * through-rank-0 form (the caller gathers the whole tensors onto rank 0
 * first); rank 0 then sends everything over "<group>.src0".
 */
int areal_wsync_plan_whole(const areal_model_config *cfg, int n_senders, areal_dtype dtype,
                           size_t bucket_bytes, areal_wsync_plan **out, areal_error *err);

void areal_wsync_plan_free(areal_wsync_plan *p);

/*
 * The JSON body of bucket b's POST /update_weights_from_distributed (see
 * above; *json: new string, caller frees). version NULL: omitted.
 */
int areal_wsync_plan_bucket_json(const areal_wsync_plan *p, size_t b, const char *group,
                                 bool abort_all, const char *version, char **json,
                                 areal_error *err);

/*
 * A sender rank other than 0: a handle on the store rank 0 hosts at
 * host:port, for areal_wsync_join_rank; self_host is the address the
 * servers reach this rank at (NULL: host). Freed with areal_wsync_close.
 */
int areal_wsync_attach(const char *host, int port, const char *self_host, areal_wsync **out,
                       areal_error *err);

/*
 * Joins the world of `world` ranks as `rank` (0 .. n_senders-1) and builds
 * the group of all of them (what the servers' init builds); blocks until
 * every member joined or timeout_ms passed (AREAL_EIO naming the missing
 * rank). Rank 0's handle comes from areal_wsync_listen.
 */
int areal_wsync_join_rank(areal_wsync *w, int rank, int world, const char *group, int timeout_ms,
                          areal_error *err);

/*
 * Every sender rank calls this with the plan and its own slices: local[i]
 * is tensor i of its areal_model_shard_tensors list (local shape, in
 * p->dtype). Broadcasts the buckets this rank roots, in plan order (a rank
 * owning none returns at once). Does not post the control messages: rank 0
 * does that (areal_wsync_plan_bucket_json) concurrently. *sent_bytes
 * (nullable): the bytes this rank broadcast. AREAL_EIO naming the bucket
 * when a transfer fails (the group is then broken: close it).
 */
int areal_wsync_send_sharded(areal_wsync *w, const areal_wsync_plan *p, const void *const *local,
                             size_t *sent_bytes, areal_error *err);

/* This rank's rank in the world (after join). */
int areal_wsync_rank(const areal_wsync *w);

/* ---- the call the trainer makes (wsync_update.c) --------------------------------- */

/* The servers of a sharded update, as rank 0 addresses them. */
typedef struct areal_wsync_target {
    const char *const *addrs; /* "host:port"; server i is world rank n_senders + i */
    int n;
    const char *group;     /* NULL: "update_weight_group" (AReaL's name) */
    const char *version;   /* the buckets' weight_version; NULL: omitted */
    bool abort_all;        /* abort_all_requests */
    double http_timeout_s; /* each POST; 0: 120 */
} areal_wsync_target;

/*
 * Rank 0, after areal_wsync_listen: POSTs /init_weights_update_group to every
 * server (rank_offset n_senders + i, world_size n_senders + t->n) while it
 * joins as rank 0; every other sender joins with areal_wsync_join_rank at the
 * same time. AREAL_EIO naming the server that refused or the rank missing.
 */
int areal_wsync_join_servers(areal_wsync *w, int n_senders, const areal_wsync_target *t,
                             int timeout_ms, areal_error *err);

/*
 * One sharded update; EVERY sender rank calls it with the same plan and its
 * own slices (local as for areal_wsync_send_sharded). Rank 0 also posts each
 * bucket's control message to every server (concurrently, bucket after
 * bucket) while it roots its own buckets on a second thread; t is read on
 * rank 0 only (others may pass NULL). Returns 0 when every server took
 * every bucket (the last one swaps the version), else the first failure
 * naming the server and the bucket: AREAL_EINVAL for a server's refusal
 * (its message, which names the field), AREAL_EIO for a broken transfer.
 * After a failure the servers keep the old version; close the handle and
 * build the world again. *sent_bytes (nullable) as for send_sharded.
 */
int areal_wsync_update_sharded(areal_wsync *w, const areal_wsync_plan *p, const void *const *local,
                               const areal_wsync_target *t, size_t *sent_bytes, areal_error *err);

#endif
