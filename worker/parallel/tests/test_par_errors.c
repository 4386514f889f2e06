/*
 * test_par_errors.c - the parallel layer's refusals, in one process: each
 * names what is wrong and what to set, and leaves nothing allocated.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "par_test_util.h"

static void load_stage(areal_model *m, int stage, int pp) {
    areal_model_shard sh;
    areal_error e;
    assert_int_equal(
        areal_model_shard_stage(&(areal_model_config){.num_layers = 2}, stage, pp, &sh, &e),
        AREAL_OK);
    if (areal_model_load_shard(m, PT_FIX "ref-qwen3", &sh, NULL, &e) != AREAL_OK)
        fail_msg("%s", e.msg);
}

static void hook_without_its_group(void **state) {
    (void)state;
    areal_par_groups g = {0};
    areal_error e;
    float x[4] = {0};
    assert_int_equal(areal_par_reduce(&g, AREAL_REDUCE_ATTN_OUT, 3, x, 4, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "layer 3"));
    assert_non_null(strstr(e.msg, "areal_par_groups.tp"));
    assert_int_equal(areal_par_reduce(&g, AREAL_REDUCE_MOE_GRAD, 0, x, 4, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "areal_par_groups.ep"));
}

static void pipeline_refusals(void **state) {
    (void)state;
    areal_model m;
    areal_error e;
    pt_batch b;
    load_stage(&m, 0, 2);
    pt_batch_make(&b, m.cfg.vocab_size);
    areal_batch whole = {
        .tokens = b.tokens, .cu_seqlens = b.cu, .n_tokens = b.T, .n_seqs = PT_SEQS};
    assert_int_equal(areal_par_pipe_1f1b(&m, NULL, &whole, 0, pt_loss_fn, NULL, NULL, &e),
                     AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "n_mb is 0"));
    /* stage 0 of 2 run without its pp group */
    assert_int_equal(areal_par_pipe_1f1b(&m, NULL, &whole, 1, pt_loss_fn, NULL, NULL, &e),
                     AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "stage 0 of 2"));
    assert_non_null(strstr(e.msg, "areal_par_shard_of"));
    /* the tied embedding's stage without the embedding group */
    areal_par_groups g = {0};
    assert_int_equal(areal_par_reduce_tied_embed(&m, &g, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "areal_par_groups.embed"));
    areal_model_free(&m);
}

static void zero1_for_another_model(void **state) {
    (void)state;
    areal_model a, b;
    areal_error e;
    areal_par_zero1 z;
    areal_par_groups g = {0};
    load_stage(&a, 0, 2);
    load_stage(&b, 1, 2);
    assert_int_equal(areal_par_zero1_init(&z, &a, NULL, &e), AREAL_OK);
    assert_int_equal(areal_par_zero1_step(&z, &b, &g, &PT_ADAMW, PT_LR, 0, &(double){0}, NULL, &e),
                     AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "init it for this model"));
    areal_par_zero1_free(&z);
    areal_model_free(&a);
    areal_model_free(&b);
}

/* One rank, no groups: ZeRO-1 over a dp of one is plain AdamW, bit for bit. */
static void zero1_alone_is_adamw(void **state) {
    (void)state;
    areal_model a, b;
    areal_error e;
    areal_par_zero1 z;
    areal_par_groups g = {0};
    areal_adamw st;
    load_stage(&a, 0, 1);
    load_stage(&b, 0, 1);
    for (size_t i = 0; i < a.n_params; i++)
        a.grads[i] = b.grads[i] = pt_hash_unit("grad", i);
    double norm = 0;
    assert_int_equal(areal_par_zero1_init(&z, &a, NULL, &e), AREAL_OK);
    assert_int_equal(areal_par_zero1_step(&z, &a, &g, &PT_ADAMW, PT_LR, 1.0, &norm, NULL, &e),
                     AREAL_OK);
    assert_int_equal(areal_adamw_init(&st, b.n_params, &e), AREAL_OK);
    double want = areal_clip_grad_norm(b.grads, b.n_params, 1.0);
    areal_adamw_step(&st, &PT_ADAMW, PT_LR, b.params, b.grads, NULL);
    assert_true(fabs(norm - want) <= 1e-6 * want);
    assert_memory_equal(a.params, b.params, sizeof(float) * a.n_params);
    areal_adamw_free(&st);
    areal_par_zero1_free(&z);
    areal_model_free(&a);
    areal_model_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hook_without_its_group),
        cmocka_unit_test(pipeline_refusals),
        cmocka_unit_test(zero1_for_another_model),
        cmocka_unit_test(zero1_alone_is_adamw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
