/*
 * reduce.c - reduction kernels of the collectives; see areal/comm/dtype.h.
 *
 * The fp16 conversion is written out bit by bit (no _Float16, which not every
 * C11 compiler has). Rejected: reducing bf16 in bf16 (each hop would round,
 * and the result would depend on the algorithm).
 */
#include "areal/comm/dtype.h"

#include <math.h>
#include <string.h>

bool areal_comm_dtype_ok(areal_dtype t) {
    return t == AREAL_DT_F32 || t == AREAL_DT_BF16 || t == AREAL_DT_F16 || t == AREAL_DT_I32 ||
           t == AREAL_DT_I64;
}

const char *areal_redop_name(areal_redop op) {
    static const char *const names[] = {"sum", "avg", "max"};
    return (unsigned)op < AREAL_REDOP_COUNT ? names[op] : NULL;
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
    case AREAL_DT_F32:
        REDUCE_LOOP(float, (isnan(a) ? a : isnan(b) ? b : (a > b ? a : b)));
        break;
    case AREAL_DT_I32: {
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
    case AREAL_DT_I64:
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
    if (t == AREAL_DT_F32) {
        float *p = buf;
        for (size_t i = 0; i < n; i++)
            p[i] /= (float)by;
    } else if (t == AREAL_DT_I32) {
        int32_t *p = buf;
        for (size_t i = 0; i < n; i++)
            p[i] /= by;
    } else if (t == AREAL_DT_I64) {
        int64_t *p = buf;
        for (size_t i = 0; i < n; i++)
            p[i] /= by;
    }
}
