/*
 * groups.c - Megatron rank groups in O(1) per query (see areal/groups.h).
 *
 * Design: a group kind is a generator (dense or expert) plus a mask of
 * dimensions, kept in one constant table. Every query is mixed-radix
 * arithmetic over the five dimensions of that generator:
 *
 *   group index  = the rank's unmasked coordinates, first unmasked dim fastest
 *   member index = the rank's masked coordinates,   first masked dim fastest
 *   member(g, j) = decompose g over the unmasked sizes and j over the masked
 *                  sizes, then rank = sum of coordinate * global stride
 *
 * which is Megatron's generate_masked_orthogonal_rank_groups evaluated for one
 * element instead of building every list. The embedding kind is the only
 * irregular one: it is the pp kind restricted to the first and last stage.
 *
 * Overflow: areal_layout_init rejects any strategy whose world exceeds
 * INT_MAX, computing products in long long with an early bound. After that
 * every intermediate value (strides, coordinates times strides, partial sums)
 * is below the world, so the queries use plain int arithmetic.
 */
#include "areal/groups.h"

#include <limits.h>
#include <string.h>

#define DIM_BIT(d) (1u << (d))

/* One group kind: its name, its generator and the dimensions it spans. */
typedef struct kind_info {
    const char *name;
    bool expert;   /* built from the expert generator */
    unsigned mask; /* DIM_BIT() of each dimension the group spans */
} kind_info;

static const kind_info KINDS[AREAL_GROUP_KIND_COUNT] = {
    [AREAL_GROUP_TP] = {"tp", false, DIM_BIT(AREAL_DIM_TP)},
    [AREAL_GROUP_CP] = {"cp", false, DIM_BIT(AREAL_DIM_CP)},
    [AREAL_GROUP_DP] = {"dp", false, DIM_BIT(AREAL_DIM_DP)},
    [AREAL_GROUP_DP_CP] = {"dp-cp", false, DIM_BIT(AREAL_DIM_CP) | DIM_BIT(AREAL_DIM_DP)},
    [AREAL_GROUP_PP] = {"pp", false, DIM_BIT(AREAL_DIM_PP)},
    [AREAL_GROUP_EMBEDDING] = {"embedding", false, DIM_BIT(AREAL_DIM_PP)},
    [AREAL_GROUP_TP_PP] = {"tp-pp", false, DIM_BIT(AREAL_DIM_TP) | DIM_BIT(AREAL_DIM_PP)},
    [AREAL_GROUP_TP_DP] = {"tp-dp", false, DIM_BIT(AREAL_DIM_TP) | DIM_BIT(AREAL_DIM_DP)},
    [AREAL_GROUP_TP_CP] = {"tp-cp", false, DIM_BIT(AREAL_DIM_TP) | DIM_BIT(AREAL_DIM_CP)},
    [AREAL_GROUP_TP_DP_CP] = {"tp-dp-cp", false,
                              DIM_BIT(AREAL_DIM_TP) | DIM_BIT(AREAL_DIM_CP) |
                                  DIM_BIT(AREAL_DIM_DP)},
    [AREAL_GROUP_EP] = {"ep", true, DIM_BIT(AREAL_DIM_EP)},
    [AREAL_GROUP_ETP] = {"etp", true, DIM_BIT(AREAL_DIM_TP)},
    [AREAL_GROUP_TP_EP] = {"tp-ep", true, DIM_BIT(AREAL_DIM_TP) | DIM_BIT(AREAL_DIM_EP)},
    [AREAL_GROUP_TP_EP_PP] = {"tp-ep-pp", true,
                              DIM_BIT(AREAL_DIM_TP) | DIM_BIT(AREAL_DIM_EP) |
                                  DIM_BIT(AREAL_DIM_PP)},
    [AREAL_GROUP_EDP] = {"edp", true, DIM_BIT(AREAL_DIM_DP)},
    [AREAL_GROUP_TP_CP_PP] = {"tp-cp-pp", false,
                              DIM_BIT(AREAL_DIM_TP) | DIM_BIT(AREAL_DIM_CP) |
                                  DIM_BIT(AREAL_DIM_PP)},
};

