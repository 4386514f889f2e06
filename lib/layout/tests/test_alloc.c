/*
 * test_alloc.c - allocation strings that parse: every valid example of the
 * reference table (areal.md §1.4) with its exact strategies, the legacy
 * forms and their migration hints, whitespace, last-wins, number limits,
 * colocation structure, the canonical format and its round trip, and the
 * small query functions. Errors are in test_alloc_errors.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "areal/alloc.h"

#define SG AREAL_BACKEND_SGLANG
#define VL AREAL_BACKEND_VLLM
#define FS AREAL_BACKEND_FSDP
#define MG AREAL_BACKEND_MEGATRON
#define AR AREAL_BACKEND_ARCHON

/* What one component must parse to; coloc is the anchor index or -1. */
typedef struct want_comp {
    areal_backend backend;
    const char *name;
    int dp, tp, pp, cp, ep, etp, edp;
    long world;
    bool hybrid;
    int coloc;
} want_comp;

typedef struct want_alloc {
    const char *text;
    long total;
    bool legacy;
    const char *hint; /* "" unless legacy */
    int n;
    want_comp comp[4];
} want_alloc;

/* The valid rows of the reference table (#3 at HEAD is an error: see test_alloc_errors.c). */
static const want_alloc table[] = {
    /* #1 */
    {"sglang:d4p1t1", 4, false, "", 1, {{SG, "", 4, 1, 1, 1, 1, 1, 4, 4, false, -1}}},
    /* #2 */
    {"fsdp:d4p1t1", 4, false, "", 1, {{FS, "", 4, 1, 1, 1, 1, 1, 4, 4, false, -1}}},
    /* #4: v0.3-lite dot form; the bare training part gets fsdp */
    {"sglang.d4p1t1+d4p1t1",
     8,
     true,
     "sglang:d4+fsdp:d4",
     2,
     {{SG, "", 4, 1, 1, 1, 1, 1, 4, 4, false, -1}, {FS, "", 4, 1, 1, 1, 1, 1, 4, 4, false, -1}}},
    /* #5: realhf, m = tensor; p2 selects megatron */
    {"sglang.d64p1m1+d32p2m1",
     128,
     true,
     "sglang:d64+megatron:d32p2",
     2,
     {{SG, "", 64, 1, 1, 1, 1, 1, 64, 64, false, -1},
      {MG, "", 32, 1, 2, 1, 1, 1, 32, 64, false, -1}}},
    /* #6 */
    {"sglang.d8m8p1+d4p4m4",
     128,
     true,
     "sglang:d8t8+megatron:d4p4t4",
     2,
     {{SG, "", 8, 8, 1, 1, 1, 1, 64, 64, false, -1},
      {MG, "", 4, 4, 4, 1, 1, 1, 16, 64, false, -1}}},
    /* #7: gen 320 GPUs + train 64 */
    {"sglang.d80m4p1+d4p8m2",
     384,
     true,
     "sglang:d80t4+megatron:d4p8t2",
     2,
     {{SG, "", 80, 4, 1, 1, 1, 1, 320, 320, false, -1},
      {MG, "", 4, 2, 8, 1, 1, 1, 8, 64, false, -1}}},
    /* #8: 4 servers of t2*p2 = 4 GPUs */
    {"sglang:d4p2t2", 16, false, "", 1, {{SG, "", 4, 2, 2, 1, 1, 1, 8, 16, false, -1}}},
    /* #9 */
    {"sglang:d2+fsdp:d4",
     6,
     false,
     "",
     2,
     {{SG, "", 2, 1, 1, 1, 1, 1, 2, 2, false, -1}, {FS, "", 4, 1, 1, 1, 1, 1, 4, 4, false, -1}}},
    /* #10 */
    {"vllm:d2t4+megatron:d2p2t1",
     12,
     false,
     "",
     2,
     {{VL, "", 2, 4, 1, 1, 1, 1, 8, 8, false, -1}, {MG, "", 2, 1, 2, 1, 1, 1, 2, 4, false, -1}}},
    /* #11: expert model parallel 2*1*4 = 8, edp 2 */
    {"megatron:d2p2t4e4", 16, false, "", 1, {{MG, "", 2, 4, 2, 1, 4, 1, 2, 16, false, -1}}},
    /* #12: edp = 16/(2*1*2) = 4 */
    {"megatron:d4t2p2e2", 16, false, "", 1, {{MG, "", 4, 2, 2, 1, 2, 1, 4, 16, false, -1}}},
    /* #13: edp = 32/(2*4*2) = 2 */
    {"megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)",
     32,
     false,
     "",
     1,
     {{MG, "", 4, 2, 2, 2, 2, 4, 2, 32, true, -1}}},
    /* #14 */
    {"megatron:(attn:d1p4t2c2|ffn:d1p4t1e4)",
     16,
     false,
     "",
     1,
     {{MG, "", 1, 2, 4, 2, 4, 1, 1, 16, true, -1}}},
    /* #15 */
    {"megatron:(attn:d1p12t4|ffn:d1p12e4)",
     48,
     false,
     "",
     1,
     {{MG, "", 1, 4, 12, 1, 4, 1, 1, 48, true, -1}}},
    /* #15 with its rollout: 80 GPUs */
    {"sglang:d4t8+megatron:(attn:d1p12t4|ffn:d1p12e4)",
     80,
     false,
     "",
     2,
     {{SG, "", 4, 8, 1, 1, 1, 1, 32, 32, false, -1}, {MG, "", 1, 4, 12, 1, 4, 1, 1, 48, true, -1}}},
    /* #16 */
    {"megatron:(attn:d4p4t2|ffn:d2p4e4)",
     32,
     false,
     "",
     1,
     {{MG, "", 4, 2, 4, 1, 4, 1, 2, 32, true, -1}}},
    /* #17: ffn d derived as 16/(2*2*2) = 2 */
    {"megatron:(attn:d4p2t2|ffn:p2t2e2)",
     16,
     false,
     "",
     1,
     {{MG, "", 4, 2, 2, 1, 2, 2, 2, 16, true, -1}}},
    /* #18 */
    {"sglang:d4p1t2+megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)",
     40,
     false,
     "",
     2,
     {{SG, "", 4, 2, 1, 1, 1, 1, 8, 8, false, -1}, {MG, "", 4, 2, 2, 2, 2, 4, 2, 32, true, -1}}},
    /* #19: critic colocated on actor */
    {"sglang[rollout]:d2+fsdp[actor]:d4|fsdp[critic]:d4",
     6,
     false,
     "",
     3,
     {{SG, "rollout", 2, 1, 1, 1, 1, 1, 2, 2, false, -1},
      {FS, "actor", 4, 1, 1, 1, 1, 1, 4, 4, false, -1},
      {FS, "critic", 4, 1, 1, 1, 1, 1, 4, 4, false, 1}}},
    /* #20: four named components */
    {"vllm[rollout1]:d2t2 + fsdp[actor1]:d4 + vllm[rollout2]:d4 + fsdp[actor2]:d4",
     16,
     false,
     "",
     4,
     {{VL, "rollout1", 2, 2, 1, 1, 1, 1, 4, 4, false, -1},
      {FS, "actor1", 4, 1, 1, 1, 1, 1, 4, 4, false, -1},
      {VL, "rollout2", 4, 1, 1, 1, 1, 1, 4, 4, false, -1},
      {FS, "actor2", 4, 1, 1, 1, 1, 1, 4, 4, false, -1}}},
    /* #21 */
    {"archon:d2", 2, false, "", 1, {{AR, "", 2, 1, 1, 1, 1, 1, 2, 2, false, -1}}},
    {"archon:d8", 8, false, "", 1, {{AR, "", 8, 1, 1, 1, 1, 1, 8, 8, false, -1}}},
    /* #22: Ulysses cp2 */
    {"fsdp:d4c2", 8, false, "", 1, {{FS, "", 4, 1, 1, 2, 1, 1, 8, 8, false, -1}}},
};

