/*
 * test_par_pp.c - pipeline parallelism on forked ranks (CPU backend): the
 * 1F1B schedule over the pp group, activations and their gradients sent
 * between stages, the tied embedding's two copies summed over the embedding
 * group, give one process's logits, loss, grad norm and update
 * (par_test_util.h: the harness and its tolerances).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "par_test_util.h"

/* Qwen3 fixture, tied: the first and last stage hold the embedding. */
static void p2_tied(void **state) {
    (void)state;
    pt_layout L = {.name = "p2-tied", .dp = 1, .tp = 1, .pp = 2, .n_mb = 4, .model = "ref-qwen3"};
    assert_int_equal(pt_run(&L), 0);
}

/* Qwen2 fixture, untied; fewer micro-batches than stages' warm-up would take. */
static void p2_one_mb(void **state) {
    (void)state;
    pt_layout L = {.name = "p2-mb1", .dp = 1, .tp = 1, .pp = 2, .n_mb = 1, .model = "ref-qwen2"};
    assert_int_equal(pt_run(&L), 0);
}

/* The synthetic 4-layer model, one layer a stage, 1F1B's steady state on every stage. */
static void p4(void **state) {
    (void)state;
    pt_layout L = {.name = "p4", .dp = 1, .tp = 1, .pp = 4, .n_mb = 8};
    assert_int_equal(pt_run(&L), 0);
}

/* m < p: stages in warm-up never reach the steady state. */
static void p4_two_mb(void **state) {
    (void)state;
    pt_layout L = {.name = "p4-mb2", .dp = 1, .tp = 1, .pp = 4, .n_mb = 2};
    assert_int_equal(pt_run(&L), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(p2_tied),
        cmocka_unit_test(p2_one_mb),
        cmocka_unit_test(p4),
        cmocka_unit_test(p4_two_mb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
