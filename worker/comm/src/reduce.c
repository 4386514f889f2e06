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

/*
 * dst op= src over n elements of type T: plain loops over restrict pointers.
 * GCC's -O2 vectoriser uses the "very cheap" cost model, which refuses any
 * loop that needs a scalar epilogue (every loop here, n being unknown), so
 * GCC gets the dynamic model for this file's kernels (REDUCE_VEC); clang
 * vectorises them at -O2 as they are.
 */
#if defined(__GNUC__) && !defined(__clang__)
#define REDUCE_VEC __attribute__((optimize("vect-cost-model=dynamic")))
#else
#define REDUCE_VEC
#endif
#define REDUCE_LOOP(T, COMBINE)                                                                    \
    do {                                                                                           \
        T *restrict d = dst;                                                                       \
        const T *restrict s = src;                                                                 \
        for (size_t i = 0; i < n; i++) {                                                           \
            T a = d[i], b = s[i];                                                                  \
            d[i] = COMBINE;                                                                        \
        }                                                                                          \
    } while (0)

/* NaN wins (a != a is isnan without a call), so max is symmetric bit for bit */
#define FMAX (a != a ? a : b != b ? b : (a > b ? a : b))

REDUCE_VEC void areal_reduce(void *dst, const void *src, size_t n, areal_dtype t, areal_redop op) {
    int max = op == AREAL_MAX;
    switch (t) {
    case AREAL_DT_F32:
        if (max)
            REDUCE_LOOP(float, FMAX);
        else
            REDUCE_LOOP(float, a + b);
        break;
    case AREAL_DT_I32:
        /* wrap-around sum, as NCCL does, without signed-overflow UB */
        if (max)
            REDUCE_LOOP(int32_t, (a > b ? a : b));
        else
            REDUCE_LOOP(uint32_t, a + b);
        break;
    case AREAL_DT_I64:
        if (max)
            REDUCE_LOOP(int64_t, (a > b ? a : b));
        else
            REDUCE_LOOP(uint64_t, a + b);
        break;
    default:
        break;
    }
}

REDUCE_VEC void areal_scale_avg(void *buf, size_t n, areal_dtype t, int by) {
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
