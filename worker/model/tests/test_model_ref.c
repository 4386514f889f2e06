/*
 * test_model_ref.c - the CPU fp32 model against PyTorch/transformers on tiny
 * random Qwen2, Qwen3 (tied), Qwen3-MoE, Qwen2-MoE (shared expert) and Llama
 * (tied, llama3 rope scaling) models:
 * logits, logprobs and entropy (temperature 1 and 0.7), mean cross-entropy,
 * the gradient of every parameter, and one AdamW step, each within 1e-4 of
 * the reference's scale; the threaded path equals the serial one; and a
 * second backward doubles the gradients (accumulation).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "areal/model/heads.h"
#include "areal/model/model.h"
#include "areal/model/optim.h"
#include "model_ref_util.h"
#include "model_test_util.h"

#define TOL 1e-4

typedef struct ref_case {
    areal_model m;
    areal_st_file ref;
    areal_pool *pool;
    int32_t *tokens, *cu, *targets;
    int T, n_seqs;
    double worst; /* largest scaled error seen */
} ref_case;

static void open_case(ref_case *c, const char *name, int threads) {
    char dir[256], file[300];
    areal_error err;
    snprintf(dir, sizeof dir, FIX "%s", name);
    snprintf(file, sizeof file, "%s/ref.safetensors", dir);
    c->pool = NULL;
    c->worst = 0;
    if (threads > 1 && areal_pool_create(threads, &c->pool, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    if (areal_model_load(&c->m, dir, c->pool, &err) != AREAL_OK)
        fail_msg("%s: %s", dir, err.msg);
    if (areal_st_open(file, &c->ref, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    size_t n = 0, ns = 1;
    c->tokens = ref_i32(&c->ref, "tokens", &n);
    c->cu = ref_i32(&c->ref, "cu_seqlens", &ns);
    c->targets = ref_i32(&c->ref, "targets", NULL);
    assert_non_null(c->tokens);
    assert_non_null(c->cu);
    assert_non_null(c->targets);
    c->T = (int)n;
    c->n_seqs = (int)ns - 1;
}

static void close_case(ref_case *c) {
    free(c->tokens);
    free(c->cu);
    free(c->targets);
    areal_st_close(&c->ref);
    areal_model_free(&c->m);
    areal_pool_destroy(c->pool);
}

static void expect_close(ref_case *c, const char *what, const float *got, size_t n) {
    size_t rn = 0;
    float *want = ref_f32(&c->ref, what, &rn);
    if (want == NULL)
        fail_msg("reference has no %s", what);
    assert_int_equal(rn, n);
    double e = ref_rel_err(got, want, n);
    free(want);
    if (e > c->worst)
        c->worst = e;
    if (!(e <= TOL))
        fail_msg("%s: %s differs from PyTorch by %.3g of its scale (limit %g)", c->m.cfg.model_type,
                 what, e, TOL);
}

/* forward + CE + backward into c->m.grads; returns the loss; logits via *acts. */
static double run_step(ref_case *c, areal_acts *acts) {
    areal_error err;
    areal_batch b = {c->tokens, c->cu, c->T, c->n_seqs};
    if (areal_model_forward(&c->m, &b, acts, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    int V = c->m.cfg.vocab_size;
    float *dlogits = malloc(sizeof(float) * (size_t)c->T * V);
    assert_non_null(dlogits);
    double loss;
    assert_int_equal(
        areal_cross_entropy(c->pool, acts->logits, c->T, V, c->targets, &loss, dlogits, &err),
        AREAL_OK);
    if (areal_model_backward(&c->m, acts, dlogits, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    free(dlogits);
    return loss;
}

static void check_arch(const char *name, int threads) {
    ref_case c;
    open_case(&c, name, threads);
    areal_acts acts;
    double loss = run_step(&c, &acts);
    int V = c.m.cfg.vocab_size;
    expect_close(&c, "logits", acts.logits, (size_t)c.T * V);
    float fl = (float)loss;
    expect_close(&c, "loss", &fl, 1);
    float *lp = malloc(sizeof(float) * (size_t)c.T * 2), *ent = lp + c.T;
    assert_non_null(lp);
    areal_token_logprobs(c.pool, acts.logits, c.T, V, c.targets, 1.0f, lp, ent);
    expect_close(&c, "logprobs", lp, (size_t)c.T);
    expect_close(&c, "entropy", ent, (size_t)c.T);
    areal_token_logprobs(c.pool, acts.logits, c.T, V, c.targets, 0.7f, lp, ent);
    expect_close(&c, "logprobs_t07", lp, (size_t)c.T);
    expect_close(&c, "entropy_t07", ent, (size_t)c.T);
    free(lp);
    int checked = 0;
    for (size_t i = 0; i < c.m.n_specs; i++) {
        char key[AREAL_TENSOR_NAME_MAX + 8];
        snprintf(key, sizeof key, "grad.%s", c.m.specs[i].name);
        size_t n = (i + 1 < c.m.n_specs ? c.m.offset[i + 1] : c.m.n_params) - c.m.offset[i];
        expect_close(&c, key, c.m.grads + c.m.offset[i], n);
        checked++;
    }
    assert_int_equal(checked, (int)c.m.n_specs);
    /* one AdamW step from fresh state, as torch.optim.AdamW took it */
    areal_adamw opt;
    areal_adamw_cfg ac = {1e-2, 0.9, 0.95, 1e-8, 0.1};
    assert_int_equal(areal_adamw_init(&opt, c.m.n_params, NULL), AREAL_OK);
    areal_adamw_step(&opt, &ac, ac.lr, c.m.params, c.m.grads, c.pool);
    const char *upd[] = {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                         "model.layers.1.post_attention_layernorm.weight", "model.norm.weight"};
    for (size_t k = 0; k < sizeof upd / sizeof upd[0]; k++) {
        int i = areal_model_find(&c.m, upd[k]);
        assert_true(i >= 0);
        char key[AREAL_TENSOR_NAME_MAX + 8];
        snprintf(key, sizeof key, "adamw.%s", upd[k]);
        size_t n =
            (size_t)(c.m.specs[i].shape[0] * (c.m.specs[i].ndim == 2 ? c.m.specs[i].shape[1] : 1));
        expect_close(&c, key, c.m.params + c.m.offset[i], n);
    }
    areal_adamw_free(&opt);
    areal_acts_free(&acts);
    print_message("%s (%d threads): %zu parameters, worst scaled error %.2e\n", name, threads,
                  c.m.n_params, c.worst);
    close_case(&c);
}

static void qwen2_matches_torch(void **s) {
    (void)s;
    check_arch("ref-qwen2", 1);
}
static void qwen3_tied_matches_torch(void **s) {
    (void)s;
    check_arch("ref-qwen3", 1);
}
static void qwen3_moe_matches_torch(void **s) {
    (void)s;
    check_arch("ref-qwen3-moe", 1);
}
static void qwen2_moe_shared_matches_torch(void **s) {
    (void)s;
    check_arch("ref-qwen2-moe", 1);
}
static void llama_rope_scaling_matches_torch(void **s) {
    (void)s;
    check_arch("ref-llama", 1);
}
static void threaded_matches_torch(void **s) {
    (void)s;
    check_arch("ref-qwen3-moe", 3);
    check_arch("ref-qwen2", 2);
}

/* Two backward passes without zeroing add up: gradients double. */
static void gradients_accumulate(void **s) {
    (void)s;
    ref_case c;
    open_case(&c, "ref-qwen3", 1);
    areal_acts a1, a2;
    run_step(&c, &a1);
    float *once = malloc(sizeof(float) * c.m.n_params);
    assert_non_null(once);
    memcpy(once, c.m.grads, sizeof(float) * c.m.n_params);
    run_step(&c, &a2);
    for (size_t i = 0; i < c.m.n_params; i++)
        once[i] *= 2.0f;
    assert_true(ref_rel_err(c.m.grads, once, c.m.n_params) < 1e-6);
    areal_model_zero_grad(&c.m);
    for (size_t i = 0; i < c.m.n_params; i++)
        assert_true(c.m.grads[i] == 0.0f);
    free(once);
    areal_acts_free(&a1);
    areal_acts_free(&a2);
    close_case(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(qwen2_matches_torch),
        cmocka_unit_test(qwen3_tied_matches_torch),
        cmocka_unit_test(qwen3_moe_matches_torch),
        cmocka_unit_test(qwen2_moe_shared_matches_torch),
        cmocka_unit_test(llama_rope_scaling_matches_torch),
        cmocka_unit_test(threaded_matches_torch),
        cmocka_unit_test(gradients_accumulate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
