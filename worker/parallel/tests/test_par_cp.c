/*
 * test_par_cp.c - context parallelism on forked ranks (CPU backend): each
 * micro-batch's packed sequences of unequal lengths (5, 9, 3, 7, 6, 4, 8, 5
 * tokens: the 3-token one shorter than 2c for c2, most of them for c4) cut
 * into 2c chunks, rank r holding chunks r and 2c-1-r (areal/parallel/cp.h),
 * RoPE at the tokens' own positions, keys and values all-gathered over the
 * cp group and their gradients reduce-scattered back, every gradient summed
 * over dp-cp; one training step equals one process (par_test_util.h: the
 * model, batch, reference step and the 1e-5 tolerance, which holds because
 * the layout only reassociates sums: the attention's softmax and the
 * gradient sums run in another order). The step is areal/parallel/step.h's
 * (areal_par_step_cp: the trainer's), which cuts the whole micro-batches
 * itself. Layouts: c2, c4, and c2 composed with dp, pp and tp (d2 p2 t2 c2,
 * 16 ranks).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "cp_test_util.h"

typedef struct cp_layout {
    const char *name;
    int dp, tp, pp, cp, n_mb;
} cp_layout;

static int cp_rank(areal_comm *c, void *arg) {
    const cp_layout *CL = arg;
    const pt_layout lay = {.name = CL->name}, *L = &lay; /* the synthetic model */
    int rank = areal_comm_rank(c), rc = 0;
    areal_error e = {0};
    areal_model ref = {0}, m = {0};
    areal_coll *gs[AREAL_GROUP_KIND_COUNT] = {0};
    float *ref_logits = NULL, *ref_grads = NULL;
    areal_par_step ps = {0};
    pt_batch b;
    double ref_loss = 0, ref_norm = 0, max_norm = 0, loss = 0, norm = 0;
    PT_CHECK("reference model", pt_model(L, NULL, &ref, &e) == AREAL_OK);
    pt_batch_make(&b, ref.cfg.vocab_size);
    PT_CHECK("reference step", pt_reference(&ref, &b, &ref_logits, &ref_grads, &ref_loss, &ref_norm,
                                            &max_norm, &e) == AREAL_OK);
    areal_strategy s = areal_strategy_single();
    s.dp = CL->dp, s.tp = CL->tp, s.pp = CL->pp, s.cp = CL->cp, s.edp = 0;
    areal_role_plan role;
    areal_coll_factory f = areal_comm_coll_factory(c);
    PT_CHECK("role", areal_comm_role_of_strategy(&s, &role, &e) == AREAL_OK);
    PT_CHECK("groups", areal_comm_role_groups(&role, &f, gs, &e) == AREAL_OK);
    areal_par_groups g = areal_par_groups_of(gs);
    areal_coll *cpg = gs[AREAL_GROUP_CP], *dpcp = gs[AREAL_GROUP_DP_CP];
    areal_model_shard shd;
    PT_CHECK("shard", areal_par_shard_of(&ref.cfg, &g, &shd, &e) == AREAL_OK);
    PT_CHECK("shard model", pt_model(L, &shd, &m, &e) == AREAL_OK);

    /* this dp slice's whole micro-batches, the same on every cp rank: the step cuts them */
    int D = areal_par_size(g.dp), d = areal_par_rank(g.dp), nmb = CL->n_mb;
    int C = areal_par_size(cpg), r = areal_par_rank(cpg);
    int s0 = d * PT_SEQS / D, s1 = (d + 1) * PT_SEQS / D;
    pt_mb mbs[PT_MAX_MB];
    areal_batch bs[PT_MAX_MB];
    long local = 0, n_total = 0, whole = 0;
    for (int i = 0; i < nmb; i++) {
        pt_mb_make(&mbs[i], &b, s0 + i * (s1 - s0) / nmb, s0 + (i + 1) * (s1 - s0) / nmb);
        bs[i] = mbs[i].b;
        whole += bs[i].n_tokens;
        for (int t = 0; t < bs[i].n_tokens; t++)
            local += b.targets[mbs[i].tok0 + t] >= 0;
    }
    /* the cp ranks share the slice: its count over dp is the global one */
    PT_CHECK("token count", areal_par_global_count(g.dp, local, &n_total, &e) == AREAL_OK);
    /* the step itself: areal/parallel/step.h with context parallelism, the trainer's */
    PT_CHECK("step init",
             areal_par_step_init(&ps, AREAL_PAR_ADAMW, &g, dpcp, &m, NULL, NULL, &e) == AREAL_OK);
    ps.bucket = 1000;
    PT_CHECK("step cp", areal_par_step_cp(&ps, cpg, &e) == AREAL_OK);
    cp_loss pl = {.b = &b, .mbs = mbs, .ps = &ps, .n_total = n_total, .ref_logits = ref_logits};
    PT_CHECK("step grads",
             areal_par_step_grads(&ps, bs, nmb, cp_loss_fn, &pl, &loss, &e) == AREAL_OK);
    /* the shards really are shards: this rank ran about 1 / c of its slice's tokens */
    PT_CHECK("sharded", C == 1 || (ps.tokens_run < whole && ps.tokens_run * C > whole / 2));
    const char *gworst = "-", *worst = "-";
    double ge = pt_tensors_err(&m, m.grads, &ref, ref_grads, &gworst);
    PT_CHECK("step apply",
             areal_par_step_apply(&ps, &PT_ADAMW, PT_LR, max_norm, &norm, &e) == AREAL_OK);

    double le = fabs(loss - ref_loss) / fabs(ref_loss), ne = fabs(norm - ref_norm) / ref_norm;
    double we = pt_tensors_err(&m, m.params, &ref, ref.params, &worst);
    int last = shd.pp_stage == shd.pp - 1;
    printf("%-8s rank %2d (cp %d/%d tp %d/%d pp %d/%d dp %d/%d, %d tokens): loss %.6f (rel err "
           "%.1e), grad norm %.6f (%.1e), grads %.1e (%s), weights %.1e (%s)",
           CL->name, rank, r, C, shd.tp_rank, shd.tp, shd.pp_stage, shd.pp, d, D,
           (int)ps.tokens_run, loss, le, norm, ne, ge, gworst, we, worst);
    if (last)
        printf(", logits %.1e", pl.logits_err);
    printf("\n");
    if (n_total != b.n_targets || !(le <= PT_TOL) || !(ne <= PT_TOL) || !(we <= PT_TOL) ||
        !(ge <= PT_GRAD_TOL) || !(pl.logits_err <= PT_TOL)) {
        fprintf(stderr, "%s rank %d: differs from one process (tolerance %g)\n", CL->name, rank,
                PT_TOL);
        rc = RANK_WRONG;
    }
