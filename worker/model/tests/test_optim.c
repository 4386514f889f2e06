/*
 * test_optim.c - AdamW, global-norm clipping and the LR schedules against
 * torch.optim.AdamW, torch.nn.utils.clip_grad_norm_ and transformers'
 * schedulers (model/tests/fixtures/ref-optim.safetensors: three clipped
 * steps under a cosine warmup schedule), plus the schedule checks.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "areal/model/optim.h"
#include "model_ref_util.h"
#include "model_test_util.h"

static areal_st_file open_ref(void) {
    areal_st_file f;
    areal_error err;
    if (areal_st_open(FIX "ref-optim.safetensors", &f, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    return f;
}

static float *get(const areal_st_file *f, const char *name, size_t n) {
    size_t got = 0;
    float *v = ref_f32(f, name, &got);
    if (v == NULL)
        fail_msg("ref-optim has no %s", name);
    assert_int_equal(got, n);
    return v;
}

static void three_clipped_cosine_steps_match_torch(void **s) {
    (void)s;
    areal_st_file f = open_ref();
    size_t n = 0;
    float *p = ref_f32(&f, "p0", &n);
    assert_non_null(p);
    areal_adamw opt;
    areal_adamw_cfg cfg = {1e-2, 0.9, 0.95, 1e-8, 0.1};
    areal_lr_schedule sch = {AREAL_LR_COSINE, 1e-2, 2, 10, 0.0};
    assert_int_equal(areal_lr_schedule_check(&sch, NULL), AREAL_OK);
    assert_int_equal(areal_adamw_init(&opt, n, NULL), AREAL_OK);
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "grad%d", i);
        float *g = get(&f, name, n);
        snprintf(name, sizeof name, "norm%d", i);
        float *norm = get(&f, name, 1);
        double got = areal_clip_grad_norm(g, n, 1.0);
        assert_true(fabs(got - norm[0]) <= 1e-5 * norm[0]);
        areal_adamw_step(&opt, &cfg, areal_lr_at(&sch, i), p, g, NULL);
        snprintf(name, sizeof name, "p%d", i + 1);
        float *want = get(&f, name, n);
        double e = ref_rel_err(p, want, n);
        if (!(e <= 1e-6))
            fail_msg("step %d: parameters differ from torch by %.3g of their scale", i + 1, e);
        free(g);
        free(norm);
        free(want);
    }
    assert_int_equal(opt.step, 3);
    areal_adamw_free(&opt);
    free(p);
    areal_st_close(&f);
}

static void schedules_match_transformers(void **s) {
    (void)s;
    areal_st_file f = open_ref();
    struct {
        const char *name;
        areal_lr_kind kind;
    } k[] = {{"sched.constant", AREAL_LR_CONSTANT},
             {"sched.linear", AREAL_LR_LINEAR},
             {"sched.cosine", AREAL_LR_COSINE}};
    for (size_t i = 0; i < 3; i++) {
        float *want = get(&f, k[i].name, 12);
        areal_lr_schedule sch = {k[i].kind, 1.0, 3, 10, 0.0};
        for (long step = 0; step <= 10; step++) /* transformers' cosine rises again past total */
            if (fabs(areal_lr_at(&sch, step) - want[step]) > 1e-6)
                fail_msg("%s step %ld: %g, transformers %g", k[i].name, step,
                         areal_lr_at(&sch, step), want[step]);
        free(want);
    }
    areal_st_close(&f);
}

static void schedule_floor_and_checks(void **s) {
    (void)s;
    areal_lr_schedule sch = {AREAL_LR_COSINE, 2.0, 0, 4, 0.1};
    assert_true(fabs(areal_lr_at(&sch, 0) - 2.0) < 1e-12);
    assert_true(fabs(areal_lr_at(&sch, 4) - 0.2) < 1e-12);
    assert_true(fabs(areal_lr_at(&sch, 9) - 0.2) < 1e-12);
    areal_error err;
    areal_lr_schedule bad = {AREAL_LR_LINEAR, 1.0, 5, 5, 0.0};
    assert_int_equal(areal_lr_schedule_check(&bad, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "total_steps"));
    bad = (areal_lr_schedule){AREAL_LR_CONSTANT, 1.0, 0, 0, 1.5};
    assert_int_equal(areal_lr_schedule_check(&bad, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "min_lr_ratio"));
}

