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

static void adam_range(void *c, size_t b, size_t e) {
    adam_ctx *k = c;
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
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (double)grads[i] * grads[i];
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
