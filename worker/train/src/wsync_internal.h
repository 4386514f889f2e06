/*
 * wsync_internal.h - the weight-update sender's handle, shared by the
 * full-tensor sender (wsync_send.c) and the sharded one (wsync_shard.c).
 */
#ifndef AREAL_TRAIN_WSYNC_INTERNAL_H
#define AREAL_TRAIN_WSYNC_INTERNAL_H

#include <jansson.h>

#include "areal/comm/comm.h"
#include "areal/train/wsync.h"
#include "areal/train/wsync_shard.h"

#define WSYNC_SRC_MAX 256 /* sender ranks of a sharded world */

struct areal_wsync {
    char host[256];            /* the store's */
    char self[256];            /* this rank's address (bind and advertise) */
    areal_store_server *store; /* rank 0 only */
    int port;
    int rank; /* in the world */
    areal_comm *comm;
    areal_pg *pg;  /* the whole world */
    areal_pg *src; /* sharded: "<group>.src<rank>", built at this rank's first bucket */
    char group[AREAL_COMM_GROUP_NAME_MAX];
    int world;
};

/* Bucket b's control message as a JSON object (new reference; NULL: out of memory). */
json_t *wsync_plan_bucket_obj(const areal_wsync_plan *p, size_t b, const char *group,
                              bool abort_all, const char *version);

#endif
