/*
 * alloc_query.c - questions about a parsed allocation and its backends:
 * names, GPU totals, equality (see areal/alloc.h). Pure functions of their
 * arguments; nothing here parses or allocates.
 */
#include <string.h>

#include "areal/alloc.h"

const char *areal_backend_name(areal_backend b) {
    switch (b) {
    case AREAL_BACKEND_SGLANG:
        return "sglang";
    case AREAL_BACKEND_VLLM:
        return "vllm";
    case AREAL_BACKEND_FSDP:
        return "fsdp";
    case AREAL_BACKEND_MEGATRON:
        return "megatron";
    case AREAL_BACKEND_ARCHON:
        return "archon";
    }
    return "unknown";
}

bool areal_backend_is_inference(areal_backend b) {
    return b == AREAL_BACKEND_SGLANG || b == AREAL_BACKEND_VLLM;
}

areal_dp_sharding areal_backend_dp_sharding(areal_backend b) {
    switch (b) {
    case AREAL_BACKEND_FSDP:
    case AREAL_BACKEND_ARCHON:
        return AREAL_DP_FULLY_SHARDED;
    case AREAL_BACKEND_MEGATRON:
        return AREAL_DP_OPTIMIZER;
    case AREAL_BACKEND_SGLANG:
    case AREAL_BACKEND_VLLM:
        break;
    }
    return AREAL_DP_REPLICATED;
}

long areal_alloc_total_gpus(const areal_alloc *a) {
    long total = 0;
    if (a == NULL)
        return 0;
    for (int i = 0; i < a->n_components && i < AREAL_ALLOC_MAX_COMPONENTS; i++)
        if (a->comp[i].sched != AREAL_SCHED_COLOCATION)
            total += areal_strategy_world(&a->comp[i].strategy);
    return total;
}

static bool same_strategy(const areal_strategy *x, const areal_strategy *y) {
    return x->dp == y->dp && x->tp == y->tp && x->pp == y->pp && x->cp == y->cp && x->ep == y->ep &&
           x->etp == y->etp && x->edp == y->edp;
}

static bool same_component(const areal_component *x, const areal_component *y) {
    return strncmp(x->name, y->name, AREAL_ALLOC_NAME_MAX) == 0 && x->backend == y->backend &&
           same_strategy(&x->strategy, &y->strategy) && x->hybrid == y->hybrid &&
           x->sched == y->sched && x->colocate_with == y->colocate_with;
}

bool areal_alloc_equal(const areal_alloc *a, const areal_alloc *b) {
    if (a == NULL || b == NULL || a->n_components != b->n_components)
        return false;
    if (a->n_components < 0 || a->n_components > AREAL_ALLOC_MAX_COMPONENTS)
        return false;
    for (int i = 0; i < a->n_components; i++)
        if (!same_component(&a->comp[i], &b->comp[i]))
            return false;
    return true;
}
