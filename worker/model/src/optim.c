/*
 * optim.c - AdamW, gradient clipping and LR schedules (see optim.h).
 *
 * AdamW follows torch's single-tensor path step for step, in fp32 where torch
 * is fp32: p *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps). The elements
 * are independent, so the update runs in chunks on the pool. The bias
 * corrections are computed once per step in double.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/optim.h"

int areal_adamw_init(areal_adamw *s, size_t n, areal_error *err) {
    memset(s, 0, sizeof *s);
    s->m = calloc(n ? n : 1, sizeof(float));
    s->v = calloc(n ? n : 1, sizeof(float));
    if (s->m == NULL || s->v == NULL) {
        areal_adamw_free(s);
        return areal_error_set(err, AREAL_ENOMEM, -1, "AdamW: no memory for %zu moments", n);
    }
    s->n = n;
    return AREAL_OK;
}

void areal_adamw_free(areal_adamw *s) {
    free(s->m);
    free(s->v);
    memset(s, 0, sizeof *s);
}

typedef struct adam_ctx {
    float *p, *m, *v;
    const float *g;
    float decay, b1, b2, step_size, bc2_sqrt, eps;
} adam_ctx;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OPT_X86 1
#include <immintrin.h>

static bool have_avx2(void) {
    static int known; /* 0 unknown, 1 no, 2 yes; a benign race: every thread computes the same */
    if (known == 0)
        known = __builtin_cpu_supports("avx2") ? 2 : 1;
    return known == 2;
}

/* adam_range's loop on [b, e) eight at a time; returns where the scalar tail starts. */
__attribute__((target("avx2"))) static size_t adam_avx2(const adam_ctx *k, size_t b, size_t e) {
    __m256 decay = _mm256_set1_ps(k->decay), b1 = _mm256_set1_ps(k->b1);
    __m256 b2 = _mm256_set1_ps(k->b2), c1 = _mm256_set1_ps(1.0f - k->b1);
    __m256 c2 = _mm256_set1_ps(1.0f - k->b2), ss = _mm256_set1_ps(k->step_size);
    __m256 bc = _mm256_set1_ps(k->bc2_sqrt), eps = _mm256_set1_ps(k->eps);
    size_t i = b;
    for (; i + 8 <= e; i += 8) {
        __m256 g = _mm256_loadu_ps(k->g + i);
        __m256 p = _mm256_mul_ps(_mm256_loadu_ps(k->p + i), decay);
        __m256 m =
            _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(k->m + i)), _mm256_mul_ps(c1, g));
        __m256 v = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(k->v + i)),
                                 _mm256_mul_ps(_mm256_mul_ps(c2, g), g));
        __m256 den = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), bc), eps);
        p = _mm256_sub_ps(p, _mm256_mul_ps(ss, _mm256_div_ps(m, den)));
        _mm256_storeu_ps(k->m + i, m);
        _mm256_storeu_ps(k->v + i, v);
        _mm256_storeu_ps(k->p + i, p);
    }
    return i;
}

/* sum of g[i]^2 over [0, n) in double, eight lanes then a fixed tree; the tail in order. */
__attribute__((target("avx2"))) static double sumsq_avx2(const float *g, size_t n) {
    __m256d lo = _mm256_setzero_pd(), hi = lo;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
        __m256d c = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
        lo = _mm256_add_pd(lo, _mm256_mul_pd(a, a));
        hi = _mm256_add_pd(hi, _mm256_mul_pd(c, c));
    }
    double l[8];
    _mm256_storeu_pd(l, lo);
    _mm256_storeu_pd(l + 4, hi);
    double s = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    for (; i < n; i++)
        s += (double)g[i] * g[i];
    return s;
}
#endif

/* The same sum, lane by lane (no AVX2): the very numbers sumsq_avx2 gives. */
static double sumsq_generic(const float *g, size_t n) {
    double l[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            l[j] += (double)g[i + j] * g[i + j];
    double s = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    for (; i < n; i++)
        s += (double)g[i] * g[i];
    return s;
}

static void adam_range(void *c, size_t b, size_t e) {
    adam_ctx *k = c;
#ifdef OPT_X86
    if (have_avx2())
        b = adam_avx2(k, b, e);
#endif
    for (size_t i = b; i < e; i++) {
        float g = k->g[i];
        k->p[i] *= k->decay;
        k->m[i] = k->b1 * k->m[i] + (1.0f - k->b1) * g;
        k->v[i] = k->b2 * k->v[i] + (1.0f - k->b2) * g * g;
        float denom = sqrtf(k->v[i]) / k->bc2_sqrt + k->eps;
        k->p[i] -= k->step_size * (k->m[i] / denom);
    }
}

void areal_adamw_step(areal_adamw *s, const areal_adamw_cfg *cfg, double lr, float *params,
                      const float *grads, areal_pool *pool) {
    s->step++;
    double bc1 = 1.0 - pow(cfg->beta1, (double)s->step);
    double bc2 = 1.0 - pow(cfg->beta2, (double)s->step);
    adam_ctx k = {params,
                  s->m,
                  s->v,
                  grads,
                  (float)(1.0 - lr * cfg->weight_decay),
                  (float)cfg->beta1,
                  (float)cfg->beta2,
                  (float)(lr / bc1),
                  (float)sqrt(bc2),
                  (float)cfg->eps};
    areal_pool_for(pool, s->n, 4096, adam_range, &k);
}

double areal_clip_grad_norm(float *grads, size_t n, double max_norm) {
#ifdef OPT_X86
    double ss = have_avx2() ? sumsq_avx2(grads, n) : sumsq_generic(grads, n);
#else
    double ss = sumsq_generic(grads, n);
#endif
    double norm = sqrt(ss);
    if (max_norm > 0 && norm > max_norm) {
        float c = (float)(max_norm / (norm + 1e-6));
        for (size_t i = 0; i < n; i++)
            grads[i] *= c;
    }
    return norm;
}

int areal_lr_schedule_check(const areal_lr_schedule *s, areal_error *err) {
    if (!(s->lr >= 0) || s->warmup_steps < 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "lr schedule: lr (%g) and warmup_steps (%ld) must be >= 0", s->lr,
                               s->warmup_steps);
    if (s->kind != AREAL_LR_CONSTANT && s->total_steps <= s->warmup_steps)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "lr schedule: total_steps (%ld) must exceed warmup_steps (%ld)",
                               s->total_steps, s->warmup_steps);
    if (!(s->min_lr_ratio >= 0 && s->min_lr_ratio <= 1))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "lr schedule: min_lr_ratio %g must be within [0, 1]",
                               s->min_lr_ratio);
    return AREAL_OK;
}

double areal_lr_at(const areal_lr_schedule *s, long step) {
    if (step < s->warmup_steps)
        return s->lr * (double)step / (double)(s->warmup_steps > 0 ? s->warmup_steps : 1);
    if (s->kind == AREAL_LR_CONSTANT)
        return s->lr;
    double prog = (double)(step - s->warmup_steps) / (double)(s->total_steps - s->warmup_steps);
    double f;
    if (s->kind == AREAL_LR_LINEAR)
        f = prog >= 1 ? 0.0 : 1.0 - prog;
    else
        f = prog >= 1 ? 0.0 : 0.5 * (1.0 + cos(M_PI * prog));
    if (f < 0)
        f = 0;
    return s->lr * (s->min_lr_ratio + (1.0 - s->min_lr_ratio) * f);
}
