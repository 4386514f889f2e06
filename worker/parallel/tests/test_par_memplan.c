/*
 * test_par_memplan.c - lib/layout's memory plan (areal/memplan.h) against
 * the worker's own allocations, in one process: for fixture models and
 * layouts (tp, pp stages, ep, vocab-parallel), the plan's parameter count of
 * each stage equals the shard model's, and its activation floats the record
 * a forward of that stage allocates (areal_acts_floats); and the refusal of
 * a layout that cannot fit names the dimension to grow.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "par_test_util.h"
#include "areal/parallel/memplan.h"

#define SEQ  6
#define NSEQ 3

/* Stage `stage` of layout (tp, pp, ep, vocab) of fixture `model` against the plan. */
static void check_stage(const char *model, int tp, int pp, int ep, bool vocab, int stage) {
    pt_layout L = {.name = model, .model = model};
    areal_model whole = {0}, m = {0};
    areal_error e;
    if (pt_model(&L, NULL, &whole, &e) != AREAL_OK)
        fail_msg("%s", e.msg);
    areal_model_shard sh;
    assert_int_equal(areal_model_shard_stage(&whole.cfg, stage, pp, &sh, &e), AREAL_OK);
    sh.tp = tp, sh.tp_rank = tp - 1, sh.ep = ep, sh.ep_rank = ep - 1, sh.vocab_parallel = vocab;
    if (areal_model_init_shard(&m, &whole.cfg, &sh, NULL, &e) != AREAL_OK)
        fail_msg("%s", e.msg);
    areal_mem_model mm = areal_par_mem_model(&whole.cfg);
    areal_strategy s = areal_strategy_single();
    s.tp = tp, s.pp = pp, s.ep = ep;
    areal_mem_opts o = {
        .mb_tokens = SEQ * NSEQ, .seq_len = SEQ, .n_mb = 1, .vocab_parallel = vocab};
    areal_mem_rank r;
    assert_int_equal(areal_mem_stage(&mm, &s, &o, stage, &r, &e), AREAL_OK);
    /* a forward of NSEQ sequences of SEQ tokens on this stage */
    int32_t tok[SEQ * NSEQ], cu[NSEQ + 1];
    for (int t = 0; t < SEQ * NSEQ; t++)
        tok[t] = t % whole.cfg.vocab_size;
    for (int i = 0; i <= NSEQ; i++)
        cu[i] = i * SEQ;
    areal_batch b = {tok, cu, SEQ * NSEQ, NSEQ};
    float *x = calloc((size_t)SEQ * NSEQ * whole.cfg.hidden_size, sizeof(float));
    areal_acts a;
    assert_int_equal(areal_model_forward_stage(&m, &b, stage == 0 ? NULL : x, &a, &e), AREAL_OK);
    printf("%-14s t%d p%d e%d%s stage %d: params %lld (shard %zu), activations %lld floats "
           "(record %zu)\n",
           model, tp, pp, ep, vocab ? " vp" : "", stage, (long long)r.n_params, m.n_params,
           (long long)(r.acts / 4), areal_acts_floats(&a));
    assert_int_equal(r.n_params, (int64_t)m.n_params);
    assert_int_equal(r.acts / 4, (int64_t)areal_acts_floats(&a));
    assert_int_equal(r.params, 4 * r.n_params);
    areal_acts_free(&a);
    free(x);
    areal_model_free(&m);
    areal_model_free(&whole);
}

static void plan_equals_the_shards(void **state) {
    (void)state;
    check_stage("ref-qwen2", 1, 1, 1, false, 0); /* the whole model, biases, untied */
    check_stage("ref-qwen2", 2, 1, 1, false, 0);
    check_stage("ref-qwen3", 2, 2, 1, false, 0); /* tied: the first stage's embedding */
    check_stage("ref-qwen3", 2, 2, 1, false, 1); /* ... and the last stage's copy */
    check_stage("ref-qwen3", 2, 1, 1, true, 0);  /* vocab-parallel */
    check_stage("ref-qwen3-moe", 1, 1, 2, false, 0);
    check_stage("ref-qwen3-moe", 1, 2, 2, false, 1);
    check_stage("ref-qwen2-moe", 1, 1, 2, false, 0); /* the shared expert */
    check_stage("ref-llama", 2, 2, 1, false, 1);
}

/* A 7B-like dense model on 80 GB: d1 does not fit, and the message names what to grow. */
static void refusal_names_the_dimension(void **state) {
    (void)state;
    areal_mem_model m = {.vocab = 152064,
                         .hidden = 3584,
                         .inter = 18944,
                         .layers = 28,
                         .heads = 28,
                         .kv_heads = 4,
                         .head_dim = 128,
                         .qkv_bias = true};
    areal_strategy s = areal_strategy_single();
    areal_mem_opts o = {.mb_tokens = 4096, .seq_len = 4096, .n_mb = 4};
    areal_mem_rank r;
    areal_error e;
    int64_t gpu = 80LL << 30;
    assert_int_equal(areal_mem_worst(&m, &s, &o, &r, &e), AREAL_OK);
    assert_int_equal(areal_mem_fit(&r, &s, &o, gpu, &e), AREAL_EINVAL);
    printf("d1: %s\n", e.msg);
    assert_non_null(strstr(e.msg, "grow"));
    /* the distributed optimizer over d8 with t4 p2 fits */
    s.dp = 8, s.tp = 4, s.pp = 2;
    o.zero1 = true, o.mb_tokens = 1024, o.seq_len = 1024;
    assert_int_equal(areal_mem_worst(&m, &s, &o, &r, &e), AREAL_OK);
    printf("d8 t4 p2 zero1: stage %d %lld bytes (params %lld, grads %lld, optim %lld, acts %lld)\n",
           r.stage, (long long)r.total, (long long)r.params, (long long)r.grads, (long long)r.optim,
           (long long)r.acts);
    assert_int_equal(areal_mem_fit(&r, &s, &o, gpu, &e), AREAL_OK);
    /* optimizer-bound without the distributed optimizer: grow dp with it */
    s.dp = 1, o.zero1 = false, s.tp = 4, s.pp = 4;
    assert_int_equal(areal_mem_worst(&m, &s, &o, &r, &e), AREAL_OK);
    assert_int_equal(areal_mem_fit(&r, &s, &o, r.total - 1, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "optimizer"));
    assert_non_null(strstr(e.msg, "distributed optimizer"));
    /* a split the model refuses */
    s.tp = 3;
    assert_int_equal(areal_mem_worst(&m, &s, &o, &r, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "tp 3"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plan_equals_the_shards),
        cmocka_unit_test(refusal_names_the_dimension),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
