/*
 * test_alloc_errors.c - allocation strings that must be rejected: the error
 * rows of the reference table (areal.md §1.4), every validation rule, and
 * the syntax errors (numbers, names, brackets, parentheses, empty parts).
 * Each case checks AREAL_EINVAL, the exact byte position, that the message
 * is one line starting with "at POS: ", and the words that tell the user
 * what was expected and how to fix it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "areal/alloc.h"

typedef struct bad_case {
    const char *text;
    int pos;
    const char *words[3]; /* substrings the message must contain; NULL ends */
} bad_case;

static void expect_error(const bad_case *c) {
    areal_alloc a;
    areal_error err;
    char prefix[32];
    int rc = areal_alloc_parse(c->text, &a, &err);
    if (rc != AREAL_EINVAL)
        fail_msg("'%s' returned %d, want AREAL_EINVAL", c->text, rc);
    assert_int_equal(err.code, AREAL_EINVAL);
    if (err.pos != c->pos)
        fail_msg("'%s': error at %d, want %d: %s", c->text, err.pos, c->pos, err.msg);
    snprintf(prefix, sizeof prefix, "at %d: ", c->pos);
    if (strncmp(err.msg, prefix, strlen(prefix)) != 0)
        fail_msg("'%s': message does not start with '%s': %s", c->text, prefix, err.msg);
    if (strchr(err.msg, '\n') != NULL || strchr(err.msg, '\r') != NULL)
        fail_msg("'%s': message is not one line: %s", c->text, err.msg);
    for (int i = 0; i < 3 && c->words[i] != NULL; i++)
        if (strstr(err.msg, c->words[i]) == NULL)
            fail_msg("'%s': message lacks \"%s\": %s", c->text, c->words[i], err.msg);
}

static void expect_errors(const bad_case *cases, size_t n) {
    for (size_t i = 0; i < n; i++)
        expect_error(&cases[i]);
}

#define EXPECT_ERRORS(cases) expect_errors(cases, sizeof cases / sizeof cases[0])

static void table_error_rows(void **state) {
    (void)state;
    static const bad_case cases[] = {
        /* #3 at HEAD: bare dims need a backend */
        {"sglang:d4p1t1+d4p1t1", 14, {"no backend", "add a backend, e.g. fsdp:d4p1t1"}},
        {"fsdp:d4p2", 0, {"FSDP backend only supports data/tensor/context parallelism", "p2"}},
        {"fsdp:d2e2", 0, {"FSDP backend only supports data/tensor/context parallelism", "e2"}},
        {"sglang:d2+fsdp[actor]:d4+fsdp:d4", 0, {"3 or more components", "must be named"}},
        {"sglang[actor]:d2+fsdp[actor]:d4", 17, {"duplicate name 'actor'", "unique"}},
        {"fsdp:d4|fsdp:d4", 8, {"colocation", "must be named", "fsdp[critic]:d4"}},
        {"megatron:(attn:d2p2t1c4|ffn:d2p4t1e2)", 0, {"pipeline size mismatch", "p2", "p4"}},
        {"megatron:(attn:d4p2t1c1|ffn:d2p2t2e2)", 0, {"world size mismatch", "= 8 ", "= 16 "}},
    };
    EXPECT_ERRORS(cases);
}

static void backend_rules(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"fsdp:d2p2e2", 0, {"FSDP backend", "p2 and e2", "megatron:d2p2e2"}},
        {"sglang:d2+fsdp[a]:d4p2", 10, {"FSDP backend", "megatron[a]:d4p2"}},
        {"fsdp:(attn:d4p2|ffn:e2)", 0, {"FSDP backend", "p2 and e2"}},
        {"archon:(attn:d4t2|ffn:d1t4e2)", 0, {"archon requires", "ffn t4", "(2)"}},
        {"archon:(attn:d4|ffn:t2e2)", 0, {"archon requires", "ffn t2"}},
        {"sglang:d4c2", 9, {"'c' is not allowed here", "sglang takes only d, t or p"}},
        {"vllm:d2e2", 7, {"'e' is not allowed here", "vllm takes only d, t or p"}},
        {"sglang.d4c2+d4", 9, {"'c' is not allowed here", "training backends"}},
        {"sglang:(attn:d4|ffn:d4)", 7, {"sglang cannot use the hybrid"}},
        {"vllm:attn:d4|ffn:d4", 5, {"vllm cannot use the hybrid"}},
    };
    EXPECT_ERRORS(cases);
}

