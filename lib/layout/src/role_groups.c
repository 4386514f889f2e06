/*
 * role_groups.c - the rank groups of one role of a plan.
 *
 * Training roles use Megatron's generators (groups.c). Inference roles are
 * independent servers of t*p GPUs numbered server-major
 * (rank = server*t*p + stage*t + tp_rank): their tp groups are the t
 * consecutive ranks of one stage of one server, pp groups the p stages of one
 * server, and dp groups the same slot across all servers.
 */
#include "areal/placement.h"

bool areal_role_has_kind(const areal_role_plan *r, areal_group_kind k) {
    if (k < 0 || k >= AREAL_GROUP_KIND_COUNT)
        return false;
    if (!r->inference)
        return true;
    return k == AREAL_GROUP_TP || k == AREAL_GROUP_PP || k == AREAL_GROUP_DP;
}

static int inference_size(const areal_role_plan *r, areal_group_kind k) {
    switch (k) {
    case AREAL_GROUP_TP:
        return r->strategy.tp;
    case AREAL_GROUP_PP:
        return r->strategy.pp;
    case AREAL_GROUP_DP:
        return r->strategy.dp;
    default:
        return -1;
    }
}

static int training_layout(const areal_role_plan *r, areal_layout *l) {
    return areal_layout_init(l, &r->strategy, NULL);
}

int areal_role_group_size(const areal_role_plan *r, areal_group_kind k) {
    if (!areal_role_has_kind(r, k))
        return -1;
    if (r->inference)
        return inference_size(r, k);
    areal_layout l;
    if (training_layout(r, &l) != AREAL_OK)
        return -1;
    return areal_group_size(&l, k);
}

int areal_role_group_count(const areal_role_plan *r, areal_group_kind k) {
    if (!areal_role_has_kind(r, k))
        return -1;
    if (r->inference)
        return r->world / inference_size(r, k);
    areal_layout l;
    if (training_layout(r, &l) != AREAL_OK)
        return -1;
    return areal_group_count(&l, k);
}

int areal_role_group_ranks(const areal_role_plan *r, areal_group_kind k, int g, int *out) {
    if (!areal_role_has_kind(r, k))
        return -1;
    if (!r->inference) {
        areal_layout l;
        if (training_layout(r, &l) != AREAL_OK)
            return -1;
        return areal_group_ranks(&l, k, g, out);
    }
    int t = r->strategy.tp, p = r->strategy.pp, d = r->strategy.dp, server = t * p;
    if (g < 0 || g >= r->world / inference_size(r, k))
        return -1;
    switch (k) {
    case AREAL_GROUP_TP: /* g = server * p + stage */
        for (int j = 0; j < t; j++)
            out[j] = g * t + j;
        return t;
    case AREAL_GROUP_PP: /* g = server * t + tp_rank */
        for (int j = 0; j < p; j++)
            out[j] = (g / t) * server + j * t + g % t;
        return p;
    case AREAL_GROUP_DP: /* g = slot inside a server */
        for (int j = 0; j < d; j++)
            out[j] = j * server + g;
        return d;
    default:
        return -1;
    }
}
