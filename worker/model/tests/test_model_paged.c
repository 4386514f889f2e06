/*
 * test_model_paged.c - the paged incremental forward (paged.h): chunked and
 * mixed prefill + decode over scattered block tables gives the slot cache's
 * logits (areal_model_step), a sequence reading another's full blocks gives
 * the logits of computing them itself, every requested prompt row equals the
 * training forward's logits, and bad tables, ids and rows are refused with
 * the cache untouched. Rows are batch-invariant: a sequence's logits are the
 * same bits whether it is stepped alone or beside others (prefill of 21 rows
 * in one step, decodes of 3), so greedy tokens cannot depend on the batch.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "areal/model/generate.h"
#include "areal/model/paged.h"
#include "model_test_util.h"

#define BT 4

static void load(areal_model *m, const char *name) {
    char dir[256];
    areal_error err;
    snprintf(dir, sizeof dir, FIX "%s", name);
    if (areal_model_load(m, dir, NULL, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
}

static double max_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - b[i]);
        d = x > d ? x : d;
    }
    return d;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

static void paged_equals_slot_cache(void **state) {
    (void)state;
    const char *archs[] = {"ref-qwen2", "ref-qwen3-moe", "ref-llama"};
    for (int k = 0; k < 3; k++) {
        areal_model m;
        load(&m, archs[k]);
        int V = m.cfg.vocab_size;
        areal_error err;
        areal_kv_cache slot;
        areal_paged_kv pk;
        assert_int_equal(areal_kv_cache_init(&slot, &m.cfg, 2, 64, &err), AREAL_OK);
        assert_int_equal(areal_paged_kv_init(&pk, &m.cfg, 40, BT, &err), AREAL_OK);
        int32_t a[13], b[7];
        for (int i = 0; i < 13; i++)
            a[i] = (i * 7 + 3) % V;
        for (int i = 0; i < 7; i++)
            b[i] = (i * 11 + 5) % V;
        /* scattered tables: block ids out of order, interleaved between the sequences */
        int32_t ta[8] = {17, 3, 29, 8, 11, 36, 22, 1}, tb[8] = {5, 30, 14, 2, 39, 26, 9, 33};
        float *ls = malloc(sizeof(float) * 2 * V), *lp = malloc(sizeof(float) * 2 * V);
        /* slot cache: both prompts in one call */
        int32_t tok[20], cu[3] = {0, 13, 20};
        memcpy(tok, a, sizeof a);
        memcpy(tok + 13, b, sizeof b);
        int slots[2] = {0, 1};
        assert_int_equal(areal_model_step(&m, &slot, tok, cu, slots, 2, ls, &err), AREAL_OK);
        /* paged: a in chunks of 5 and 8, b whole with a's second chunk */
        areal_paged_seq sq[2] = {{ta, 8, 0}, {tb, 8, 0}};
        int32_t c1[2] = {0, 5}, row = 4;
        assert_int_equal(areal_model_step_paged(&m, &pk, a, c1, sq, 1, &row, 1, lp, &err),
                         AREAL_OK);
        sq[0].start = 5;
        int32_t tok2[15], cu2[3] = {0, 8, 15}, rows[2] = {7, 14};
        memcpy(tok2, a + 5, sizeof(int32_t) * 8);
        memcpy(tok2 + 8, b, sizeof b);
        assert_int_equal(areal_model_step_paged(&m, &pk, tok2, cu2, sq, 2, rows, 2, lp, &err),
                         AREAL_OK);
        double d = max_diff(ls, lp, (size_t)2 * V);
        print_message("%s: paged prefill vs slot cache, max |diff| %.2e\n", archs[k], d);
        assert_true(d <= 1e-5);
        sq[0].start = 13;
        sq[1].start = 7;
        for (int step = 0; step < 6; step++) { /* decode both, greedy */
            int32_t next[2] = {argmax(ls, V), argmax(ls + V, V)}, dcu[3] = {0, 1, 2};
            int32_t drows[2] = {0, 1};
            assert_int_equal(areal_model_step(&m, &slot, next, dcu, slots, 2, ls, &err), AREAL_OK);
            assert_int_equal(areal_model_step_paged(&m, &pk, next, dcu, sq, 2, drows, 2, lp, &err),
                             AREAL_OK);
            sq[0].start++;
            sq[1].start++;
            assert_true(max_diff(ls, lp, (size_t)2 * V) <= 1e-5);
        }
        free(ls);
        free(lp);
        areal_kv_cache_free(&slot);
        areal_paged_kv_free(&pk);
        areal_model_free(&m);
    }
}

