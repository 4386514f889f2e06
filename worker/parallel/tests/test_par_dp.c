/*
 * test_par_dp.c - data parallelism on forked ranks (CPU backend): each dp
 * rank trains on its own sequences (unequal token counts), the GRPO loss
 * aggregated over the global valid-token count (or the NLL over the global
 * target count); the gradients summed over dp (bucketed
 * all-reduce) or reduce-scattered into ZeRO-1 shards with sharded AdamW and
 * all-gathered parameters give one process's loss, grad norm and update
 * (par_test_util.h: the harness and its tolerances).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "par_test_util.h"

static void d2(void **state) {
    (void)state;
    pt_layout L = {.name = "d2", .dp = 2, .tp = 1, .pp = 1, .n_mb = 1, .model = "ref-qwen2"};
    assert_int_equal(pt_run(&L), 0);
}

/* The mean-token-NLL step (SFT's loss) on the same layout. */
static void d2_nll(void **state) {
    (void)state;
    pt_layout L = {
        .name = "d2-nll", .dp = 2, .tp = 1, .pp = 1, .n_mb = 1, .model = "ref-qwen2", .nll = 1};
    assert_int_equal(pt_run(&L), 0);
}

/* Two micro-batches per rank accumulate before the reduction. */
static void d2_accumulated(void **state) {
    (void)state;
    pt_layout L = {.name = "d2-mb2", .dp = 2, .tp = 1, .pp = 1, .n_mb = 2, .model = "ref-qwen3"};
    assert_int_equal(pt_run(&L), 0);
}

static void d2_zero1(void **state) {
    (void)state;
    pt_layout L = {
        .name = "d2-zero1", .dp = 2, .tp = 1, .pp = 1, .n_mb = 1, .zero1 = 1, .model = "ref-qwen3"};
    assert_int_equal(pt_run(&L), 0);
}

/* Four ranks of two sequences each: the padded shard of the last rank. */
static void d4_zero1(void **state) {
    (void)state;
    pt_layout L = {.name = "d4-zero1", .dp = 4, .tp = 1, .pp = 1, .n_mb = 1, .zero1 = 1};
    assert_int_equal(pt_run(&L), 0);
}

/* The dp sum overlapped with the backward (the trainer's megatron dN): two
 * micro-batches, the hook armed on the last; buckets must really launch inside it. */
static void d2_overlap(void **state) {
    (void)state;
    pt_layout L = {.name = "d2-overlap",
                   .dp = 2,
                   .tp = 1,
                   .pp = 1,
                   .n_mb = 2,
                   .model = "ref-qwen3",
                   .overlap = 1};
    assert_int_equal(pt_run(&L), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(d2),       cmocka_unit_test(d2_nll),   cmocka_unit_test(d2_accumulated),
        cmocka_unit_test(d2_zero1), cmocka_unit_test(d4_zero1), cmocka_unit_test(d2_overlap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
