/*
 * k_softmax.c - the vocabulary-wide reductions of next-token sampling
 * (sampler.c): the maximum of a logits row and the sum of exp(x * scale -
 * shift) over it, with the terms kept for the draw.
 *
 * Why: at 128 concurrent requests the sampler's scalar double exp over the
 * 8,192-id vocabulary, taken twice per token (once for the sum, once again
 * while scanning for the draw), was a tenth of the rollout server's CPU time
 * (perf on the engine bench), more than all of attention. Here exp is a
 * float polynomial (k_vexp.h: Cephes' expf, about 1 ulp), eight lanes at a
 * time, and the sum is
 * taken in double in a fixed lane order, so the log-sum-exp keeps its
 * accuracy (the relative error of a term is ~1e-7, far below the 1e-5 the
 * logprobs are held to) and the result depends on nothing but the row.
 *
 * The scalar path (no AVX2, and the tail of a row) runs the same operations
 * lane by lane (fmaf where the vector code fuses), so every build on every
 * machine draws the same tokens. Inputs below -87.3 (exp underflows float's
 * normal range) give exactly 0, as the double exp of the old path rounded
 * to float would.
 */
#include <math.h>

#include "k_vexp.h"
#include "kernels.h"

/* The fixed reduction tree of the eight double lanes. */
static double lanes_sum(const double a[8]) {
    double s0 = a[0] + a[4], s1 = a[1] + a[5], s2 = a[2] + a[6], s3 = a[3] + a[7];
    return (s0 + s2) + (s1 + s3);
}

static float max_generic(const float *x, int n) {
    float m = -INFINITY;
    for (int j = 0; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

static double exp_sum_generic(float *e, const float *x, float scale, float shift, int n) {
    double acc[8] = {0};
    int n8 = n & ~7;
    for (int j = 0; j < n8; j++) {
        float v = exp_lane(x[j] * scale - shift);
        if (e != NULL)
            e[j] = v;
        acc[j & 7] += (double)v;
    }
    double s = lanes_sum(acc);
    for (int j = n8; j < n; j++) {
        float v = exp_lane(x[j] * scale - shift);
        if (e != NULL)
            e[j] = v;
        s += (double)v;
    }
    return s;
}

#ifdef KV_HAVE_X86
#define AVX __attribute__((target("avx2,fma")))

AVX static float max_avx2(const float *x, int n) {
    __m256 m = _mm256_set1_ps(-INFINITY);
    int j = 0;
    for (; j + 8 <= n; j += 8)
        m = _mm256_max_ps(_mm256_loadu_ps(x + j), m);
    float l[8];
    _mm256_storeu_ps(l, m);
    float r = max_generic(l, 8);
    for (; j < n; j++)
        r = x[j] > r ? x[j] : r;
    return r;
}

AVX static double exp_sum_avx2(float *e, const float *x, float scale, float shift, int n) {
    __m256 sc = _mm256_set1_ps(scale), sh = _mm256_set1_ps(shift);
    __m256d lo = _mm256_setzero_pd(), hi = lo;
    int n8 = n & ~7;
    for (int j = 0; j < n8; j += 8) {
        __m256 v = exp_avx2(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j), sc), sh));
        if (e != NULL)
            _mm256_storeu_ps(e + j, v);
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    double acc[8];
    _mm256_storeu_pd(acc, lo);
    _mm256_storeu_pd(acc + 4, hi);
    double s = lanes_sum(acc);
    for (int j = n8; j < n; j++) {
        float v = exp_lane(x[j] * scale - shift);
        if (e != NULL)
            e[j] = v;
        s += (double)v;
    }
    return s;
}

#endif

float k_max(const float *x, int n) {
#ifdef KV_HAVE_X86
    if (kv_have_avx2())
        return max_avx2(x, n);
#endif
    return max_generic(x, n);
}

double k_exp_sum(float *e, const float *x, float scale, float shift, int n) {
#ifdef KV_HAVE_X86
    if (kv_have_avx2())
        return exp_sum_avx2(e, x, scale, shift, n);
#endif
    return exp_sum_generic(e, x, scale, shift, n);
}
