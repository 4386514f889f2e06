/*
 * test_gpu_paged.c - the plan of an engine step on the GPU decode step
 * (areal/gpumodel/paged.h), on the CPU: a decoding sequence, a prefill
 * chunk and a chunk that crosses a block boundary in one step, split into
 * sub-steps in the sequences' order with the positions, tables and logits
 * slots the engine's areal_model_step_paged call implies; and the refusals
 * (each naming what is wrong).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "areal/gpumodel/paged.h"

static void three_sequences(void **st) {
    (void)st;
    /* A: one token at 20 (decode); B: a 5-token prefill from 0; C: 3 tokens from 15 (crosses 16) */
    const int32_t tA[2] = {7, 9}, tB[1] = {3}, tC[2] = {4, 5};
    areal_paged_seq seqs[3] = {{tA, 2, 20}, {tB, 1, 0}, {tC, 2, 15}};
    int32_t tokens[9] = {100, 200, 201, 202, 203, 204, 300, 301, 302};
    int32_t cu[4] = {0, 1, 6, 9};
    int32_t out_rows[4] = {0, 5, 8, 2}; /* each last row, and a scoring row of B (its second) */
    areal_gpu_kv_cfg kv = {4, 16, 32, 3};
    areal_gpu_paged_plan p;
    areal_error e;
    assert_int_equal(areal_gpu_paged_plan_make(tokens, cu, seqs, 3, out_rows, 4, &kv, &p, &e),
                     AREAL_OK);
    assert_int_equal(p.n_sub, 5);
    assert_int_equal(p.rows, 9);
    const int off[6] = {0, 3, 5, 7, 8, 9};
    for (int j = 0; j <= 5; j++)
        assert_int_equal(p.sub_off[j], off[j]);
    /* sub-step rows: (seq, token, position, slot) */
    const int want[9][4] = {{0, 100, 20, 0}, {1, 200, 0, -1},  {2, 300, 15, -1},
                            {1, 201, 1, 3},  {2, 301, 16, -1}, {1, 202, 2, -1},
                            {2, 302, 17, 2}, {1, 203, 3, -1},  {1, 204, 4, 1}};
    for (int i = 0; i < 9; i++) {
        assert_int_equal(p.seq[i], want[i][0]);
        assert_int_equal(p.tok[i], want[i][1]);
        assert_int_equal(p.pos[i], want[i][2]);
        assert_int_equal(p.slot[i], want[i][3]);
    }
    /* tables: the sequence's blocks, padded with its first block to max_blocks entries */
    const int32_t *t0 = p.table, *t2 = p.table + 2 * 3, *t1 = p.table + 1 * 3;
    assert_int_equal(t0[0], 7), assert_int_equal(t0[1], 9), assert_int_equal(t0[2], 7);
    assert_int_equal(t1[0], 3), assert_int_equal(t1[1], 3), assert_int_equal(t1[2], 3);
    assert_int_equal(t2[0], 4), assert_int_equal(t2[1], 5), assert_int_equal(t2[2], 4);
    areal_gpu_paged_plan_free(&p);
    /* no logits wanted at all (a pure prefill step): no slot anywhere */
    assert_int_equal(areal_gpu_paged_plan_make(tokens, cu, seqs, 3, NULL, 0, &kv, &p, &e),
                     AREAL_OK);
    for (int i = 0; i < p.rows; i++)
        assert_int_equal(p.slot[i], -1);
    areal_gpu_paged_plan_free(&p);
}

static void refusals(void **st) {
    (void)st;
    const int32_t tb[1] = {0};
    areal_paged_seq seqs[2] = {{tb, 1, 0}, {tb, 1, 14}};
    int32_t tokens[4] = {1, 2, 3, 4}, cu[3] = {0, 1, 4};
    int32_t rep[2] = {3, 3}, bad[1] = {4};
    areal_gpu_kv_cfg kv = {1, 16, 8, 2};
    areal_gpu_paged_plan p;
    areal_error e;
    /* two sequences for a cache of max_batch 1 */
    assert_int_equal(areal_gpu_paged_plan_make(tokens, cu, seqs, 2, NULL, 0, &kv, &p, &e),
                     AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "max_batch"));
    kv.max_batch = 2;
    /* the second sequence reaches position 16 with one block of 16 */
    assert_int_equal(areal_gpu_paged_plan_make(tokens, cu, seqs, 2, NULL, 0, &kv, &p, &e),
                     AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "cover position 16"));
    seqs[1].start = 12;
    assert_int_equal(areal_gpu_paged_plan_make(tokens, cu, seqs, 2, rep, 2, &kv, &p, &e),
                     AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "repeats"));
    assert_int_equal(areal_gpu_paged_plan_make(tokens, cu, seqs, 2, bad, 1, &kv, &p, &e),
                     AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "not a row"));
    int32_t empty[3] = {0, 1, 1};
    assert_int_equal(areal_gpu_paged_plan_make(tokens, empty, seqs, 2, NULL, 0, &kv, &p, &e),
                     AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "no new token"));
    assert_int_equal(areal_gpu_paged_plan_make(tokens, cu, seqs, 2, bad + 0, 0, &kv, &p, &e),
                     AREAL_OK);
    areal_gpu_paged_plan_free(&p);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(three_sequences),
                                       cmocka_unit_test(refusals)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
