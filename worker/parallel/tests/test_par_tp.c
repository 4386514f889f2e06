/*
 * test_par_tp.c - tensor parallelism on forked ranks (CPU backend): the
 * model's reduction hook bound to the tp group's all-reduce and the qk-norm
 * gradients summed over tp give one process's logits, loss, grad norm and
 * AdamW update (par_test_util.h: the harness and its tolerances).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "par_test_util.h"

/* Qwen2 fixture: qkv biases split with their heads. */
static void t2_qwen2(void **state) {
    (void)state;
    pt_layout L = {.name = "t2-qwen2", .dp = 1, .tp = 2, .pp = 1, .n_mb = 1, .model = "ref-qwen2"};
    assert_int_equal(pt_run(&L), 0);
}

/* The mean-token-NLL step (SFT's loss). */
static void t2_qwen2_nll(void **state) {
    (void)state;
    pt_layout L = {
        .name = "t2-nll", .dp = 1, .tp = 2, .pp = 1, .n_mb = 1, .model = "ref-qwen2", .nll = 1};
    assert_int_equal(pt_run(&L), 0);
}

/* Qwen3 fixture: qk-norm (partial over tp), tied embedding. */
static void t2_qwen3(void **state) {
    (void)state;
    pt_layout L = {.name = "t2-qwen3", .dp = 1, .tp = 2, .pp = 1, .n_mb = 2, .model = "ref-qwen3"};
    assert_int_equal(pt_run(&L), 0);
}

/* The synthetic model: 8 query heads over 4 key/value heads, 2 and 1 per rank. */
static void t4_gqa(void **state) {
    (void)state;
    pt_layout L = {.name = "t4-gqa", .dp = 1, .tp = 4, .pp = 1, .n_mb = 1};
    assert_int_equal(pt_run(&L), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t2_qwen2),
        cmocka_unit_test(t2_qwen2_nll),
        cmocka_unit_test(t2_qwen3),
        cmocka_unit_test(t4_gqa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
