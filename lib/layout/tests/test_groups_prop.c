/*
 * test_groups_prop.c - properties of areal/groups.h over random strategies.
 *
 * A seeded splitmix64 stream draws PROP_STRATEGIES valid strategies (world up
 * to PROP_MAX_WORLD, log-uniform; random etp/ep with etp*ep*pp dividing the
 * world; cp > 1 together with ep > 1 included; edp sometimes given, sometimes
 * derived). For each one and every kind the groups are built with
 * areal_group_ranks and checked:
 *   (a) partitioning kinds hold every rank exactly once; embedding holds
 *       exactly the first and last pipeline stage, once each;
 *   (b) size * count == world and each size is the product of its dimensions;
 *   (c) the dense pp groups equal the expert generator's pp groups;
 *   (d) coordinates round-trip through both generators;
 *   (e) areal_group_index / member_index / member agree with the built groups.
 * Worlds above PROP_FULL_WORLD get a cheaper check, to keep the sanitizer
 * build fast: (b), one random group built whole, and PROP_SAMPLES random
 * (group, member) pairs and ranks per kind for (a) and (e); (c) and the heads
 * stay complete, (d) is sampled too.
 * (f) A slow, literal port of Megatron's generate_masked_orthogonal_rank_groups
 * (RankGenerator with its order string, nested enumeration, nothing shared
 * with groups.c) builds every group of every kind for PROP_REF_STRATEGIES
 * strategies and must match group by group.
 *
 * The seed is printed; set AREAL_PROP_SEED to replay another one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "areal/groups.h"

#define PROP_STRATEGIES     10000
#define PROP_REF_STRATEGIES 500
#define PROP_MAX_WORLD      4096
#define PROP_FULL_WORLD     1024 /* larger worlds are sampled */
#define PROP_SAMPLES        256  /* sampled members and ranks per kind */
#define PROP_DEFAULT_SEED   0x5eed0a2ea1ULL

/* ---- seeded randomness -------------------------------------------------- */

typedef struct prng {
    uint64_t state;
} prng;

static uint64_t splitmix64(prng *p) {
    uint64_t z = (p->state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, n), n >= 1 (the modulo bias is irrelevant here). */
static int uniform(prng *p, int n) {
    return (int)(splitmix64(p) % (uint64_t)n);
}

/* The seed: AREAL_PROP_SEED if set, else the fixed default; printed either way. */
static uint64_t prop_seed(void) {
    const char *env = getenv("AREAL_PROP_SEED");
    uint64_t seed = env != NULL ? strtoull(env, NULL, 0) : PROP_DEFAULT_SEED;
    printf("test_groups_prop: seed 0x%llx (replay with AREAL_PROP_SEED=0x%llx)\n",
           (unsigned long long)seed, (unsigned long long)seed);
    return seed;
}

/* A random divisor of n (n >= 1), 1 with probability about `one_percent`%. */
static int random_divisor(prng *p, int n, int one_percent) {
    if (uniform(p, 100) < one_percent)
        return 1;
    int divisors[PROP_MAX_WORLD], count = 0;
    for (int d = 1; d <= n; d++) {
        if (n % d == 0)
            divisors[count++] = d;
    }
    return divisors[uniform(p, count)];
}

/*
 * A random valid strategy. The world is log-uniform up to PROP_MAX_WORLD: a
 * target 2^(12u) is drawn, then prime factors are dealt to tp, cp, dp, pp
 * (dp most often) while they fit. etp divides world/pp, ep divides
 * world/(pp*etp); edp is given explicitly half of the time.
 */
static areal_strategy random_strategy(prng *p) {
    static const int primes[] = {2, 2, 2, 2, 3, 3, 5, 7};
    areal_strategy s = {.dp = 1, .tp = 1, .pp = 1, .cp = 1, .ep = 1, .etp = 1, .edp = 0};
    int target = 1 << uniform(p, 13);
    target += uniform(p, target); /* in [2^k, 2^(k+1)) */
    if (target > PROP_MAX_WORLD)
        target = PROP_MAX_WORLD;
    for (int world = 1;;) {
        int f = primes[uniform(p, (int)(sizeof primes / sizeof primes[0]))];
        if (world * f > target)
            break;
        world *= f;
        int *dims[] = {&s.tp, &s.cp, &s.dp, &s.dp, &s.pp};
        *dims[uniform(p, 5)] *= f;
    }
    int world = s.tp * s.cp * s.dp * s.pp;
    s.etp = uniform(p, 4) == 0 ? s.tp : random_divisor(p, world / s.pp, 40);
    s.ep = random_divisor(p, world / (s.pp * s.etp), 30);
    if (uniform(p, 2))
        s.edp = world / (s.pp * s.etp * s.ep);
    return s;
}

/* ---- failure context ---------------------------------------------------- */

/* What is under test, for failure messages. */
typedef struct prop_ctx {
    char what[160];
} prop_ctx;

static void describe(prop_ctx *ctx, int index, const areal_strategy *s) {
    snprintf(ctx->what, sizeof ctx->what,
             "strategy #%d (tp=%d cp=%d dp=%d pp=%d ep=%d etp=%d edp=%d)", index, s->tp, s->cp,
             s->dp, s->pp, s->ep, s->etp, s->edp);
}

#define EXPECT(ctx, kind, cond)                                                                    \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fail_msg("%s kind %s: %s fails (line %d)", (ctx)->what,                                \
                     areal_group_kind_name(kind) ? areal_group_kind_name(kind) : "-", #cond,       \
                     __LINE__);                                                                    \
    } while (0)

