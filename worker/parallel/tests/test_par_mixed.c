/*
 * test_par_mixed.c - combined layouts on forked ranks (CPU backend): tensor,
 * data and pipeline parallelism at once, the groups built by the comm
 * runtime in Megatron's order, equal to one process (par_test_util.h: the
 * harness and its tolerances); and the harness's own check, which must see a
 * layout that leaves out a reduction.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "par_test_util.h"

static void d2t2(void **state) {
    (void)state;
    pt_layout L = {.name = "d2t2", .dp = 2, .tp = 2, .pp = 1, .n_mb = 1, .model = "ref-qwen3"};
    assert_int_equal(pt_run(&L), 0);
}

static void t2p2(void **state) {
    (void)state;
    pt_layout L = {.name = "t2p2", .dp = 1, .tp = 2, .pp = 2, .n_mb = 3};
    assert_int_equal(pt_run(&L), 0);
}

/* Eight ranks: the synthetic model's 4 layers in 2 stages, 4 and 2 heads a tp rank. */
static void d2p2t2(void **state) {
    (void)state;
    pt_layout L = {.name = "d2p2t2", .dp = 2, .tp = 2, .pp = 2, .n_mb = 2};
    assert_int_equal(pt_run(&L), 0);
}

static void d2p2t2_zero1(void **state) {
    (void)state;
    pt_layout L = {.name = "d2p2t2-z1", .dp = 2, .tp = 2, .pp = 2, .n_mb = 2, .zero1 = 1};
    assert_int_equal(pt_run(&L), 0);
}

/* Without the qk-norm gradients' sum over tp the harness reports the ranks wrong. */
static void a_missing_reduction_is_seen(void **state) {
    (void)state;
    pt_layout L = {.name = "t2-broken",
                   .dp = 1,
                   .tp = 2,
                   .pp = 1,
                   .n_mb = 1,
                   .model = "ref-qwen3",
                   .skip_partial = 1};
    assert_int_equal(pt_run(&L), RANK_WRONG);
}

/* d2p2t2 with the dp sum overlapped: the tp-partial and tied tensors wait for finish. */
static void d2p2t2_overlap(void **state) {
    (void)state;
    pt_layout L = {.name = "d2p2t2-ovl", .dp = 2, .tp = 2, .pp = 2, .n_mb = 2, .overlap = 1};
    assert_int_equal(pt_run(&L), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(d2t2),           cmocka_unit_test(t2p2),
        cmocka_unit_test(d2p2t2),         cmocka_unit_test(d2p2t2_zero1),
        cmocka_unit_test(d2p2t2_overlap), cmocka_unit_test(a_missing_reduction_is_seen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
