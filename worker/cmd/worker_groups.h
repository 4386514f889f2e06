/*
 * worker_groups.h - the process groups of one role, as the plan numbers
 * them: training roles by Megatron's rank order, inference roles server by
 * server (areal/placement.h); see worker_groups.c.
 */
#ifndef AREAL_WORKER_GROUPS_H
#define AREAL_WORKER_GROUPS_H

#include "areal/alloc.h"
#include "areal/comm/comm.h"
#include "areal/placement.h"

/*
 * Fills r with what the layout's role-group queries need for component ci
 * of a: its plan name (areal_role_names), backend, strategy, world and
 * whether it serves inference. Returns AREAL_EINVAL (naming the component)
 * for a training strategy that has no layout.
 */
int worker_role_of(const areal_alloc *a, int ci, areal_role_plan *r, areal_error *err);

/*
 * Index of the group of kind k that holds global rank `rank`, its members
 * written to out (room for r->world) and their number to *n; -1 when the
 * kind does not apply to the role or no group of it holds the rank.
 */
int worker_role_group(const areal_role_plan *r, areal_group_kind k, int rank, int *out, int *n);

/*
 * Creates, for every kind of the role, the group holding this rank, named
 * "<kind>/<index>" ("tp/3"); out[k] is NULL where there is none. On failure
 * every group created so far is destroyed and out[] is all NULL.
 */
int worker_role_groups(areal_comm *c, const areal_role_plan *r,
                       areal_pg *out[AREAL_GROUP_KIND_COUNT], areal_error *err);

#endif
