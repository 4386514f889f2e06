/*
 * test_par_ep.c - expert parallelism on forked ranks (CPU backend): each ep
 * rank holds its range of experts, the routed experts' sum and its input
 * gradient all-reduced over the ep group through the model's hook, the
 * router's gradient (partial: each rank's covers its own experts) summed over
 * ep, equal to one process (par_test_util.h: the harness and its
 * tolerances). The dispatch here is replicated (every ep rank routes every
 * token, the ep ranks hold one data shard together); the all-to-all dispatch
 * is test_par_ep_a2a.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "par_test_util.h"

/* Qwen3-MoE fixture: one MoE layer, one dense layer. */
static void e2_qwen3_moe(void **state) {
    (void)state;
    pt_layout L = {.name = "e2-q3moe",
                   .dp = 2,
                   .ep = 2,
                   .tp = 1,
                   .pp = 1,
                   .n_mb = 1,
                   .model = "ref-qwen3-moe"};
    assert_int_equal(pt_run(&L), 0);
}

/* Qwen2-MoE fixture: a gated shared expert beside the routed ones, two micro-batches. */
static void e2_qwen2_moe_shared(void **state) {
    (void)state;
    pt_layout L = {.name = "e2-q2moe",
                   .dp = 2,
                   .ep = 2,
                   .tp = 1,
                   .pp = 1,
                   .n_mb = 2,
                   .model = "ref-qwen2-moe"};
    assert_int_equal(pt_run(&L), 0);
}

/* Four experts over four ranks, one each. */
static void e4_qwen3_moe(void **state) {
    (void)state;
    pt_layout L = {.name = "e4-q3moe",
                   .dp = 4,
                   .ep = 4,
                   .tp = 1,
                   .pp = 1,
                   .n_mb = 1,
                   .model = "ref-qwen3-moe"};
    assert_int_equal(pt_run(&L), 0);
}

/* Experts over ep and the MoE model's two layers over two stages. */
static void e2p2_qwen3_moe(void **state) {
    (void)state;
    pt_layout L = {
        .name = "e2p2", .dp = 2, .ep = 2, .tp = 1, .pp = 2, .n_mb = 2, .model = "ref-qwen3-moe"};
    assert_int_equal(pt_run(&L), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(e2_qwen3_moe),
        cmocka_unit_test(e2_qwen2_moe_shared),
        cmocka_unit_test(e4_qwen3_moe),
        cmocka_unit_test(e2p2_qwen3_moe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
