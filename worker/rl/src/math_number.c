/*
 * math_number.c - one number out of a short answer string: strips what
 * surrounds it in math answers (spaces, $, \text{...}, \%, a final period,
 * LaTeX thin spaces), then reads integers, decimals, fractions a/b and
 * \frac{a}{b} (\dfrac, \tfrac), signs and thousands separators, exactly as
 * a reduced int64 fraction when it fits, else as a double. No recursion,
 * no allocation: any byte string is safe.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "areal/rl/reward.h"
#include "reward_internal.h"

#define CLEAN_MAX 256

static int64_t gcd64(int64_t a, int64_t b) {
    if (a < 0)
        a = -a;
    while (b != 0) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a < 0 ? -a : a;
}

/* Reduces num/den (den != 0) into out, exact when it fits in int64. */
static bool make_ratio(__int128 num, __int128 den, areal_math_number *out) {
    if (den == 0)
        return false;
    if (den < 0) {
        num = -num;
        den = -den;
    }
    out->value = (double)num / (double)den;
    if (num > INT64_MAX || num < -INT64_MAX || den > INT64_MAX) {
        out->exact = false;
        return true;
    }
    int64_t n = (int64_t)num, d = (int64_t)den;
    int64_t g = gcd64(n, d);
    if (g > 1) {
        n /= g;
        d /= g;
    }
    out->exact = true;
    out->num = n;
    out->den = d;
    return true;
}

/*
 * Copies s into buf without spaces, '$', "\!", "\,", "\;", "\ ", "{,}" (a
 * LaTeX thousands separator), "\left", "\right", and \text{...}/\mathrm{...}
 * groups whose content has no digit (units). Returns the length or -1 when
 * it does not fit.
 */
static int clean(const char *s, size_t len, char *buf) {
    int n = 0;
    size_t i = 0;
    while (i < len) {
        char c = s[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '$') {
            i++;
            continue;
        }
        if (c == '\\' && i + 1 < len &&
            (s[i + 1] == '!' || s[i + 1] == ',' || s[i + 1] == ';' || s[i + 1] == ' ' ||
             s[i + 1] == '$')) {
            i += 2;
            continue;
        }
        if (c == '{' && i + 2 < len && s[i + 1] == ',' && s[i + 2] == '}') {
            buf[n++] = ',';
            if (n >= CLEAN_MAX)
                return -1;
            i += 3;
            continue;
        }
        if (c == '\\' && len - i >= 5 && memcmp(s + i, "\\left", 5) == 0) {
            i += 5;
            continue;
        }
        if (c == '\\' && len - i >= 6 && memcmp(s + i, "\\right", 6) == 0) {
            i += 6;
            continue;
        }
        size_t kw = 0;
        if (c == '\\' && len - i >= 6 && memcmp(s + i, "\\text{", 6) == 0)
            kw = 6;
        else if (c == '\\' && len - i >= 8 && memcmp(s + i, "\\mathrm{", 8) == 0)
            kw = 8;
        else if (c == '\\' && len - i >= 8 && memcmp(s + i, "\\textbf{", 8) == 0)
            kw = 8;
        if (kw > 0) {
            size_t j = i + kw;
            bool digit = false;
            while (j < len && s[j] != '}') {
                digit = digit || isdigit((unsigned char)s[j]);
                j++;
            }
            if (!digit) {
                i = j < len ? j + 1 : len;
                continue;
            }
            /* keep the content of a \text{} that holds the number itself */
            for (size_t k = i + kw; k < j; k++) {
                if (s[k] == ' ')
                    continue;
                buf[n++] = s[k];
                if (n >= CLEAN_MAX)
                    return -1;
            }
            i = j < len ? j + 1 : len;
            continue;
        }
        buf[n++] = c;
        if (n >= CLEAN_MAX)
            return -1;
        i++;
    }
    /* a trailing period, percent sign or degree sign is not part of the value */
    for (;;) {
        if (n > 0 && buf[n - 1] == '.')
            n--;
        else if (n >= 2 && buf[n - 2] == '\\' && buf[n - 1] == '%')
            n -= 2;
        else if (n > 0 && buf[n - 1] == '%')
            n--;
        else if (n >= 6 && memcmp(buf + n - 6, "^\\circ", 6) == 0)
            n -= 6;
        else
            break;
    }
    buf[n] = '\0';
    return n;
}

/*
 * A decimal [sign] digits [,ddd]* [. digits] covering all of s[0..n).
 * Exact when its digits fit in 18.
 */