/* ---- generators --------------------------------------------------------- */

/* Fills sizes, strides and world of `g` from sizes in "tp-cp-ep-dp-pp" order. */
static void rankgen_init(areal_rankgen *g, int tp, int cp, int ep, int dp, int pp) {
    const int sizes[AREAL_DIM_COUNT] = {tp, cp, ep, dp, pp};
    int stride = 1;
    for (int d = 0; d < AREAL_DIM_COUNT; d++) {
        g->size[d] = sizes[d];
        g->stride[d] = stride;
        stride *= sizes[d];
    }
    g->world = stride;
}

/* Coordinate of `rank` along dimension `d` of `g`. */
static int rankgen_coord(const areal_rankgen *g, int rank, int d) {
    return (rank / g->stride[d]) % g->size[d];
}

/*
 * Multiplies `acc` by `factor` unless the product would exceed `limit`;
 * returns false (leaving *acc alone) when it would. Inputs are >= 1.
 */
static bool mul_bounded(long long *acc, int factor, long long limit) {
    if (*acc > limit / factor)
        return false;
    *acc *= factor;
    return true;
}

/* ---- layout ------------------------------------------------------------- */

/* Checks that each size of `s` is >= 1 (edp >= 0: 0 means derive). */
static int check_sizes(const areal_strategy *s, areal_error *err) {
    const struct {
        const char *name;
        int value;
    } sizes[] = {{"dp", s->dp}, {"tp", s->tp}, {"pp", s->pp},
                 {"cp", s->cp}, {"ep", s->ep}, {"etp", s->etp}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (sizes[i].value < 1)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "parallel size %s=%d is invalid: every size must be >= 1",
                                   sizes[i].name, sizes[i].value);
    }
    if (s->edp < 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "expert data parallel size edp=%d is invalid: it must be >= 1, "
                               "or 0 to derive it as world / (etp * ep * pp)",
                               s->edp);
    return AREAL_OK;
}

/* The world dp*tp*cp*pp of `s` (sizes >= 1), or -1 when it exceeds INT_MAX. */
static int strategy_world(const areal_strategy *s) {
    long long world = 1;
    if (!mul_bounded(&world, s->tp, INT_MAX) || !mul_bounded(&world, s->cp, INT_MAX) ||
        !mul_bounded(&world, s->dp, INT_MAX) || !mul_bounded(&world, s->pp, INT_MAX))
        return -1;
    return (int)world;
}

/*
 * The expert data parallel size of `s` in a world of `world` ranks: derived
 * when s->edp is 0, checked otherwise. Returns it (>= 1) or a negative code.
 */
static int expert_dp(const areal_strategy *s, int world, areal_error *err) {
    long long expert_mp = 1; /* etp * ep * pp, bounded by world */
    if (!mul_bounded(&expert_mp, s->etp, world) || !mul_bounded(&expert_mp, s->ep, world) ||
        !mul_bounded(&expert_mp, s->pp, world) || world % expert_mp != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "expert layout etp=%d ep=%d pp=%d does not divide the world of %d "
                               "ranks: world %% (etp * ep * pp) must be 0 (Megatron's rule); "
                               "choose etp and ep so that etp * ep divides tp * cp * dp = %d",
                               s->etp, s->ep, s->pp, world, world / s->pp);
    int derived = (int)(world / expert_mp);
    if (s->edp != 0 && s->edp != derived)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "expert data parallel size edp=%d is inconsistent: edp * etp * ep "
                               "* pp must equal the world (dp * tp * cp * pp = %d), so edp must "
                               "be %d for etp=%d ep=%d pp=%d; pass edp=0 to derive it",
                               s->edp, world, derived, s->etp, s->ep, s->pp);
    return derived;
}

