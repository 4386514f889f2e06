/*
 * test_model_grad_ready.c - the backward's gradient-ready hook
 * (areal_model_set_grad_ready) on the tiny HF fixtures (Qwen2 untied, Qwen3
 * tied with qk-norm, Qwen3-MoE), whole and as two pipeline stages:
 * - each reported range is final: its gradient, copied when reported, equals
 *   the gradient after the backward bit for bit (so a collective started on
 *   it then would reduce the final values);
 * - the reports are descending, disjoint, on tensor boundaries, and cover
 *   the whole buffer, except a pipeline's tied embedding (both stages);
 * - disarmed (or unset) the hook hears nothing and the gradients are those
 *   of a model with no hook, bit for bit.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "areal/model/model.h"
#include "areal/model/shard.h"
#include "model_test_util.h"

static const char *const CASES[] = {"ref-qwen2", "ref-qwen3", "ref-qwen3-moe"};
#define NCASES  3
#define MAX_REP 64

typedef struct reports {
    const areal_model *m;
    size_t lo[MAX_REP], hi[MAX_REP];
    float *copy[MAX_REP]; /* the range's gradient when reported */
    int n;
} reports;

static int on_ready(void *ctx, size_t lo, size_t hi, areal_error *err) {
    (void)err;
    reports *r = ctx;
    assert_true(r->n < MAX_REP);
    r->lo[r->n] = lo, r->hi[r->n] = hi;
    r->copy[r->n] = malloc(sizeof(float) * (hi - lo));
    assert_non_null(r->copy[r->n]);
    memcpy(r->copy[r->n], r->m->grads + lo, sizeof(float) * (hi - lo));
    r->n++;
    return AREAL_OK;
}

static void reports_free(reports *r) {
    for (int i = 0; i < r->n; i++)
        free(r->copy[i]);
    r->n = 0;
}

static void load(areal_model *m, const char *name, const areal_model_shard *s) {
    char dir[256];
    areal_error err;
    snprintf(dir, sizeof dir, FIX "%s", name);
    if (areal_model_load_shard(m, dir, s, NULL, &err) != AREAL_OK)
        fail_msg("%s: %s", dir, err.msg);
}

/* A small packed batch of three sequences. */
static const int32_t TOKENS[] = {1, 5, 9, 2, 7, 3, 3, 8, 4, 6, 1};
static const int32_t CU[] = {0, 4, 7, 11};
static const areal_batch BATCH = {.tokens = TOKENS, .cu_seqlens = CU, .n_tokens = 11, .n_seqs = 3};

static float *make_dlogits(int T, int V) {
    float *d = malloc(sizeof(float) * (size_t)T * V);
    assert_non_null(d);
    for (size_t i = 0; i < (size_t)T * V; i++)
        d[i] = 0.01f * (float)sin(0.37 * (double)i + 1.0);
    return d;
}

static int is_boundary(const areal_model *m, size_t x) {
    if (x == m->n_params)
        return 1;
    for (size_t i = 0; i < m->n_specs; i++)
        if (m->offset[i] == x)
            return 1;
    return 0;
}

/* The reports against the final gradient; `skip` floats at the start are the tied copy left out. */
static void check(const char *what, const areal_model *m, const reports *r, size_t skip) {
    size_t cur = m->n_params;
    assert_true(r->n > 0);
    for (int i = 0; i < r->n; i++) {
        if (r->hi[i] != cur || r->lo[i] >= r->hi[i] || !is_boundary(m, r->lo[i]))
            fail_msg("%s: report %d is [%zu, %zu), expected to end at %zu on tensor bounds", what,
                     i, r->lo[i], r->hi[i], cur);
        if (memcmp(r->copy[i], m->grads + r->lo[i], sizeof(float) * (r->hi[i] - r->lo[i])) != 0)
            fail_msg("%s: range [%zu, %zu) changed after it was reported ready", what, r->lo[i],
                     r->hi[i]);
        cur = r->lo[i];
    }
    if (cur != skip)
        fail_msg("%s: the reports end at %zu, expected %zu", what, cur, skip);
}

static size_t embed_floats(const areal_model *m) {
    return (size_t)m->cfg.vocab_size * (size_t)m->cfg.hidden_size;
}

