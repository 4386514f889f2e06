/*
 * test_rl_reward.c - math answer extraction and equivalence (reward.h):
 * \boxed{} with nested braces, "####", the answer phrase, the last number;
 * integers, decimals, fractions, \frac, signs, thousands separators, units;
 * wrong answers score 0; junk (cut-off boxes, huge numbers, binary bytes,
 * NULs) never crashes and scores 0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "areal/rl/dataset.h"
#include "areal/rl/reward.h"

static double reward(const char *completion, const char *gold) {
    return areal_math_reward(completion, strlen(completion), gold, strlen(gold));
}

static void extraction_order(void **st) {
    (void)st;
    char out[128];
    assert_int_equal(
        areal_math_extract("so 3 then \\boxed{\\frac{1}{2}} and 7", 35, out, sizeof out),
        AREAL_ANSWER_BOXED);
    assert_string_equal(out, "\\frac{1}{2}");
    const char *nested = "first \\boxed{1} then \\boxed{\\dfrac{\\sqrt{2}}{2}}.";
    assert_int_equal(areal_math_extract(nested, strlen(nested), out, sizeof out),
                     AREAL_ANSWER_BOXED);
    assert_string_equal(out, "\\dfrac{\\sqrt{2}}{2}");
    const char *hash = "He has 5 + 3 = 8 apples.\n#### 8\nextra 9";
    assert_int_equal(areal_math_extract(hash, strlen(hash), out, sizeof out), AREAL_ANSWER_HASH);
    assert_string_equal(out, "8");
    const char *phr = "We add 2 and 2. The answer is 4. Check: 4 = 2 + 2";
    assert_int_equal(areal_math_extract(phr, strlen(phr), out, sizeof out), AREAL_ANSWER_PHRASE);
    assert_string_equal(out, "4");
    const char *last = "3 apples plus 4.5 apples make 7.5 apples.";
    assert_int_equal(areal_math_extract(last, strlen(last), out, sizeof out),
                     AREAL_ANSWER_LAST_NUMBER);
    assert_string_equal(out, "7.5");
    assert_int_equal(areal_math_extract("no digits here", 14, out, sizeof out), AREAL_ANSWER_NONE);
    assert_string_equal(out, "");
    /* a box that never closes falls back to the earlier, closed one */
    const char *cut = "\\boxed{12} and then \\boxed{13";
    assert_int_equal(areal_math_extract(cut, strlen(cut), out, sizeof out), AREAL_ANSWER_BOXED);
    assert_string_equal(out, "12");
    /* a name like x2 is not a number */
    const char *var = "let x2 be the count; it is 5 for v_3";
    assert_int_equal(areal_math_extract(var, strlen(var), out, sizeof out),
                     AREAL_ANSWER_LAST_NUMBER);
    assert_string_equal(out, "5");
    /* a tiny buffer cuts the answer but stays NUL-terminated */
    char tiny[3];
    areal_math_extract("\\boxed{12345}", 13, tiny, sizeof tiny);
    assert_string_equal(tiny, "12");
}

static void numbers_parse(void **st) {
    (void)st;
    areal_math_number n;
    assert_true(areal_math_parse_number("-1,234.50", 9, &n));
    assert_true(n.exact && n.num == -2469 && n.den == 2);
    assert_true(areal_math_parse_number("\\frac{3}{4}", 11, &n));
    assert_true(n.exact && n.num == 3 && n.den == 4);
    assert_true(areal_math_parse_number("-\\dfrac{6}{8}", 13, &n));
    assert_true(n.exact && n.num == -3 && n.den == 4);
    assert_true(areal_math_parse_number("$12$", 4, &n));
    assert_true(n.exact && n.num == 12 && n.den == 1);
    assert_true(areal_math_parse_number("\\$ 1{,}000", 10, &n));
    assert_true(n.exact && n.num == 1000);
    assert_true(areal_math_parse_number("50\\%", 4, &n));
    assert_true(n.exact && n.num == 50);
    assert_true(areal_math_parse_number("18 \\text{ dollars}.", 19, &n));
    assert_true(n.num == 18);
    assert_true(areal_math_parse_number("+7", 2, &n) && n.num == 7);
    assert_true(areal_math_parse_number("0.125", 5, &n) && n.num == 1 && n.den == 8);
    assert_true(areal_math_parse_number("{42}", 4, &n) && n.num == 42);
    /* huge: inexact but finite */
    const char *big = "123456789012345678901234567890";
    assert_true(areal_math_parse_number(big, strlen(big), &n));
    assert_false(n.exact);
    assert_true(n.value > 1.2e29 && n.value < 1.3e29);
    /* not numbers */
    assert_false(areal_math_parse_number("1,2", 3, &n));
    assert_false(areal_math_parse_number("12,34", 5, &n));
    assert_false(areal_math_parse_number("1/0", 3, &n));
    assert_false(areal_math_parse_number("\\frac{1}{0}", 11, &n));
    assert_false(areal_math_parse_number("1e3", 3, &n));
    assert_false(areal_math_parse_number("x+1", 3, &n));
    assert_false(areal_math_parse_number("", 0, &n));
    assert_false(areal_math_parse_number("--3", 3, &n));
    assert_false(areal_math_parse_number(".", 1, &n));
}