/* ---- (f) Megatron reference, a literal port ----------------------------- */

/*
 * Megatron's RankGenerator for order "tp-cp-ep-dp-pp": the order string is
 * parsed into tokens, each token's size looked up by name, masks built by
 * token name, and groups enumerated exactly as
 * generate_masked_orthogonal_rank_groups does (prefix_product, decompose,
 * inner_product). Deliberately naive.
 */
#define REF_ORDER  "tp-cp-ep-dp-pp"
#define REF_TOKENS 5

typedef struct ref_gen {
    int world;
    char token[REF_TOKENS][4];
    int size[REF_TOKENS];
} ref_gen;

static void ref_gen_init(ref_gen *g, int tp, int cp, int ep, int dp, int pp) {
    const char *names[] = {"tp", "cp", "ep", "dp", "pp"};
    const int sizes[] = {tp, cp, ep, dp, pp};
    char order[] = REF_ORDER, *save = NULL;
    int n = 0;
    for (char *tok = strtok_r(order, "-", &save); tok != NULL;
         tok = strtok_r(NULL, "-", &save), n++) {
        snprintf(g->token[n], sizeof g->token[n], "%s", tok);
        for (int i = 0; i < REF_TOKENS; i++) {
            if (strcmp(names[i], tok) == 0)
                g->size[n] = sizes[i];
        }
    }
    g->world = tp * cp * ep * dp * pp;
}

/* mask[i] = 1 when token i of the order appears in `tokens` ("tp-dp", ...). */
static void ref_get_mask(const ref_gen *g, const char *tokens, int *mask) {
    char copy[32], *save = NULL;
    snprintf(copy, sizeof copy, "%s", tokens);
    for (int i = 0; i < REF_TOKENS; i++)
        mask[i] = 0;
    for (char *tok = strtok_r(copy, "-", &save); tok != NULL; tok = strtok_r(NULL, "-", &save)) {
        for (int i = 0; i < REF_TOKENS; i++) {
            if (strcmp(g->token[i], tok) == 0)
                mask[i] = 1;
        }
    }
}