static void hybrid_rules(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"megatron:(attn:d4p2|ffn:p1e2)", 0, {"pipeline size mismatch", "ffn p1"}},
        {"megatron:(attn:d8|ffn:t3e1)", 0, {"cannot derive the ffn d", "e*t*p = 3"}},
        {"megatron:(attn:d4|ffn:d3e2)", 0, {"world size mismatch", "= 4 GPUs", "= 6 GPUs"}},
        {"megatron:(attn:d1|ffn:d1048576e1048576)", 0, {"world size mismatch", "more than"}},
        {"megatron:(attn:d4e2|ffn:d4)", 17, {"the attn section takes only d, t, p or c", "ffn"}},
        {"megatron:(attn:d4|ffn:d4c2)", 24, {"the ffn section takes only d, t, p or e", "attn"}},
        {"megatron[a]:(attn:d4|ffn:d4)", 8, {"takes no name", "[a]"}},
        {"(attn:d4|ffn:d4)", 0, {"needs a backend", "megatron:(attn:"}},
        {"attn:d4|ffn:d4", 0, {"needs a backend"}},
        {"megatron:(attn:d4+ffn:d4)", 17, {"expected '|ffn:'", "found '+'"}},
        {"megatron:(attn:d4|fsdp:d4)", 18, {"expected 'ffn:'", "found 'f'"}},
        {"megatron:(attn d4|ffn:d4)", 15, {"expected 'attn:'", "found 'd'"}},
        {"megatron:(ffn:d4|attn:d4)", 10, {"expected 'attn:'"}},
        {"megatron:((attn:d4|ffn:d4))", 10, {"expected 'attn:'", "found '('"}},
        {"megatron:(attn:|ffn:d4)", 15, {"expected a dimension letter (d, t, p or c)"}},
        {"megatron:(attn:d4|ffn:)", 22, {"expected a dimension letter (d, t, p or e)"}},
    };
    EXPECT_ERRORS(cases);
}

static void expert_parallelism_must_divide_the_world(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"megatron:d1e2", 0, {"experts do not divide", "world 1", "p*etp*e = 2"}},
        {"megatron:d2t3e4", 0, {"experts do not divide", "world 6", "= 4"}},
        {"megatron:d4p2e8", 0, {"experts do not divide", "= 16"}},
    };
    EXPECT_ERRORS(cases);
}

static void colocation_rules(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"sglang:d4|fsdp[a]:d8", 10, {"matching world sizes", "'a' has 8", "has 4"}},
        {"fsdp[a]:d4|fsdp[b]:d4|fsdp:d4", 22, {"colocation", "must be named"}},
        {"fsdp[a]:d4|fsdp[b]:d4|megatron[c]:d2p2t2", 22, {"matching world sizes", "'c' has 8"}},
        {"fsdp[a]:d4|fsdp[a]:d4", 11, {"duplicate name 'a'"}},
        /* legacy bare parts cannot be named, so they cannot join a group */
        {"sglang.d4|d4", 10, {"colocation", "must be named"}},
    };
    EXPECT_ERRORS(cases);
}

static void name_rules(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"sglang[r]:d2+fsdp[a]:d4+fsdp[r]:d4", 24, {"duplicate name 'r'", "also used at 0"}},
        {"sglang[r]:d2+fsdp[a]:d4+fsdp:d4", 24, {"3 or more", "fsdp[actor]:d4"}},
        {"sglang:d2+fsdp[a]:d4|fsdp[c]:d4", 0, {"3 or more", "sglang[rollout]:d2"}},
        {"fsdp[a-b]:d4", 6, {"names hold only letters, digits and '_'", "found '-'"}},
        {"fsdp[1a]:d4", 5, {"expected a name after '['", "found '1'"}},
        {"fsdp[]:d4", 5, {"expected a name after '['", "found ']'"}},
        {"fsdp[a b]:d4", 7, {"expected ']'", "found 'b'"}},
        {"fsdp[actor:d4", 10, {"expected ']' to close the name opened at 4", "found ':'"}},
        {"fsdp[actor", 10, {"expected ']'", "end of input"}},
        {"fsdp[\xc3\xa9]:d4", 5, {"expected a name", "byte 0xc3"}},
        {"fsdp]:d4", 4, {"expected ':' after fsdp", "found ']'"}},
        {"fsdp actor]:d4", 5, {"expected ':' after fsdp", "found 'a'"}},
        {"[actor]:d4", 0, {"'[actor]' has no backend", "fsdp[actor]:d4"}},
        {"sglang[r].d4", 9, {"expected ':' after the name", "dot form"}},
    };
    EXPECT_ERRORS(cases);

    char text[128], name[AREAL_ALLOC_NAME_MAX + 1];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    snprintf(text, sizeof text, "fsdp[%s]:d4", name);
    bad_case too_long = {text, 5, {"name is too long", "64 bytes", "at most 63"}};
    expect_error(&too_long);
}

