/*
 * test_groups.c - areal/groups.h against literal group lists.
 *
 * Every expected list is written out in full, in Megatron's group order and
 * member order, in the reference's notation ("[0,2,4,6] [1,3,5,7] ..."). The
 * lists of docs §2.2 are copied from it; the kinds it does not list (cp,
 * dp-cp, tp-cp, tp-dp-cp, embedding, etp, ...) were derived by hand from
 * rank = tp_r + tp*(cp_r + cp*(dp_r + dp*pp_r)) (dense) and
 * rank = etp_r + etp*(ep_r + ep*(edp_r + edp*pp_r)) (expert).
 * A checked list also checks areal_group_index/member_index of each member.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "areal/groups.h"

#define LIST_MAX 4096

/* A strategy from its sizes; edp 0 (derive). */
static areal_strategy strategy(int tp, int cp, int dp, int pp, int ep, int etp) {
    areal_strategy s = {.dp = dp, .tp = tp, .pp = pp, .cp = cp, .ep = ep, .etp = etp, .edp = 0};
    return s;
}

/* Initialises `l` from `s`, failing the test on error. */
static void layout_ok(areal_layout *l, areal_strategy s) {
    areal_error e;
    areal_error_clear(&e);
    int rc = areal_layout_init(l, &s, &e);
    if (rc != AREAL_OK)
        fail_msg("areal_layout_init: %s", e.msg);
}

/*
 * Writes every group of kind `k` as "[a,b] [c,d] ..." to `buf`, checking on
 * the way that each member's group index and member index are its position.
 */
static void format_groups(const areal_layout *l, areal_group_kind k, char *buf, size_t cap) {
    int count = areal_group_count(l, k), size = areal_group_size(l, k);
    int ranks[LIST_MAX];
    size_t used = 0;
    buf[0] = '\0';
    assert_true(count >= 1 && size >= 1 && size <= LIST_MAX);
    for (int g = 0; g < count; g++) {
        assert_int_equal(areal_group_ranks(l, k, g, ranks), size);
        for (int j = 0; j < size; j++) {
            assert_int_equal(areal_group_index(l, k, ranks[j]), g);
            assert_int_equal(areal_group_member_index(l, k, ranks[j]), j);
            assert_int_equal(areal_group_member(l, k, g, j), ranks[j]);
            int n = snprintf(buf + used, cap - used, "%s%s%d%s", g > 0 && j == 0 ? " " : "",
                             j == 0 ? "[" : ",", ranks[j], j == size - 1 ? "]" : "");
            assert_true(n > 0 && (size_t)n < cap - used);
            used += (size_t)n;
        }
    }
}

/* Asserts that the groups of the kind named `name` are exactly `expected`. */
static void expect_groups(const areal_layout *l, const char *name, const char *expected) {
    char got[16384];
    int k = areal_group_kind_from_name(name);
    assert_true(k >= 0);
    format_groups(l, (areal_group_kind)k, got, sizeof got);
    if (strcmp(got, expected) != 0)
        fail_msg("kind %s:\n  expected %s\n  got      %s", name, expected, got);
}

/* The ranks for which `is_dp_head` holds, as "a b c". */
static void expect_dp_heads(const areal_layout *l, const char *expected) {
    char got[1024];
    size_t used = 0;
    got[0] = '\0';
    for (int r = 0; r < l->world; r++) {
        if (areal_is_dp_head(l, r))
            used += (size_t)snprintf(got + used, sizeof got - used, "%s%d", used ? " " : "", r);
    }
    assert_string_equal(got, expected);
}

/* ---- docs §2.2: world 16, tp2 pp2 dp4, ep2 etp1 (edp 4) ---------------------------- */

static const char TP_16_T2[] = "[0,1] [2,3] [4,5] [6,7] [8,9] [10,11] [12,13] [14,15]";
static const char SINGLETONS_16[] =
    "[0] [1] [2] [3] [4] [5] [6] [7] [8] [9] [10] [11] [12] [13] [14] [15]";
static const char PP_16_P2[] = "[0,8] [1,9] [2,10] [3,11] [4,12] [5,13] [6,14] [7,15]";

