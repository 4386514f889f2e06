/*
 * test_par_vocab.c - vocabulary parallelism on forked ranks (CPU backend):
 * the vocab-parallel heads (areal/parallel/vocab.h) against heads.c on the
 * whole rows, and layouts whose embedding, lm_head and loss are split by
 * vocabulary over tp (tied embeddings included, across pipeline stages)
 * equal to one process (par_test_util.h: the harness and its tolerances).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "par_test_util.h"

#define HT 7  /* rows */
#define HV 24 /* vocabulary: 12, 8 or 6 columns a rank */

/* One rank: its columns of fixed logits, logp / entropy / gradients against heads.c's. */
static int heads_rank(areal_comm *c, void *arg) {
    (void)arg;
    int rank = areal_comm_rank(c), n = areal_comm_world(c), rc = 0;
    areal_error e = {0};
    areal_coll *gs[AREAL_GROUP_KIND_COUNT] = {0};
    areal_strategy s = areal_strategy_single();
    s.tp = n, s.edp = 0;
    areal_role_plan role;
    areal_coll_factory f = areal_comm_coll_factory(c);
    if (areal_comm_role_of_strategy(&s, &role, &e) != AREAL_OK ||
        areal_comm_role_groups(&role, &f, gs, &e) != AREAL_OK) {
        fprintf(stderr, "rank %d: groups: %s\n", rank, e.msg);
        return RANK_COMM_FAIL;
    }
    float logits[HT * HV], dlp[HT], dent[HT], lp_ref[HT], ent_ref[HT], d_ref[HT * HV];
    int32_t tg[HT];
    for (int i = 0; i < HT * HV; i++)
        logits[i] = 3.0f * pt_hash_unit("vocab logits", (size_t)i);
    for (int t = 0; t < HT; t++) {
        tg[t] = t == 3 ? -1 : (int32_t)((t * 7 + 2) % HV); /* every rank owns some target */
        dlp[t] = 0.5f * pt_hash_unit("dlogp", (size_t)t);
        dent[t] = 0.3f * pt_hash_unit("dent", (size_t)t);
    }
    areal_token_logprobs(NULL, logits, HT, HV, tg, 0.7f, lp_ref, ent_ref);
    areal_token_logprobs_backward(NULL, logits, HT, HV, tg, 0.7f, dlp, dent, d_ref);
    double ce_ref = 0;
    float dce_ref[HT * HV];
    areal_cross_entropy(NULL, logits, HT, HV, tg, &ce_ref, dce_ref, &e);

    int Vl = HV / n, v0 = rank * Vl;
    areal_par_vocab v = {.tp = gs[AREAL_GROUP_TP], .v0 = v0, .Vl = Vl};
    float mine[HT * HV], lp[HT], ent[HT], d[HT * HV], want[HT * HV], dce[HT * HV];
    for (int t = 0; t < HT; t++)
        memcpy(mine + t * Vl, logits + t * HV + v0, sizeof(float) * (size_t)Vl);
    double ce = 0;
    int ok =
        areal_par_vocab_logprobs(&v, mine, HT, tg, 0.7f, lp, ent, &e) == AREAL_OK &&
        areal_par_vocab_logprobs_backward(&v, mine, HT, tg, 0.7f, dlp, dent, d, &e) == AREAL_OK &&
        areal_par_vocab_cross_entropy(&v, mine, HT, tg, &ce, dce, &e) == AREAL_OK;
    if (!ok) {
        fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        rc = RANK_COMM_FAIL;
        goto out;
    }
    for (int t = 0; t < HT; t++)
        memcpy(want + t * Vl, d_ref + t * HV + v0, sizeof(float) * (size_t)Vl);
    double el = pt_rel_err(lp, lp_ref, HT), ee = pt_rel_err(ent, ent_ref, HT);
    double ed = pt_rel_err(d, want, (size_t)HT * Vl);
    for (int t = 0; t < HT; t++)
        memcpy(want + t * Vl, dce_ref + t * HV + v0, sizeof(float) * (size_t)Vl);
    double ec = fabs(ce - ce_ref) / fabs(ce_ref), edc = pt_rel_err(dce, want, (size_t)HT * Vl);
    printf("vocab heads tp %d rank %d: logp %.1e entropy %.1e dlogits %.1e ce %.1e dce %.1e\n", n,
           rank, el, ee, ed, ec, edc);
    if (!(el <= 1e-6 && ee <= 1e-6 && ed <= 1e-6 && ec <= 1e-6 && edc <= 1e-6))
        rc = RANK_WRONG;
out:
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(gs[k]);
    return rc;
}