static void backends_are_required_outside_legacy_strings(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"d4p1t1", 0, {"no backend", "fsdp:d4p1t1"}},
        {"d2p2t1", 0, {"no backend", "megatron:d2p2t1"}},
        {"fsdp:d4+d2e2", 8, {"no backend", "megatron:d2e2", "legacy"}},
        {"sglang:d4 + d4", 12, {"no backend", "fsdp:d4"}},
        {"foo:d4", 0, {"unknown backend 'foo'", "sglang, vllm, fsdp, megatron or archon"}},
        {"Sglang:d4", 0, {"unknown backend 'Sglang'", "lower case"}},
        {"FSDP:d4", 0, {"unknown backend 'FSDP'", "lower case"}},
        {"megatron4:d4", 0, {"unknown backend 'megatron4'"}},
        {"sglang:d4+eval", 10, {"unknown backend 'eval'", "removed"}},
        {"sglang.d4+cpu", 10, {"unknown backend 'cpu'", "removed"}},
        {"manual", 0, {"unknown backend 'manual'"}},
        {"abcdefghijklmnopqrstuvwxyz0123456789:d4", 0, {"'abcdefghijklmnopqrstuvwx...'"}},
        {"fsdp:d4m2", 7, {"'m' is realhf's old letter", "write t", "fsdp:d4t2"}},
        {"megatron:(attn:d4m2|ffn:d4)", 17, {"'m' is realhf's old letter"}},
        {"fsdp.d4", 4, {"expected ':' after fsdp", "dot form"}},
        {"megatron.d4p2", 8, {"expected ':' after megatron"}},
        {"sglang d4", 7, {"expected ':' after sglang", "found 'd'"}},
        {"sglang", 6, {"expected ':' after sglang", "end of input"}},
        {"sglang(P:d1|D:d1)", 6, {"expected ':' after sglang", "found '('"}},
    };
    EXPECT_ERRORS(cases);
}

static void numbers(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"fsdp:d0", 6, {"sizes start at 1", "'d0'"}},
        {"fsdp:d04", 6, {"no leading zeros", "'d04'"}},
        {"fsdp:d4t00", 8, {"leading zeros", "'t00'"}},
        {"fsdp:d99999999999999999999", 6, {"too large", "'d99999999999999999999'", "1048576"}},
        {"fsdp:d1048577", 6, {"too large", "at most 1048576"}},
        {"fsdp:d1111111111111111111111111111111", 6, {"too large", "..."}},
        {"fsdp:d", 6, {"expected a number after 'd'", "end of input", "d4"}},
        {"fsdp:dt2", 6, {"expected a number after 'd'", "found 't'"}},
        {"fsdp:d-1", 6, {"expected a number after 'd'", "found '-'"}},
        {"fsdp:d+4", 6, {"expected a number after 'd'"}},
        {"fsdp:4", 5, {"expected a dimension letter (d, t, p, c or e)", "found '4'"}},
        {"fsdp:d4 4", 8, {"expected a dimension letter", "found '4'"}},
        {"fsdp:d1 0", 8, {"expected a dimension letter", "found '0'"}},
        {"fsdp:d1024t1025", 0, {"more than 1048576 GPUs"}},
        {"megatron:d1048576t1048576p1048576c1048576", 0, {"more than 1048576 GPUs"}},
        {"megatron:(attn:d1048576t2|ffn:e1)", 0, {"more than 1048576 GPUs"}},
    };
    EXPECT_ERRORS(cases);
}

