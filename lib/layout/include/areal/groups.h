/*
 * groups.h - Megatron rank groups for any parallel strategy, in O(1) per query.
 *
 * Ranks are ordered "tp-cp-ep-dp-pp" (Megatron's default and what AReaL
 * passes): tensor parallel fastest, pipeline slowest. Two generators share that
 * order (Megatron-core parallel_state.RankGenerator):
 *
 *   dense  : sizes (tp, cp, ep=1, dp, pp)   rank = tp_r + tp*(cp_r + cp*(dp_r + dp*pp_r))
 *   expert : sizes (etp, cp=1, ep, edp, pp) rank = etp_r + etp*(ep_r + ep*(edp_r + edp*pp_r))
 *
 * A group kind masks some of the generator's dimensions. Its groups are
 * enumerated by the unmasked coordinates (the first unmasked dimension varies
 * fastest) and its members by the masked coordinates (the first masked
 * dimension varies fastest). Group order and member order are exactly
 * Megatron's, so a group's index equals the rank's coordinate in the
 * orthogonal dimensions. Nothing here allocates: every query decomposes the
 * rank into at most five coordinates.
 *
 * The embedding group of a pipeline is its first and last stage (one member
 * when pp == 1); middle stages belong to no embedding group.
 * AReaL's own `tp-cp-pp` group is one per data-parallel index; its first rank
 * is the DP head. The PP head of a stage (the weight-sync source for that
 * stage) is the rank with dp-cp rank 0 and tp rank 0 in that stage.
 */
#ifndef AREAL_GROUPS_H
#define AREAL_GROUPS_H

#include <stdbool.h>

#include "areal/error.h"
#include "areal/strategy.h"

typedef enum areal_group_kind {
    /* dense generator */
    AREAL_GROUP_TP,        /* "tp"        TENSOR_MODEL_PARALLEL */
    AREAL_GROUP_CP,        /* "cp"        CONTEXT_PARALLEL */
    AREAL_GROUP_DP,        /* "dp"        DATA_PARALLEL */
    AREAL_GROUP_DP_CP,     /* "dp-cp"     DATA_PARALLEL_WITH_CP */
    AREAL_GROUP_PP,        /* "pp"        PIPELINE_MODEL_PARALLEL */
    AREAL_GROUP_EMBEDDING, /* "embedding" first and last member of each pp group */
    AREAL_GROUP_TP_PP,     /* "tp-pp"     MODEL_PARALLEL */
    AREAL_GROUP_TP_DP,     /* "tp-dp"     TENSOR_AND_DATA (no cp) */
    AREAL_GROUP_TP_CP,     /* "tp-cp"     TENSOR_AND_CONTEXT */
    AREAL_GROUP_TP_DP_CP,  /* "tp-dp-cp"  TENSOR_AND_DATA with cp */
    /* expert generator */
    AREAL_GROUP_EP,       /* "ep"        EXPERT_MODEL_PARALLEL */
    AREAL_GROUP_ETP,      /* "etp"       EXPERT_TENSOR_PARALLEL */
    AREAL_GROUP_TP_EP,    /* "tp-ep"     EXPERT_TENSOR_AND_MODEL_PARALLEL */
    AREAL_GROUP_TP_EP_PP, /* "tp-ep-pp"  EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL */
    AREAL_GROUP_EDP,      /* "edp"       EXPERT_DATA_PARALLEL */
    /* AReaL */
    AREAL_GROUP_TP_CP_PP, /* "tp-cp-pp"  CONTEXT_AND_MODEL_PARALLEL, one per dp index */
    AREAL_GROUP_KIND_COUNT
} areal_group_kind;

/* Dimension indices of a generator, in rank order (fastest first). */
enum { AREAL_DIM_TP, AREAL_DIM_CP, AREAL_DIM_EP, AREAL_DIM_DP, AREAL_DIM_PP, AREAL_DIM_COUNT };

/* One Megatron RankGenerator: sizes and strides in "tp-cp-ep-dp-pp" order. */
typedef struct areal_rankgen {
    int size[AREAL_DIM_COUNT];
    int stride[AREAL_DIM_COUNT];
    int world;
} areal_rankgen;

/* The dense and expert generators of one strategy. */
typedef struct areal_layout {
    areal_strategy s; /* complete, validated */
    int world;
    areal_rankgen dense;
    areal_rankgen expert;
} areal_layout;

/* The coordinates of one rank in both generators. */
typedef struct areal_rank_coords {
    int tp, cp, dp, pp; /* dense */
    int etp, ep, edp;   /* expert (its pp equals the dense pp) */
} areal_rank_coords;

/*
 * Builds the generators of `s`. Fills edp when it is 0 (derives it), and checks
 * Megatron's rules: every size >= 1, world % (tp*cp*pp) == 0 (by construction),
 * world % (etp*ep*pp) == 0, edp * etp * ep * pp == world. AREAL_EINVAL with a
 * message naming the broken rule otherwise; AREAL_ERANGE when the world
 * dp*tp*cp*pp exceeds INT_MAX (ranks are ints). `l` is written only on success.
 */
int areal_layout_init(areal_layout *l, const areal_strategy *s, areal_error *err);

/* Name of a kind ("tp", "dp-cp", ...); NULL for an out-of-range kind. */
const char *areal_group_kind_name(areal_group_kind k);

/* The kind named `name`, or -1. */
int areal_group_kind_from_name(const char *name);

/* True for the kinds built from the expert generator. */
bool areal_group_kind_is_expert(areal_group_kind k);

/* Number of groups of kind `k`, and members per group (embedding: 1 or 2). */
int areal_group_count(const areal_layout *l, areal_group_kind k);
int areal_group_size(const areal_layout *l, areal_group_kind k);

/*
 * The group of kind `k` that holds `rank`, and the rank's position in it.
 * Both return -1 when the rank is in no group of that kind (only possible for
 * embedding, for middle pipeline stages) or the rank is out of range.
 */
int areal_group_index(const areal_layout *l, areal_group_kind k, int rank);
int areal_group_member_index(const areal_layout *l, areal_group_kind k, int rank);

/* Member `j` of group `g` of kind `k`, or -1 when out of range. */
int areal_group_member(const areal_layout *l, areal_group_kind k, int g, int j);

/*
 * Writes the members of group `g` of kind `k` to `out` (room for
 * areal_group_size() entries); returns the number written, or -1.
 */
int areal_group_ranks(const areal_layout *l, areal_group_kind k, int g, int *out);

/* Coordinates of `rank` (0 <= rank < world), and the inverse for the dense generator. */
areal_rank_coords areal_rank_coords_of(const areal_layout *l, int rank);
int areal_dense_rank(const areal_layout *l, int tp, int cp, int dp, int pp);

/* True when `rank` is the first rank of its tp-cp-pp group (AReaL's DP head). */
bool areal_is_dp_head(const areal_layout *l, int rank);

/* The PP head of stage `stage`: dp-cp rank 0 and tp rank 0 of that stage. */
int areal_pp_head(const areal_layout *l, int stage);

#endif