/* More valid strings: legacy variants, colocation, hybrid corners, limits. */
static const want_alloc more[] = {
    /* realhf forms of §1.1 */
    {"vllm.d2p1m4+d8p2m1",
     24,
     true,
     "vllm:d2t4+megatron:d8p2",
     2,
     {{VL, "", 2, 4, 1, 1, 1, 1, 8, 8, false, -1}, {MG, "", 8, 1, 2, 1, 1, 1, 8, 16, false, -1}}},
    {"d32p1m4", 128, true, "fsdp:d32t4", 1, {{FS, "", 32, 4, 1, 1, 1, 1, 128, 128, false, -1}}},
    /* v0.4: legacy dot with a colon training part */
    {"sglang.d4t2+fsdp:d8",
     16,
     true,
     "sglang:d4t2+fsdp:d8",
     2,
     {{SG, "", 4, 2, 1, 1, 1, 1, 8, 8, false, -1}, {FS, "", 8, 1, 1, 1, 1, 1, 8, 8, false, -1}}},
    /* e > 1 in a bare legacy part selects megatron */
    {"sglang.d4+d2e2",
     6,
     true,
     "sglang:d4+megatron:d2e2",
     2,
     {{SG, "", 4, 1, 1, 1, 1, 1, 4, 4, false, -1}, {MG, "", 2, 1, 1, 1, 2, 1, 1, 2, false, -1}}},
    /* legacy is judged on the whole string: the bare part may come first */
    {"d4p1t1+sglang.d4p1t1",
     8,
     true,
     "fsdp:d4+sglang:d4",
     2,
     {{FS, "", 4, 1, 1, 1, 1, 1, 4, 4, false, -1}, {SG, "", 4, 1, 1, 1, 1, 1, 4, 4, false, -1}}},
    /* colocation: unnamed anchor, named members, all world 4 */
    {"fsdp:d4|fsdp[ref]:d2t2|megatron[critic]:d2p2",
     4,
     false,
     "",
     3,
     {{FS, "", 4, 1, 1, 1, 1, 1, 4, 4, false, -1},
      {FS, "ref", 2, 2, 1, 1, 1, 1, 4, 4, false, 0},
      {MG, "critic", 2, 1, 2, 1, 1, 1, 2, 4, false, 0}}},
    /* inference anchor with a training member */
    {"vllm:d2t4|fsdp[actor]:d8",
     8,
     false,
     "",
     2,
     {{VL, "", 2, 4, 1, 1, 1, 1, 8, 8, false, -1},
      {FS, "actor", 8, 1, 1, 1, 1, 1, 8, 8, false, 0}}},
    /* a hybrid without parentheses as a colocation anchor */
    {"megatron:attn:d4|ffn:e2|fsdp[ref]:d4",
     4,
     false,
     "",
     2,
     {{MG, "", 4, 1, 1, 1, 2, 1, 2, 4, true, -1}, {FS, "ref", 4, 1, 1, 1, 1, 1, 4, 4, false, 0}}},
    /* hybrid with no experts: etp from ffn t, edp = world/(pp*etp) */
    {"megatron:(attn:d4t2|ffn:t4)", 8, false, "", 1, {{MG, "", 4, 2, 1, 1, 1, 4, 2, 8, true, -1}}},
    /* archon with etp == tp */
    {"archon:(attn:d8t2|ffn:d2t2e4)",
     16,
     false,
     "",
     1,
     {{AR, "", 8, 2, 1, 1, 4, 2, 2, 16, true, -1}}},
    /* fsdp hybrid: only p and e are restricted (as in AReaL) */
    {"fsdp:(attn:d4|ffn:d2t2)", 4, false, "", 1, {{FS, "", 4, 1, 1, 1, 1, 2, 2, 4, true, -1}}},
    /* all defaults */
    {"megatron:t1", 1, false, "", 1, {{MG, "", 1, 1, 1, 1, 1, 1, 1, 1, false, -1}}},
    /* limits: one letter and the world at exactly the maximum */
    {"fsdp:d1048576",
     1048576,
     false,
     "",
     1,
     {{FS, "", 1048576, 1, 1, 1, 1, 1, 1048576, 1048576, false, -1}}},
    {"megatron:d1024t1024e1048576",
     1048576,
     false,
     "",
     1,
     {{MG, "", 1024, 1024, 1, 1, 1048576, 1, 1, 1048576, false, -1}}},
    /* names: underscore start, digits, 63 bytes */
    {"fsdp[_a9]:d2+sglang[Roll_Out2]:d2",
     4,
     false,
     "",
     2,
     {{FS, "_a9", 2, 1, 1, 1, 1, 1, 2, 2, false, -1},
      {SG, "Roll_Out2", 2, 1, 1, 1, 1, 1, 2, 2, false, -1}}},
};