static void syntax_errors_point_at_the_unexpected_byte(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"", 0, {"empty allocation string", "sglang:d4t2+fsdp:d8"}},
        {"   \t\n", 5, {"empty allocation string"}},
        {"megatron:d2x4",
         11,
         /* the message of the brief, word for word */
         {"expected a dimension letter (d, t, p, c or e) followed by a number, found 'x'; "
          "example: megatron:d2p2t4"}},
        {"sglang:d4x", 9, {"expected a dimension letter (d, t or p)", "sglang:d4t2"}},
        {"fsdp:D4", 5, {"found 'D'", "lower case"}},
        {"fsdp:", 5, {"expected a dimension letter", "end of input"}},
        {"fsdp:d4\x01", 7, {"byte 0x01"}},
        {"fsdp:d4'", 7, {"byte 0x27"}},
        {"sglang:d4+", 10, {"expected a component after '+'", "end of input"}},
        {"sglang:d4 + ", 12, {"expected a component after '+'"}},
        {"+fsdp:d4", 0, {"expected a component,", "found '+'"}},
        {"fsdp:d4++fsdp:d4", 8, {"after '+'", "found '+'"}},
        {"fsdp:d4|", 8, {"expected a component after '|'", "end of input"}},
        {"fsdp:d4||fsdp[a]:d4", 8, {"after '|'", "found '|'"}},
        {"|fsdp:d4", 0, {"expected a component", "found '|'"}},
        {"fsdp:d4,sglang:d4", 7, {"expected a dimension letter", "found ','"}},
        {"megatron:(attn:d4|ffn:d4", 24, {"expected ')' to close the '(' at 9", "end of input"}},
        {"megatron:(attn:d4|ffn:d4 +", 25, {"expected ')'", "found '+'"}},
        {"megatron:attn:d4|ffn:d4)", 23, {"unmatched ')'"}},
        {"fsdp:d4)", 7, {"unmatched ')'"}},
        {"megatron:(attn:d4|ffn:d4))", 25, {"unmatched ')'"}},
        {"megatron:(attn:d4|ffn:d4)x", 25, {"expected '+', '|' or the end", "found 'x'"}},
        {"megatron:(attn:d4|ffn:d4)fsdp:d4", 25, {"expected '+', '|' or the end"}},
        {"9sglang:d4", 0, {"expected a component", "found '9'"}},
    };
    EXPECT_ERRORS(cases);
}

static void too_many_components(void **state) {
    (void)state;
    char text[1024];
    int len = 0, start = 0;
    for (int i = 0; i <= AREAL_ALLOC_MAX_COMPONENTS; i++) {
        if (i == AREAL_ALLOC_MAX_COMPONENTS)
            start = len + 1;
        len += snprintf(text + len, sizeof text - (size_t)len, "%sfsdp[c%d]:d1", i ? "+" : "", i);
    }
    bad_case chain = {text, start, {"too many components", "at most 16"}};
    expect_error(&chain);

    /* the limit counts colocated members too */
    len = snprintf(text, sizeof text, "fsdp:d1");
    for (int i = 1; i <= AREAL_ALLOC_MAX_COMPONENTS; i++) {
        if (i == AREAL_ALLOC_MAX_COMPONENTS)
            start = len + 1;
        len += snprintf(text + len, sizeof text - (size_t)len, "|fsdp[m%d]:d1", i);
    }
    bad_case group = {text, start, {"too many components"}};
    expect_error(&group);
}

static void overlong_strings_are_rejected(void **state) {
    (void)state;
    size_t n = AREAL_ALLOC_MAX_LEN + 10;
    char *text = malloc(n + 1);
    assert_non_null(text);
    memcpy(text, "fsdp:d4", 7);
    memset(text + 7, ' ', n - 7);
    text[n] = '\0';
    bad_case c = {text, AREAL_ALLOC_MAX_LEN, {"longer than 65536 bytes"}};
    expect_error(&c);
    /* at exactly the limit, trailing whitespace is fine */
    text[AREAL_ALLOC_MAX_LEN] = '\0';
    areal_alloc a;
    assert_int_equal(areal_alloc_parse(text, &a, NULL), AREAL_OK);
    free(text);
}

static void null_arguments(void **state) {
    (void)state;
    areal_alloc a;
    areal_error err;
    assert_int_equal(areal_alloc_parse(NULL, &a, &err), AREAL_EINVAL);
    assert_int_equal(err.code, AREAL_EINVAL);
    assert_int_equal(err.pos, -1);
    assert_non_null(strstr(err.msg, "NULL"));
    assert_int_equal(areal_alloc_parse("fsdp:d4", NULL, &err), AREAL_EINVAL);
    assert_int_equal(areal_alloc_parse(NULL, NULL, NULL), AREAL_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_error_rows),
        cmocka_unit_test(backend_rules),
        cmocka_unit_test(hybrid_rules),
        cmocka_unit_test(expert_parallelism_must_divide_the_world),
        cmocka_unit_test(colocation_rules),
        cmocka_unit_test(name_rules),
        cmocka_unit_test(backends_are_required_outside_legacy_strings),
        cmocka_unit_test(numbers),
        cmocka_unit_test(syntax_errors_point_at_the_unexpected_byte),
        cmocka_unit_test(too_many_components),
        cmocka_unit_test(overlong_strings_are_rejected),
        cmocka_unit_test(null_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