static void heads_equal_whole_rows(void **state) {
    (void)state;
    assert_int_equal(pt_ranks_run(2, 30000, heads_rank, NULL), 0);
    assert_int_equal(pt_ranks_run(4, 30000, heads_rank, NULL), 0);
}

/* Qwen3 fixture: tied embedding and lm_head, one buffer split by rows. */
static void t2_vocab_tied(void **state) {
    (void)state;
    pt_layout L = {
        .name = "t2-vocab", .dp = 1, .tp = 2, .pp = 1, .n_mb = 2, .model = "ref-qwen3", .vocab = 1};
    assert_int_equal(pt_run(&L), 0);
}

/* The synthetic model: GQA heads and 24 vocabulary rows a rank. */
static void t4_vocab(void **state) {
    (void)state;
    pt_layout L = {.name = "t4-vocab", .dp = 1, .tp = 4, .pp = 1, .n_mb = 1, .vocab = 1};
    assert_int_equal(pt_run(&L), 0);
}

/* Qwen2 fixture, untied, the NLL step through the vocab-parallel cross-entropy, with dp. */
static void d2t2_vocab_nll(void **state) {
    (void)state;
    pt_layout L = {.name = "d2t2-vnll",
                   .dp = 2,
                   .tp = 2,
                   .pp = 1,
                   .n_mb = 1,
                   .model = "ref-qwen2",
                   .vocab = 1,
                   .nll = 1};
    assert_int_equal(pt_run(&L), 0);
}

/* Tied across stages: the first and last stage's row slices summed over the embedding group. */
static void t2p2_vocab_tied(void **state) {
    (void)state;
    pt_layout L = {.name = "t2p2-vocab", .dp = 1, .tp = 2, .pp = 2, .n_mb = 3, .vocab = 1};
    assert_int_equal(pt_run(&L), 0);
}

/* A vocabulary the tp size does not divide is refused, naming the field. */
static void vocab_must_divide(void **state) {
    (void)state;
    areal_model_config cfg = {.num_layers = 2,
                              .num_heads = 4,
                              .num_kv_heads = 2,
                              .intermediate_size = 8,
                              .vocab_size = 95};
    areal_model_shard s = areal_model_shard_whole(&cfg);
    s.tp = 2, s.tp_rank = 1, s.vocab_parallel = true;
    areal_error e;
    assert_int_equal(areal_model_shard_check(&cfg, &s, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "vocab_size 95"));
    cfg.vocab_size = 96;
    assert_int_equal(areal_model_shard_check(&cfg, &s, &e), AREAL_OK);
    int v0 = -1;
    assert_int_equal(areal_model_shard_vocab(&cfg, &s, &v0), 48);
    assert_int_equal(v0, 48);
    s.vocab_parallel = false;
    assert_int_equal(areal_model_shard_vocab(&cfg, &s, &v0), 96);
    assert_int_equal(v0, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(heads_equal_whole_rows),
        cmocka_unit_test(t2_vocab_tied),
        cmocka_unit_test(t4_vocab),
        cmocka_unit_test(d2t2_vocab_nll),
        cmocka_unit_test(t2p2_vocab_tied),
        cmocka_unit_test(vocab_must_divide),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
