/*
 * k_vexp.h - exp as a float polynomial, one lane (exp_lane) and eight
 * (exp_avx2, x86 with AVX2+FMA), the same operations in both so the scalar
 * tail of a row and a machine without AVX2 get the very numbers the vector
 * body does (internal to the kernels that take exp over whole rows:
 * k_softmax.c, the sampler's; k_swiglu.c, the inference activation).
 *
 * Cephes' expf: clamp, n = floor(x log2 e + 1/2), r = x - n ln 2 (ln 2 in
 * two parts), a degree-5 polynomial, times 2^n built in the exponent field;
 * about 1 ulp. Below -87.3 (2^-126, float's smallest normal) it returns
 * exactly 0; above 88 it returns exp(88) (finite: 2^n stays below 2^128).
 */
#ifndef AREAL_MODEL_K_VEXP_H
#define AREAL_MODEL_K_VEXP_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KV_HAVE_X86 1
#include <immintrin.h>
#endif

#define KV_EXP_LO (-87.3365447f) /* below: 0 (2^-126 and under) */
#define KV_EXP_HI 88.0f
#define KV_LOG2E  1.44269504088896341f
#define KV_C1     0.693359375f
#define KV_C2     (-2.12194440e-4f)
#define KV_P0     1.9875691500e-4f
#define KV_P1     1.3981999507e-3f
#define KV_P2     8.3334519073e-3f
#define KV_P3     4.1665795894e-2f
#define KV_P4     1.6666665459e-1f
#define KV_P5     5.0000001201e-1f

/* The lane arithmetic of exp_avx2, one lane. */
static inline float exp_lane(float x) {
    if (x < KV_EXP_LO)
        return 0.0f;
    x = x > KV_EXP_HI ? KV_EXP_HI : x;
    float n = floorf(__builtin_fmaf(x, KV_LOG2E, 0.5f));
    float r = __builtin_fmaf(n, -KV_C1, x);
    r = __builtin_fmaf(n, -KV_C2, r);
    float y = KV_P0;
    y = __builtin_fmaf(y, r, KV_P1);
    y = __builtin_fmaf(y, r, KV_P2);
    y = __builtin_fmaf(y, r, KV_P3);
    y = __builtin_fmaf(y, r, KV_P4);
    y = __builtin_fmaf(y, r, KV_P5);
    y = __builtin_fmaf(y, r * r, r + 1.0f);
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return y * scale;
}

#ifdef KV_HAVE_X86
__attribute__((target("avx2,fma"))) static inline __m256 exp_avx2(__m256 x) {
    __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(KV_EXP_LO), _CMP_LT_OQ);
    x = _mm256_min_ps(x, _mm256_set1_ps(KV_EXP_HI));
    __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(KV_LOG2E), _mm256_set1_ps(0.5f)));
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-KV_C1), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-KV_C2), r);
    __m256 y = _mm256_set1_ps(KV_P0);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(KV_P1));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(KV_P2));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(KV_P3));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(KV_P4));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(KV_P5));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* n is >= -126 unless under (then masked), so the exponent field is valid */
    __m256i bits =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
    return _mm256_andnot_ps(under, y);
}

static inline bool kv_have_avx2(void) {
    static int known; /* 0 unknown, 1 no, 2 yes; a benign race: every thread computes the same */
    if (known == 0)
        known = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 2 : 1;
    return known == 2;
}
#endif

#endif