/* The dense kinds of world 16, tp2 pp2 dp4 (the same for both expert layouts). */
static void expect_dense_t2p2d4(const areal_layout *l) {
    expect_groups(l, "tp", TP_16_T2);
    expect_groups(l, "cp", SINGLETONS_16);
    expect_groups(l, "dp", "[0,2,4,6] [1,3,5,7] [8,10,12,14] [9,11,13,15]");
    expect_groups(l, "dp-cp", "[0,2,4,6] [1,3,5,7] [8,10,12,14] [9,11,13,15]");
    expect_groups(l, "pp", PP_16_P2);
    expect_groups(l, "embedding", PP_16_P2);
    expect_groups(l, "tp-pp", "[0,1,8,9] [2,3,10,11] [4,5,12,13] [6,7,14,15]");
    expect_groups(l, "tp-dp", "[0,1,2,3,4,5,6,7] [8,9,10,11,12,13,14,15]");
    expect_groups(l, "tp-cp", TP_16_T2);
    expect_groups(l, "tp-dp-cp", "[0,1,2,3,4,5,6,7] [8,9,10,11,12,13,14,15]");
    expect_groups(l, "tp-cp-pp", "[0,1,8,9] [2,3,10,11] [4,5,12,13] [6,7,14,15]");
    expect_dp_heads(l, "0 2 4 6");
    assert_int_equal(areal_pp_head(l, 0), 0);
    assert_int_equal(areal_pp_head(l, 1), 8);
    assert_int_equal(areal_pp_head(l, 2), -1);
    assert_int_equal(areal_pp_head(l, -1), -1);
}

static void worked_example_etp1(void **state) {
    (void)state;
    areal_layout l;
    layout_ok(&l, strategy(2, 1, 4, 2, 2, 1));
    assert_int_equal(l.world, 16);
    assert_int_equal(l.s.edp, 4);
    expect_dense_t2p2d4(&l);
    expect_groups(&l, "ep", TP_16_T2);
    expect_groups(&l, "etp", SINGLETONS_16);
    expect_groups(&l, "tp-ep", TP_16_T2);
    expect_groups(&l, "tp-ep-pp", "[0,1,8,9] [2,3,10,11] [4,5,12,13] [6,7,14,15]");
    expect_groups(&l, "edp", "[0,2,4,6] [1,3,5,7] [8,10,12,14] [9,11,13,15]");

    areal_rank_coords c = areal_rank_coords_of(&l, 13);
    assert_int_equal(c.tp, 1);
    assert_int_equal(c.cp, 0);
    assert_int_equal(c.dp, 2);
    assert_int_equal(c.pp, 1);
    assert_int_equal(c.etp, 0);
    assert_int_equal(c.ep, 1);
    assert_int_equal(c.edp, 2);
    assert_int_equal(areal_dense_rank(&l, 1, 0, 2, 1), 13);
}

static void worked_example_etp2(void **state) {
    (void)state;
    areal_layout l;
    layout_ok(&l, strategy(2, 1, 4, 2, 2, 2));
    assert_int_equal(l.s.edp, 2);
    expect_dense_t2p2d4(&l);
    expect_groups(&l, "etp", TP_16_T2);
    expect_groups(&l, "ep", "[0,2] [1,3] [4,6] [5,7] [8,10] [9,11] [12,14] [13,15]");
    expect_groups(&l, "tp-ep", "[0,1,2,3] [4,5,6,7] [8,9,10,11] [12,13,14,15]");
    expect_groups(&l, "edp", "[0,4] [1,5] [2,6] [3,7] [8,12] [9,13] [10,14] [11,15]");
    expect_groups(&l, "tp-ep-pp", "[0,1,2,3,8,9,10,11] [4,5,6,7,12,13,14,15]");

    areal_rank_coords c = areal_rank_coords_of(&l, 13);
    assert_int_equal(c.tp, 1);
    assert_int_equal(c.cp, 0);
    assert_int_equal(c.dp, 2);
    assert_int_equal(c.pp, 1);
    assert_int_equal(c.etp, 1);
    assert_int_equal(c.ep, 0);
    assert_int_equal(c.edp, 1);
}

