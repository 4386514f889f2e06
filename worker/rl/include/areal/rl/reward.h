/*
 * reward.h - math answer equivalence: the final answer of a completion
 * (the last \boxed{...}, else the line after the last "####", else "the
 * answer is ...", else the last number)
 * against a gold answer, as AReaL's older math_parser did before math_verify.
 * Numbers: integers, decimals, fractions (a/b, \frac{a}{b}, \dfrac), signs,
 * thousands separators, a trailing %, \$ and units words around them.
 * Equal when both parse as numbers of equal value (exact rationals when they
 * fit in 64 bits, else relative 1e-6 as math_verify's 6-digit rounding),
 * otherwise when their normalised text is equal. Any byte string is a valid
 * input: junk never crashes, it just scores 0.
 */
#ifndef AREAL_RL_REWARD_H
#define AREAL_RL_REWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where an extracted answer came from. */
typedef enum {
    AREAL_ANSWER_NONE = 0,
    AREAL_ANSWER_BOXED = 1,       /* the last \boxed{...} (or \fbox{...}) */
    AREAL_ANSWER_PHRASE = 2,      /* "the answer is" / "final answer is" / "answer:" */
    AREAL_ANSWER_LAST_NUMBER = 3, /* the last number in the text */
    AREAL_ANSWER_HASH = 4,        /* GSM8K style: the line after the last "####" */
} areal_answer_source;

/*
 * Extracts the final answer of `text` (len bytes, need not be NUL ended) into
 * out (NUL ended, at most cap-1 bytes; longer answers are cut). Returns where
 * it came from; AREAL_ANSWER_NONE (and out = "") when there is none.
 */
areal_answer_source areal_math_extract(const char *text, size_t len, char *out, size_t cap);

/* A parsed number: num/den exactly when exact, else only value. */
typedef struct areal_math_number {
    bool exact;
    int64_t num; /* den > 0, gcd(num, den) = 1 */
    int64_t den;
    double value;
} areal_math_number;

/*
 * Parses s (len bytes) as one number, after removing what surrounds it
 * ($ signs, \text{...} units, a trailing period, spaces, "\%", "%"):
 * "-1,234.50", "3/4", "\frac{3}{4}", "-\dfrac{1}{2}", "+7", "1e3" is not a
 * number (no exponents, as math answers rarely are). Returns false when it is
 * not exactly one number.
 */
bool areal_math_parse_number(const char *s, size_t len, areal_math_number *out);

/* Whether answer a equals answer b (both already extracted). */
bool areal_math_equal(const char *a, size_t alen, const char *b, size_t blen);

/*
 * The reward of a completion against a gold answer: 1.0 when the extracted
 * answer equals gold, else 0.0. `gold` is a bare answer ("18"), as
 * areal_rl_gsm8k_gold gives.
 */
double areal_math_reward(const char *completion, size_t len, const char *gold, size_t gold_len);

#endif