static bool parse_decimal(const char *s, int n, areal_math_number *out) {
    int i = 0;
    bool neg = false;
    if (i < n && (s[i] == '-' || s[i] == '+')) {
        neg = s[i] == '-';
        i++;
    }
    __int128 mant = 0;
    int digits = 0, frac = 0, int_digits = 0, group = -1;
    bool overflow = false, dot = false;
    double approx = 0.0;
    for (; i < n; i++) {
        char c = s[i];
        if (isdigit((unsigned char)c)) {
            if (digits < 36)
                mant = mant * 10 + (c - '0');
            else
                overflow = true;
            approx = approx * 10.0 + (c - '0');
            digits++;
            if (dot)
                frac++;
            else
                int_digits++;
            if (group >= 0)
                group++;
        } else if (c == ',' && !dot) {
            /* thousands separator: 1-3 digits before the first, exactly 3 between */
            if (int_digits == 0 || (group < 0 && int_digits > 3) || (group >= 0 && group != 3))
                return false;
            group = 0;
        } else if (c == '.' && !dot) {
            if (group >= 0 && group != 3)
                return false;
            group = -1;
            dot = true;
        } else {
            return false;
        }
    }
    if (digits == 0 || (group >= 0 && group != 3) || (dot && frac == 0 && int_digits == 0))
        return false;
    if (overflow || digits > 18) {
        out->exact = false;
        out->value = (neg ? -approx : approx) / pow(10.0, frac);
        return true;
    }
    __int128 den = 1;
    for (int k = 0; k < frac; k++)
        den *= 10;
    return make_ratio(neg ? -mant : mant, den, out);
}

static bool divide(const areal_math_number *a, const areal_math_number *b, areal_math_number *out) {
    if (b->value == 0.0)
        return false;
    if (a->exact && b->exact)
        return make_ratio((__int128)a->num * b->den, (__int128)a->den * b->num, out);
    out->exact = false;
    out->value = a->value / b->value;
    return true;
}

/* \frac{A}{B} (or \dfrac, \tfrac) with an optional leading sign, covering s[0..n). */
static bool parse_frac(const char *s, int n, areal_math_number *out) {
    int i = 0;
    bool neg = false;
    if (i < n && (s[i] == '-' || s[i] == '+')) {
        neg = s[i] == '-';
        i++;
    }
    if (n - i >= 6 && (memcmp(s + i, "\\dfrac", 6) == 0 || memcmp(s + i, "\\tfrac", 6) == 0))
        i += 6;
    else if (n - i >= 5 && memcmp(s + i, "\\frac", 5) == 0)
        i += 5;
    else
        return false;
    int a0, a1, b0, b1;
    if (i >= n || s[i] != '{')
        return false;
    a0 = ++i;
    while (i < n && s[i] != '}')
        i++;
    if (i >= n)
        return false;
    a1 = i++;
    if (i >= n || s[i] != '{')
        return false;
    b0 = ++i;
    while (i < n && s[i] != '}')
        i++;
    if (i != n - 1)
        return false;
    b1 = i;
    areal_math_number a, b;
    if (!parse_decimal(s + a0, a1 - a0, &a) || !parse_decimal(s + b0, b1 - b0, &b))
        return false;
    if (!divide(&a, &b, out))
        return false;
    if (neg) {
        out->num = -out->num;
        out->value = -out->value;
    }
    return true;
}

bool areal_math_parse_number(const char *s, size_t len, areal_math_number *out) {
    char buf[CLEAN_MAX + 1];
    areal_math_number tmp;
    if (out == NULL)
        out = &tmp;
    memset(out, 0, sizeof *out);
    if (s == NULL)
        return false;
    int n = clean(s, len, buf);
    if (n <= 0)
        return false;
    /* one pair of braces around the whole answer: {42} */
    char *b = buf;
    while (n >= 2 && b[0] == '{' && b[n - 1] == '}') {
        b++;
        n -= 2;
    }
    if (parse_decimal(b, n, out))
        return true;
    if (parse_frac(b, n, out))
        return true;
    /* a/b with decimals on both sides */
    char *slash = memchr(b, '/', (size_t)n);
    if (slash != NULL) {
        areal_math_number x, y;
        int k = (int)(slash - b);
        if (parse_decimal(b, k, &x) && parse_decimal(slash + 1, n - k - 1, &y) &&
            divide(&x, &y, out))
            return true;
    }
    memset(out, 0, sizeof *out);
    return false;
}

/* A long decimal (a denominator dividing 10^18, at least 10^6): a rounded value. */
static bool long_decimal(const areal_math_number *x) {
    return x->exact && x->den >= 1000000 && 1000000000000000000LL % x->den == 0;
}

bool areal_math_number_equal(const areal_math_number *a, const areal_math_number *b) {
    if (a->exact && b->exact) {
        if (a->num == b->num && a->den == b->den)
            return true;
        /* 0.3333333 for 1/3: compare as rounded values, else exactly */
        if (!long_decimal(a) && !long_decimal(b))
            return false;
    }
    if (!isfinite(a->value) || !isfinite(b->value))
        return false;
    double scale = fmax(fabs(a->value), fabs(b->value));
    /* math_verify's float_rounding=6: six significant digits */
    return fabs(a->value - b->value) <= 1e-6 * fmax(scale, 1e-12);
}