/* Megatron's initialize_model_parallel docstring: 16 GPUs, tp2 pp4 (dp2), ep1 etp1. */
static void megatron_docstring_example(void **state) {
    (void)state;
    areal_layout l;
    layout_ok(&l, strategy(2, 1, 2, 4, 1, 1));
    expect_groups(&l, "tp", TP_16_T2);
    expect_groups(&l, "cp", SINGLETONS_16);
    expect_groups(&l, "dp", "[0,2] [1,3] [4,6] [5,7] [8,10] [9,11] [12,14] [13,15]");
    expect_groups(&l, "dp-cp", "[0,2] [1,3] [4,6] [5,7] [8,10] [9,11] [12,14] [13,15]");
    expect_groups(&l, "pp", "[0,4,8,12] [1,5,9,13] [2,6,10,14] [3,7,11,15]");
    expect_groups(&l, "embedding", "[0,12] [1,13] [2,14] [3,15]");
    expect_groups(&l, "tp-pp", "[0,1,4,5,8,9,12,13] [2,3,6,7,10,11,14,15]");
    expect_groups(&l, "tp-dp", "[0,1,2,3] [4,5,6,7] [8,9,10,11] [12,13,14,15]");
    expect_groups(&l, "tp-cp", TP_16_T2);
    expect_groups(&l, "tp-dp-cp", "[0,1,2,3] [4,5,6,7] [8,9,10,11] [12,13,14,15]");
    expect_groups(&l, "tp-cp-pp", "[0,1,4,5,8,9,12,13] [2,3,6,7,10,11,14,15]");
    expect_groups(&l, "ep", SINGLETONS_16);
    expect_groups(&l, "etp", SINGLETONS_16);
    expect_groups(&l, "tp-ep", SINGLETONS_16);
    expect_groups(&l, "tp-ep-pp", "[0,4,8,12] [1,5,9,13] [2,6,10,14] [3,7,11,15]");
    expect_groups(&l, "edp", "[0,1,2,3] [4,5,6,7] [8,9,10,11] [12,13,14,15]");
    expect_dp_heads(&l, "0 2");
    for (int stage = 0; stage < 4; stage++)
        assert_int_equal(areal_pp_head(&l, stage), 4 * stage);

    /* middle stages (ranks 4..11) are in no embedding group */
    for (int r = 0; r < 16; r++) {
        int middle = r >= 4 && r < 12;
        assert_int_equal(areal_group_index(&l, AREAL_GROUP_EMBEDDING, r), middle ? -1 : r % 4);
        assert_int_equal(areal_group_member_index(&l, AREAL_GROUP_EMBEDDING, r),
                         middle ? -1 : r / 12);
    }
}

/* cp > 1 and ep > 1 together: tp2 cp2 dp2 pp2, ep2 etp1 (edp 4). */
static void context_parallel_example(void **state) {
    (void)state;
    areal_layout l;
    layout_ok(&l, strategy(2, 2, 2, 2, 2, 1));
    assert_int_equal(l.world, 16);
    assert_int_equal(l.s.edp, 4);
    expect_groups(&l, "tp", TP_16_T2);
    expect_groups(&l, "cp", "[0,2] [1,3] [4,6] [5,7] [8,10] [9,11] [12,14] [13,15]");
    expect_groups(&l, "dp", "[0,4] [1,5] [2,6] [3,7] [8,12] [9,13] [10,14] [11,15]");
    expect_groups(&l, "dp-cp", "[0,2,4,6] [1,3,5,7] [8,10,12,14] [9,11,13,15]");
    expect_groups(&l, "pp", PP_16_P2);
    expect_groups(&l, "embedding", PP_16_P2);
    expect_groups(&l, "tp-pp", "[0,1,8,9] [2,3,10,11] [4,5,12,13] [6,7,14,15]");
    expect_groups(&l, "tp-dp", "[0,1,4,5] [2,3,6,7] [8,9,12,13] [10,11,14,15]");
    expect_groups(&l, "tp-cp", "[0,1,2,3] [4,5,6,7] [8,9,10,11] [12,13,14,15]");
    expect_groups(&l, "tp-dp-cp", "[0,1,2,3,4,5,6,7] [8,9,10,11,12,13,14,15]");
    expect_groups(&l, "tp-cp-pp", "[0,1,2,3,8,9,10,11] [4,5,6,7,12,13,14,15]");
    expect_groups(&l, "ep", TP_16_T2);
    expect_groups(&l, "etp", SINGLETONS_16);
    expect_groups(&l, "tp-ep", TP_16_T2);
    expect_groups(&l, "tp-ep-pp", "[0,1,8,9] [2,3,10,11] [4,5,12,13] [6,7,14,15]");
    expect_groups(&l, "edp", "[0,2,4,6] [1,3,5,7] [8,10,12,14] [9,11,13,15]");
    expect_dp_heads(&l, "0 4");
    assert_int_equal(areal_pp_head(&l, 0), 0);
    assert_int_equal(areal_pp_head(&l, 1), 8);

    areal_rank_coords c = areal_rank_coords_of(&l, 13); /* 13 = 1 + 2*0 + 4*1 + 8*1 */
    assert_int_equal(c.tp, 1);
    assert_int_equal(c.cp, 0);
    assert_int_equal(c.dp, 1);
    assert_int_equal(c.pp, 1);
    assert_int_equal(c.etp, 0);
    assert_int_equal(c.ep, 1);
    assert_int_equal(c.edp, 2);
    assert_int_equal(areal_dense_rank(&l, 1, 0, 1, 1), 13);
}