static void shared_blocks_and_prompt_rows(void **state) {
    (void)state;
    areal_model m;
    load(&m, "ref-qwen3");
    int V = m.cfg.vocab_size;
    areal_error err;
    areal_paged_kv pk;
    assert_int_equal(areal_paged_kv_init(&pk, &m.cfg, 16, BT, &err), AREAL_OK);
    int32_t a[11];
    for (int i = 0; i < 11; i++)
        a[i] = (i * 5 + 1) % V;
    /* every row of a prefill against the training forward's logits */
    int32_t t1[3] = {0, 1, 2}, cu[2] = {0, 11}, rows[11];
    for (int i = 0; i < 11; i++)
        rows[i] = i;
    float *lp = malloc(sizeof(float) * 11 * V);
    areal_paged_seq s1 = {t1, 3, 0};
    assert_int_equal(areal_model_step_paged(&m, &pk, a, cu, &s1, 1, rows, 11, lp, &err), AREAL_OK);
    areal_batch bt = {a, cu, 11, 1};
    areal_acts acts;
    assert_int_equal(areal_model_forward(&m, &bt, &acts, &err), AREAL_OK);
    double d = max_diff(acts.logits, lp, (size_t)11 * V);
    print_message("paged rows vs training forward logits, max |diff| %.2e\n", d);
    assert_true(d <= 1e-5);
    /* a second sequence reuses a's two full blocks (8 tokens) and computes 3 of its own */
    int32_t t2[3] = {0, 1, 9}, cu2[2] = {0, 3}, last = 2;
    areal_paged_seq s2 = {t2, 3, 8};
    float *lq = malloc(sizeof(float) * V);
    assert_int_equal(areal_model_step_paged(&m, &pk, a + 8, cu2, &s2, 1, &last, 1, lq, &err),
                     AREAL_OK);
    assert_true(max_diff(acts.logits + (size_t)10 * V, lq, (size_t)V) <= 1e-5);
    areal_acts_free(&acts);
    /* refusals leave the cache as it was */
    float *before = malloc(sizeof(float) * pk.n_blocks * BT * pk.kv_dim);
    memcpy(before, pk.k, sizeof(float) * pk.n_blocks * BT * pk.kv_dim);
    areal_paged_seq short_t = {t2, 2, 8}; /* 8 + 3 positions need 3 blocks */
    assert_int_equal(areal_model_step_paged(&m, &pk, a + 8, cu2, &short_t, 1, &last, 1, lq, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "table"));
    int32_t bad_t[3] = {0, 1, 16};
    areal_paged_seq bad_s = {bad_t, 3, 8};
    assert_int_equal(areal_model_step_paged(&m, &pk, a + 8, cu2, &bad_s, 1, &last, 1, lq, &err),
                     AREAL_EINVAL);
    int32_t bad_row = 3;
    assert_int_equal(areal_model_step_paged(&m, &pk, a + 8, cu2, &s2, 1, &bad_row, 1, lq, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "out_rows"));
    int32_t bad_tok[3] = {1, V, 2};
    assert_int_equal(areal_model_step_paged(&m, &pk, bad_tok, cu2, &s2, 1, &last, 1, lq, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "vocabulary"));
    assert_memory_equal(before, pk.k, sizeof(float) * pk.n_blocks * BT * pk.kv_dim);
    /* a copied block reads back the same logits */
    areal_paged_kv_copy_block(&pk, 12, 2);
    int32_t t3[3] = {0, 1, 12};
    areal_paged_seq s3 = {t3, 3, 11};
    int32_t one = a[3], cu1[2] = {0, 1}, r0 = 0;
    float *x = malloc(sizeof(float) * V), *y = malloc(sizeof(float) * V);
    areal_paged_seq s4 = {t2, 3, 11};
    assert_int_equal(areal_model_step_paged(&m, &pk, &one, cu1, &s4, 1, &r0, 1, x, &err), AREAL_OK);
    assert_int_equal(areal_model_step_paged(&m, &pk, &one, cu1, &s3, 1, &r0, 1, y, &err), AREAL_OK);
    assert_true(max_diff(x, y, (size_t)V) == 0);
    free(x);
    free(y);
    free(before);
    free(lp);
    free(lq);
    areal_paged_kv_free(&pk);
    areal_model_free(&m);
}

