/*
 * groups.c - a role's groups as the parallel layers see them, and the shard
 * a rank holds in them (read off its member indices, see groups.h).
 */
#include "areal/parallel/groups.h"

areal_par_groups areal_par_groups_of(areal_coll *const gs[AREAL_GROUP_KIND_COUNT]) {
    areal_par_groups g = {
        .tp = gs[AREAL_GROUP_TP],
        .pp = gs[AREAL_GROUP_PP],
        .dp = gs[AREAL_GROUP_DP],
        .ep = gs[AREAL_GROUP_EP],
        .embed = gs[AREAL_GROUP_EMBEDDING],
    };
    return g;
}

int areal_par_size(const areal_coll *g) {
    return g == NULL ? 1 : areal_coll_size(g);
}

int areal_par_rank(const areal_coll *g) {
    return g == NULL ? 0 : areal_coll_rank(g);
}

int areal_par_shard_of(const areal_model_config *cfg, const areal_par_groups *g,
                       areal_model_shard *out, areal_error *err) {
    int rc = areal_model_shard_stage(cfg, areal_par_rank(g->pp), areal_par_size(g->pp), out, err);
    if (rc != AREAL_OK)
        return rc;
    out->tp = areal_par_size(g->tp), out->tp_rank = areal_par_rank(g->tp);
    out->ep = areal_par_size(g->ep), out->ep_rank = areal_par_rank(g->ep);
    return areal_model_shard_check(cfg, out, err);
}
