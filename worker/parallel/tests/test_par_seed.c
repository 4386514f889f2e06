/*
 * test_par_seed.c - expert and context parallelism together, up to the
 * seed's 13B-MoE strategy d4 t4 p2 c2 e8 etp4 (64 forked ranks) on a tiny
 * synthetic Qwen3-MoE (8 experts, every layer MoE, 8 query and 4 key/value
 * heads): sequences over dp, each micro-batch's sequences sharded over cp
 * (areal/parallel/cp.h), heads over tp, layers over pp, the experts' slots
 * dispatched by all-to-all(v) over ep (which the expert layout carves out
 * of dp x cp) and split over etp (areal/parallel/ep.h); one training step
 * equals one process at par_test_util.h's 1e-5 (the layouts only reassociate
 * sums). make test runs c2 e2 and t2 c2 e2 etp2; the 64-rank layout runs in
 * make test-long (AREAL_TEST_LONG=1), since 64 processes on two cores take
 * longer than a unit test should.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "areal/parallel/ep.h"
#include "cp_test_util.h"

static const char SEED_MOE[] =
    "{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"bos_token_id\":0,\"decoder_sparse_step\":1,"
    "\"eos_token_id\":95,\"head_dim\":8,\"hidden_act\":\"silu\",\"hidden_size\":32,"
    "\"intermediate_size\":64,\"max_position_embeddings\":256,\"mlp_only_layers\":[],"
    "\"model_type\":\"qwen3_moe\",\"moe_intermediate_size\":16,\"norm_topk_prob\":true,"
    "\"num_attention_heads\":8,\"num_experts\":8,\"num_experts_per_tok\":2,"
    "\"num_hidden_layers\":2,\"num_key_value_heads\":4,\"output_router_logits\":false,"
    "\"rms_norm_eps\":1e-06,\"rope_theta\":10000.0,\"tie_word_embeddings\":false,"
    "\"torch_dtype\":\"float32\",\"vocab_size\":96}";

typedef struct seed_layout {
    const char *name;
    int dp, tp, pp, cp, ep, etp, n_mb;
} seed_layout;

/* The synthetic MoE (s NULL: whole), parameters from pt_synth_tensor's hash. */
static int seed_model(const areal_model_shard *s, areal_model *m, areal_error *err) {
    areal_model_config cfg;
    int rc = areal_model_config_parse(SEED_MOE, sizeof SEED_MOE - 1, "seed-moe", &cfg, err);
    if (rc == AREAL_OK)
        rc = s == NULL ? areal_model_init(m, &cfg, NULL, err)
                       : areal_model_init_shard(m, &cfg, s, NULL, err);
    if (rc != AREAL_OK)
        return rc;
    areal_tensor_spec *whole = NULL;
    size_t nw = 0;
    rc = areal_model_expected_tensors(&cfg, &whole, &nw, err);
    float *buf = malloc(sizeof(float) * (size_t)cfg.vocab_size * 1024);
    for (size_t i = 0; rc == AREAL_OK && i < m->n_specs; i++) {
        size_t j = 0;
        while (j < nw && strcmp(whole[j].name, m->specs[i].name) != 0)
            j++;
        if (j == nw || buf == NULL) {
            rc = areal_error_set(err, AREAL_EINVAL, -1, "seed model: no tensor %s",
                                 m->specs[i].name);
            break;
        }
        pt_synth_tensor(&whole[j], buf);
        areal_tensor_slice_copy(m->params + m->offset[i], buf, &whole[j], &m->slices[i]);
    }
    free(buf);
    free(whole);
    if (rc != AREAL_OK)
        areal_model_free(m);
    return rc;
}

