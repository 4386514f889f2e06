/*
 * test_par_sp.c - sequence parallelism on forked ranks (CPU backend): norms
 * and residuals on each tp rank's rows of the packed batch, all-gather
 * before the column-parallel layers and reduce-scatter after the
 * row-parallel ones, give one process's logits, loss, grad norm and update
 * (par_test_util.h: the harness and its tolerances). Micro-batches of odd
 * token counts exercise the padded last block. The activation record of a
 * t2 forward with sequence parallelism is smaller than without (the
 * residuals keep the rank's rows only), by the rows it does not keep, and
 * equals lib/layout's plan with sequence_parallel on tp rank 0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "par_test_util.h"
#include "areal/parallel/memplan.h"

/* Qwen2 fixture: qkv biases, untied; 47 tokens over 2 ranks (24 + 23 rows). */
static void t2_sp(void **state) {
    (void)state;
    pt_layout L = {
        .name = "t2-sp", .dp = 1, .tp = 2, .pp = 1, .n_mb = 1, .model = "ref-qwen2", .sp = 1};
    assert_int_equal(pt_run(&L), 0);
}

/* Qwen3 fixture: qk-norm, tied, two micro-batches; with the vocab-parallel head and loss. */
static void t2_sp_vocab(void **state) {
    (void)state;
    pt_layout L = {.name = "t2-sp-vp",
                   .dp = 1,
                   .tp = 2,
                   .pp = 1,
                   .n_mb = 2,
                   .model = "ref-qwen3",
                   .sp = 1,
                   .vocab = 1};
    assert_int_equal(pt_run(&L), 0);
}

/* The synthetic model: 4 ranks' blocks of 12 rows (the last one 11). */
static void t4_sp(void **state) {
    (void)state;
    pt_layout L = {.name = "t4-sp", .dp = 1, .tp = 4, .pp = 1, .n_mb = 1, .sp = 1, .vocab = 1};
    assert_int_equal(pt_run(&L), 0);
}

/* With a pipeline and dp: stages pass whole buffers of which each rank reads its rows. */
static void d2t2p2_sp(void **state) {
    (void)state;
    pt_layout L = {.name = "d2t2p2-sp", .dp = 2, .tp = 2, .pp = 2, .n_mb = 2, .sp = 1};
    assert_int_equal(pt_run(&L), 0);
}

/*
 * The norms' gradients cover only each rank's rows: left unsummed, the
 * harness sees the ranks wrong (Qwen2 has no qk-norm, so this fails only if
 * the rows really are split).
 */
static void unsummed_norm_grads_are_seen(void **state) {
    (void)state;
    pt_layout L = {.name = "t2-sp-broken",
                   .dp = 1,
                   .tp = 2,
                   .pp = 1,
                   .n_mb = 1,
                   .model = "ref-qwen2",
                   .sp = 1,
                   .skip_partial = 1};
    assert_int_equal(pt_run(&L), RANK_WRONG);
}

/* A MoE model is refused, naming the option. */
static void sp_refuses_moe(void **state) {
    (void)state;
    areal_model_config cfg = {.num_layers = 2,
                              .num_heads = 4,
                              .num_kv_heads = 2,
                              .intermediate_size = 8,
                              .vocab_size = 96,
                              .num_experts = 4};
    areal_model_shard s = areal_model_shard_whole(&cfg);
    s.tp = 2, s.sequence_parallel = true;
    areal_error e;
    assert_int_equal(areal_model_shard_check(&cfg, &s, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "sequence_parallel"));
    int lo, hi;
    s.tp_rank = 1;
    areal_model_sp_rows(&s, 47, &lo, &hi);
    assert_int_equal(lo, 24);
    assert_int_equal(hi, 47);
    s.tp = 4, s.tp_rank = 3;
    areal_model_sp_rows(&s, 5, &lo, &hi); /* blocks of 2: the last rank has none */
    assert_int_equal(lo, 5);
    assert_int_equal(hi, 5);
}

