/*
 * groups.h - the process groups a sharded model runs over, and the shard a
 * rank holds in them.
 *
 * A rank's place in each parallel dimension is read off its groups (its
 * member index in the tp, pp, ep groups), never computed from its global
 * rank: the groups come from areal_comm_role_groups, which follows the
 * planner's Megatron order, so the shard and the plan always agree. A NULL
 * group is a dimension of size one.
 */
#ifndef AREAL_PARALLEL_GROUPS_H
#define AREAL_PARALLEL_GROUPS_H

#include "areal/comm/coll.h"
#include "areal/error.h"
#include "areal/groups.h"
#include "areal/model/config.h"
#include "areal/model/shard.h"

/* Borrowed group handles (NULL: size one); the caller owns them. */
typedef struct areal_par_groups {
    areal_coll *tp;    /* tensor parallel: the model's reduction hook, partial gradients */
    areal_coll *pp;    /* pipeline: stage = member index, activations and gradients */
    areal_coll *dp;    /* data parallel: gradient reduction, ZeRO-1 shards */
    areal_coll *ep;    /* expert parallel: the MoE reduction hook, the router's gradient */
    areal_coll *embed; /* first and last pipeline stage: the tied embedding's gradient */
} areal_par_groups;

/* The groups of a role (out of areal_comm_role_groups' table), borrowed. */
areal_par_groups areal_par_groups_of(areal_coll *const gs[AREAL_GROUP_KIND_COUNT]);

/* Size and member index of a group, 1 and 0 for NULL. */
int areal_par_size(const areal_coll *g);
int areal_par_rank(const areal_coll *g);

/*
 * The shard this rank holds: tp rank and size from g->tp, the pipeline stage
 * from g->pp (layers split evenly, areal_model_shard_stage), ep from g->ep.
 * AREAL_EINVAL (areal_model_shard_check's message, naming the field) when
 * cfg cannot be split so.
 */
int areal_par_shard_of(const areal_model_config *cfg, const areal_par_groups *g,
                       areal_model_shard *out, areal_error *err);

#endif