/* pp3 has a middle stage; pp1 makes every embedding group a single rank. */
static void embedding_edge_cases(void **state) {
    (void)state;
    areal_layout l;
    layout_ok(&l, strategy(1, 1, 2, 3, 1, 1)); /* world 6: rank = dp_r + 2*pp_r */
    expect_groups(&l, "pp", "[0,2,4] [1,3,5]");
    expect_groups(&l, "embedding", "[0,4] [1,5]");
    assert_int_equal(areal_group_index(&l, AREAL_GROUP_EMBEDDING, 2), -1);
    assert_int_equal(areal_group_member_index(&l, AREAL_GROUP_EMBEDDING, 3), -1);
    assert_int_equal(areal_pp_head(&l, 2), 4);

    layout_ok(&l, strategy(2, 1, 2, 1, 1, 1)); /* world 4, pp1 */
    assert_int_equal(areal_group_size(&l, AREAL_GROUP_EMBEDDING), 1);
    expect_groups(&l, "pp", "[0] [1] [2] [3]");
    expect_groups(&l, "embedding", "[0] [1] [2] [3]");
    expect_groups(&l, "tp-cp-pp", "[0,1] [2,3]");
    expect_dp_heads(&l, "0 2");
    assert_int_equal(areal_group_member(&l, AREAL_GROUP_EMBEDDING, 0, 1), -1);
}

/* ---- kinds -------------------------------------------------------------- */

static void kind_names_round_trip(void **state) {
    (void)state;
    static const char *const names[AREAL_GROUP_KIND_COUNT] = {
        "tp",    "cp",       "dp", "dp-cp", "pp",    "embedding", "tp-pp", "tp-dp",
        "tp-cp", "tp-dp-cp", "ep", "etp",   "tp-ep", "tp-ep-pp",  "edp",   "tp-cp-pp"};
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
        assert_string_equal(areal_group_kind_name((areal_group_kind)k), names[k]);
        assert_int_equal(areal_group_kind_from_name(names[k]), k);
        bool expert = k >= AREAL_GROUP_EP && k <= AREAL_GROUP_EDP;
        assert_int_equal(areal_group_kind_is_expert((areal_group_kind)k), expert);
    }
    assert_null(areal_group_kind_name(AREAL_GROUP_KIND_COUNT));
    assert_null(areal_group_kind_name((areal_group_kind)-1));
    assert_false(areal_group_kind_is_expert(AREAL_GROUP_KIND_COUNT));
    assert_int_equal(areal_group_kind_from_name("TP"), -1);
    assert_int_equal(areal_group_kind_from_name(""), -1);
    assert_int_equal(areal_group_kind_from_name(NULL), -1);
}

/* ---- out-of-range inputs ------------------------------------------------ */