int areal_layout_init(areal_layout *l, const areal_strategy *s, areal_error *err) {
    if (l == NULL || s == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "areal_layout_init: NULL argument");
    int rc = check_sizes(s, err);
    if (rc != AREAL_OK)
        return rc;
    int world = strategy_world(s);
    if (world < 0)
        return areal_error_set(err, AREAL_ERANGE, -1,
                               "world dp * tp * cp * pp = %d * %d * %d * %d exceeds %d ranks",
                               s->dp, s->tp, s->cp, s->pp, INT_MAX);
    int edp = expert_dp(s, world, err);
    if (edp < 0)
        return edp;

    areal_layout out;
    memset(&out, 0, sizeof out);
    out.s = *s;
    out.s.edp = edp;
    out.world = world;
    rankgen_init(&out.dense, s->tp, s->cp, 1, s->dp, s->pp);
    rankgen_init(&out.expert, s->etp, 1, s->ep, edp, s->pp);
    /* Megatron's check that both generators give the same pp groups: with pp
     * slowest in both, that is equal pp strides (true by construction). */
    if (out.dense.stride[AREAL_DIM_PP] != out.expert.stride[AREAL_DIM_PP] ||
        out.dense.world != world || out.expert.world != world)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "dense and expert generators disagree on the pp groups: "
                               "tp * cp * dp (%d) must equal etp * ep * edp (%d)",
                               out.dense.stride[AREAL_DIM_PP], out.expert.stride[AREAL_DIM_PP]);
    *l = out;
    return AREAL_OK;
}

/* ---- kinds -------------------------------------------------------------- */

static bool kind_ok(areal_group_kind k) {
    return (int)k >= 0 && k < AREAL_GROUP_KIND_COUNT;
}

const char *areal_group_kind_name(areal_group_kind k) {
    return kind_ok(k) ? KINDS[k].name : NULL;
}

int areal_group_kind_from_name(const char *name) {
    if (name == NULL)
        return -1;
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
        if (strcmp(KINDS[k].name, name) == 0)
            return k;
    }
    return -1;
}

bool areal_group_kind_is_expert(areal_group_kind k) {
    return kind_ok(k) && KINDS[k].expert;
}

/* ---- queries ------------------------------------------------------------ */

/* The generator of kind `k` (valid kind). */
static const areal_rankgen *gen_of(const areal_layout *l, areal_group_kind k) {
    return KINDS[k].expert ? &l->expert : &l->dense;
}

/* Product of the sizes of the dimensions of `g` inside (`inside`) or outside `mask`. */
static int mask_product(const areal_rankgen *g, unsigned mask, bool inside) {
    int product = 1;
    for (int d = 0; d < AREAL_DIM_COUNT; d++) {
        if (((mask & DIM_BIT(d)) != 0) == inside)
            product *= g->size[d];
    }
    return product;
}

/*
 * Mixed-radix index of `rank` over the dimensions inside/outside `mask`, first
 * fastest. Peels the rank's coordinates off in rank order (size-1 dims skipped).
 */
static int mask_index(const areal_rankgen *g, unsigned mask, bool inside, int rank) {
    int index = 0, radix = 1;
    for (int d = 0; d < AREAL_DIM_COUNT; d++) {
        int size = g->size[d];
        if (size == 1)
            continue;
        int coord = rank % size;
        rank /= size;
        if (((mask & DIM_BIT(d)) != 0) == inside) {
            index += coord * radix;
            radix *= size;
        }
    }
    return index;
}

/*
 * The rank whose unmasked coordinates are those of group `g` and masked ones
 * of member `j`, or -1 when g >= group count or j >= group size (a digit is
 * left over after the decomposition). g, j >= 0.
 */
static int mask_compose(const areal_rankgen *gen, unsigned mask, int g, int j) {
    int rank = 0;
    for (int d = 0; d < AREAL_DIM_COUNT; d++) {
        int size = gen->size[d];
        if (size == 1)
            continue;
        if (mask & DIM_BIT(d)) {
            rank += (j % size) * gen->stride[d];
            j /= size;
        } else {
            rank += (g % size) * gen->stride[d];
            g /= size;
        }
    }
    return g == 0 && j == 0 ? rank : -1;
}

/* True when `l` is usable and `rank` is one of its ranks. */
static bool rank_ok(const areal_layout *l, int rank) {
    return l != NULL && rank >= 0 && rank < l->world;
}

int areal_group_size(const areal_layout *l, areal_group_kind k) {
    if (l == NULL || !kind_ok(k))
        return -1;
    if (k == AREAL_GROUP_EMBEDDING)
        return l->s.pp == 1 ? 1 : 2;
    return mask_product(gen_of(l, k), KINDS[k].mask, true);
}

