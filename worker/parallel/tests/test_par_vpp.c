/*
 * test_par_vpp.c - the interleaved pipeline (virtual_pipeline_parallel_size
 * 2) on forked ranks (CPU backend): each rank's two model chunks, Megatron's
 * interleaved 1F1B order with the transfers ordered by the replayed
 * schedule, give one process's GRPO step (logits, loss, grad norm, every
 * updated weight of every chunk; par_test_util.h: the harness and its
 * tolerances); and the schedule's bubble against Megatron's formulas.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "par_test_util.h"
#include "areal/parallel/vpp.h"

#define VPP 2

/* The synthetic model with 8 layers: one a virtual stage of p4 x vpp 2. */
static const char SYNTH8[] =
    "{\"architectures\":[\"Qwen3ForCausalLM\"],\"attention_bias\":false,\"bos_token_id\":0,"
    "\"eos_token_id\":95,\"head_dim\":8,\"hidden_act\":\"silu\",\"hidden_size\":32,"
    "\"intermediate_size\":64,\"max_position_embeddings\":256,\"model_type\":\"qwen3\","
    "\"num_attention_heads\":8,\"num_hidden_layers\":8,\"num_key_value_heads\":4,"
    "\"rms_norm_eps\":1e-06,\"rope_scaling\":null,\"rope_theta\":10000.0,"
    "\"tie_word_embeddings\":true,\"torch_dtype\":\"float32\",\"vocab_size\":96}";

/* A layout and how it runs: the schedule's own calls, or the shared step (step.h). */
typedef struct vpp_case {
    pt_layout L;
    int step; /* areal_par_step_vpp: the trainer's calls, the recompute and the HF tensors */
} vpp_case;

/*
 * Through the step: every HF tensor gathered over the chunks equals the one
 * process's updated weight, and a moment set from whole tensors reads back
 * (set and get both look in every chunk). The worst relative error.
 */