static void out_of_range_returns_minus_one(void **state) {
    (void)state;
    areal_layout l;
    int ranks[16];
    layout_ok(&l, strategy(2, 1, 4, 2, 2, 1));
    const areal_group_kind bad_kinds[] = {(areal_group_kind)-1, AREAL_GROUP_KIND_COUNT};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(areal_group_count(&l, bad_kinds[i]), -1);
        assert_int_equal(areal_group_size(&l, bad_kinds[i]), -1);
        assert_int_equal(areal_group_index(&l, bad_kinds[i], 0), -1);
        assert_int_equal(areal_group_member_index(&l, bad_kinds[i], 0), -1);
        assert_int_equal(areal_group_member(&l, bad_kinds[i], 0, 0), -1);
        assert_int_equal(areal_group_ranks(&l, bad_kinds[i], 0, ranks), -1);
    }
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
        areal_group_kind kind = (areal_group_kind)k;
        int count = areal_group_count(&l, kind), size = areal_group_size(&l, kind);
        assert_int_equal(areal_group_index(&l, kind, -1), -1);
        assert_int_equal(areal_group_index(&l, kind, 16), -1);
        assert_int_equal(areal_group_member_index(&l, kind, 16), -1);
        assert_int_equal(areal_group_member(&l, kind, -1, 0), -1);
        assert_int_equal(areal_group_member(&l, kind, count, 0), -1);
        assert_int_equal(areal_group_member(&l, kind, 0, -1), -1);
        assert_int_equal(areal_group_member(&l, kind, 0, size), -1);
        assert_int_equal(areal_group_ranks(&l, kind, count, ranks), -1);
        assert_int_equal(areal_group_ranks(&l, kind, 0, NULL), -1);
        assert_int_equal(areal_group_count(NULL, kind), -1);
        assert_int_equal(areal_group_index(NULL, kind, 0), -1);
        assert_int_equal(areal_group_member(NULL, kind, 0, 0), -1);
    }
    areal_rank_coords c = areal_rank_coords_of(&l, 16);
    assert_int_equal(c.tp, -1);
    assert_int_equal(c.edp, -1);
    c = areal_rank_coords_of(NULL, 0);
    assert_int_equal(c.pp, -1);
    assert_int_equal(areal_dense_rank(&l, 2, 0, 0, 0), -1);
    assert_int_equal(areal_dense_rank(&l, 0, 1, 0, 0), -1);
    assert_int_equal(areal_dense_rank(&l, 0, 0, 4, 0), -1);
    assert_int_equal(areal_dense_rank(&l, 0, 0, 0, -1), -1);
    assert_int_equal(areal_dense_rank(NULL, 0, 0, 0, 0), -1);
    assert_false(areal_is_dp_head(&l, -1));
    assert_false(areal_is_dp_head(&l, 16));
    assert_false(areal_is_dp_head(NULL, 0));
    assert_int_equal(areal_pp_head(NULL, 0), -1);
}

/* ---- init errors -------------------------------------------------------- */

