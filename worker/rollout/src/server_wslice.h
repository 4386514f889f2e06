/*
 * server_wslice.h - the receiver's half of a sharded weight update
 * (areal/train/wsync_shard.h is the sender's): the extra fields of
 * /update_weights_from_distributed (src_rank, n_senders, slice_dims,
 * slice_offsets, full_shapes), the per-root groups "<group>.src<r>", and the
 * assembly of full tensors in the staging copy from slices. Kept apart from
 * server_weights.c so that the full-tensor path stays as SGLang's. Not
 * installed; control thread only.
 */
#ifndef AREAL_ROLLOUT_SERVER_WSLICE_H
#define AREAL_ROLLOUT_SERVER_WSLICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server_internal.h"

/* A bucket's slice fields; sharded false: the full-tensor form (root 0, one sender). */
typedef struct wslice_req {
    bool sharded;
    int src_rank, n_senders;
    int *dims;          /* [n] -1 whole, 0 rows, 1 columns */
    int64_t *offs;      /* [n] */
    int64_t (*full)[2]; /* [n] the HF shapes */
    int *full_ndim;     /* [n] */
} wslice_req;

/*
 * Reads the slice fields of request j for its n tensors. None of them: the
 * full-tensor form. Returns 0, or -1 with msg naming the field and the fix
 * (then the wire layout is unknown). Free with wslice_req_free.
 */
int wslice_parse(json_t *j, size_t n, wslice_req *q, char *msg, size_t cap);
void wslice_req_free(wslice_req *q);

/*
 * The group the bucket arrives over: g's own for the full-tensor form, else
 * "<name>.src<r>" = {r, n_senders, ..., world-1}, built on first use (blocks
 * until the root joins it). NULL with msg on failure.
 */
areal_pg *wslice_group(areal_rollout_server *s, wgroup *g, const wslice_req *q, char *msg,
                       size_t cap);

/* Destroys g's per-root groups (before g's comm). */
void wslice_group_free(wgroup *g);

/*
 * Lands tensor i of the bucket (dtype dt, local shape shape[ndim], bytes at
 * src) in model parameter k of s->staging and marks the spec seen when all
 * of it has arrived. Returns 0, or -1 with msg naming the tensor and the
 * field (shape mismatch, slice out of range or overlapping one received).
 */
int wslice_land(areal_rollout_server *s, int k, const wslice_req *q, size_t i, areal_dtype dt,
                const int64_t *shape, int ndim, const void *src, char *msg, size_t cap);

/* Forgets the slices of the update in progress (with the staging copy). */
void wslice_drop(areal_rollout_server *s);

#endif
