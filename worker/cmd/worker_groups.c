/*
 * worker_groups.c - the process groups of one role, from the layout
 * library's role-group queries (areal_role_group_ranks), so an inference
 * role's tp/pp/dp groups follow the plan's server-major rank order exactly
 * as the operator placed its pods, and a training role's groups are
 * Megatron's. The group holding a rank is found by walking the role's
 * groups of that kind (world members in all), never by rank arithmetic of
 * our own. Rejected: areal_comm_layout_groups for every role (it applies
 * Megatron's order to inference servers too, which splits a server's tp
 * group across pods).
 */
#include "worker_groups.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int worker_role_of(const areal_alloc *a, int ci, areal_role_plan *r, areal_error *err) {
    char names[AREAL_ALLOC_MAX_COMPONENTS][AREAL_ALLOC_NAME_MAX];
    areal_role_names(a, names);
    const areal_component *c = &a->comp[ci];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", names[ci]);
    r->backend = c->backend;
    r->strategy = c->strategy;
    r->world = (int)areal_strategy_world(&c->strategy);
    r->inference = areal_backend_is_inference(c->backend);
    r->colocated_with = -1;
    if (!r->inference) {
        areal_layout l;
        int rc = areal_layout_init(&l, &c->strategy, err);
        if (rc != AREAL_OK)
            return rc;
        r->world = l.world;
    }
    return AREAL_OK;
}

int worker_role_group(const areal_role_plan *r, areal_group_kind k, int rank, int *out, int *n) {
    int count = areal_role_group_count(r, k);
    for (int g = 0; g < count; g++) {
        int size = areal_role_group_ranks(r, k, g, out);
        for (int j = 0; j < size; j++) {
            if (out[j] == rank) {
                *n = size;
                return g;
            }
        }
    }
    return -1;
}

int worker_role_groups(areal_comm *c, const areal_role_plan *r,
                       areal_pg *out[AREAL_GROUP_KIND_COUNT], areal_error *err) {
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        out[k] = NULL;
    if (r->world != areal_comm_world(c))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "role %s has %d ranks but WORLD_SIZE is %d; AREAL_ALLOCATION and "
                               "WORLD_SIZE must describe the same job",
                               r->name, r->world, areal_comm_world(c));
    int *ranks = malloc(sizeof *ranks * (size_t)r->world), rc = AREAL_OK;
    if (ranks == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for group members");
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT && rc == AREAL_OK; k++) {
        int n = 0, gi = worker_role_group(r, (areal_group_kind)k, areal_comm_rank(c), ranks, &n);
        if (gi < 0)
            continue;
        char name[AREAL_COMM_GROUP_NAME_MAX];
        snprintf(name, sizeof name, "%s/%d", areal_group_kind_name((areal_group_kind)k), gi);
        rc = areal_comm_group(c, name, ranks, n, &out[k], err);
    }
    free(ranks);
    if (rc != AREAL_OK) {
        for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
            areal_pg_destroy(out[k]);
            out[k] = NULL;
        }
    }
    return rc;
}
