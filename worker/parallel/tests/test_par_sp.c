/*
 * test_par_sp.c - sequence parallelism on forked ranks (CPU backend): norms
 * and residuals on each tp rank's rows of the packed batch, all-gather
 * before the column-parallel layers and reduce-scatter after the
 * row-parallel ones, give one process's logits, loss, grad norm and update
 * (par_test_util.h: the harness and its tolerances). Micro-batches of odd
 * token counts exercise the padded last block.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "par_test_util.h"

/* Qwen2 fixture: qkv biases, untied; 47 tokens over 2 ranks (24 + 23 rows). */
static void t2_sp(void **state) {
    (void)state;
    pt_layout L = {
        .name = "t2-sp", .dp = 1, .tp = 2, .pp = 1, .n_mb = 1, .model = "ref-qwen2", .sp = 1};
    assert_int_equal(pt_run(&L), 0);
}

/* Qwen3 fixture: qk-norm, tied, two micro-batches; with the vocab-parallel head and loss. */
static void t2_sp_vocab(void **state) {
    (void)state;
    pt_layout L = {.name = "t2-sp-vp",
                   .dp = 1,
                   .tp = 2,
                   .pp = 1,
                   .n_mb = 2,
                   .model = "ref-qwen3",
                   .sp = 1,
                   .vocab = 1};
    assert_int_equal(pt_run(&L), 0);
}

/* The synthetic model: 4 ranks' blocks of 12 rows (the last one 11). */
static void t4_sp(void **state) {
    (void)state;
    pt_layout L = {.name = "t4-sp", .dp = 1, .tp = 4, .pp = 1, .n_mb = 1, .sp = 1, .vocab = 1};
    assert_int_equal(pt_run(&L), 0);
}

/* With a pipeline and dp: stages pass whole buffers of which each rank reads its rows. */
static void d2t2p2_sp(void **state) {
    (void)state;
    pt_layout L = {.name = "d2t2p2-sp", .dp = 2, .tp = 2, .pp = 2, .n_mb = 2, .sp = 1};
    assert_int_equal(pt_run(&L), 0);
}

/*
 * The norms' gradients cover only each rank's rows: left unsummed, the
 * harness sees the ranks wrong (Qwen2 has no qk-norm, so this fails only if
 * the rows really are split).
 */
static void unsummed_norm_grads_are_seen(void **state) {
    (void)state;
    pt_layout L = {.name = "t2-sp-broken",
                   .dp = 1,
                   .tp = 2,
                   .pp = 1,
                   .n_mb = 1,
                   .model = "ref-qwen2",
                   .sp = 1,
                   .skip_partial = 1};
    assert_int_equal(pt_run(&L), RANK_WRONG);
}

/* A MoE model is refused, naming the option. */
static void sp_refuses_moe(void **state) {
    (void)state;
    areal_model_config cfg = {.num_layers = 2,
                              .num_heads = 4,
                              .num_kv_heads = 2,
                              .intermediate_size = 8,
                              .vocab_size = 96,
                              .num_experts = 4};
    areal_model_shard s = areal_model_shard_whole(&cfg);
    s.tp = 2, s.sequence_parallel = true;
    areal_error e;
    assert_int_equal(areal_model_shard_check(&cfg, &s, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "sequence_parallel"));
    int lo, hi;
    s.tp_rank = 1;
    areal_model_sp_rows(&s, 47, &lo, &hi);
    assert_int_equal(lo, 24);
    assert_int_equal(hi, 47);
    s.tp = 4, s.tp_rank = 3;
    areal_model_sp_rows(&s, 5, &lo, &hi); /* blocks of 2: the last rank has none */
    assert_int_equal(lo, 5);
    assert_int_equal(hi, 5);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t2_sp),
        cmocka_unit_test(t2_sp_vocab),
        cmocka_unit_test(t4_sp),
        cmocka_unit_test(d2t2p2_sp),
        cmocka_unit_test(unsummed_norm_grads_are_seen),
        cmocka_unit_test(sp_refuses_moe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
