/*
 * xccl_shard.h - the xccl weight update of a megatron t/p trainer sent
 * shard-direct (wsync_shard.h): every trainer rank broadcasts the slices it
 * holds straight to the rollout servers, so the per-step update gathers
 * nothing through rank 0 (issue 15, item 6).
 *
 * Rank 0 drives: per update it checks the controller's servers (GET
 * /health, as xccl.c), (re)builds the sharded world when the members
 * changed (a fresh store; group "<group>_shard", so the gathered path's
 * group on the servers stays intact for the fallback and catch-up), tells
 * every follower through the trainer's own channel (dp.h's CMD_WSYNC: the
 * store's address, the world size, whether to rejoin) and runs
 * areal_wsync_update_sharded with the followers. Any failure closes the
 * world (so the followers' joins and transfers fail at the store, or at the
 * group timeout) and is returned: the caller then gathers and sends through
 * the existing xccl path (its health checks, retry and catch-up), which is
 * also the path for catch-up of restarted servers. Road not taken: catching
 * servers up in the sharded world too - a one-off world per catch-up would
 * need every follower in it while rank 0 waits for rollouts; the gathered
 * path does it with rank 0 alone.
 */
#ifndef AREAL_TRAIN_XCCL_SHARD_H
#define AREAL_TRAIN_XCCL_SHARD_H

#include <stddef.h>

#include "areal/comm/comm.h"
#include "areal/error.h"
#include "areal/train/rollout_ctl.h"
#include "areal/train/trainer.h"
#include "areal/train/xccl.h"

typedef struct areal_xccl_shard areal_xccl_shard;

/*
 * Any rank of a layout whose areal_train_par_sharded holds: the plan (same
 * on every rank) and the slices of t's shard; cfg (rank 0's host, group,
 * bucket, timeouts; followers take the bucket and group) is copied.
 * AREAL_EINVAL for another layout, the plan's errors.
 */
int areal_xccl_shard_open(const areal_xccl_cfg *cfg, const areal_trainer *t, areal_xccl_shard **out,
                          areal_error *err);

/*
 * Rank 0: one shard-direct update to version `version` over the live servers
 * of ctl, the followers on dp told to take part. 0 when every live server
 * took every bucket (they are marked synced; none live: 0 with st->servers
 * 0), else the failure (the world is closed; fall back to the gathered path).
 * st (nullable): bytes = what rank 0 itself broadcast, buckets = the plan's.
 */
int areal_xccl_shard_update(areal_xccl_shard *x, areal_pg *dp, areal_rollout_ctl *ctl, long version,
                            areal_xccl_stats *st, areal_error *err);

/*
 * A follower, on rank 0's CMD_WSYNC message (msg, n bytes): joins the world
 * when told, then sends its slices. A failure closes its world and is
 * returned (the follower logs it and goes on: rank 0 falls back).
 */
int areal_xccl_shard_follow(areal_xccl_shard *x, int rank, const void *msg, size_t n,
                            areal_error *err);

/* Total bytes of the plan (the model once) and what this rank roots. */
size_t areal_xccl_shard_plan_bytes(const areal_xccl_shard *x);

void areal_xccl_shard_close(areal_xccl_shard *x);

#endif