/* Each sequence alone (prefill, then 3 decodes) vs all three in every step:
 * bit-identical logits (the KV path's products do not depend on T). */
static void rows_are_batch_invariant(void **state) {
    (void)state;
    const char *archs[] = {"ref-qwen2", "ref-llama"};
    for (int k = 0; k < 2; k++) {
        areal_model m;
        load(&m, archs[k]);
        int V = m.cfg.vocab_size;
        enum { NS = 3, STEPS = 4 };
        const int len[NS] = {7, 13, 1};
        int32_t toks[NS][16], next[NS][STEPS];
        for (int s = 0; s < NS; s++) {
            for (int i = 0; i < len[s]; i++)
                toks[s][i] = (int32_t)((s * 31 + i * 7 + 3) % V);
            for (int j = 0; j < STEPS; j++)
                next[s][j] = (int32_t)((s * 17 + j * 5 + 1) % V);
        }
        float *alone = malloc(sizeof(float) * (size_t)NS * STEPS * V);
        float *together = malloc(sizeof(float) * (size_t)NS * STEPS * V);
        areal_error err;
        for (int s = 0; s < NS; s++) { /* alone */
            areal_kv_cache c;
            assert_int_equal(areal_kv_cache_init(&c, &m.cfg, 1, 32, &err), AREAL_OK);
            int slot = 0;
            for (int j = 0; j < STEPS; j++) {
                const int32_t *t = j == 0 ? toks[s] : &next[s][j - 1];
                int32_t cu[2] = {0, j == 0 ? len[s] : 1};
                assert_int_equal(areal_model_step(&m, &c, t, cu, &slot, 1,
                                                  alone + ((size_t)j * NS + s) * V, &err),
                                 AREAL_OK);
            }
            areal_kv_cache_free(&c);
        }
        areal_kv_cache c;
        assert_int_equal(areal_kv_cache_init(&c, &m.cfg, NS, 32, &err), AREAL_OK);
        int slots[NS] = {2, 0, 1}; /* other slots than alone, too */
        for (int j = 0; j < STEPS; j++) {
            int32_t t[64], cu[NS + 1] = {0};
            for (int s = 0; s < NS; s++) {
                int n = j == 0 ? len[s] : 1;
                for (int i = 0; i < n; i++)
                    t[cu[s] + i] = j == 0 ? toks[s][i] : next[s][j - 1];
                cu[s + 1] = cu[s] + n;
            }
            assert_int_equal(
                areal_model_step(&m, &c, t, cu, slots, NS, together + (size_t)j * NS * V, &err),
                AREAL_OK);
        }
        areal_kv_cache_free(&c);
        for (int j = 0; j < STEPS; j++)
            for (int s = 0; s < NS; s++)
                if (memcmp(alone + ((size_t)j * NS + s) * V, together + ((size_t)j * NS + s) * V,
                           sizeof(float) * (size_t)V) != 0)
                    fail_msg("%s: sequence %d step %d: logits differ alone vs batched (max %g)",
                             archs[k], s, j,
                             max_diff(alone + ((size_t)j * NS + s) * V,
                                      together + ((size_t)j * NS + s) * V, (size_t)V));
        free(alone);
        free(together);
        areal_model_free(&m);
    }
}