/* prefix_product(a): out[0] = 1, out[i+1] = out[i] * a[i]. */
static void ref_prefix_product(const int *a, int n, long *out) {
    out[0] = 1;
    for (int i = 0; i < n; i++)
        out[i + 1] = out[i] * a[i];
}

/* decompose(index, shape): idx[i] = (index // stride[i]) % shape[i]. */
static void ref_decompose(long index, const int *shape, int n, long *idx) {
    long stride[REF_TOKENS + 1];
    ref_prefix_product(shape, n, stride);
    long check = 0;
    for (int i = 0; i < n; i++) {
        idx[i] = (index / stride[i]) % shape[i];
        check += idx[i] * stride[i];
    }
    assert_int_equal(check, index);
}

static long ref_inner_product(const long *a, const long *b, int n) {
    long sum = 0;
    for (int i = 0; i < n; i++)
        sum += a[i] * b[i];
    return sum;
}

/*
 * generate_masked_orthogonal_rank_groups(world, sizes, mask) for `tokens`:
 * writes the groups, one after another, to a new array; sets *count, *size.
 */
static int *ref_get_ranks(const ref_gen *g, const char *tokens, int *count, int *size) {
    int mask[REF_TOKENS], masked_shape[REF_TOKENS], unmasked_shape[REF_TOKENS];
    long global_stride[REF_TOKENS + 1], masked_stride[REF_TOKENS], unmasked_stride[REF_TOKENS];
    long prefix[REF_TOKENS + 1];
    int n_masked = 0, n_unmasked = 0;
    ref_get_mask(g, tokens, mask);
    ref_prefix_product(g->size, REF_TOKENS, global_stride);
    for (int i = 0; i < REF_TOKENS; i++) {
        if (mask[i]) {
            masked_shape[n_masked] = g->size[i];
            masked_stride[n_masked++] = global_stride[i];
        } else {
            unmasked_shape[n_unmasked] = g->size[i];
            unmasked_stride[n_unmasked++] = global_stride[i];
        }
    }
    ref_prefix_product(masked_shape, n_masked, prefix);
    int group_size = (int)prefix[n_masked];
    int num_of_group = g->world / group_size;
    int *ranks = malloc(sizeof *ranks * (size_t)g->world);
    assert_non_null(ranks);
    for (int group_index = 0; group_index < num_of_group; group_index++) {
        long group_idx[REF_TOKENS], rank_idx[REF_TOKENS];
        ref_decompose(group_index, unmasked_shape, n_unmasked, group_idx);
        for (int rank_in_group = 0; rank_in_group < group_size; rank_in_group++) {
            ref_decompose(rank_in_group, masked_shape, n_masked, rank_idx);
            ranks[group_index * group_size + rank_in_group] =
                (int)(ref_inner_product(rank_idx, masked_stride, n_masked) +
                      ref_inner_product(group_idx, unmasked_stride, n_unmasked));
        }
    }
    *count = num_of_group;
    *size = group_size;
    return ranks;
}

/* The Megatron token string and generator of each kind (embedding: from "pp"). */
static const struct {
    const char *tokens;
    bool expert;
} REF_KIND[AREAL_GROUP_KIND_COUNT] = {
    [AREAL_GROUP_TP] = {"tp", false},       [AREAL_GROUP_CP] = {"cp", false},
    [AREAL_GROUP_DP] = {"dp", false},       [AREAL_GROUP_DP_CP] = {"dp-cp", false},
    [AREAL_GROUP_PP] = {"pp", false},       [AREAL_GROUP_EMBEDDING] = {"pp", false},
    [AREAL_GROUP_TP_PP] = {"tp-pp", false}, [AREAL_GROUP_TP_DP] = {"tp-dp", false},
    [AREAL_GROUP_TP_CP] = {"tp-cp", false}, [AREAL_GROUP_TP_DP_CP] = {"tp-dp-cp", false},
    [AREAL_GROUP_EP] = {"ep", true},        [AREAL_GROUP_ETP] = {"tp", true},
    [AREAL_GROUP_TP_EP] = {"tp-ep", true},  [AREAL_GROUP_TP_EP_PP] = {"tp-ep-pp", true},
    [AREAL_GROUP_EDP] = {"dp", true},       [AREAL_GROUP_TP_CP_PP] = {"tp-cp-pp", false},
};