int areal_group_count(const areal_layout *l, areal_group_kind k) {
    if (l == NULL || !kind_ok(k))
        return -1;
    return mask_product(gen_of(l, k), KINDS[k].mask, false);
}

/* Pipeline stage of a rank in an embedding group, or -1 for a middle stage. */
static int embedding_stage(const areal_layout *l, int rank) {
    int stage = rankgen_coord(&l->dense, rank, AREAL_DIM_PP);
    return stage == 0 || stage == l->s.pp - 1 ? stage : -1;
}

int areal_group_index(const areal_layout *l, areal_group_kind k, int rank) {
    if (!rank_ok(l, rank) || !kind_ok(k))
        return -1;
    if (k == AREAL_GROUP_EMBEDDING && embedding_stage(l, rank) < 0)
        return -1;
    return mask_index(gen_of(l, k), KINDS[k].mask, false, rank);
}

int areal_group_member_index(const areal_layout *l, areal_group_kind k, int rank) {
    if (!rank_ok(l, rank) || !kind_ok(k))
        return -1;
    if (k == AREAL_GROUP_EMBEDDING) {
        int stage = embedding_stage(l, rank);
        return stage <= 0 ? stage : 1; /* -1 middle, 0 first, 1 last */
    }
    return mask_index(gen_of(l, k), KINDS[k].mask, true, rank);
}

int areal_group_member(const areal_layout *l, areal_group_kind k, int g, int j) {
    if (l == NULL || !kind_ok(k) || g < 0 || j < 0)
        return -1;
    if (k == AREAL_GROUP_EMBEDDING) {
        if (j >= (l->s.pp == 1 ? 1 : 2))
            return -1;
        if (j == 1)
            j = l->s.pp - 1; /* the last stage: member pp-1 of the pp group */
    }
    return mask_compose(gen_of(l, k), KINDS[k].mask, g, j);
}

int areal_group_ranks(const areal_layout *l, areal_group_kind k, int g, int *out) {
    int size = areal_group_size(l, k);
    if (size < 0 || out == NULL || areal_group_member(l, k, g, 0) < 0)
        return -1;
    for (int j = 0; j < size; j++)
        out[j] = areal_group_member(l, k, g, j);
    return size;
}

/* ---- coordinates and heads ---------------------------------------------- */

areal_rank_coords areal_rank_coords_of(const areal_layout *l, int rank) {
    areal_rank_coords c = {-1, -1, -1, -1, -1, -1, -1};
    if (!rank_ok(l, rank))
        return c;
    c.tp = rankgen_coord(&l->dense, rank, AREAL_DIM_TP);
    c.cp = rankgen_coord(&l->dense, rank, AREAL_DIM_CP);
    c.dp = rankgen_coord(&l->dense, rank, AREAL_DIM_DP);
    c.pp = rankgen_coord(&l->dense, rank, AREAL_DIM_PP);
    c.etp = rankgen_coord(&l->expert, rank, AREAL_DIM_TP);
    c.ep = rankgen_coord(&l->expert, rank, AREAL_DIM_EP);
    c.edp = rankgen_coord(&l->expert, rank, AREAL_DIM_DP);
    return c;
}

int areal_dense_rank(const areal_layout *l, int tp, int cp, int dp, int pp) {
    if (l == NULL)
        return -1;
    const areal_rankgen *g = &l->dense;
    const int coord[AREAL_DIM_COUNT] = {tp, cp, 0, dp, pp};
    int rank = 0;
    for (int d = 0; d < AREAL_DIM_COUNT; d++) {
        if (coord[d] < 0 || coord[d] >= g->size[d])
            return -1;
        rank += coord[d] * g->stride[d];
    }
    return rank;
}

bool areal_is_dp_head(const areal_layout *l, int rank) {
    return areal_group_member_index(l, AREAL_GROUP_TP_CP_PP, rank) == 0;
}

int areal_pp_head(const areal_layout *l, int stage) {
    return areal_dense_rank(l, 0, 0, 0, stage);
}