static void check_comp(const char *text, int i, const areal_component *got, const want_comp *w) {
    const areal_strategy *s = &got->strategy;
    if (got->backend != w->backend || strcmp(got->name, w->name) != 0 || s->dp != w->dp ||
        s->tp != w->tp || s->pp != w->pp || s->cp != w->cp || s->ep != w->ep || s->etp != w->etp ||
        s->edp != w->edp || areal_strategy_world(s) != w->world || got->hybrid != w->hybrid ||
        got->colocate_with != w->coloc ||
        got->sched != (w->coloc >= 0 ? AREAL_SCHED_COLOCATION : AREAL_SCHED_SEPARATION))
        fail_msg("%s: component %d is %s[%s] dp%d tp%d pp%d cp%d ep%d etp%d edp%d world%ld "
                 "hybrid%d sched%d coloc%d",
                 text, i, areal_backend_name(got->backend), got->name, s->dp, s->tp, s->pp, s->cp,
                 s->ep, s->etp, s->edp, areal_strategy_world(s), got->hybrid, got->sched,
                 got->colocate_with);
}

static void parse_ok(const char *text, areal_alloc *a) {
    areal_error err;
    int rc = areal_alloc_parse(text, a, &err);
    if (rc != AREAL_OK)
        fail_msg("'%s' failed: %s", text, err.msg);
    assert_int_equal(err.code, AREAL_OK);
}

