/*
 * reward.c - the final answer of a completion and its equivalence with the
 * gold answer (reward.h). Extraction order follows AReaL's math_parser
 * (areal/reward/math_parser.py, <= v0.5): the last \boxed{...} with braces
 * matched, else the answer phrase, else the last number; the GSM8K "####"
 * line sits between the box and the phrase because the synthetic task and
 * GSM8K-trained models answer that way. Everything is a bounded forward scan
 * over the bytes: no recursion, no allocation, junk in, 0 out.
 */
#include <ctype.h>
#include <string.h>

#include "areal/rl/reward.h"
#include "reward_internal.h"

static void put(char *out, size_t cap, const char *s, size_t n) {
    if (cap == 0)
        return;
    if (n > cap - 1)
        n = cap - 1;
    memcpy(out, s, n);
    out[n] = '\0';
}

static void trim(const char **s, size_t *n) {
    while (*n > 0 && isspace((unsigned char)(*s)[0]))
        (*s)++, (*n)--;
    while (*n > 0 && isspace((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

/* Last occurrence of needle in hay[0..len), or NULL; case-insensitive when ci. */
static const char *find_last(const char *hay, size_t len, const char *needle, bool ci) {
    size_t m = strlen(needle);
    if (m == 0 || m > len)
        return NULL;
    for (size_t i = len - m + 1; i-- > 0;) {
        size_t k = 0;
        while (k < m &&
               (ci ? tolower((unsigned char)hay[i + k]) == needle[k] : hay[i + k] == needle[k]))
            k++;
        if (k == m)
            return hay + i;
    }
    return NULL;
}

/* The content of the last \boxed{...} / \fbox{...} with matched braces. */
static bool last_boxed(const char *t, size_t len, const char **a, size_t *n) {
    static const char *const keys[] = {"\\boxed{", "\\fbox{"};
    const char *best = NULL;
    size_t best_k = 0;
    for (int k = 0; k < 2; k++) {
        const char *p = find_last(t, len, keys[k], false);
        if (p != NULL && (best == NULL || p > best)) {
            best = p;
            best_k = strlen(keys[k]);
        }
    }
    /* walk back over boxes whose braces never close (cut-off output) */
    while (best != NULL) {
        const char *start = best + best_k, *end = t + len;
        int depth = 1;
        const char *q = start;
        for (; q < end && depth > 0; q++) {
            if (*q == '{')
                depth++;
            else if (*q == '}')
                depth--;
        }
        if (depth == 0) {
            *a = start;
            *n = (size_t)(q - 1 - start);
            return true;
        }
        size_t before = (size_t)(best - t);
        const char *p1 = find_last(t, before, "\\boxed{", false);
        const char *p2 = find_last(t, before, "\\fbox{", false);
        if (p1 != NULL && (p2 == NULL || p1 > p2)) {
            best = p1;
            best_k = 7;
        } else {
            best = p2;
            best_k = 6;
        }
    }
    return false;
}

/* The rest of the line after `p` (k bytes of key), up to a sentence end. */
static void line_after(const char *t, size_t len, const char *p, size_t k, const char **a,
                       size_t *n) {
    const char *s = p + k, *end = t + len, *q = s;
    while (q < end && *q != '\n') {
        /* a period followed by a space or the end closes the sentence, unless
         * it is a decimal point */
        if (*q == '.' && (q + 1 == end || isspace((unsigned char)q[1])))
            break;
        q++;
    }
    *a = s;
    *n = (size_t)(q - s);
    trim(a, n);
    while (*n > 0 && (**a == ':' || **a == '='))
        (*a)++, (*n)--;
    trim(a, n);
}

static bool phrase(const char *t, size_t len, const char **a, size_t *n) {
    static const char *const keys[] = {"the answer is", "final answer is",
                                       "final answer:", "answer:"};
    const char *best = NULL;
    size_t best_k = 0;
    for (int k = 0; k < 4; k++) {
        const char *p = find_last(t, len, keys[k], true);
        if (p != NULL && (best == NULL || p > best)) {
            best = p;
            best_k = strlen(keys[k]);
        }
    }
    if (best == NULL)
        return false;
    line_after(t, len, best, best_k, a, n);
    return *n > 0;
}

/*
 * Finds numbers: [sign] digits [,ddd]* [. digits] [/ digits...]. With
 * `last` the last one, else the first; *count (nullable) gets how many.
 */
static bool scan_numbers(const char *t, size_t len, bool last, const char **a, size_t *n,
                         int *count) {
    bool found = false;
    int c = 0;
    size_t i = 0;
    while (i < len) {
        unsigned char ch = (unsigned char)t[i];
        bool sign = (ch == '-' || ch == '+') && i + 1 < len && isdigit((unsigned char)t[i + 1]);
        if (!isdigit(ch) && !sign) {
            i++;
            continue;
        }
        /* a digit glued to a letter or underscore before it is a name (x2, v_3) */
        if (i > 0 && (isalpha((unsigned char)t[i - 1]) || t[i - 1] == '_') && !sign) {
            while (i < len && isdigit((unsigned char)t[i]))
                i++;
            continue;
        }
        size_t s = i;
        if (sign)
            i++;
        for (;;) {
            while (i < len && isdigit((unsigned char)t[i]))
                i++;
            if (i + 3 < len && t[i] == ',' && isdigit((unsigned char)t[i + 1]) &&
                isdigit((unsigned char)t[i + 2]) && isdigit((unsigned char)t[i + 3]) &&
                (i + 4 >= len || !isdigit((unsigned char)t[i + 4]))) {
                i += 4;
                continue;
            }
            break;
        }
        if (i + 1 < len && t[i] == '.' && isdigit((unsigned char)t[i + 1])) {
            i++;
            while (i < len && isdigit((unsigned char)t[i]))
                i++;
        }
        if (i + 1 < len && t[i] == '/' && isdigit((unsigned char)t[i + 1])) {
            i++;
            while (i < len && isdigit((unsigned char)t[i]))
                i++;
        }
        c++;
        if (last || !found) {
            *a = t + s;
            *n = i - s;
            found = true;
        }
    }
    if (count != NULL)
        *count = c;
    return found;
}

areal_answer_source areal_math_extract(const char *text, size_t len, char *out, size_t cap) {
    const char *a = NULL;
    size_t n = 0;
    put(out, cap, "", 0);
    if (text == NULL)
        return AREAL_ANSWER_NONE;
    if (last_boxed(text, len, &a, &n)) {
        trim(&a, &n);
        put(out, cap, a, n);
        return AREAL_ANSWER_BOXED;
    }
    const char *h = find_last(text, len, "####", false);
    if (h != NULL) {
        line_after(text, len, h, 4, &a, &n);
        if (n > 0) {
            put(out, cap, a, n);
            return AREAL_ANSWER_HASH;
        }
    }
    if (phrase(text, len, &a, &n)) {
        put(out, cap, a, n);
        return AREAL_ANSWER_PHRASE;
    }
    if (scan_numbers(text, len, true, &a, &n, NULL)) {
        put(out, cap, a, n);
        return AREAL_ANSWER_LAST_NUMBER;
    }
    return AREAL_ANSWER_NONE;
}

/* Lowercased text without spaces, $, braces, "\text", "\left"/"\right" and a final period. */
static size_t norm_text(const char *s, size_t n, char *buf, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < cap; i++) {
        char c = s[i];
        if (c == '\\' && n - i >= 5 && memcmp(s + i, "\\text", 5) == 0) {
            i += 4;
            continue;
        }
        if (c == '\\' && n - i >= 5 && memcmp(s + i, "\\left", 5) == 0) {
            i += 4;
            continue;
        }
        if (c == '\\' && n - i >= 6 && memcmp(s + i, "\\right", 6) == 0) {
            i += 5;
            continue;
        }
        if (isspace((unsigned char)c) || c == '$' || c == '{' || c == '}')
            continue;
        buf[k++] = (char)tolower((unsigned char)c);
    }
    while (k > 0 && buf[k - 1] == '.')
        k--;
    buf[k] = '\0';
    return k;
}

bool areal_math_equal(const char *a, size_t alen, const char *b, size_t blen) {
    if (a == NULL || b == NULL)
        return false;
    areal_math_number x, y;
    bool nx = areal_math_parse_number(a, alen, &x);
    bool ny = areal_math_parse_number(b, blen, &y);
    if (nx && ny)
        return areal_math_number_equal(&x, &y);
    if (ny && !nx) {
        /* "18 dollars", "x = 18": the answer's only number */
        const char *p;
        size_t pn;
        int count = 0;
        if (scan_numbers(a, alen, false, &p, &pn, &count) && count == 1 &&
            areal_math_parse_number(p, pn, &x))
            return areal_math_number_equal(&x, &y);
        return false;
    }
    char na[512], nb[512];
    size_t la = norm_text(a, alen, na, sizeof na);
    size_t lb = norm_text(b, blen, nb, sizeof nb);
    return la > 0 && la == lb && memcmp(na, nb, la) == 0;
}

double areal_math_reward(const char *completion, size_t len, const char *gold, size_t gold_len) {
    char ans[512];
    if (areal_math_extract(completion, len, ans, sizeof ans) == AREAL_ANSWER_NONE)
        return 0.0;
    return areal_math_equal(ans, strlen(ans), gold, gold_len) ? 1.0 : 0.0;
}