/* Megatron's two generators for `s`, built from the strategy alone. */
static void ref_generators(const areal_strategy *s, ref_gen *dense, ref_gen *expert) {
    int world = s->tp * s->cp * s->dp * s->pp;
    int edp = world / (s->etp * s->ep * s->pp);
    ref_gen_init(dense, s->tp, s->cp, 1, s->dp, s->pp);
    ref_gen_init(expert, s->etp, 1, s->ep, edp, s->pp);
}

/*
 * The reference groups of kind `k` into a new array: for embedding, the first
 * and last member of each pp group (the one member when pp == 1).
 */
static int *ref_groups(const areal_strategy *s, areal_group_kind k, int *count, int *size) {
    ref_gen dense, expert;
    ref_generators(s, &dense, &expert);
    int *ranks =
        ref_get_ranks(REF_KIND[k].expert ? &expert : &dense, REF_KIND[k].tokens, count, size);
    if (k == AREAL_GROUP_EMBEDDING && *size > 1) {
        for (int g = 0; g < *count; g++) {
            int first = ranks[g * *size], last = ranks[g * *size + *size - 1];
            ranks[2 * g] = first;
            ranks[2 * g + 1] = last;
        }
        *size = 2;
    }
    return ranks;
}

/* ---- (a)-(e) ------------------------------------------------------------ */

/* Expected group size of kind `k` as a product of the strategy's sizes. */
static int expected_size(const areal_strategy *s, int edp, areal_group_kind k) {
    switch (k) {
    case AREAL_GROUP_TP:
        return s->tp;
    case AREAL_GROUP_CP:
        return s->cp;
    case AREAL_GROUP_DP:
        return s->dp;
    case AREAL_GROUP_DP_CP:
        return s->dp * s->cp;
    case AREAL_GROUP_PP:
        return s->pp;
    case AREAL_GROUP_EMBEDDING:
        return s->pp == 1 ? 1 : 2;
    case AREAL_GROUP_TP_PP:
        return s->tp * s->pp;
    case AREAL_GROUP_TP_DP:
        return s->tp * s->dp;
    case AREAL_GROUP_TP_CP:
        return s->tp * s->cp;
    case AREAL_GROUP_TP_DP_CP:
        return s->tp * s->dp * s->cp;
    case AREAL_GROUP_EP:
        return s->ep;
    case AREAL_GROUP_ETP:
        return s->etp;
    case AREAL_GROUP_TP_EP:
        return s->etp * s->ep;
    case AREAL_GROUP_TP_EP_PP:
        return s->etp * s->ep * s->pp;
    case AREAL_GROUP_EDP:
        return edp;
    case AREAL_GROUP_TP_CP_PP:
        return s->tp * s->cp * s->pp;
    default:
        return -1;
    }
}

/* Scratch space for one strategy, reused across strategies. */
typedef struct scratch {
    int ranks[PROP_MAX_WORLD]; /* all groups of one kind, concatenated */
    int seen[PROP_MAX_WORLD];  /* times each rank was met */
    int stage[PROP_MAX_WORLD]; /* pp stage of each rank */
    int stamp;                 /* sampled mode: last value written to seen[] */
} scratch;

/* (e) for member `j` of group `g`, which is rank `r`: the O(1) queries agree. */
static void check_member(const areal_layout *l, areal_group_kind k, int g, int j, int r,
                         const prop_ctx *ctx) {
    EXPECT(ctx, k, r >= 0 && r < l->world);
    EXPECT(ctx, k, areal_group_index(l, k, r) == g);
    EXPECT(ctx, k, areal_group_member_index(l, k, r) == j);
    EXPECT(ctx, k, areal_group_member(l, k, g, j) == r);
}