static void check_rows(const want_alloc *rows, size_t n) {
    for (size_t r = 0; r < n; r++) {
        const want_alloc *w = &rows[r];
        areal_alloc a;
        parse_ok(w->text, &a);
        if (a.n_components != w->n)
            fail_msg("%s: %d components, want %d", w->text, a.n_components, w->n);
        for (int i = 0; i < w->n; i++)
            check_comp(w->text, i, &a.comp[i], &w->comp[i]);
        if (areal_alloc_total_gpus(&a) != w->total)
            fail_msg("%s: total %ld, want %ld", w->text, areal_alloc_total_gpus(&a), w->total);
        if (a.legacy != w->legacy || strcmp(a.legacy_hint, w->hint) != 0)
            fail_msg("%s: legacy %d hint '%s', want %d '%s'", w->text, a.legacy, a.legacy_hint,
                     w->legacy, w->hint);
    }
}

static void table_examples_parse_exactly(void **state) {
    (void)state;
    check_rows(table, sizeof table / sizeof table[0]);
}

static void more_valid_strings_parse_exactly(void **state) {
    (void)state;
    check_rows(more, sizeof more / sizeof more[0]);
}

/* parse -> format -> parse gives the same components, and format is a fixed point. */
static void round_trip(const char *text) {
    areal_alloc a, b;
    char canon[1024], again[1024];
    parse_ok(text, &a);
    int n = areal_alloc_format(&a, canon, sizeof canon);
    assert_true(n > 0 && n < (int)sizeof canon);
    assert_int_equal(strlen(canon), n);
    parse_ok(canon, &b);
    if (!areal_alloc_equal(&a, &b))
        fail_msg("'%s' formats as '%s', which parses differently", text, canon);
    assert_false(b.legacy);
    areal_alloc_format(&b, again, sizeof again);
    assert_string_equal(canon, again);
    if (a.legacy)
        assert_string_equal(a.legacy_hint, canon);
}

static void format_round_trips_every_valid_example(void **state) {
    (void)state;
    for (size_t r = 0; r < sizeof table / sizeof table[0]; r++)
        round_trip(table[r].text);
    for (size_t r = 0; r < sizeof more / sizeof more[0]; r++)
        round_trip(more[r].text);
}

static void expect_format(const char *text, const char *want) {
    areal_alloc a;
    char buf[512];
    parse_ok(text, &a);
    assert_int_equal(areal_alloc_format(&a, buf, sizeof buf), strlen(want));
    assert_string_equal(buf, want);
}