out:
    areal_par_step_free(&ps);
    areal_model_free(&m);
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(gs[k]);
    areal_model_free(&ref);
    free(ref_logits);
    free(ref_grads);
    return rc;
}

static int cp_run(const cp_layout *L) {
    return pt_ranks_run(L->dp * L->tp * L->pp * L->cp, 30000, cp_rank, (void *)L);
}

/* The split itself: chunks r and 2c-1-r of each sequence, empty chunks of a short one. */
static void shard_split(void **state) {
    (void)state;
    int32_t tok[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, cu[3] = {0, 8, 10};
    areal_batch w = {.tokens = tok, .cu_seqlens = cu, .n_tokens = 10, .n_seqs = 2};
    areal_par_cp_shard s;
    areal_error e;
    /* c2: chunks of the 8-token sequence are [0,2) [2,4) [4,6) [6,8); of the 2-token one
       [0,0) [0,1) [1,1) [1,2): rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2 */
    assert_int_equal(areal_par_cp_shard_make(&w, 2, 0, &s, &e), AREAL_OK);
    int32_t want0[] = {0, 1, 6, 7, 9}, pos0[] = {0, 1, 6, 7, 1};
    assert_int_equal(s.b.n_tokens, 5);
    assert_memory_equal(s.b.tokens, want0, sizeof want0);
    assert_memory_equal(s.t.pos, pos0, sizeof pos0);
    assert_memory_equal(s.t.gidx, want0, sizeof want0);
    areal_par_cp_shard_free(&s);
    assert_int_equal(areal_par_cp_shard_make(&w, 2, 1, &s, &e), AREAL_OK);
    int32_t want1[] = {2, 3, 4, 5, 8};
    assert_int_equal(s.b.n_tokens, 5);
    assert_memory_equal(s.t.gidx, want1, sizeof want1);
    areal_par_cp_shard_free(&s);
    /* a shard with no token is refused, naming the fix */
    int32_t cu1[2] = {0, 1};
    areal_batch one = {.tokens = tok, .cu_seqlens = cu1, .n_tokens = 1, .n_seqs = 1};
    assert_int_equal(areal_par_cp_shard_make(&one, 2, 1, &s, &e), AREAL_EINVAL); /* rank 0 has it */
    assert_non_null(strstr(e.msg, "smaller cp"));
    assert_int_equal(areal_par_cp_shard_make(&w, 2, 2, &s, &e), AREAL_EINVAL);
}

static void c2(void **state) {
    (void)state;
    cp_layout L = {.name = "c2", .dp = 1, .tp = 1, .pp = 1, .cp = 2, .n_mb = 1};
    assert_int_equal(cp_run(&L), 0);
}

static void c4(void **state) {
    (void)state;
    cp_layout L = {.name = "c4", .dp = 1, .tp = 1, .pp = 1, .cp = 4, .n_mb = 2};
    assert_int_equal(cp_run(&L), 0);
}

static void d2p2t2c2(void **state) {
    (void)state;
    cp_layout L = {.name = "d2p2t2c2", .dp = 2, .tp = 2, .pp = 2, .cp = 2, .n_mb = 2};
    assert_int_equal(cp_run(&L), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shard_split),
        cmocka_unit_test(c2),
        cmocka_unit_test(c4),
        cmocka_unit_test(d2p2t2c2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