/* Logits of three sequences stepped together (prefills of 7, 13 and 1 rows
 * in one step: the 6-row kernels and the row-at-a-time tail; then decodes of
 * 3 rows, and one of 1 row) into out[STEPS + 1][NS][V]. */
enum { PK_NS = 3, PK_STEPS = 4 };
static void pk_steps(areal_model *m, float *out) {
    int V = m->cfg.vocab_size;
    const int len[PK_NS] = {7, 13, 1};
    areal_error err;
    areal_kv_cache c;
    assert_int_equal(areal_kv_cache_init(&c, &m->cfg, PK_NS, 32, &err), AREAL_OK);
    int slots[PK_NS] = {0, 1, 2};
    for (int j = 0; j < PK_STEPS; j++) {
        int32_t t[64], cu[PK_NS + 1] = {0};
        for (int s = 0; s < PK_NS; s++) {
            int n = j == 0 ? len[s] : 1;
            for (int i = 0; i < n; i++)
                t[cu[s] + i] = (int32_t)((s * 31 + i * 7 + j * 5 + 3) % V);
            cu[s + 1] = cu[s] + n;
        }
        assert_int_equal(
            areal_model_step(m, &c, t, cu, slots, PK_NS, out + (size_t)j * PK_NS * V, &err),
            AREAL_OK);
    }
    int32_t one = 5, cu1[2] = {0, 1}, slot = 1; /* a 1-row step */
    assert_int_equal(
        areal_model_step(m, &c, &one, cu1, &slot, 1, out + (size_t)PK_STEPS * PK_NS * V, &err),
        AREAL_OK);
    areal_kv_cache_free(&c);
}

/* The packed inference twins (areal_model_infer_pack) change no bit: the
 * same steps on the same model, unpacked and packed; and a pack made before
 * the parameters changed is replaced by packing again. */
static void packed_twins_give_the_same_bits(void **state) {
    (void)state;
    const char *archs[] = {"ref-qwen2", "ref-qwen3", "ref-qwen3-moe", "ref-llama"};
    for (int k = 0; k < 4; k++) {
        areal_model m;
        load(&m, archs[k]);
        size_t n = (size_t)(PK_STEPS * PK_NS + 1) * (size_t)m.cfg.vocab_size;
        float *plain = malloc(sizeof(float) * n), *packed = malloc(sizeof(float) * n);
        areal_error err;
        pk_steps(&m, plain);
        assert_int_equal(areal_model_infer_pack(&m, &err), AREAL_OK);
        assert_non_null(m.infer_pack);
        pk_steps(&m, packed);
        if (memcmp(plain, packed, sizeof(float) * n) != 0)
            fail_msg("%s: packed logits differ (max %g)", archs[k], max_diff(plain, packed, n));
        /* new parameters, packed again: the logits of the new weights, not the old twin's */
        for (size_t i = 0; i < m.n_params; i++)
            m.params[i] *= 0.5f;
        assert_int_equal(areal_model_infer_pack(&m, &err), AREAL_OK);
        pk_steps(&m, packed);
        areal_model_infer_unpack(&m);
        assert_null(m.infer_pack);
        pk_steps(&m, plain);
        if (memcmp(plain, packed, sizeof(float) * n) != 0)
            fail_msg("%s: repacked logits differ (max %g)", archs[k], max_diff(plain, packed, n));
        print_message("%s: packed twins, bit-identical logits over %zu values\n", archs[k], n);
        free(plain);
        free(packed);
        areal_model_free(&m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(packed_twins_give_the_same_bits),
        cmocka_unit_test(paged_equals_slot_cache),
        cmocka_unit_test(rows_are_batch_invariant),
        cmocka_unit_test(shared_blocks_and_prompt_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