static int seed_rank(areal_comm *c, void *arg) {
    const seed_layout *SL = arg;
    const pt_layout lay = {.name = SL->name}, *L = &lay; /* PT_CHECK's messages */
    int rank = areal_comm_rank(c), rc = 0;
    areal_error e = {0};
    areal_model ref = {0}, m = {0};
    areal_coll *gs[AREAL_GROUP_KIND_COUNT] = {0};
    float *ref_logits = NULL, *ref_grads = NULL;
    areal_adamw st = {0};
    areal_par_cp_shard sh[PT_MAX_MB] = {0};
    areal_par_ep disp;
    pt_batch b;
    double ref_loss = 0, ref_norm = 0, max_norm = 0, loss = 0, norm = 0;
    PT_CHECK("reference model", seed_model(NULL, &ref, &e) == AREAL_OK);
    pt_batch_make(&b, ref.cfg.vocab_size);
    PT_CHECK("reference step", pt_reference(&ref, &b, &ref_logits, &ref_grads, &ref_loss, &ref_norm,
                                            &max_norm, &e) == AREAL_OK);
    areal_strategy s = areal_strategy_single();
    s.dp = SL->dp, s.tp = SL->tp, s.pp = SL->pp, s.cp = SL->cp, s.ep = SL->ep, s.etp = SL->etp;
    s.edp = 0;
    areal_role_plan role;
    areal_coll_factory f = areal_comm_coll_factory(c);
    PT_CHECK("role", areal_comm_role_of_strategy(&s, &role, &e) == AREAL_OK);
    PT_CHECK("groups", areal_comm_role_groups(&role, &f, gs, &e) == AREAL_OK);
    areal_par_groups g = areal_par_groups_of(gs);
    areal_par_ep_groups eg = areal_par_ep_groups_of(gs);
    areal_coll *cpg = gs[AREAL_GROUP_CP], *dpcp = eg.dp;
    areal_model_shard shd;
    PT_CHECK("shard", areal_par_ep_shard_of(&ref.cfg, &eg, &shd, &e) == AREAL_OK);
    PT_CHECK("shard model", seed_model(&shd, &m, &e) == AREAL_OK);
    PT_CHECK("dispatcher", areal_par_ep_init(&disp, &eg, &e) == AREAL_OK);
    areal_par_bind(&m, &g);
    areal_par_ep_bind(&m, &disp);

    int D = areal_par_size(g.dp), d = areal_par_rank(g.dp), nmb = SL->n_mb;
    int C = areal_par_size(cpg), r = areal_par_rank(cpg);
    int s0 = d * PT_SEQS / D, s1 = (d + 1) * PT_SEQS / D;
    pt_mb mbs[PT_MAX_MB];
    areal_batch bs[PT_MAX_MB];
    long local = 0, n_total = 0;
    for (int i = 0; i < nmb; i++) {
        pt_mb_make(&mbs[i], &b, s0 + i * (s1 - s0) / nmb, s0 + (i + 1) * (s1 - s0) / nmb);
        PT_CHECK("cp shard", areal_par_cp_shard_make(&mbs[i].b, C, r, &sh[i], &e) == AREAL_OK);
        bs[i] = sh[i].b;
        for (int t = 0; t < bs[i].n_tokens; t++)
            local += b.targets[mbs[i].tok0 + sh[i].t.gidx[t]] >= 0;
    }
    areal_par_cp cpx = {.cp = cpg, .shards = sh, .n_shards = nmb};
    areal_par_cp_bind(&m, &cpx);
    PT_CHECK("token count", areal_par_global_count(dpcp, local, &n_total, &e) == AREAL_OK);
    cp_loss pl = {.b = &b, .mbs = mbs, .sh = sh, .n_total = n_total, .ref_logits = ref_logits};
    PT_CHECK("1f1b",
             areal_par_pipe_1f1b(&m, g.pp, bs, nmb, cp_loss_fn, &pl, &loss, &e) == AREAL_OK);
    float lv[2] = {(float)loss, 0};
    lv[1] = (float)(loss - (double)lv[0]);
    if (areal_par_size(dpcp) > 1)
        PT_CHECK("loss sum",
                 areal_coll_all_reduce(dpcp, lv, 2, AREAL_DT_F32, AREAL_SUM, &e) == AREAL_OK);
    loss = (double)lv[0] + (double)lv[1];
    PT_CHECK("partial grads", areal_par_reduce_partial_grads(&m, &g, &e) == AREAL_OK);
    PT_CHECK("tied embedding", areal_par_reduce_tied_embed(&m, &g, &e) == AREAL_OK);
    PT_CHECK("ep grads", areal_par_ep_reduce_grads(&m, &eg, &e) == AREAL_OK);
    const char *gworst = "-", *worst = "-";
    double ge = pt_tensors_err(&m, m.grads, &ref, ref_grads, &gworst);
    PT_CHECK("grad norm", areal_par_ep_grad_norm(&m, &eg, &norm, &e) == AREAL_OK);
    areal_par_clip(m.grads, m.n_params, norm, max_norm);
    PT_CHECK("adamw", areal_adamw_init(&st, m.n_params, &e) == AREAL_OK);
    areal_adamw_step(&st, &PT_ADAMW, PT_LR, m.params, m.grads, NULL);

    double le = fabs(loss - ref_loss) / fabs(ref_loss), ne = fabs(norm - ref_norm) / ref_norm;
    double we = pt_tensors_err(&m, m.params, &ref, ref.params, &worst);
    int last = shd.pp_stage == shd.pp - 1;
    printf("%-14s rank %2d (dp %d/%d cp %d/%d tp %d/%d pp %d/%d ep %d/%d etp %d/%d): loss %.6f "
           "(%.1e), grad norm %.6f (%.1e), grads %.1e (%s), weights %.1e (%s)",
           SL->name, rank, d, D, r, C, shd.tp_rank, shd.tp, shd.pp_stage, shd.pp, shd.ep_rank,
           shd.ep, shd.etp_rank, shd.etp, loss, le, norm, ne, ge, gworst, we, worst);
    if (last)
        printf(", logits %.1e", pl.logits_err);
    printf("\n");
    if (n_total != b.n_targets || !(le <= PT_TOL) || !(ne <= PT_TOL) || !(we <= PT_TOL) ||
        !(ge <= PT_GRAD_TOL) || !(pl.logits_err <= PT_TOL)) {
        fprintf(stderr, "%s rank %d: differs from one process (tolerance %g)\n", SL->name, rank,
                PT_TOL);
        rc = RANK_WRONG;
    }
out:
    for (int i = 0; i < PT_MAX_MB; i++)
        areal_par_cp_shard_free(&sh[i]);
    areal_adamw_free(&st);
    areal_model_free(&m);
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(gs[k]);
    areal_model_free(&ref);
    free(ref_logits);
    free(ref_grads);
    return rc;
}