static void equivalence(void **st) {
    (void)st;
    assert_true(reward("so \\boxed{0.5}", "1/2") == 1.0);
    assert_true(reward("so \\boxed{\\frac{1}{2}}", "0.5") == 1.0);
    assert_true(reward("The answer is 1,234.", "1234") == 1.0);
    assert_true(reward("The answer is $1,234.00$ dollars.", "1234") == 1.0);
    assert_true(reward("#### -3", "-3") == 1.0);
    assert_true(reward("I think 42", "42") == 1.0);
    assert_true(reward("\\boxed{18 \\text{ dollars}}", "18") == 1.0);
    assert_true(reward("\\boxed{x = 18}", "18") == 1.0);
    assert_true(reward("\\boxed{0.3333333}", "1/3") == 1.0);
    /* wrong answers */
    assert_true(reward("\\boxed{0.333}", "1/3") == 0.0);
    assert_true(reward("The answer is 41.", "42") == 0.0);
    assert_true(reward("\\boxed{-18}", "18") == 0.0);
    assert_true(reward("\\boxed{18 or 20}", "18") == 0.0);
    assert_true(reward("nothing", "3") == 0.0);
    assert_true(reward("", "3") == 0.0);
    assert_true(reward("\\boxed{3}", "") == 0.0);
    /* the boxed answer wins over later numbers */
    assert_true(reward("\\boxed{7}. Check: 7 = 3 + 4", "7") == 1.0);
    /* symbolic answers by normalised text */
    assert_true(reward("\\boxed{\\text{B}}", "b") == 1.0);
    assert_true(reward("\\boxed{x^2 + 1}", "x^2+1") == 1.0);
    assert_true(reward("\\boxed{x^2 + 2}", "x^2+1") == 0.0);
}

static void gsm8k_gold(void **st) {
    (void)st;
    char g[32];
    const char *a = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72";
    assert_int_equal(areal_rl_gsm8k_gold(a, strlen(a), g, sizeof g), 2);
    assert_string_equal(g, "72");
    assert_int_equal(areal_rl_gsm8k_gold("#### 1,000,000 ", 15, g, sizeof g), 7);
    assert_string_equal(g, "1000000");
    assert_int_equal(areal_rl_gsm8k_gold("  5 ", 4, g, sizeof g), 1);
    assert_int_equal(areal_rl_gsm8k_gold("reasoning ####   ", 17, g, sizeof g), -1);
    assert_int_equal(areal_rl_gsm8k_gold("#### 123456", 11, g, 4), -1);
}

/* Junk never crashes: every prefix of nasty strings, and random bytes. */
static void junk_never_crashes(void **st) {
    (void)st;
    const char *nasty[] = {
        "\\boxed{",
        "\\boxed{{{{{{{{{{",
        "}}}}\\boxed}}{",
        "####",
        "#### \n####",
        "the answer is",
        "-",
        "+-+-.,.,/",
        "1,,,,,000.....5////3",
        "\\frac{\\frac{1}{2}}{3}",
        "\\frac{",
        "\\frac{1}{",
        "99999999999999999999999999999999/3",
        "1/99999999999999999999999999999",
        "-0",
        "0/0",
        "\\boxed{\\text{",
        "\\text{\\text{1}}",
    };
    char out[64];
    for (size_t k = 0; k < sizeof nasty / sizeof *nasty; k++) {
        size_t n = strlen(nasty[k]);
        for (size_t i = 0; i <= n; i++) {
            areal_math_extract(nasty[k], i, out, sizeof out);
            double r = areal_math_reward(nasty[k], i, "1", 1);
            assert_true(r == 0.0 || r == 1.0);
            areal_math_number num;
            (void)areal_math_parse_number(nasty[k], i, &num);
        }
    }
    uint32_t x = 12345;
    char buf[300];
    for (int it = 0; it < 2000; it++) {
        size_t n = 1 + (size_t)(it % 299);
        for (size_t i = 0; i < n; i++) {
            x = x * 1103515245u + 12345u;
            const char alphabet[] = "0123456789,./-+ {}\\boxed#answeris$%\n\0\xff";
            buf[i] = alphabet[(x >> 16) % (sizeof alphabet - 1)];
        }
        areal_math_extract(buf, n, out, sizeof out);
        double r = areal_math_reward(buf, n, buf, n);
        assert_true(r == 0.0 || r == 1.0);
    }
    assert_int_equal(areal_math_extract(NULL, 0, out, sizeof out), AREAL_ANSWER_NONE);
    assert_false(areal_math_equal(NULL, 0, "1", 1));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(extraction_order),   cmocka_unit_test(numbers_parse),
        cmocka_unit_test(equivalence),        cmocka_unit_test(gsm8k_gold),
        cmocka_unit_test(junk_never_crashes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
