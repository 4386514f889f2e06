/*
 * test_gpu_plan.c - the GPU model's host-side plans on the CPU (no device
 * needed): the weight layout against the CPU model loaded from the tiny HF
 * fixtures (alignment, experts packed at the model's stride, every layer
 * view pointing at the same values as the CPU model's, pack/unpack a round
 * trip with zero padding), the training and decode plans (regions aligned,
 * disjoint, inside the allocation, sized as the layers use them), and the
 * refusals (a shared expert, bad batch sizes) with the field named.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "areal/gpumodel/plan.h"

#define HF "worker/model/tests/fixtures/hf/"

static void load(areal_model *m, const char *dir) {
    areal_error err;
    areal_error_clear(&err);
    int rc = areal_model_load(m, dir, NULL, &err);
    if (rc != AREAL_OK)
        print_error("%s: %s\n", dir, err.msg);
    assert_int_equal(rc, AREAL_OK);
}

/* the packed values at device offset off equal the CPU model's view v over n floats */
static void same(const float *packed, size_t off, const float *v, size_t n) {
    if (v == NULL) {
        assert_true(off == AREAL_GPU_NONE);
        return;
    }
    assert_true(off != AREAL_GPU_NONE);
    assert_memory_equal(packed + off, v, n * sizeof(float));
}

static void layout_case(const char *dir) {
    areal_model m;
    load(&m, dir);
    areal_gpu_wlayout l;
    areal_error err;
    assert_int_equal(areal_gpu_wlayout_make(&m, &l, &err), AREAL_OK);
    assert_int_equal(l.n_specs, m.n_specs);
    size_t prev_end = 0;
    for (size_t i = 0; i < l.n_specs; i++) {
        bool expert = strstr(m.specs[i].name, ".mlp.experts.") != NULL &&
                      strstr(m.specs[i].name, ".mlp.experts.0.gate_proj.") == NULL;
        if (expert)
            assert_int_equal(l.dev_off[i], prev_end); /* packed after the previous tensor */
        else
            assert_int_equal(l.dev_off[i] % 128, 0);
        assert_true(l.dev_off[i] >= prev_end); /* in order, disjoint */
        prev_end = l.dev_off[i] + l.numel[i];
    }
    assert_true(prev_end <= l.n_elems);
    /* fill the host params with distinct values so that a wrong offset shows */
    for (size_t i = 0; i < m.n_params; i++)
        m.params[i] = (float)i + 0.5f;
    float *packed = malloc(sizeof(float) * l.n_elems), *back = malloc(sizeof(float) * m.n_params);
    assert_non_null(packed);
    assert_non_null(back);
    areal_gpu_wlayout_pack(&l, m.params, packed);
    size_t nonzero = 0;
    for (size_t i = 0; i < l.n_elems; i++)
        nonzero += packed[i] != 0.0f;
    assert_int_equal(nonzero, m.n_params); /* padding zero, every parameter once */
    areal_gpu_wlayout_unpack(&l, packed, back);
    assert_memory_equal(back, m.params, sizeof(float) * m.n_params);
    const areal_model_config *c = &m.cfg;
    size_t H = (size_t)c->hidden_size, hd = (size_t)c->head_dim;
    size_t Q = (size_t)c->num_heads * hd, KV = (size_t)c->num_kv_heads * hd;
    size_t I = (size_t)c->intermediate_size;
    same(packed, l.embed, m.w.embed, (size_t)c->vocab_size * H);
    same(packed, l.lm_head, m.w.lm_head, (size_t)c->vocab_size * H);
    same(packed, l.norm, m.w.norm, H);
    if (c->tie_word_embeddings)
        assert_int_equal(l.lm_head, l.embed);
    for (int i = 0; i < c->num_layers; i++) {
        const areal_layer_w *w = &m.w.layers[i];
        const areal_gpu_layer_off *o = &l.layers[i];
        same(packed, o->ln1, w->ln1, H);
        same(packed, o->wq, w->wq, Q * H);
        same(packed, o->wk, w->wk, KV * H);
        same(packed, o->wv, w->wv, KV * H);
        same(packed, o->bq, w->bq, Q);
        same(packed, o->bk, w->bk, KV);
        same(packed, o->bv, w->bv, KV);
        same(packed, o->wo, w->wo, H * Q);
        same(packed, o->q_norm, w->q_norm, hd);
        same(packed, o->k_norm, w->k_norm, hd);
        same(packed, o->ln2, w->ln2, H);
        if (c->num_experts > 0 && c->moe_layer[i]) {
            size_t E = (size_t)c->num_experts;
            same(packed, o->router, w->router, E * H);
            assert_int_equal(o->expert_stride, w->expert_stride);
            same(packed, o->experts, w->experts, E * w->expert_stride); /* all experts */
            assert_null(w->gate);
        } else {
            same(packed, o->gate, w->gate, I * H);
            same(packed, o->up, w->up, I * H);
            same(packed, o->down, w->down, H * I);
        }
    }
    free(packed);
    free(back);
    areal_gpu_wlayout_free(&l);
    areal_model_free(&m);
}