/* (b): size and count of kind `k` are the products of its dimensions. */
static void check_shape(const areal_layout *l, areal_group_kind k, const prop_ctx *ctx) {
    int count = areal_group_count(l, k), size = areal_group_size(l, k);
    bool embedding = k == AREAL_GROUP_EMBEDDING;
    EXPECT(ctx, k, size == expected_size(&l->s, l->s.edp, k));
    EXPECT(ctx, k, count == l->world / (embedding ? l->s.pp : size));
    EXPECT(ctx, k, embedding || (long)count * size == l->world);
}

/* Embedding group `group` (of `size`) is the first and last stage of its pipeline. */
static void check_embedding(const areal_layout *l, const int *group, int size, const scratch *sc,
                            const prop_ctx *ctx) {
    EXPECT(ctx, AREAL_GROUP_EMBEDDING, sc->stage[group[0]] == 0);
    EXPECT(ctx, AREAL_GROUP_EMBEDDING, size == 1 || sc->stage[group[1]] == l->s.pp - 1);
}

/* (a), (b), (e) for kind `k`: builds every group and cross-checks every member. */
static void check_kind_full(const areal_layout *l, areal_group_kind k, scratch *sc,
                            const prop_ctx *ctx) {
    int count = areal_group_count(l, k), size = areal_group_size(l, k);
    bool embedding = k == AREAL_GROUP_EMBEDDING;
    check_shape(l, k, ctx);
    memset(sc->seen, 0, sizeof sc->seen[0] * (size_t)l->world);
    for (int g = 0; g < count; g++) {
        int *group = sc->ranks + g * size;
        EXPECT(ctx, k, areal_group_ranks(l, k, g, group) == size);
        for (int j = 0; j < size; j++) {
            check_member(l, k, g, j, group[j], ctx);
            sc->seen[group[j]]++;
        }
        if (embedding)
            check_embedding(l, group, size, sc, ctx);
    }
    for (int r = 0; r < l->world; r++) {
        bool in_embedding = sc->stage[r] == 0 || sc->stage[r] == l->s.pp - 1;
        EXPECT(ctx, k, sc->seen[r] == (!embedding || in_embedding ? 1 : 0));
        if (embedding && !in_embedding)
            EXPECT(ctx, k, areal_group_index(l, k, r) == -1);
    }
}

/*
 * The cheaper check for big worlds: (b); one random group built whole, its
 * members distinct; PROP_SAMPLES random (group, member) pairs and ranks
 * cross-checked. With count * size == world, index/member being mutually
 * inverse on the samples stands in for the full partition check.
 */
static void check_kind_sampled(const areal_layout *l, areal_group_kind k, scratch *sc, prng *p,
                               const prop_ctx *ctx) {
    int count = areal_group_count(l, k), size = areal_group_size(l, k);
    check_shape(l, k, ctx);
    int g = uniform(p, count), stamp = ++sc->stamp;
    EXPECT(ctx, k, areal_group_ranks(l, k, g, sc->ranks) == size);
    for (int j = 0; j < size; j++) {
        check_member(l, k, g, j, sc->ranks[j], ctx);
        EXPECT(ctx, k, sc->seen[sc->ranks[j]] != stamp); /* members are distinct */
        sc->seen[sc->ranks[j]] = stamp;
    }
    if (k == AREAL_GROUP_EMBEDDING)
        check_embedding(l, sc->ranks, size, sc, ctx);
    for (int i = 0; i < PROP_SAMPLES; i++) {
        int sg = uniform(p, count), sj = uniform(p, size);
        check_member(l, k, sg, sj, areal_group_member(l, k, sg, sj), ctx);
        int r = uniform(p, l->world), rg = areal_group_index(l, k, r);
        if (k == AREAL_GROUP_EMBEDDING && rg < 0) { /* only a middle stage is in none */
            EXPECT(ctx, k, sc->stage[r] != 0 && sc->stage[r] != l->s.pp - 1);
            continue;
        }
        EXPECT(ctx, k, areal_group_member(l, k, rg, areal_group_member_index(l, k, r)) == r);
    }
}

