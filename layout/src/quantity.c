/*
 * quantity.c - Kubernetes resource quantities ("500m", "64Gi", "1.5", "2e3").
 *
 * Grammar (k8s.io/apimachinery resource.Quantity): a signed decimal number,
 * then an optional suffix: binary Ki Mi Gi Ti Pi Ei, decimal n u m k M G T P E,
 * or an exponent e<int>/E<int>. The value is scaled by the caller's unit
 * (1000 for CPU millicores) and rounded up, as Kubernetes rounds requests.
 * The number is kept as an exact integer mantissa and a power-of-ten exponent
 * so "0.1" and "100m" give the same millicores without float rounding.
 */
#include "areal/cluster.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#define QUANTITY_MAX (1LL << 62)

/* value = mant * 10^exp10 * mult; returns AREAL_OK or AREAL_ERANGE. */
static int scale_up(long long mant, int exp10, long long mult, long long scale, long long *out) {
    /* Fold multiplier and scale into the mantissa, checking for overflow. */
    long long factors[2] = {mult, scale};
    for (int i = 0; i < 2; i++) {
        if (mant != 0 && factors[i] > QUANTITY_MAX / mant)
            return AREAL_ERANGE;
        mant *= factors[i];
    }
    for (; exp10 > 0; exp10--) {
        if (mant > QUANTITY_MAX / 10)
            return AREAL_ERANGE;
        mant *= 10;
    }
    int rem = 0;
    for (; exp10 < 0; exp10++) {
        rem |= (int)(mant % 10);
        mant /= 10;
    }
    if (rem)
        mant++; /* round up, never down: a request of 0.5m CPU still needs 1m */
    *out = mant;
    return AREAL_OK;
}

int areal_quantity_parse(const char *s, long long scale, long long *out) {
    if (s == NULL || *s == '\0')
        return AREAL_EINVAL;
    const char *p = s;
    if (*p == '+')
        p++;
    if (*p == '-')
        return AREAL_EINVAL;
    long long mant = 0;
    int exp10 = 0, digits = 0;
    bool seen_dot = false;
    for (; *p != '\0'; p++) {
        if (isdigit((unsigned char)*p)) {
            digits++;
            if (mant > (QUANTITY_MAX - 9) / 10) {
                if (!seen_dot)
                    exp10++; /* drop low digits of huge numbers; the range check fails later */
                continue;
            }
            mant = mant * 10 + (*p - '0');
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
    if (*p == 'e' || *p == 'E') {
        if (p[1] == '\0' && *p == 'E') {
            exp10 += 18;
            p++;
        } else {
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
            p = q;
        }
    } else if (*p != '\0') {
        size_t i;
        for (i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++)
            if (strcmp(p, suffixes[i].suffix) == 0)
                break;
        if (i == sizeof suffixes / sizeof suffixes[0])
            return AREAL_EINVAL;
        mult = suffixes[i].mult;
        exp10 += suffixes[i].exp10;
    }
    if (exp10 > 40)
        return mant == 0 ? (*out = 0, AREAL_OK) : AREAL_ERANGE;
    if (exp10 < -40) {
        *out = mant == 0 ? 0 : 1;
        return AREAL_OK;
    }
    return scale_up(mant, exp10, mult, scale, out);
}