static void whole_model_reports_every_range_final(void **state) {
    (void)state;
    for (int k = 0; k < NCASES; k++) {
        areal_model m, plain;
        areal_error err;
        load(&m, CASES[k], NULL);
        load(&plain, CASES[k], NULL);
        reports r = {.m = &m};
        areal_model_set_grad_ready(&m, on_ready, &r);
        areal_acts a, b;
        assert_int_equal(areal_model_forward(&m, &BATCH, &a, &err), AREAL_OK);
        assert_int_equal(areal_model_forward(&plain, &BATCH, &b, &err), AREAL_OK);
        float *dl = make_dlogits(a.T, a.V);
        /* two accumulated backwards: the first disarmed hears nothing */
        assert_int_equal(areal_model_backward(&m, &a, dl, &err), AREAL_OK);
        assert_int_equal(r.n, 0);
        areal_model_arm_grad_ready(&m, true);
        assert_int_equal(areal_model_backward(&m, &a, dl, &err), AREAL_OK);
        check(CASES[k], &m, &r, 0);
        assert_int_equal(areal_model_backward(&plain, &b, dl, &err), AREAL_OK);
        assert_int_equal(areal_model_backward(&plain, &b, dl, &err), AREAL_OK);
        assert_memory_equal(m.grads, plain.grads, sizeof(float) * m.n_params);
        reports_free(&r);
        free(dl);
        areal_acts_free(&a);
        areal_acts_free(&b);
        areal_model_free(&m);
        areal_model_free(&plain);
    }
}

static void stages_leave_out_the_tied_embedding(void **state) {
    (void)state;
    for (int k = 0; k < NCASES; k++) {
        areal_model s0, s1;
        areal_model_shard a0, a1;
        areal_error err;
        areal_model_config cfg;
        {
            areal_model w;
            load(&w, CASES[k], NULL);
            cfg = w.cfg;
            areal_model_free(&w);
        }
        assert_int_equal(areal_model_shard_stage(&cfg, 0, 2, &a0, NULL), AREAL_OK);
        assert_int_equal(areal_model_shard_stage(&cfg, 1, 2, &a1, NULL), AREAL_OK);
        load(&s0, CASES[k], &a0);
        load(&s1, CASES[k], &a1);
        reports r0 = {.m = &s0}, r1 = {.m = &s1};
        areal_model_set_grad_ready(&s0, on_ready, &r0);
        areal_model_set_grad_ready(&s1, on_ready, &r1);
        areal_model_arm_grad_ready(&s0, true);
        areal_model_arm_grad_ready(&s1, true);
        areal_acts x0, x1;
        assert_int_equal(areal_model_forward_stage(&s0, &BATCH, NULL, &x0, &err), AREAL_OK);
        assert_int_equal(areal_model_forward_stage(&s1, &BATCH, x0.hidden, &x1, &err), AREAL_OK);
        int T = BATCH.n_tokens, V = cfg.vocab_size, H = cfg.hidden_size;
        float *dl = make_dlogits(T, V), *dx = malloc(sizeof(float) * (size_t)T * H);
        assert_non_null(dx);
        assert_int_equal(areal_model_backward_stage(&s1, &x1, dl, dx, &err), AREAL_OK);
        assert_int_equal(areal_model_backward_stage(&s0, &x0, dx, NULL, &err), AREAL_OK);
        bool tied = cfg.tie_word_embeddings;
        char what[64];
        snprintf(what, sizeof what, "%s stage 0", CASES[k]);
        /* stage 0: embed | its layers; the tied embedding is not final yet */
        check(what, &s0, &r0, tied ? embed_floats(&s0) : 0);
        snprintf(what, sizeof what, "%s stage 1", CASES[k]);
        /* stage 1: (tied copy |) its layers | norm (| lm_head) */
        check(what, &s1, &r1, tied ? embed_floats(&s1) : 0);
        reports_free(&r0);
        reports_free(&r1);
        free(dl);
        free(dx);
        areal_acts_free(&x0);
        areal_acts_free(&x1);
        areal_model_free(&s0);
        areal_model_free(&s1);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(whole_model_reports_every_range_final),
        cmocka_unit_test(stages_leave_out_the_tied_embedding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