/*
 * (c): the dense pp groups equal those of Megatron's expert generator for
 * the same strategy (built by the reference from etp, ep, edp, pp).
 */
static void check_pp_groups_agree(const areal_layout *l, scratch *sc, const prop_ctx *ctx) {
    ref_gen dense, expert;
    int count, size;
    ref_generators(&l->s, &dense, &expert);
    int *expert_pp = ref_get_ranks(&expert, "pp", &count, &size);
    EXPECT(ctx, AREAL_GROUP_PP, count == areal_group_count(l, AREAL_GROUP_PP));
    EXPECT(ctx, AREAL_GROUP_PP, size == areal_group_size(l, AREAL_GROUP_PP));
    for (int g = 0; g < count; g++) {
        areal_group_ranks(l, AREAL_GROUP_PP, g, sc->ranks);
        EXPECT(ctx, AREAL_GROUP_PP,
               memcmp(sc->ranks, expert_pp + g * size, sizeof *sc->ranks * (size_t)size) == 0);
    }
    free(expert_pp);
    EXPECT(ctx, AREAL_GROUP_PP, l->dense.stride[AREAL_DIM_PP] == l->expert.stride[AREAL_DIM_PP]);
}

/* (d) and the heads, for rank `r`: coordinates round-trip and match the group queries. */
static void check_rank(const areal_layout *l, int r, const prop_ctx *ctx) {
    const areal_strategy *s = &l->s;
    areal_rank_coords c = areal_rank_coords_of(l, r);
    EXPECT(ctx, AREAL_GROUP_TP, areal_dense_rank(l, c.tp, c.cp, c.dp, c.pp) == r);
    EXPECT(ctx, AREAL_GROUP_EP, c.etp + s->etp * (c.ep + s->ep * (c.edp + s->edp * c.pp)) == r);
    EXPECT(ctx, AREAL_GROUP_TP, c.tp >= 0 && c.tp < s->tp && c.cp >= 0 && c.cp < s->cp);
    EXPECT(ctx, AREAL_GROUP_DP, c.dp >= 0 && c.dp < s->dp && c.pp >= 0 && c.pp < s->pp);
    EXPECT(ctx, AREAL_GROUP_EP, c.etp >= 0 && c.etp < s->etp && c.ep >= 0 && c.ep < s->ep);
    EXPECT(ctx, AREAL_GROUP_EDP, c.edp >= 0 && c.edp < s->edp);
    EXPECT(ctx, AREAL_GROUP_TP, areal_group_member_index(l, AREAL_GROUP_TP, r) == c.tp);
    EXPECT(ctx, AREAL_GROUP_CP, areal_group_member_index(l, AREAL_GROUP_CP, r) == c.cp);
    EXPECT(ctx, AREAL_GROUP_DP, areal_group_member_index(l, AREAL_GROUP_DP, r) == c.dp);
    EXPECT(ctx, AREAL_GROUP_PP, areal_group_member_index(l, AREAL_GROUP_PP, r) == c.pp);
    EXPECT(ctx, AREAL_GROUP_ETP, areal_group_member_index(l, AREAL_GROUP_ETP, r) == c.etp);
    EXPECT(ctx, AREAL_GROUP_EP, areal_group_member_index(l, AREAL_GROUP_EP, r) == c.ep);
    EXPECT(ctx, AREAL_GROUP_EDP, areal_group_member_index(l, AREAL_GROUP_EDP, r) == c.edp);
    EXPECT(ctx, AREAL_GROUP_TP_CP_PP, areal_group_index(l, AREAL_GROUP_TP_CP_PP, r) == c.dp);
    bool head = c.tp == 0 && c.cp == 0 && c.pp == 0;
    EXPECT(ctx, AREAL_GROUP_TP_CP_PP, areal_is_dp_head(l, r) == head);
    EXPECT(ctx, AREAL_GROUP_TP_CP_PP,
           !head || areal_group_member(l, AREAL_GROUP_TP_CP_PP, c.dp, 0) == r);
}

