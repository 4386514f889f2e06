/* test_attn_plan.c - the host-side half of the tensor-core attention
 * (areal/kernels/attention_plan.h), on a machine without a GPU: which shapes
 * the tensor cores serve and why the others fall back to the scalar kernel,
 * the grids (tiles, heads, sequences) and shared-memory sizes the kernels
 * carve, the cu_seqlens check's clear errors, and the FLOP count of the
 * bench. Sizes are recomputed here from the tile constants, not copied. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "areal/error.h"
#include "areal/kernels/attention_plan.h"

static areal_k_attn_shape shape(int T, int n_seqs, int max_len, int nh, int nkv, int hd) {
    areal_k_attn_shape s = {T, n_seqs, max_len, nh, nkv, hd, 0.125f};
    return s;
}

static void test_tensor_cores_serve_hd_64_and_128(void **state) {
    (void)state;
    areal_error err;
    areal_k_attn_plan p;
    /* Qwen2-0.5B: 14 query heads on 2 KV heads of 64; 3 sequences, the longest 130 tokens */
    assert_int_equal(areal_k_attn_plan_make(shape(200, 3, 130, 14, 2, 64), &p, &err), AREAL_OK);
    assert_int_equal(p.tc, 1);
    assert_null(p.why);
    const unsigned tiles = (130 + AREAL_K_ATTN_TC_BM - 1) / AREAL_K_ATTN_TC_BM; /* 3 */
    assert_int_equal(tiles, 3);
    assert_int_equal(p.grid_fwd[0], tiles);
    assert_int_equal(p.grid_fwd[1], 14);
    assert_int_equal(p.grid_fwd[2], 3);
    assert_int_equal(p.grid_dkdv[0], (130 + AREAL_K_ATTN_TC_BN - 1) / AREAL_K_ATTN_TC_BN);
    assert_int_equal(p.grid_dkdv[1], 2); /* one block column per KV head: GQA without atomics */
    assert_int_equal(p.grid_dq[1], 14);
    const size_t row = (64 + AREAL_K_ATTN_TC_PAD) * 2;
    assert_int_equal(p.smem_fwd, (AREAL_K_ATTN_TC_BM + 2 * AREAL_K_ATTN_TC_BN) * row);
    assert_int_equal(p.smem_dq, (2 * AREAL_K_ATTN_TC_BM + 2 * AREAL_K_ATTN_TC_BN) * row);
    assert_int_equal(p.smem_dkdv, (2 * AREAL_K_ATTN_TC_BN + 2 * AREAL_K_ATTN_TC_BQ) * row +
                                      2 * AREAL_K_ATTN_TC_BQ * sizeof(float));
    /* hd 128: past the 48 KiB default (the kernels raise their limit), under Hopper's 227 KiB */
    assert_int_equal(areal_k_attn_plan_make(shape(8192, 1, 8192, 12, 2, 128), &p, &err), AREAL_OK);
    assert_int_equal(p.tc, 1);
    assert_int_equal(p.grid_fwd[0], 8192 / AREAL_K_ATTN_TC_BM);
    assert_true(p.smem_fwd > 48 * 1024 && p.smem_fwd <= 227 * 1024);
    assert_true(p.smem_dq <= 227 * 1024 && p.smem_dkdv <= 227 * 1024);
    assert_int_equal(p.smem_fwd % 16, 0); /* tiles start 16-byte aligned */
}

static void test_other_head_sizes_fall_back_with_a_reason(void **state) {
    (void)state;
    areal_error err;
    areal_k_attn_plan p;
    const int hds[] = {8, 33, 96, 160, 256};
    for (size_t i = 0; i < sizeof hds / sizeof *hds; i++) {
        assert_int_equal(areal_k_attn_plan_make(shape(10, 1, 10, 4, 2, hds[i]), &p, &err),
                         AREAL_OK);
        assert_int_equal(p.tc, 0);
        assert_non_null(p.why);
        assert_non_null(strstr(p.why, "64 or 128"));
    }
}

static void test_bad_shapes_name_the_field(void **state) {
    (void)state;
    areal_error err;
    areal_k_attn_plan p;
    assert_int_equal(areal_k_attn_plan_make(shape(10, 1, 10, 3, 2, 64), &p, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "nkv 2"));
    assert_int_equal(areal_k_attn_plan_make(shape(10, 1, 10, 4, 2, 512), &p, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "hd 512"));
    assert_int_equal(areal_k_attn_plan_make(shape(10, 1, 11, 4, 2, 64), &p, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "max_len 11"));
    assert_int_equal(areal_k_attn_plan_make(shape(10, 70000, 10, 4, 2, 64), &p, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "n_seqs 70000"));
    assert_int_equal(areal_k_attn_plan_make(shape(10, 1, 10, 4, 2, 64), NULL, &err), AREAL_EINVAL);
}

static void test_cu_seqlens_check(void **state) {
    (void)state;
    areal_error err;
    const int32_t good[] = {0, 5, 5, 45, 62}; /* an empty sequence is allowed */
    assert_int_equal(areal_k_attn_check_cu(good, shape(62, 4, 40, 4, 2, 64), &err), AREAL_OK);
    const int32_t start[] = {1, 5};
    assert_int_equal(areal_k_attn_check_cu(start, shape(5, 1, 5, 4, 2, 64), &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "cu_seqlens[0] is 1"));
    const int32_t down[] = {0, 5, 3, 9};
    assert_int_equal(areal_k_attn_check_cu(down, shape(9, 3, 6, 4, 2, 64), &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "cu_seqlens[2] = 3"));
    assert_non_null(strstr(err.msg, "must not decrease"));
    assert_int_equal(areal_k_attn_check_cu(good, shape(62, 4, 39, 4, 2, 64), &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "sequence 2 has 40 tokens"));
    assert_non_null(strstr(err.msg, "max_len 39"));
    assert_int_equal(areal_k_attn_check_cu(good, shape(63, 4, 40, 4, 2, 64), &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "T is 63"));
    assert_int_equal(areal_k_attn_check_cu(NULL, shape(0, 0, 0, 4, 2, 64), &err), AREAL_EINVAL);
}

static void test_flops(void **state) {
    (void)state;
    const int32_t cu[] = {0, 2048, 4096};
    /* 4 * len^2 / 2 * nh * hd per sequence */
    const double want = 2 * (4.0 * 2048 * 2048 / 2 * 14 * 64);
    assert_true(areal_k_attn_flops_fwd(cu, 2, 14, 64) == want);
    const int32_t uneven[] = {0, 3, 4};
    assert_true(areal_k_attn_flops_fwd(uneven, 2, 1, 1) == 4.0 * (9 + 1) / 2);
    assert_true(areal_k_attn_flops_fwd(NULL, 2, 1, 1) == 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensor_cores_serve_hd_64_and_128),
        cmocka_unit_test(test_other_head_sizes_fall_back_with_a_reason),
        cmocka_unit_test(test_bad_shapes_name_the_field),
        cmocka_unit_test(test_cu_seqlens_check),
        cmocka_unit_test(test_flops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