/* Asserts that init of `s` fails with `code` and a message containing `needle`. */
static void expect_init_error(areal_strategy s, int code, const char *needle) {
    areal_layout l;
    memset(&l, 0x5a, sizeof l);
    areal_layout before = l;
    areal_error e;
    areal_error_clear(&e);
    assert_int_equal(areal_layout_init(&l, &s, &e), code);
    assert_int_equal(e.code, code);
    if (strstr(e.msg, needle) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", e.msg, needle);
    assert_memory_equal(&l, &before, sizeof l); /* untouched on failure */
    assert_int_equal(areal_layout_init(&l, &s, NULL), code);
}

static void init_rejects_bad_sizes(void **state) {
    (void)state;
    areal_strategy s = strategy(2, 1, 4, 2, 2, 1);
    s.tp = 0;
    expect_init_error(s, AREAL_EINVAL, "tp=0 is invalid: every size must be >= 1");
    s = strategy(2, 1, 4, 2, 2, 1);
    s.dp = -3;
    expect_init_error(s, AREAL_EINVAL, "dp=-3 is invalid");
    s = strategy(2, 1, 4, 2, 2, 1);
    s.pp = 0;
    expect_init_error(s, AREAL_EINVAL, "pp=0");
    s = strategy(2, 1, 4, 2, 2, 1);
    s.cp = -1;
    expect_init_error(s, AREAL_EINVAL, "cp=-1");
    s = strategy(2, 1, 4, 2, 2, 1);
    s.ep = 0;
    expect_init_error(s, AREAL_EINVAL, "ep=0");
    s = strategy(2, 1, 4, 2, 2, 1);
    s.etp = 0;
    expect_init_error(s, AREAL_EINVAL, "etp=0");
    s = strategy(2, 1, 4, 2, 2, 1);
    s.edp = -4;
    expect_init_error(s, AREAL_EINVAL, "edp=-4 is invalid");

    areal_layout l;
    assert_int_equal(areal_layout_init(&l, NULL, NULL), AREAL_EINVAL);
    s = strategy(2, 1, 4, 2, 2, 1);
    assert_int_equal(areal_layout_init(NULL, &s, NULL), AREAL_EINVAL);
}

static void init_rejects_expert_layout_not_dividing_world(void **state) {
    (void)state;
    /* world 12, etp*ep*pp = 1*4*2 = 8 */
    expect_init_error(strategy(2, 1, 3, 2, 4, 1), AREAL_EINVAL,
                      "world % (etp * ep * pp) must be 0");
    /* world 16, etp*ep*pp = 2*2*2 = 8 divides, but 3*2*2 = 12 does not */
    expect_init_error(strategy(2, 1, 4, 2, 2, 3), AREAL_EINVAL, "etp=3 ep=2 pp=2");
    /* sizes whose product overflows int and long long stay an error, not UB */
    expect_init_error(strategy(1, 1, 1, 1, 2147483647, 2147483647), AREAL_EINVAL,
                      "does not divide the world of 1 ranks");
}

static void init_checks_edp(void **state) {
    (void)state;
    areal_strategy s = strategy(2, 1, 4, 2, 2, 1);
    s.edp = 8;
    expect_init_error(s, AREAL_EINVAL,
                      "edp=8 is inconsistent: edp * etp * ep * pp must equal the world");
    s.edp = 2; /* correct for etp 2, not for etp 1 */
    expect_init_error(s, AREAL_EINVAL, "edp must be 4 for etp=1 ep=2 pp=2");

    areal_layout l;
    s.edp = 4; /* explicit and consistent */
    layout_ok(&l, s);
    assert_int_equal(l.s.edp, 4);
    s = strategy(2, 1, 4, 2, 2, 2);
    s.edp = 2;
    layout_ok(&l, s);
    assert_int_equal(l.s.edp, 2);
}

static void init_rejects_world_beyond_int(void **state) {
    (void)state;
    expect_init_error(strategy(65536, 1, 65536, 1, 1, 1), AREAL_ERANGE, "exceeds");
    expect_init_error(strategy(2147483647, 2147483647, 2147483647, 2147483647, 1, 1), AREAL_ERANGE,
                      "exceeds");
}

/* A world of 2^20 ranks: the last rank's groups, with no overflow. */
static void million_rank_world(void **state) {
    (void)state;
    areal_layout l;
    layout_ok(&l, strategy(8, 4, 1024, 32, 16, 2)); /* 8*4*1024*32 = 2^20 */
    const int last = 1048575;
    assert_int_equal(l.world, 1048576);
    assert_int_equal(l.s.edp, 1024);
    areal_rank_coords c = areal_rank_coords_of(&l, last);
    assert_int_equal(c.tp, 7);
    assert_int_equal(c.cp, 3);
    assert_int_equal(c.dp, 1023);
    assert_int_equal(c.pp, 31);
    assert_int_equal(c.etp, 1);
    assert_int_equal(c.ep, 15);
    assert_int_equal(c.edp, 1023);
    assert_int_equal(areal_dense_rank(&l, 7, 3, 1023, 31), last);
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
        areal_group_kind kind = (areal_group_kind)k;
        int g = areal_group_index(&l, kind, last), j = areal_group_member_index(&l, kind, last);
        assert_int_equal(g, areal_group_count(&l, kind) - 1);
        assert_int_equal(j, areal_group_size(&l, kind) - 1);
        assert_int_equal(areal_group_member(&l, kind, g, j), last);
    }
    assert_int_equal(areal_group_size(&l, AREAL_GROUP_TP_DP_CP), 8 * 4 * 1024);
    assert_int_equal(areal_pp_head(&l, 31), 31 * 32768);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(worked_example_etp1),
        cmocka_unit_test(worked_example_etp2),
        cmocka_unit_test(megatron_docstring_example),
        cmocka_unit_test(context_parallel_example),
        cmocka_unit_test(embedding_edge_cases),
        cmocka_unit_test(kind_names_round_trip),
        cmocka_unit_test(out_of_range_returns_minus_one),
        cmocka_unit_test(init_rejects_bad_sizes),
        cmocka_unit_test(init_rejects_expert_layout_not_dividing_world),
        cmocka_unit_test(init_checks_edp),
        cmocka_unit_test(init_rejects_world_beyond_int),
        cmocka_unit_test(million_rank_world),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