/* The PP head of every stage: stage s, dp-cp rank 0, tp rank 0. */
static void check_pp_heads(const areal_layout *l, const prop_ctx *ctx) {
    for (int stage = 0; stage < l->s.pp; stage++) {
        int h = areal_pp_head(l, stage);
        EXPECT(ctx, AREAL_GROUP_PP, areal_rank_coords_of(l, h).pp == stage);
        EXPECT(ctx, AREAL_GROUP_DP_CP, areal_group_member_index(l, AREAL_GROUP_DP_CP, h) == 0);
        EXPECT(ctx, AREAL_GROUP_TP, areal_group_member_index(l, AREAL_GROUP_TP, h) == 0);
        EXPECT(ctx, AREAL_GROUP_PP, areal_group_member(l, AREAL_GROUP_PP, 0, stage) == h);
    }
    EXPECT(ctx, AREAL_GROUP_PP, areal_pp_head(l, l->s.pp) == -1);
}

/* Initialises `l` from `s`, failing with the context on error. */
static void init_or_fail(areal_layout *l, const areal_strategy *s, const prop_ctx *ctx) {
    areal_error e;
    areal_error_clear(&e);
    if (areal_layout_init(l, s, &e) != AREAL_OK)
        fail_msg("%s: areal_layout_init: %s", ctx->what, e.msg);
}

/* Counts of the interesting shapes drawn, to show the generator covers them. */
typedef struct coverage {
    int cp_and_ep, etp_eq_tp, etp_ne_tp, pp_middle, explicit_edp, sampled, max_world;
} coverage;

static void count_coverage(coverage *cov, const areal_strategy *s, int world) {
    cov->cp_and_ep += s->cp > 1 && s->ep > 1;
    cov->etp_eq_tp += s->etp > 1 && s->etp == s->tp;
    cov->etp_ne_tp += s->etp > 1 && s->etp != s->tp;
    cov->pp_middle += s->pp > 2;
    cov->explicit_edp += s->edp != 0;
    cov->sampled += world > PROP_FULL_WORLD;
    if (world > cov->max_world)
        cov->max_world = world;
}

static void random_strategies_satisfy_properties(void **state) {
    (void)state;
    prng p = {prop_seed()};
    scratch *sc = malloc(sizeof *sc);
    assert_non_null(sc);
    coverage cov = {0};
    clock_t start = clock();
    for (int i = 0; i < PROP_STRATEGIES; i++) {
        areal_strategy s = random_strategy(&p);
        areal_layout l;
        prop_ctx ctx;
        describe(&ctx, i, &s);
        init_or_fail(&l, &s, &ctx);
        count_coverage(&cov, &s, l.world);
        bool full = l.world <= PROP_FULL_WORLD;
        for (int r = 0; r < l.world; r++)
            sc->stage[r] = r / (l.world / s.pp); /* pp is the slowest dimension */
        if (!full) {
            memset(sc->seen, 0, sizeof sc->seen[0] * (size_t)l.world);
            sc->stamp = 0;
        }
        for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
            if (full)
                check_kind_full(&l, (areal_group_kind)k, sc, &ctx);
            else
                check_kind_sampled(&l, (areal_group_kind)k, sc, &p, &ctx);
        }
        check_pp_groups_agree(&l, sc, &ctx);
        for (int n = 0; n < (full ? l.world : PROP_SAMPLES); n++)
            check_rank(&l, full ? n : uniform(&p, l.world), &ctx);
        check_pp_heads(&l, &ctx);
    }
    free(sc);
    printf("test_groups_prop: %d strategies in %.2f s cpu; cp>1&ep>1 %d, etp==tp>1 %d, "
           "etp!=tp>1 %d, pp>2 %d, explicit edp %d, sampled (world>%d) %d, max world %d\n",
           PROP_STRATEGIES, (double)(clock() - start) / CLOCKS_PER_SEC, cov.cp_and_ep,
           cov.etp_eq_tp, cov.etp_ne_tp, cov.pp_middle, cov.explicit_edp, PROP_FULL_WORLD,
           cov.sampled, cov.max_world);
    assert_true(cov.cp_and_ep >= PROP_STRATEGIES / 50);
    assert_true(cov.etp_eq_tp >= PROP_STRATEGIES / 50);
    assert_true(cov.etp_ne_tp >= PROP_STRATEGIES / 50);
    assert_true(cov.pp_middle >= PROP_STRATEGIES / 50);
    assert_true(cov.sampled >= PROP_STRATEGIES / 50);
    assert_true(cov.max_world > PROP_MAX_WORLD / 2);
}

