/*
 * quantity.c - Kubernetes resource quantities ("500m", "64Gi", "1.5", "2e3").
 *
 * Grammar (k8s.io/apimachinery resource.Quantity): a signed decimal number,
 * then an optional suffix: binary Ki Mi Gi Ti Pi Ei, decimal n u m k M G T P E,
 * or an exponent e<int>/E<int>. The value is scaled by the caller's unit
 * (1000 for CPU millicores) and rounded up, as Kubernetes rounds requests.
 * The number is kept as an exact integer mantissa and a power-of-ten exponent
 * so "0.1" and "100m" give the same millicores without float rounding; the
 * final product is formed in 128 bits (GCC/Clang unsigned __int128).
 */
#include "areal/cluster.h"

#include <ctype.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#define QUANTITY_MAX (1LL << 62)

/*
 * value = ceil(mant * mult * scale * 10^exp10). The product is formed in 128
 * bits before any division, so "0.5Ei" or a long fraction at CPU scale does not
 * overflow on the way to a result that fits. Returns AREAL_OK or AREAL_ERANGE.
 */
static int scale_up(unsigned long long mant, int exp10, long long mult, long long scale,
                    long long *out) {
    typedef unsigned __int128 wide;
    wide v = (wide)mant * (wide)mult; /* < 2^64 * 2^60 */
    if (v > ~(wide)0 / (wide)scale)
        return AREAL_ERANGE; /* only with 20 digits, a binary suffix and a large scale */
    v *= (wide)scale;
    for (; exp10 > 0 && v != 0; exp10--) {
        if (v > QUANTITY_MAX)
            return AREAL_ERANGE;
        v *= 10;
    }
    bool rem = false;
    for (; exp10 < 0 && v != 0; exp10++) {
        rem |= v % 10 != 0;
        v /= 10;
    }
    if (rem)
        v++; /* round up, never down: a request of 0.5m CPU still needs 1m */
    if (v > QUANTITY_MAX)
        return AREAL_ERANGE;
    *out = (long long)v;
    return AREAL_OK;
}

int areal_quantity_parse(const char *s, long long scale, long long *out) {
    if (s == NULL || *s == '\0' || scale < 1)
        return AREAL_EINVAL;
    const char *p = s;
    if (*p == '+')
        p++;
    if (*p == '-')
        return AREAL_EINVAL;
    unsigned long long mant = 0; /* the first 19 or 20 significant digits */
    int exp10 = 0, digits = 0;
    bool seen_dot = false, inexact = false;
    for (; *p != '\0'; p++) {
        if (isdigit((unsigned char)*p)) {
            digits++;
            if (mant > (ULLONG_MAX - 9) / 10) {
                /* Drop the rest; a dropped non-zero digit rounds the mantissa up below. */
                if (!seen_dot)
                    exp10++;
                inexact |= *p != '0';
                continue;
            }
            mant = mant * 10 + (unsigned)(*p - '0');
            if (seen_dot)
                exp10--;
        } else if (*p == '.' && !seen_dot) {
            seen_dot = true;
        } else {
            break;
        }
    }
    if (digits == 0)
        return AREAL_EINVAL;
    long long mult = 1;
    static const struct {
        const char *suffix;
        long long mult;
        int exp10;
    } suffixes[] = {
        {"Ki", 1LL << 10, 0}, {"Mi", 1LL << 20, 0}, {"Gi", 1LL << 30, 0}, {"Ti", 1LL << 40, 0},
        {"Pi", 1LL << 50, 0}, {"Ei", 1LL << 60, 0}, {"n", 1, -9},         {"u", 1, -6},
        {"m", 1, -3},         {"k", 1, 3},          {"M", 1, 6},          {"G", 1, 9},
        {"T", 1, 12},         {"P", 1, 15},         {"E", 1, 18},
    };
    /* A suffix ("Ei", "E", "m") first, so that "2Ei" is not read as an exponent. */
    size_t n_suffixes = sizeof suffixes / sizeof suffixes[0], i = 0;
    while (i < n_suffixes && strcmp(p, suffixes[i].suffix) != 0)
        i++;
    if (i < n_suffixes) {
        mult = suffixes[i].mult;
        exp10 += suffixes[i].exp10;
    } else if (*p == 'e' || *p == 'E') {
        const char *q = p + 1;
        int sign = 1, e = 0, edigits = 0;
        if (*q == '+' || *q == '-')
            sign = (*q++ == '-') ? -1 : 1;
        for (; isdigit((unsigned char)*q); q++, edigits++)
            if (e < 1000)
                e = e * 10 + (*q - '0');
        if (edigits == 0 || *q != '\0')
            return AREAL_EINVAL;
        exp10 += sign * e;
    } else if (*p != '\0') {
        return AREAL_EINVAL;
    }
    if (inexact)
        mant++; /* past 19 digits never round down (the result may be one unit high) */
    return scale_up(mant, exp10, mult, scale, out);
}