/* Each t2 rank: the record of one forward of the batch, without and with sequence parallel. */
static int sp_memory_rank(areal_comm *c, void *arg) {
    const pt_layout *L = arg;
    int rank = areal_comm_rank(c), rc = 0;
    areal_error e = {0};
    areal_model m[2];
    areal_acts a[2];
    memset(m, 0, sizeof m), memset(a, 0, sizeof a);
    areal_coll *gs[AREAL_GROUP_KIND_COUNT] = {0};
    areal_strategy s = areal_strategy_single();
    s.tp = L->tp, s.edp = 0;
    areal_role_plan role;
    areal_coll_factory f = areal_comm_coll_factory(c);
    PT_CHECK("role", areal_comm_role_of_strategy(&s, &role, &e) == AREAL_OK);
    PT_CHECK("groups", areal_comm_role_groups(&role, &f, gs, &e) == AREAL_OK);
    areal_par_groups g = areal_par_groups_of(gs);
    size_t floats[2];
    pt_batch b;
    int lo = 0, hi = 0;
    for (int k = 0; k < 2; k++) {
        areal_model whole = {0};
        PT_CHECK("model", pt_model(L, NULL, &whole, &e) == AREAL_OK);
        areal_model_shard sh;
        int ok = areal_par_shard_of(&whole.cfg, &g, &sh, &e) == AREAL_OK;
        sh.sequence_parallel = k == 1;
        pt_batch_make(&b, whole.cfg.vocab_size);
        ok = ok && pt_model(L, &sh, &m[k], &e) == AREAL_OK;
        areal_model_free(&whole);
        PT_CHECK("shard", ok);
        areal_par_bind(&m[k], &g);
        areal_batch bt = {b.tokens, b.cu, b.T, PT_SEQS};
        PT_CHECK("forward", areal_model_forward(&m[k], &bt, &a[k], &e) == AREAL_OK);
        floats[k] = areal_acts_floats(&a[k]);
        areal_model_sp_rows(&m[k].shard, b.T, &lo, &hi);
    }
    /* per layer: res and mid, rstd1 and rstd2 keep hi - lo of T rows; one [T, H] scratch more */
    size_t T = (size_t)b.T, R = (size_t)(hi - lo), H = (size_t)m[0].cfg.hidden_size;
    size_t saved = (size_t)m[0].cfg.num_layers * 2 * (T - R) * (H + 1) - T * H;
    /* the plan's saving on tp rank 0 (its attention term assumes equal sequences: compare the
     * difference, which is the residual stream's alone) */
    areal_mem_model mm = areal_par_mem_model(&m[0].cfg);
    areal_mem_opts o = {.mb_tokens = b.T, .seq_len = b.T, .n_mb = 1};
    areal_mem_rank r0, r1;
    PT_CHECK("plan", areal_mem_stage(&mm, &s, &o, 0, &r0, &e) == AREAL_OK);
    o.sequence_parallel = true;
    PT_CHECK("plan", areal_mem_stage(&mm, &s, &o, 0, &r1, &e) == AREAL_OK);
    long long plan_saved = (long long)((r0.acts - r1.acts) / 4);
    printf("t2 rank %d: activation record %zu floats without sequence parallel, %zu with (%zu of "
           "%zu rows kept, %.1f%% smaller; the plan's saving on rank 0: %lld)\n",
           rank, floats[0], floats[1], R, T, 100.0 * (double)(floats[0] - floats[1]) / floats[0],
           plan_saved);
    if (floats[0] - floats[1] != saved || (rank == 0 && (long long)saved != plan_saved)) {
        fprintf(stderr, "t2 rank %d: the record shrank by %zu floats, not %zu (plan %lld)\n", rank,
                floats[0] - floats[1], saved, plan_saved);
        rc = RANK_WRONG;
    }
out:
    for (int k = 0; k < 2; k++) {
        areal_acts_free(&a[k]);
        areal_model_free(&m[k]);
    }
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(gs[k]);
    return rc;
}

/* The synthetic model (4 layers, hidden 32): 47 tokens, 24 rows on rank 0 and 23 on rank 1. */
static void sp_shrinks_the_activations(void **state) {
    (void)state;
    pt_layout L = {.name = "t2-sp-mem", .tp = 2};
    assert_int_equal(pt_ranks_run(2, 30000, sp_memory_rank, &L), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t2_sp),
        cmocka_unit_test(t2_sp_vocab),
        cmocka_unit_test(t4_sp),
        cmocka_unit_test(d2t2p2_sp),
        cmocka_unit_test(unsummed_norm_grads_are_seen),
        cmocka_unit_test(sp_refuses_moe),
        cmocka_unit_test(sp_shrinks_the_activations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