/* ---- (f) ---------------------------------------------------------------- */

/* Every group of every kind of `l` equals Megatron's, in order. */
static void check_against_reference(const areal_layout *l, int *buf, const prop_ctx *ctx) {
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
        int count, size;
        int *want = ref_groups(&l->s, (areal_group_kind)k, &count, &size);
        EXPECT(ctx, k, areal_group_count(l, (areal_group_kind)k) == count);
        EXPECT(ctx, k, areal_group_size(l, (areal_group_kind)k) == size);
        for (int g = 0; g < count; g++) {
            EXPECT(ctx, k, areal_group_ranks(l, (areal_group_kind)k, g, buf) == size);
            EXPECT(ctx, k, memcmp(buf, want + g * size, sizeof *buf * (size_t)size) == 0);
        }
        free(want);
    }
}

static void random_strategies_match_megatron_reference(void **state) {
    (void)state;
    prng p = {prop_seed() ^ 0x7265666572656e63ULL}; /* a stream of its own */
    int *buf = malloc(sizeof *buf * PROP_MAX_WORLD);
    assert_non_null(buf);
    for (int i = 0; i < PROP_REF_STRATEGIES; i++) {
        areal_strategy s = random_strategy(&p);
        areal_layout l;
        prop_ctx ctx;
        describe(&ctx, i, &s);
        init_or_fail(&l, &s, &ctx);
        check_against_reference(&l, buf, &ctx);
    }
    free(buf);
}

/* The reference itself reproduces docs §2.2 (etp 2), so it cannot drift. */
static void reference_reproduces_worked_example(void **state) {
    (void)state;
    areal_strategy s = {.dp = 4, .tp = 2, .pp = 2, .cp = 1, .ep = 2, .etp = 2, .edp = 0};
    static const int ep[] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};
    static const int tp_ep_pp[] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};
    static const int dp[] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
    int count, size;
    int *got = ref_groups(&s, AREAL_GROUP_EP, &count, &size);
    assert_int_equal(count * size, 16);
    assert_memory_equal(got, ep, sizeof ep);
    free(got);
    got = ref_groups(&s, AREAL_GROUP_TP_EP_PP, &count, &size);
    assert_int_equal(size, 8);
    assert_memory_equal(got, tp_ep_pp, sizeof tp_ep_pp);
    free(got);
    got = ref_groups(&s, AREAL_GROUP_DP, &count, &size);
    assert_int_equal(size, 4);
    assert_memory_equal(got, dp, sizeof dp);
    free(got);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reference_reproduces_worked_example),
        cmocka_unit_test(random_strategies_satisfy_properties),
        cmocka_unit_test(random_strategies_match_megatron_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