static void test_layout_qwen3(void **state) {
    (void)state;
    layout_case(HF "qwen3-bf16");
}
static void test_layout_qwen3_moe(void **state) {
    (void)state;
    layout_case(HF "qwen3-moe-bf16");
}
static void test_layout_qwen2(void **state) {
    (void)state;
    layout_case(HF "qwen2-bf16");
}

static const areal_gpu_region *region(const areal_gpu_region *r, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(r[i].name, name) == 0)
            return &r[i];
    return NULL;
}

static void regions_ok(const areal_gpu_region *r, size_t n, size_t bytes) {
    assert_true(n > 0);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(r[i].off % AREAL_GPU_ALIGN, 0);
        assert_true(r[i].bytes > 0);
        assert_true(r[i].off + r[i].bytes <= bytes);
        if (i > 0) /* appended in order: disjoint when each starts after the last ends */
            assert_true(r[i].off >= r[i - 1].off + r[i - 1].bytes);
    }
}

static void size_is(const areal_gpu_region *r, size_t n, const char *name, size_t bytes) {
    const areal_gpu_region *g = region(r, n, name);
    if (g == NULL)
        print_error("no region %s\n", name);
    assert_non_null(g);
    assert_int_equal(g->bytes, bytes);
}

static void test_plan_sizes(void **state) {
    (void)state;
    areal_model m;
    load(&m, HF "qwen3-moe-bf16");
    const areal_model_config *c = &m.cfg;
    areal_gpu_plan p;
    areal_error err;
    int T = 37, S = 3;
    assert_int_equal(areal_gpu_plan_make(&m, T, S, 16, &p, &err), AREAL_OK);
    regions_ok(p.regions, p.n_regions, p.bytes);
    size_t Q = (size_t)c->num_heads * c->head_dim, KV = (size_t)c->num_kv_heads * c->head_dim;
    size_t TK = (size_t)T * c->num_experts_per_tok;
    size_is(p.regions, p.n_regions, "L0.qr", T * Q * 2);
    size_is(p.regions, p.n_regions, "L0.q", T * Q * 2); /* qk-norm: pre-norm q kept */
    size_is(p.regions, p.n_regions, "L0.kr", T * KV * 2);
    size_is(p.regions, p.n_regions, "L0.lse", (size_t)T * c->num_heads * 4);
    /* layer 0 routes (mlp_only_layers: [1]); layer 1 is dense */
    assert_true(c->moe_layer[0] && !c->moe_layer[1]);
    size_is(p.regions, p.n_regions, "L0.g", TK * c->moe_intermediate_size * 2);
    size_is(p.regions, p.n_regions, "L0.xs", TK * c->hidden_size * 2);
    size_is(p.regions, p.n_regions, "L0.off", (size_t)(c->num_experts + 1) * 4);
    size_is(p.regions, p.n_regions, "L1.g", (size_t)T * c->intermediate_size * 2);
    assert_null(region(p.regions, p.n_regions, "L1.xs"));
    assert_true(p.layers[1].probs == AREAL_GPU_NONE);
    size_is(p.regions, p.n_regions, "logits", (size_t)16 * c->vocab_size * 2);
    size_is(p.regions, p.n_regions, "cu", (size_t)(S + 1) * 4);
    size_t wide = (size_t)T * c->intermediate_size;
    if (TK * c->moe_intermediate_size > wide)
        wide = TK * c->moe_intermediate_size;
    size_is(p.regions, p.n_regions, "dh", wide * 2);
    assert_int_equal(p.chunk, 16);
    areal_gpu_plan_free(&p);
    /* chunk clamped to T */
    assert_int_equal(areal_gpu_plan_make(&m, 5, 1, 4096, &p, &err), AREAL_OK);
    assert_int_equal(p.chunk, 5);
    areal_gpu_plan_free(&p);
    areal_model_free(&m);
}

static void test_plan_dense_no_qknorm(void **state) {
    (void)state;
    areal_model m;
    load(&m, HF "qwen2-bf16");
    areal_gpu_plan p;
    areal_error err;
    assert_int_equal(areal_gpu_plan_make(&m, 8, 2, 0 + 8, &p, &err), AREAL_OK);
    regions_ok(p.regions, p.n_regions, p.bytes);
    assert_true(p.layers[0].q == AREAL_GPU_NONE); /* no qk-norm: the projection goes to qr */
    assert_true(p.dq == AREAL_GPU_NONE);
    assert_true(p.rlogits == AREAL_GPU_NONE && p.dys == AREAL_GPU_NONE); /* dense */
    areal_gpu_plan_free(&p);
    areal_model_free(&m);
}

