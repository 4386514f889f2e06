/*
 * copy.c - areal_comm_copy: memcpy without `rep movsb` for the shared-memory
 * paths; see copy.h for why and the measurements.
 */
#include "copy.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#define LOOP_MIN 1024 /* below this glibc copies with vector moves itself */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/*
 * 128 bytes per iteration; unaligned loads and stores (as fast as aligned
 * ones on data in cache). no-tree-loop-distribute-patterns keeps GCC from
 * turning the loop back into a memcpy call.
 */
#ifdef __clang__
#define NO_MEMCPY_IDIOM /* clang keeps the intrinsics as they are */
#else
#define NO_MEMCPY_IDIOM __attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif

__attribute__((target("avx2"))) NO_MEMCPY_IDIOM static void copy_avx2(uint8_t *d, const uint8_t *s,
                                                                      size_t n) {
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 64));
        __m256i e = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 96));
        _mm256_storeu_si256((__m256i *)(void *)(d + i), a);
        _mm256_storeu_si256((__m256i *)(void *)(d + i + 32), b);
        _mm256_storeu_si256((__m256i *)(void *)(d + i + 64), c);
        _mm256_storeu_si256((__m256i *)(void *)(d + i + 96), e);
    }
    memcpy(d + i, s + i, n - i);
}

static int have_avx2(void) {
    static _Atomic int known = -1; /* every thread that races here stores the same value */
    int k = atomic_load_explicit(&known, memory_order_relaxed);
    if (k < 0) {
        __builtin_cpu_init();
        k = __builtin_cpu_supports("avx2") ? 1 : 0;
        atomic_store_explicit(&known, k, memory_order_relaxed);
    }
    return k;
}

void areal_comm_copy(void *dst, const void *src, size_t n) {
    if (n >= LOOP_MIN && have_avx2())
        copy_avx2(dst, src, n);
    else
        memcpy(dst, src, n);
}
#else
void areal_comm_copy(void *dst, const void *src, size_t n) {
    memcpy(dst, src, n);
}
#endif
