/*
 * role_groups.c - a role's process groups from the layout library's
 * role-group queries, for any backend; see areal/comm/role_groups.h.
 */
#include "areal/comm/role_groups.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/comm/comm.h"

int areal_comm_role_of(const areal_alloc *a, int ci, areal_role_plan *r, areal_error *err) {
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

int areal_comm_role_of_strategy(const areal_strategy *s, areal_role_plan *r, areal_error *err) {
    memset(r, 0, sizeof *r);
    areal_layout l;
    int rc = areal_layout_init(&l, s, err);
    if (rc != AREAL_OK)
        return rc;
    snprintf(r->name, sizeof r->name, "trainer");
    r->backend = AREAL_BACKEND_MEGATRON;
    r->strategy = *s;
    r->world = l.world;
    r->inference = false;
    r->colocated_with = -1;
    return AREAL_OK;
}

int areal_comm_role_group(const areal_role_plan *r, areal_group_kind k, int rank, int *out,
                          int *n) {
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

int areal_comm_role_groups(const areal_role_plan *r, const areal_coll_factory *f,
                           areal_coll *out[AREAL_GROUP_KIND_COUNT], areal_error *err) {
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        out[k] = NULL;
    if (r->world != f->world)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "role %s has %d ranks but WORLD_SIZE is %d; AREAL_ALLOCATION and "
                               "WORLD_SIZE must describe the same job",
                               r->name, r->world, f->world);
    int *ranks = malloc(sizeof *ranks * (size_t)r->world), rc = AREAL_OK;
    if (ranks == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for group members");
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT && rc == AREAL_OK; k++) {
        int n = 0, gi = areal_comm_role_group(r, (areal_group_kind)k, f->rank, ranks, &n);
        if (gi < 0)
            continue;
        char name[AREAL_COMM_GROUP_NAME_MAX];
        snprintf(name, sizeof name, "%s/%d", areal_group_kind_name((areal_group_kind)k), gi);
        rc = f->group(f->ctx, name, ranks, n, &out[k], err);
    }
    free(ranks);
    if (rc != AREAL_OK) {
        for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
            areal_coll_destroy(out[k]);
            out[k] = NULL;
        }
    }
    return rc;
}
