/*
 * role_groups.h - the process groups of one role, built once in the library
 * for every backend: training roles by Megatron's rank order, inference
 * roles server by server (areal/placement.h), exactly as the operator's
 * planner numbers them, so a rank and the plan always agree on its peers.
 *
 * Groups come from the layout library's role-group queries
 * (areal_role_group_ranks); the group holding a rank is found by walking the
 * role's groups of that kind, never by rank arithmetic of our own. The
 * backend is a factory (areal_coll_factory: areal_comm_coll_factory for the
 * CPU backend, areal_ncclpg_coll_factory for NCCL), so one builder serves
 * both. Rejected: one builder per backend over areal_layout alone (it
 * applies Megatron's order to inference servers too, which splits a server's
 * tp group across pods; the two such builders were removed).
 */
#ifndef AREAL_COMM_ROLE_GROUPS_H
#define AREAL_COMM_ROLE_GROUPS_H

#include "areal/alloc.h"
#include "areal/comm/coll.h"
#include "areal/error.h"
#include "areal/groups.h"
#include "areal/placement.h"

/*
 * Fills r with what the role-group queries need for component ci of a: its
 * plan name (areal_role_names), backend, strategy, world and whether it
 * serves inference. AREAL_EINVAL (naming the component) for a training
 * strategy that has no layout.
 */
int areal_comm_role_of(const areal_alloc *a, int ci, areal_role_plan *r, areal_error *err);

/*
 * Fills r for a training role of strategy s alone (no allocation string):
 * name "trainer", backend megatron. AREAL_EINVAL for a strategy without a
 * layout.
 */
int areal_comm_role_of_strategy(const areal_strategy *s, areal_role_plan *r, areal_error *err);

/*
 * Index of the group of kind k that holds global rank `rank`, its members
 * written to out (room for r->world) and their number to *n; -1 when the
 * kind does not apply to the role or no group of it holds the rank.
 */
int areal_comm_role_group(const areal_role_plan *r, areal_group_kind k, int rank, int *out, int *n);

/*
 * Creates, for every kind of the role, the group holding f->rank through the
 * factory, named "<kind>/<index>" ("tp/3"); out[k] is NULL where there is
 * none. AREAL_EINVAL when the role's world is not f->world. On failure every
 * group created so far is destroyed and out[] is all NULL.
 */
int areal_comm_role_groups(const areal_role_plan *r, const areal_coll_factory *f,
                           areal_coll *out[AREAL_GROUP_KIND_COUNT], areal_error *err);

#endif
