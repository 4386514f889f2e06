/*
 * wsync.h - the trainer side of update_weights_from_distributed: the source
 * rank (rank 0) of a weight-update group of the worker comm runtime, and
 * the wire layout the rollout server expects (worker/rollout/README.md).
 *
 * It lives in train, not rollout: the sender is the trainer's half of the
 * protocol and `train` may not use `rollout` (ARCHITECTURE.md rule 2). The
 * rollout server's own test of the receiver links it as a test dependency
 * (test_rollout_wsync_DEPS). Not comm: the bucket's JSON body is SGLang's
 * HTTP API, which the comm runtime knows nothing of. The loop-level driver
 * (groups over the controller's servers, buckets, retries) is xccl.h.
 *
 * Sequence (AReaL's xccl mode, one group per update world):
 *   1. areal_wsync_open() hosts the group's store on host:port (0 = any; see
 *      areal_wsync_port) and joins as rank 0. At the same time every server i
 *      gets POST /init_weights_update_group {master_address: host,
 *      master_port: port, rank_offset: 1 + i, world_size: 1 + n_servers,
 *      group_name, backend}; open returns when all have joined.
 *   2. Per update: POST /pause_generation; then per bucket, POST
 *      /update_weights_from_distributed with areal_wsync_bucket_json() to
 *      every server (concurrently) and areal_wsync_send() the same tensors;
 *      each POST answers when its server holds the bucket. When the last
 *      tensor of the model lands, the servers swap to the new version.
 *      Then POST /continue_generation.
 * Wire: one broadcast per bucket of the tensors' bytes in order, each in its
 * dtype (little-endian), zero-padded to a multiple of 4 bytes, sent as int32
 * elements.
 */
#ifndef AREAL_TRAIN_WSYNC_H
#define AREAL_TRAIN_WSYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/dtype.h"
#include "areal/error.h"

typedef struct areal_wsync areal_wsync;

typedef struct areal_wsync_tensor {
    const char *name;     /* HF name, e.g. "model.layers.0.mlp.up_proj.weight" */
    areal_dtype dtype;    /* F32, BF16 or F16 */
    int ndim;             /* 0..8 */
    const int64_t *shape; /* [ndim] */
    const void *data;     /* numel * dtype size bytes */
} areal_wsync_tensor;

/*
 * Hosts the store on host:port and joins as rank 0 of `world` ranks
 * (1 + servers), then builds group `group` of all of them; blocks until
 * every server joined or timeout_ms passed (AREAL_EIO naming the missing
 * rank). The caller frees *out with areal_wsync_close.
 */
int areal_wsync_open(const char *host, int port, int world, const char *group, int timeout_ms,
                     areal_wsync **out, areal_error *err);

/* The store's port (what master_port must say); valid as soon as open has started it. */
int areal_wsync_port(const areal_wsync *w);

/*
 * Starts the store only (so that the port is known before the servers are
 * told), for a later areal_wsync_join; open = listen + join.
 */
int areal_wsync_listen(const char *host, int port, areal_wsync **out, areal_error *err);
int areal_wsync_join(areal_wsync *w, int world, const char *group, int timeout_ms,
                     areal_error *err);

/*
 * The JSON body of POST /update_weights_from_distributed for these tensors
 * (*json: new string, caller frees). version NULL: omitted.
 */
int areal_wsync_bucket_json(const areal_wsync_tensor *t, size_t n, const char *group,
                            bool abort_all, const char *version, char **json, areal_error *err);

/* Broadcasts one bucket (the same tensors as its JSON). */
int areal_wsync_send(areal_wsync *w, const areal_wsync_tensor *t, size_t n, areal_error *err);

/* Leaves the group and stops the store; NULL is a no-op. */
void areal_wsync_close(areal_wsync *w);

#endif