static void clip_leaves_small_gradients(void **s) {
    (void)s;
    float g[4] = {0.3f, 0.4f, 0.0f, 0.0f};
    assert_true(fabs(areal_clip_grad_norm(g, 4, 1.0) - 0.5) < 1e-7);
    assert_true(g[0] == 0.3f && g[1] == 0.4f);
    assert_true(fabs(areal_clip_grad_norm(g, 4, 0.25) - 0.5) < 1e-7);
    assert_true(fabs(sqrt(g[0] * g[0] + g[1] * g[1]) - 0.25) < 1e-5);
}

/*
 * The vectorised AdamW (optim.c, eight lanes on AVX2) must be bitwise the
 * scalar formula: torch's single-tensor update written out here element by
 * element, on a length with a scalar tail (1003) and chunks that start off
 * the 8-lane grid (the pool's ranges). The norm is checked against a long
 * double sum within 1e-12 (its lanes reorder the double sum).
 */
static void vector_adamw_is_the_scalar_formula_bitwise(void **s) {
    (void)s;
    enum { N = 1003 };
    static float p[N], g[N], pr[N], mr[N], vr[N];
    uint64_t x = 7;
    areal_adamw opt;
    areal_adamw_cfg cfg = {3e-3, 0.9, 0.95, 1e-8, 0.1};
    assert_int_equal(areal_adamw_init(&opt, N, NULL), AREAL_OK);
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        pr[i] = p[i] = (float)((x >> 40) % 2001) / 1000.0f - 1.0f;
        mr[i] = vr[i] = 0.0f;
    }
    for (int step = 1; step <= 3; step++) {
        long double ss = 0;
        for (int i = 0; i < N; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            g[i] = ((float)((x >> 40) % 2001) / 1000.0f - 1.0f) * 0.01f * (float)step;
            ss += (long double)g[i] * g[i];
        }
        double norm = areal_clip_grad_norm(g, N, 0.0); /* max_norm 0: measure only */
        assert_true(fabs(norm - (double)sqrtl(ss)) <= 1e-12 * norm);
        areal_adamw_step(&opt, &cfg, cfg.lr, p, g, NULL);
        float decay = (float)(1.0 - cfg.lr * cfg.weight_decay), b1 = 0.9f, b2 = 0.95f;
        float ssz = (float)(cfg.lr / (1.0 - pow(0.9, step)));
        float bc2 = (float)sqrt(1.0 - pow(0.95, step)), eps = 1e-8f;
        for (int i = 0; i < N; i++) {
            pr[i] *= decay;
            mr[i] = b1 * mr[i] + (1.0f - b1) * g[i];
            vr[i] = b2 * vr[i] + (1.0f - b2) * g[i] * g[i];
            float den = sqrtf(vr[i]) / bc2 + eps;
            pr[i] -= ssz * (mr[i] / den);
        }
        for (int i = 0; i < N; i++)
            if (p[i] != pr[i] || opt.m[i] != mr[i] || opt.v[i] != vr[i])
                fail_msg("step %d element %d: %.9g %.9g %.9g, scalar %.9g %.9g %.9g", step, i, p[i],
                         opt.m[i], opt.v[i], pr[i], mr[i], vr[i]);
    }
    areal_adamw_free(&opt);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(three_clipped_cosine_steps_match_torch),
        cmocka_unit_test(schedules_match_transformers),
        cmocka_unit_test(schedule_floor_and_checks),
        cmocka_unit_test(clip_leaves_small_gradients),
        cmocka_unit_test(vector_adamw_is_the_scalar_formula_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