static void format_is_canonical(void **state) {
    (void)state;
    expect_format("sglang:d4p2t2", "sglang:d4t2p2");
    expect_format("megatron:d4t2p2e2", "megatron:d4p2t2e2");
    expect_format("fsdp:d4p1t1", "fsdp:d4");
    expect_format("fsdp:t1", "fsdp:d1");
    expect_format("fsdp:c2t2d2", "fsdp:d2t2c2");
    expect_format("megatron:(attn:d4p2t2|ffn:p2t2e2)", "megatron:(attn:d4p2t2|ffn:d2p2t2e2)");
    expect_format("megatron:attn:d1p4t2c2|ffn:d1p4t1e4", "megatron:(attn:d1p4t2c2|ffn:d1p4e4)");
    expect_format(" sglang [ rollout ] : d2 + fsdp[actor]:d4 | fsdp[critic] : d4 ",
                  "sglang[rollout]:d2+fsdp[actor]:d4|fsdp[critic]:d4");
}

static void format_truncates_like_snprintf(void **state) {
    (void)state;
    areal_alloc a;
    char buf[8];
    parse_ok("sglang:d2+fsdp:d4", &a);
    assert_int_equal(areal_alloc_format(&a, NULL, 0), 17);
    memset(buf, 'x', sizeof buf);
    assert_int_equal(areal_alloc_format(&a, buf, 5), 17);
    assert_string_equal(buf, "sgla");
    assert_int_equal(areal_alloc_format(&a, buf, 1), 17);
    assert_string_equal(buf, "");
    assert_int_equal(areal_alloc_format(NULL, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
}

static void legacy_hint_is_empty_when_it_does_not_fit(void **state) {
    (void)state;
    char text[2048];
    int len = snprintf(text, sizeof text, "sglang.d1");
    for (int i = 0; i < 15; i++)
        len += snprintf(text + len, sizeof text - (size_t)len,
                        "|fsdp[member_%02d_with_a_rather_long_name_to_fill_the_hint]:d1", i);
    areal_alloc a;
    parse_ok(text, &a);
    assert_int_equal(a.n_components, 16);
    assert_true(a.legacy);
    assert_string_equal(a.legacy_hint, "");
    assert_true(areal_alloc_format(&a, NULL, 0) >= (int)sizeof a.legacy_hint);
}

static void current_strings_are_not_legacy(void **state) {
    (void)state;
    areal_alloc a;
    parse_ok("sglang:d4t2+fsdp:d8", &a);
    assert_false(a.legacy);
    assert_string_equal(a.legacy_hint, "");
}

/* Whitespace between tokens is ignored; positions and lengths skip it. */
static void whitespace_between_tokens_is_ignored(void **state) {
    (void)state;
    areal_alloc a, b;
    parse_ok("sglang[rollout]:d2+fsdp[actor]:d4|fsdp[critic]:d4", &a);
    parse_ok(" \t sglang [ rollout ] :\td2\n+\r\n fsdp[ actor] : d 4 |fsdp [critic]:d4\f ", &b);
    assert_true(areal_alloc_equal(&a, &b));
    assert_int_equal(b.comp[0].pos, 3);
    assert_int_equal(b.comp[0].len, (int)strlen("sglang [ rollout ] :\td2"));
    parse_ok("megatron : ( attn : d4 p2 | ffn : e2 )", &a);
    parse_ok("megatron:(attn:d4p2|ffn:e2)", &b);
    assert_true(areal_alloc_equal(&a, &b));
    assert_int_equal(a.comp[0].len, (int)strlen("megatron : ( attn : d4 p2 | ffn : e2 )"));
}

static void positions_and_lengths_of_components(void **state) {
    (void)state;
    areal_alloc a;
    parse_ok("sglang[rollout]:d2+fsdp[actor]:d4|fsdp[critic]:d4", &a);
    assert_int_equal(a.comp[0].pos, 0);
    assert_int_equal(a.comp[0].len, 18);
    assert_int_equal(a.comp[1].pos, 19);
    assert_int_equal(a.comp[1].len, 14);
    assert_int_equal(a.comp[2].pos, 34);
    assert_int_equal(a.comp[2].len, 15);
    parse_ok("vllm[rollout1]:d2t2 + fsdp[actor1]:d4 + vllm[rollout2]:d4 + fsdp[actor2]:d4", &a);
    assert_int_equal(a.comp[1].pos, 22);
    assert_int_equal(a.comp[2].pos, 40);
    assert_int_equal(a.comp[3].pos, 60);
    assert_int_equal(a.comp[3].len, 15);
}

static void repeated_letter_last_wins(void **state) {
    (void)state;
    areal_alloc a;
    parse_ok("fsdp:d2d4", &a);
    assert_int_equal(a.comp[0].strategy.dp, 4);
    parse_ok("sglang:t2d4t1", &a);
    assert_int_equal(a.comp[0].strategy.tp, 1);
    assert_int_equal(a.comp[0].strategy.dp, 4);
    parse_ok("megatron:(attn:d2d4p1|ffn:e4e2)", &a);
    assert_int_equal(a.comp[0].strategy.dp, 4);
    assert_int_equal(a.comp[0].strategy.ep, 2);
    assert_int_equal(a.comp[0].strategy.edp, 2);
    /* realhf m and t both mean tensor: the last one wins */
    parse_ok("d4m2t4m8", &a);
    assert_int_equal(a.comp[0].strategy.tp, 8);
}

static void sixteen_components_are_accepted(void **state) {
    (void)state;
    char text[1024];
    int len = 0;
    for (int i = 0; i < AREAL_ALLOC_MAX_COMPONENTS; i++)
        len += snprintf(text + len, sizeof text - (size_t)len, "%sfsdp[c%d]:d%d", i ? "+" : "", i,
                        i + 1);
    areal_alloc a;
    parse_ok(text, &a);
    assert_int_equal(a.n_components, AREAL_ALLOC_MAX_COMPONENTS);
    assert_int_equal(areal_alloc_total_gpus(&a), 16 * 17 / 2);
    assert_string_equal(a.comp[15].name, "c15");
    round_trip(text);
}

static void longest_name_is_accepted(void **state) {
    (void)state;
    char text[128];
    char name[AREAL_ALLOC_NAME_MAX];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    snprintf(text, sizeof text, "fsdp[%s]:d4", name);
    areal_alloc a;
    parse_ok(text, &a);
    assert_string_equal(a.comp[0].name, name);
    round_trip(text);
}

static void colocated_components_count_zero_gpus(void **state) {
    (void)state;
    areal_alloc a;
    parse_ok("sglang[r]:d8+megatron[a]:d2p2t2|fsdp[ref]:d8|fsdp[c]:d4t2", &a);
    assert_int_equal(areal_alloc_total_gpus(&a), 16);
    assert_int_equal(a.comp[1].sched, AREAL_SCHED_SEPARATION);
    assert_int_equal(a.comp[2].colocate_with, 1);
    assert_int_equal(a.comp[3].colocate_with, 1);
    assert_int_equal(areal_alloc_total_gpus(NULL), 0);
}

static void error_is_cleared_on_success_and_may_be_null(void **state) {
    (void)state;
    areal_alloc a;
    areal_error err = {.code = AREAL_EIO, .pos = 9, .msg = "stale"};
    assert_int_equal(areal_alloc_parse("fsdp:d4", &a, &err), AREAL_OK);
    assert_int_equal(err.code, AREAL_OK);
    assert_int_equal(err.pos, -1);
    assert_string_equal(err.msg, "");
    assert_int_equal(areal_alloc_parse("fsdp:d4", &a, NULL), AREAL_OK);
    assert_int_equal(areal_alloc_parse("fsdp:d0", &a, NULL), AREAL_EINVAL);
}

static void backend_names_and_kinds(void **state) {
    (void)state;
    assert_string_equal(areal_backend_name(AREAL_BACKEND_SGLANG), "sglang");
    assert_string_equal(areal_backend_name(AREAL_BACKEND_VLLM), "vllm");
    assert_string_equal(areal_backend_name(AREAL_BACKEND_FSDP), "fsdp");
    assert_string_equal(areal_backend_name(AREAL_BACKEND_MEGATRON), "megatron");
    assert_string_equal(areal_backend_name(AREAL_BACKEND_ARCHON), "archon");
    assert_string_equal(areal_backend_name((areal_backend)99), "unknown");
    assert_true(areal_backend_is_inference(AREAL_BACKEND_SGLANG));
    assert_true(areal_backend_is_inference(AREAL_BACKEND_VLLM));
    assert_false(areal_backend_is_inference(AREAL_BACKEND_FSDP));
    assert_false(areal_backend_is_inference(AREAL_BACKEND_MEGATRON));
    assert_false(areal_backend_is_inference(AREAL_BACKEND_ARCHON));
}

/* AReaL's fsdp:d4 is the dp dimension, fully sharded; megatron's dp shards the optimizer only. */
static void dp_sharding_of_backends(void **state) {
    (void)state;
    areal_alloc a;
    parse_ok("sglang:d2+fsdp:d4", &a);
    assert_int_equal(a.comp[1].backend, AREAL_BACKEND_FSDP);
    assert_int_equal(a.comp[1].strategy.dp, 4);
    assert_int_equal(a.comp[1].strategy.tp * a.comp[1].strategy.pp * a.comp[1].strategy.cp, 1);
    assert_int_equal(areal_backend_dp_sharding(a.comp[1].backend), AREAL_DP_FULLY_SHARDED);
    assert_int_equal(areal_backend_dp_sharding(a.comp[0].backend), AREAL_DP_REPLICATED);
    parse_ok("megatron:d2p2t2", &a);
    assert_int_equal(areal_backend_dp_sharding(a.comp[0].backend), AREAL_DP_OPTIMIZER);
    assert_int_equal(areal_backend_dp_sharding(AREAL_BACKEND_ARCHON), AREAL_DP_FULLY_SHARDED);
    assert_int_equal(areal_backend_dp_sharding(AREAL_BACKEND_VLLM), AREAL_DP_REPLICATED);
}

static void equal_compares_every_field_but_positions(void **state) {
    (void)state;
    areal_alloc a, b;
    parse_ok("sglang[r]:d2+megatron[a]:d4p2|fsdp[c]:d8", &a);
    parse_ok(" sglang[r] : d2 + megatron[a]:p2d4 | fsdp[c]:d8", &b);
    assert_true(areal_alloc_equal(&a, &b));
    assert_false(areal_alloc_equal(&a, NULL));
    assert_false(areal_alloc_equal(NULL, &b));

    areal_alloc c = b;
    c.comp[1].name[0] = 'b';
    assert_false(areal_alloc_equal(&a, &c));
    c = b, c.comp[0].backend = AREAL_BACKEND_VLLM;
    assert_false(areal_alloc_equal(&a, &c));
    c = b, c.comp[1].strategy.edp = 99;
    assert_false(areal_alloc_equal(&a, &c));
    c = b, c.comp[1].hybrid = true;
    assert_false(areal_alloc_equal(&a, &c));
    c = b, c.comp[2].sched = AREAL_SCHED_SEPARATION;
    assert_false(areal_alloc_equal(&a, &c));
    c = b, c.comp[2].colocate_with = 0;
    assert_false(areal_alloc_equal(&a, &c));
    c = b, c.n_components = 2;
    assert_false(areal_alloc_equal(&a, &c));
    c = b, c.legacy = true, c.comp[0].pos = 77;
    assert_true(areal_alloc_equal(&a, &c));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_examples_parse_exactly),
        cmocka_unit_test(more_valid_strings_parse_exactly),
        cmocka_unit_test(format_round_trips_every_valid_example),
        cmocka_unit_test(format_is_canonical),
        cmocka_unit_test(format_truncates_like_snprintf),
        cmocka_unit_test(legacy_hint_is_empty_when_it_does_not_fit),
        cmocka_unit_test(current_strings_are_not_legacy),
        cmocka_unit_test(whitespace_between_tokens_is_ignored),
        cmocka_unit_test(positions_and_lengths_of_components),
        cmocka_unit_test(repeated_letter_last_wins),
        cmocka_unit_test(sixteen_components_are_accepted),
        cmocka_unit_test(longest_name_is_accepted),
        cmocka_unit_test(colocated_components_count_zero_gpus),
        cmocka_unit_test(error_is_cleared_on_success_and_may_be_null),
        cmocka_unit_test(backend_names_and_kinds),
        cmocka_unit_test(dp_sharding_of_backends),
        cmocka_unit_test(equal_compares_every_field_but_positions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