static double step_tensors_err(areal_par_step *ps, areal_coll *world, const areal_model *ref,
                               areal_error *e) {
    double worst = 0;
    for (size_t i = 0; i < ref->n_specs; i++) {
        const areal_tensor_spec *t = &ref->specs[i];
        size_t n = (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
        float *w = malloc(sizeof(float) * n), *v = malloc(sizeof(float) * n);
        int rc = w == NULL || v == NULL
                     ? AREAL_ENOMEM
                     : areal_par_step_get_tensor(ps, world, t, AREAL_PAR_PARAMS, w, e);
        double x = rc == AREAL_OK ? pt_rel_err(w, ref->params + ref->offset[i], n) : INFINITY;
        for (size_t k = 0; rc == AREAL_OK && k < n; k++)
            w[k] = (float)(i + 1) + (float)k * 1e-3f;
        if (rc == AREAL_OK)
            rc = areal_par_step_set_tensor(ps, t, AREAL_PAR_EXP_AVG_SQ, w, e);
        if (rc == AREAL_OK)
            rc = areal_par_step_get_tensor(ps, world, t, AREAL_PAR_EXP_AVG_SQ, v, e);
        double y = rc == AREAL_OK ? pt_rel_err(v, w, n) : INFINITY;
        x = y > x || isnan(y) ? y : x;
        worst = x > worst || isnan(x) ? x : worst;
        free(w);
        free(v);
    }
    return worst;
}

static int vpp_rank(areal_comm *c, void *arg) {
    const vpp_case *vc = arg;
    const pt_layout *L = &vc->L;
    areal_par_step ps = {0};
    double lpe = 0, te = 0;
    int rank = areal_comm_rank(c), rc = 0;
    areal_error e = {0};
    areal_model ref = {0}, ch[VPP];
    areal_model *chunks[VPP] = {&ch[0], &ch[1]};
    areal_adamw st[VPP];
    memset(ch, 0, sizeof ch);
    memset(st, 0, sizeof st);
    areal_coll *gs[AREAL_GROUP_KIND_COUNT] = {0};
    float *ref_logits = NULL, *ref_grads = NULL;
    pt_grpo grpo = {0};
    pt_batch b;
    double ref_loss = 0, ref_norm = 0, max_norm = 0, loss = 0, norm = 0;
    PT_CHECK("reference model", pt_model(L, NULL, &ref, &e) == AREAL_OK);
    pt_batch_make(&b, ref.cfg.vocab_size);
    PT_CHECK("grpo batch", pt_grpo_prepare(&grpo, &ref, &b, &e) == AREAL_OK);
    b.grpo = &grpo;
    PT_CHECK("reference step", pt_reference(&ref, &b, &ref_logits, &ref_grads, &ref_loss, &ref_norm,
                                            &max_norm, &e) == AREAL_OK);
    areal_strategy s = areal_strategy_single();
    s.pp = L->pp, s.edp = 0;
    areal_role_plan role;
    areal_coll_factory f = areal_comm_coll_factory(c);
    PT_CHECK("role", areal_comm_role_of_strategy(&s, &role, &e) == AREAL_OK);
    PT_CHECK("groups", areal_comm_role_groups(&role, &f, gs, &e) == AREAL_OK);
    areal_par_groups g = areal_par_groups_of(gs);
    int p = areal_par_size(g.pp), r = areal_par_rank(g.pp);
    for (int k = 0; k < VPP; k++) {
        areal_model_shard sh;
        PT_CHECK("chunk shard",
                 areal_model_shard_stage(&ref.cfg, k * p + r, p * VPP, &sh, &e) == AREAL_OK);
        PT_CHECK("chunk model", pt_model(L, &sh, &ch[k], &e) == AREAL_OK);
        areal_par_bind(&ch[k], &g);
    }
    int nmb = L->n_mb;
    pt_mb mbs[PT_MAX_MB];
    areal_batch bs[PT_MAX_MB];
    for (int i = 0; i < nmb; i++) {
        pt_mb_make(&mbs[i], &b, i * PT_SEQS / nmb, (i + 1) * PT_SEQS / nmb);
        bs[i] = mbs[i].b;
    }
    pt_loss pl = {.b = &b,
                  .mbs = mbs,
                  .n_total = b.n_targets,
                  .ref_logits = ref_logits,
                  .V = ref.cfg.vocab_size};
    pl.vocab.Vl = ref.cfg.vocab_size;
    PT_CHECK("grpo loss", pt_grpo_layout(&grpo, &b, mbs, nmb, NULL, &e) == AREAL_OK);
    pl.ppo = &grpo.par;
    if (vc->step) {
        /* the trainer's calls: recompute, forward-backward with its sums, the update */
        PT_CHECK("step init", areal_par_step_init(&ps, AREAL_PAR_ADAMW, &g, g.dp, &ch[0], NULL,
                                                  NULL, &e) == AREAL_OK);
        PT_CHECK("step vpp", areal_par_step_vpp(&ps, chunks, VPP, &e) == AREAL_OK &&
                                 areal_par_step_n_chunks(&ps) == VPP);
        lpe = pt_check_recompute(&ps, &b, mbs, bs, nmb, &grpo, &e);
        PT_CHECK("step grads",
                 areal_par_step_grads(&ps, bs, nmb, pt_loss_fn, &pl, &loss, &e) == AREAL_OK);
    } else {
        PT_CHECK("interleaved", areal_par_pipe_interleaved(chunks, VPP, g.pp, bs, nmb, pt_loss_fn,
                                                           &pl, &loss, &e) == AREAL_OK);
        for (int k = 0; k < VPP; k++)
            PT_CHECK("tied embedding", areal_par_reduce_tied_embed(&ch[k], &g, &e) == AREAL_OK);
        PT_CHECK("grad norm", areal_par_vpp_grad_norm(chunks, VPP, &g, &norm, &e) == AREAL_OK);
    }
    double ge = 0, we = 0;
    const char *gworst = "-", *worst = "-";
    for (int k = 0; k < VPP; k++) {
        const char *w1 = "-";
        double x = pt_tensors_err(&ch[k], ch[k].grads, &ref, ref_grads, &w1);
        if (x > ge || isnan(x))
            ge = x, gworst = w1;
    }
    if (vc->step)
        PT_CHECK("step apply",
                 areal_par_step_apply(&ps, &PT_ADAMW, PT_LR, max_norm, &norm, &e) == AREAL_OK);
    for (int k = 0; k < VPP; k++) {
        const char *w1 = "-";
        double x;
        if (vc->step)
            goto weights;
        areal_par_clip(ch[k].grads, ch[k].n_params, norm, max_norm);
        PT_CHECK("adamw", areal_adamw_init(&st[k], ch[k].n_params, &e) == AREAL_OK);
        areal_adamw_step(&st[k], &PT_ADAMW, PT_LR, ch[k].params, ch[k].grads, NULL);
    weights:
        x = pt_tensors_err(&ch[k], ch[k].params, &ref, ref.params, &w1);
        if (x > we || isnan(x))
            we = x, worst = w1;
    }
    double le = fabs(loss - ref_loss) / fabs(ref_loss), ne = fabs(norm - ref_norm) / ref_norm;
    int last = r == p - 1;
    printf("%-8s rank %d (stages %d,%d of %d): loss %.6f (rel err %.1e), grad norm %.6f (%.1e), "
           "grads %.1e (%s), weights %.1e (%s)%s",
           L->name, rank, r, p + r, p * VPP, loss, le, norm, ne, ge, gworst, we, worst,
           last ? "" : "\n");
    if (last)
        printf(", logits %.1e\n", pl.logits_err);
    if (vc->step) {
        te = step_tensors_err(&ps, g.pp, &ref, &e);
        printf("%-8s rank %d: through the step: recompute %.1e, HF tensors %.1e\n", L->name, rank,
               lpe, te);
    }
    if (!(lpe <= PT_TOL) || !(te <= PT_TOL)) {
        fprintf(stderr, "%s rank %d: the step's recompute or HF tensors differ (%s)\n", L->name,
                rank, e.msg);
        rc = RANK_WRONG;
    }
    if (!(le <= PT_TOL) || !(ne <= PT_TOL) || !(we <= PT_TOL) || !(ge <= PT_GRAD_TOL) ||
        !(pl.logits_err <= PT_TOL)) {
        fprintf(stderr, "%s rank %d: differs from one process (tolerance %g)\n", L->name, rank,
                PT_TOL);
        rc = RANK_WRONG;
    }
out:
    areal_par_step_free(&ps);
    pt_grpo_free(&grpo);
    for (int k = 0; k < VPP; k++) {
        areal_adamw_free(&st[k]);
        areal_model_free(&ch[k]);
    }
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(gs[k]);
    areal_model_free(&ref);
    free(ref_logits);
    free(ref_grads);
    return rc;
}

static int vpp_run(const pt_layout *L) {
    vpp_case vc = {*L, 0};
    return pt_ranks_run(L->pp, 30000, vpp_rank, &vc);
}

static int vpp_step_run(const pt_layout *L) {
    vpp_case vc = {*L, 1};
    return pt_ranks_run(L->pp, 30000, vpp_rank, &vc);
}

/* The synthetic 4-layer model, tied: virtual stages 0..3 on ranks 0,1,0,1. */
static void p2_vpp2(void **state) {
    (void)state;
    pt_layout L = {.name = "p2v2", .dp = 1, .tp = 1, .pp = 2, .n_mb = 4};
    assert_int_equal(vpp_run(&L), 0);
}

/* The same through the shared step (step.h's areal_par_step_vpp): what the trainer runs. */
static void p2_vpp2_step(void **state) {
    (void)state;
    pt_layout L = {.name = "p2v2-step", .dp = 1, .tp = 1, .pp = 2, .n_mb = 4};
    assert_int_equal(vpp_step_run(&L), 0);
}

/* 8 layers over p4 x vpp 2, 8 micro-batches: the steady state on every rank. */
static void p4_vpp2(void **state) {
    (void)state;
    pt_layout L = {.name = "p4v2", .dp = 1, .tp = 1, .pp = 4, .n_mb = 8, .synth = SYNTH8};
    assert_int_equal(vpp_run(&L), 0);
}

/* m == p: every op of every rank in warm-up order (Megatron's all-warm-up case). */
static void p4_vpp2_m4(void **state) {
    (void)state;
    pt_layout L = {.name = "p4v2-m4", .dp = 1, .tp = 1, .pp = 4, .n_mb = 4, .synth = SYNTH8};
    assert_int_equal(vpp_run(&L), 0);
}

/*
 * The schedule's bubble: plain 1F1B's equals (p - 1) / (m + p - 1); the
 * interleaved one is the formula with the warm-up divided by vpp,
 * ((p - 1) / vpp) / (m + (p - 1) / vpp) (Narayanan et al. 2021); with a
 * backward twice a forward both are exact.
 */
static void bubble_fractions(void **state) {
    (void)state;
    areal_error e;
    static const int cases[][2] = {{4, 8}, {4, 16}, {2, 4}, {8, 16}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int p = cases[i][0], m = cases[i][1];
        double b1 = 0, b2 = 0;
        assert_int_equal(areal_par_vpp_bubble(p, 1, m, &b1, &e), AREAL_OK);
        assert_int_equal(areal_par_vpp_bubble(p, 2, m, &b2, &e), AREAL_OK);
        double f1 = (double)(p - 1) / (m + p - 1), w = (p - 1) / 2.0, f2 = w / (m + w);
        printf("bubble p %d m %d: 1F1B %.4f (formula %.4f), vpp 2 %.4f (formula %.4f)\n", p, m, b1,
               f1, b2, f2);
        assert_true(fabs(b1 - f1) < 1e-9);
        assert_true(b2 < b1);
        assert_true(fabs(b2 - f2) < 1e-9);
    }
    assert_int_equal(areal_par_vpp_bubble(4, 2, 6, &(double){0}, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "multiple of pp"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(p2_vpp2),    cmocka_unit_test(p2_vpp2_step),     cmocka_unit_test(p4_vpp2),
        cmocka_unit_test(p4_vpp2_m4), cmocka_unit_test(bubble_fractions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