static void test_plan_refusals(void **state) {
    (void)state;
    areal_model m;
    load(&m, HF "qwen3-bf16");
    areal_gpu_plan p;
    areal_error err;
    assert_int_equal(areal_gpu_plan_make(&m, 0, 1, 8, &p, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "tokens 0"));
    assert_int_equal(areal_gpu_plan_make(&m, 4, 5, 8, &p, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "sequences 5"));
    areal_gpu_kv_cfg kv = {4, 16, 8, 0};
    areal_gpu_dplan d;
    assert_int_equal(areal_gpu_dplan_make(&m, &kv, &d, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "max_blocks"));
    areal_model_free(&m);
    load(&m, "worker/model/tests/fixtures/qwen2-moe-shared");
    assert_int_equal(areal_gpu_check_model(&m, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "shared_expert_intermediate_size"));
    assert_int_equal(areal_gpu_plan_make(&m, 4, 1, 8, &p, &err), AREAL_EINVAL);
    areal_model_free(&m);
}

static void test_decode_buckets(void **state) {
    (void)state;
    int idx = -1;
    /* max_batch 256: 1, 2, 4, ..., 128, 256 */
    assert_int_equal(areal_gpu_decode_n_buckets(256), 9);
    assert_int_equal(areal_gpu_decode_bucket(1, 256, &idx), 1);
    assert_int_equal(idx, 0);
    assert_int_equal(areal_gpu_decode_bucket(3, 256, &idx), 4);
    assert_int_equal(idx, 2);
    assert_int_equal(areal_gpu_decode_bucket(32, 256, &idx), 32);
    assert_int_equal(idx, 5);
    assert_int_equal(areal_gpu_decode_bucket(129, 256, &idx), 256);
    assert_int_equal(idx, 8);
    /* max_batch 48 (not a power of two): 1, 2, 4, 8, 16, 32, 48 */
    assert_int_equal(areal_gpu_decode_n_buckets(48), 7);
    assert_int_equal(areal_gpu_decode_bucket(33, 48, &idx), 48);
    assert_int_equal(idx, 6);
    assert_int_equal(areal_gpu_decode_bucket(48, 48, NULL), 48);
    assert_int_equal(areal_gpu_decode_n_buckets(1), 1);
    assert_int_equal(areal_gpu_decode_bucket(1, 1, &idx), 1);
    assert_int_equal(idx, 0);
    /* every batch fits its bucket, and the index is within the count */
    for (int mb = 1; mb <= 300; mb += 7)
        for (int B = 1; B <= mb; B++) {
            int b = areal_gpu_decode_bucket(B, mb, &idx);
            assert_true(b >= B && b <= mb && b < 2 * B + (b == mb ? mb : 0));
            assert_true(idx >= 0 && idx < areal_gpu_decode_n_buckets(mb));
        }
    assert_int_equal(areal_gpu_decode_bucket(0, 8, NULL), -1);
    assert_int_equal(areal_gpu_decode_bucket(9, 8, NULL), -1);
}

static void test_dplan(void **state) {
    (void)state;
    areal_model m;
    load(&m, HF "qwen3-moe-bf16");
    const areal_model_config *c = &m.cfg;
    areal_gpu_kv_cfg kv = {3, 16, 10, 4};
    areal_gpu_dplan d;
    areal_error err;
    assert_int_equal(areal_gpu_dplan_make(&m, &kv, &d, &err), AREAL_OK);
    regions_ok(d.regions, d.n_regions, d.bytes);
    size_t kvw = (size_t)c->num_kv_heads * c->head_dim;
    assert_int_equal(d.cache_bytes, (size_t)(10 + 1) * 16 * kvw * 2); /* + the padding block */
    size_is(d.regions, d.n_regions, "L1.vcache", d.cache_bytes);
    size_is(d.regions, d.n_regions, "table", (size_t)3 * 4 * 4);
    size_is(d.regions, d.n_regions, "xs", (size_t)3 * c->num_experts_per_tok * c->hidden_size * 2);
    size_is(d.regions, d.n_regions, "logits", (size_t)3 * c->vocab_size * 2);
    assert_int_equal(d.kcache[1], region(d.regions, d.n_regions, "L1.kcache")->off);
    areal_gpu_dplan_free(&d);
    areal_model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_qwen3),
        cmocka_unit_test(test_layout_qwen3_moe),
        cmocka_unit_test(test_layout_qwen2),
        cmocka_unit_test(test_plan_sizes),
        cmocka_unit_test(test_plan_dense_no_qknorm),
        cmocka_unit_test(test_plan_refusals),
        cmocka_unit_test(test_dplan),
        cmocka_unit_test(test_decode_buckets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
