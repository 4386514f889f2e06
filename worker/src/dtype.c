/*
 * dtype.c - element types and reduction kernels; see areal/comm/dtype.h.
 *
 * The fp16 conversion is written out bit by bit (no _Float16, which not every
 * C11 compiler has). Rejected: reducing bf16 in bf16 (each hop would round,
 * and the result would depend on the algorithm).
 */
#include "areal/comm/dtype.h"

#include <math.h>
#include <string.h>

size_t areal_dtype_size(areal_dtype t) {
    switch (t) {
    case AREAL_FP32:
    case AREAL_INT32:
        return 4;
    case AREAL_BF16:
    case AREAL_FP16:
        return 2;
    case AREAL_INT64:
        return 8;
    default:
        return 0;
    }
}

const char *areal_dtype_name(areal_dtype t) {
    static const char *const names[] = {"fp32", "bf16", "fp16", "int32", "int64"};
    return (unsigned)t < AREAL_DTYPE_COUNT ? names[t] : NULL;
}

const char *areal_redop_name(areal_redop op) {
    static const char *const names[] = {"sum", "avg", "max"};
    return (unsigned)op < AREAL_REDOP_COUNT ? names[op] : NULL;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float areal_bf16_to_f32(uint16_t h) {
    return float_of((uint32_t)h << 16);
}

uint16_t areal_f32_to_bf16(float f) {
    uint32_t u = bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float areal_fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f)
        return float_of(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return float_of(sign);
        float v = ldexpf((float)man, -24); /* subnormal: man * 2^-24, exact */
        return sign ? -v : v;
    }
    return float_of(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t areal_f32_to_fp16(float f) {
    uint32_t u = bits_of(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below 2^-14: subnormal or zero */
        float v = float_of(a);
        /* v * 2^24 rounded to nearest even by the FPU's default mode */
        float m = nearbyintf(v * 16777216.0f);
        return (uint16_t)(sign | (uint16_t)m);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u); /* round to nearest even at bit 13 */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

#define REDUCE_LOOP(T, MAXEXPR)                                                                    \
    do {                                                                                           \
        T *d = dst;                                                                                \
        const T *s = src;                                                                          \
        if (op == AREAL_MAX) {                                                                     \
            for (size_t i = 0; i < n; i++) {                                                       \
                T a = d[i], b = s[i];                                                              \
                d[i] = MAXEXPR;                                                                    \
            }                                                                                      \
        } else {                                                                                   \
            for (size_t i = 0; i < n; i++)                                                         \
                d[i] += s[i];                                                                      \
        }                                                                                          \
    } while (0)

void areal_reduce(void *dst, const void *src, size_t n, areal_dtype t, areal_redop op) {
    switch (t) {
    case AREAL_FP32:
        REDUCE_LOOP(float, (isnan(a) ? a : isnan(b) ? b : (a > b ? a : b)));
        break;
    case AREAL_INT32: {
        /* wrap-around sum, as NCCL does, without signed-overflow UB */
        if (op == AREAL_MAX) {
            REDUCE_LOOP(int32_t, (a > b ? a : b));
        } else {
            uint32_t *d = dst;
            const uint32_t *s = src;
            for (size_t i = 0; i < n; i++)
                d[i] += s[i];
        }
        break;
    }
    case AREAL_INT64:
        if (op == AREAL_MAX) {
            REDUCE_LOOP(int64_t, (a > b ? a : b));
        } else {
            uint64_t *d = dst;
            const uint64_t *s = src;
            for (size_t i = 0; i < n; i++)
                d[i] += s[i];
        }
        break;
    default:
        break;
    }
}

void areal_scale_avg(void *buf, size_t n, areal_dtype t, int by) {
    if (by <= 1)
        return;
    if (t == AREAL_FP32) {
        float *p = buf;
        for (size_t i = 0; i < n; i++)
            p[i] /= (float)by;
    } else if (t == AREAL_INT32) {
        int32_t *p = buf;
        for (size_t i = 0; i < n; i++)
            p[i] /= by;
    } else if (t == AREAL_INT64) {
        int64_t *p = buf;
        for (size_t i = 0; i < n; i++)
            p[i] /= by;
    }
}