static int seed_run(const seed_layout *L) {
    return pt_ranks_run(L->dp * L->tp * L->pp * L->cp, 60000, seed_rank, (void *)L);
}

static void c2_e2(void **state) {
    (void)state;
    seed_layout L = {
        .name = "c2e2", .dp = 1, .tp = 1, .pp = 1, .cp = 2, .ep = 2, .etp = 1, .n_mb = 2};
    assert_int_equal(seed_run(&L), 0);
}

static void t2_c2_e2_etp2(void **state) {
    (void)state;
    seed_layout L = {
        .name = "t2c2e2etp2", .dp = 1, .tp = 2, .pp = 1, .cp = 2, .ep = 2, .etp = 2, .n_mb = 1};
    assert_int_equal(seed_run(&L), 0);
}

/* The seed's strategy: 64 ranks; make test-long. */
static void d4_t4_p2_c2_e8_etp4(void **state) {
    (void)state;
    const char *on = getenv("AREAL_TEST_LONG");
    if (on == NULL || strcmp(on, "1") != 0) {
        printf("d4t4p2c2e8etp4: 64 ranks, run by make test-long (AREAL_TEST_LONG=1)\n");
        skip();
    }
    seed_layout L = {
        .name = "d4t4p2c2e8etp4", .dp = 4, .tp = 4, .pp = 2, .cp = 2, .ep = 8, .etp = 4, .n_mb = 1};
    assert_int_equal(seed_run(&L), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(c2_e2),
        cmocka_unit_test(t2_c2_e2_etp2),
        cmocka_unit_test(d4_t4_p2_c2_e8_etp4),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
