/*
 * test_par_overlap.c - the data-parallel reduction overlapped with the
 * backward (areal/parallel/overlap.h) on forked ranks: every rank runs one
 * training step (the NLL of par_test_util.h's batch, two micro-batches per
 * dp rank, clipping, AdamW) three ways from the same weights:
 *   A  the classic reduction after the backward (areal_par_dp_reduce_grads,
 *      areal_par_zero1_step);
 *   B  the overlap reducer with its hook unset: the same buckets, every one
 *      launched after the backward;
 *   C  the overlap reducer armed: buckets launched from the backward.
 * C equals B bitwise (gradients or ZeRO-1 pieces, norm, updated weights:
 * each element's reduction order is its bucket's collective either way) and
 * A within 1e-6 relative (other bucket boundaries reassociate the sums); C
 * launched buckets inside the backward (its counter is > 0), and B none.
 * A is itself one process's step (test_par_dp, par_test_util.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "areal/parallel/overlap.h"
#include "par_test_util.h"

#define OV_BUCKET 4096 /* floats: several buckets per layer of the synthetic model */
#define OV_TOL    1e-6

enum { OV_CLASSIC, OV_LATE, OV_ARMED, OV_MODES };

/* What one way of the step left. */
typedef struct ov_out {
    float *params, *red; /* updated weights; the reduced gradient (plain DP) or pieces (ZeRO-1) */
    size_t n_red, n_params;
    double norm;
    areal_par_overlap_stats stats;
} ov_out;

static void ov_out_free(ov_out *o) {
    free(o->params);
    free(o->red);
}

static float *dup_floats(const float *p, size_t n) {
    float *q = malloc(sizeof(float) * (n ? n : 1));
    if (q != NULL)
        memcpy(q, p, sizeof(float) * n);
    return q;
}

/* One step of L in `mode` on a fresh shard; max_norm 0: no clipping. */
static int ov_step(const pt_layout *L, int rank, const areal_par_groups *g,
                   const areal_model_shard *sh, int mode, double max_norm, ov_out *out) {
    areal_error e = {0};
    areal_model m = {0};
    areal_par_overlap o = {0};
    areal_par_zero1 z = {0};
    areal_adamw st = {0};
    pt_batch b;
    int rc = 0;
    PT_CHECK("shard model", pt_model(L, sh, &m, &e) == AREAL_OK);
    areal_par_bind(&m, g);
    pt_batch_make(&b, m.cfg.vocab_size);
    int D = areal_par_size(g->dp), d = areal_par_rank(g->dp);
    int s0 = d * PT_SEQS / D, s1 = (d + 1) * PT_SEQS / D, nmb = L->n_mb;
    pt_mb mbs[PT_MAX_MB];
    areal_batch bs[PT_MAX_MB];
    long local = 0, n_total = 0;
    for (int i = 0; i < nmb; i++) {
        pt_mb_make(&mbs[i], &b, s0 + i * (s1 - s0) / nmb, s0 + (i + 1) * (s1 - s0) / nmb);
        bs[i] = mbs[i].b;
        for (int t = 0; t < bs[i].n_tokens; t++)
            local += b.targets[mbs[i].tok0 + t] >= 0;
    }
    PT_CHECK("token count", areal_par_global_count(g->dp, local, &n_total, &e) == AREAL_OK);
    pt_loss pl = {.b = &b, .mbs = mbs, .n_total = n_total, .V = m.cfg.vocab_size};
    if (mode != OV_CLASSIC) {
        PT_CHECK("overlap init",
                 areal_par_overlap_init(&o, &m, g->dp, NULL, OV_BUCKET, L->zero1, &e) == AREAL_OK);
        if (mode == OV_LATE) /* the same buckets, none launched from the backward */
            areal_model_set_grad_ready(&m, NULL, NULL);
    }
    double loss = 0;
    PT_CHECK("1f1b",
             areal_par_pipe_1f1b(&m, g->pp, bs, nmb, pt_loss_fn, &pl, &loss, &e) == AREAL_OK);
    PT_CHECK("partial grads", areal_par_reduce_partial_grads(&m, g, &e) == AREAL_OK);
    PT_CHECK("tied embedding", areal_par_reduce_tied_embed(&m, g, &e) == AREAL_OK);
    if (L->zero1 && mode == OV_CLASSIC) {
        PT_CHECK("zero1 init", areal_par_zero1_init(&z, &m, g->dp, &e) == AREAL_OK);
        PT_CHECK("zero1 step", areal_par_zero1_step(&z, &m, g, &PT_ADAMW, PT_LR, max_norm,
                                                    &out->norm, NULL, &e) == AREAL_OK);
    } else if (L->zero1) {
        PT_CHECK("overlap zero1 step",
                 areal_par_overlap_zero1_step(&o, g, &PT_ADAMW, PT_LR, max_norm, &out->norm, NULL,
                                              &e) == AREAL_OK);
        out->red = dup_floats(o.gshard, o.S), out->n_red = o.S;
    } else {
        if (mode == OV_CLASSIC)
            PT_CHECK("dp grads", areal_par_dp_reduce_grads(&m, g->dp, 1000, &e) == AREAL_OK);
        else
            PT_CHECK("overlap finish", areal_par_overlap_finish(&o, &e) == AREAL_OK);
        out->red = dup_floats(m.grads, m.n_params), out->n_red = m.n_params;
        PT_CHECK("grad norm", areal_par_grad_norm(&m, m.grads, 0, m.n_params, g, NULL, &out->norm,
                                                  &e) == AREAL_OK);
        areal_par_clip(m.grads, m.n_params, out->norm, max_norm);
        PT_CHECK("adamw", areal_adamw_init(&st, m.n_params, &e) == AREAL_OK);
        areal_adamw_step(&st, &PT_ADAMW, PT_LR, m.params, m.grads, NULL);
    }
    out->stats = o.stats;
    out->params = dup_floats(m.params, m.n_params), out->n_params = m.n_params;
    PT_CHECK("copies",
             out->params != NULL && (out->red != NULL || (L->zero1 && mode == OV_CLASSIC)));
out:
    areal_adamw_free(&st);
    areal_par_zero1_free(&z);
    areal_par_overlap_free(&o);
    areal_model_free(&m);
    return rc;
}

static int ov_rank(areal_comm *c, void *arg) {
    const pt_layout *L = arg;
    int rank = areal_comm_rank(c), rc = 0;
    areal_error e = {0};
    areal_model ref = {0};
    areal_coll *gs[AREAL_GROUP_KIND_COUNT] = {0};
    ov_out w[OV_MODES] = {0};
    PT_CHECK("model", pt_model(L, NULL, &ref, &e) == AREAL_OK);
    areal_strategy s = areal_strategy_single();
    s.dp = L->dp, s.tp = L->tp, s.pp = L->pp, s.edp = 0;
    areal_role_plan role;
    areal_coll_factory f = areal_comm_coll_factory(c);
    PT_CHECK("role", areal_comm_role_of_strategy(&s, &role, &e) == AREAL_OK);
    PT_CHECK("groups", areal_comm_role_groups(&role, &f, gs, &e) == AREAL_OK);
    areal_par_groups g = areal_par_groups_of(gs);
    areal_model_shard sh;
    PT_CHECK("shard", areal_par_shard_of(&ref.cfg, &g, &sh, &e) == AREAL_OK);
    /* A unclipped first; then every way clips to half its norm, so the clip path runs */
    ov_out probe = {0};
    rc = ov_step(L, rank, &g, &sh, OV_CLASSIC, 0, &probe);
    double max_norm = probe.norm / 2;
    ov_out_free(&probe);
    for (int k = 0; rc == 0 && k < OV_MODES; k++)
        rc = ov_step(L, rank, &g, &sh, k, max_norm, &w[k]);
    if (rc != 0)
        goto out;
    const ov_out *A = &w[OV_CLASSIC], *B = &w[OV_LATE], *C = &w[OV_ARMED];
    size_t np = C->n_params;
    int bitwise = B->n_red == C->n_red && memcmp(B->red, C->red, sizeof(float) * B->n_red) == 0 &&
                  B->norm == C->norm;
    bitwise = bitwise && memcmp(B->params, C->params, sizeof(float) * np) == 0;
    double we = pt_rel_err(C->params, A->params, np);
    double ne = fabs(C->norm - A->norm) / A->norm;
    double ge = L->zero1 ? 0 : pt_rel_err(C->red, A->red, np);
    printf("%-10s rank %d: overlapped == late bitwise: %s; vs classic: norm %.1e, grads %.1e, "
           "weights %.1e; buckets early %ld (%zu bytes, %ld done before finish), late %ld; "
           "unarmed early %ld\n",
           L->name, rank, bitwise ? "yes" : "NO", ne, ge, we, C->stats.early, C->stats.early_bytes,
           C->stats.done_before_finish, C->stats.late, B->stats.early);
    if (!bitwise || !(we <= OV_TOL) || !(ne <= OV_TOL) || !(ge <= OV_TOL) || C->stats.early <= 0 ||
        C->stats.early_bytes == 0 || B->stats.early != 0) {
        fprintf(stderr, "%s rank %d: the overlapped reduction differs or did not overlap\n",
                L->name, rank);
        rc = RANK_WRONG;
    }
out:
    for (int k = 0; k < OV_MODES; k++)
        ov_out_free(&w[k]);
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(gs[k]);
    areal_model_free(&ref);
    return rc;
}

static int ov_run(const pt_layout *L) {
    return pt_ranks_run(L->dp * L->tp * L->pp, 30000, ov_rank, (void *)L);
}

static void d2(void **state) {
    (void)state;
    pt_layout L = {.name = "d2", .dp = 2, .tp = 1, .pp = 1, .n_mb = 2, .model = "ref-qwen3"};
    assert_int_equal(ov_run(&L), 0);
}

static void d4(void **state) {
    (void)state;
    pt_layout L = {.name = "d4", .dp = 4, .tp = 1, .pp = 1, .n_mb = 2};
    assert_int_equal(ov_run(&L), 0);
}

static void d2_zero1(void **state) {
    (void)state;
    pt_layout L = {
        .name = "d2-zero1", .dp = 2, .tp = 1, .pp = 1, .n_mb = 2, .zero1 = 1, .model = "ref-qwen3"};
    assert_int_equal(ov_run(&L), 0);
}

static void d4_zero1(void **state) {
    (void)state;
    pt_layout L = {.name = "d4-zero1", .dp = 4, .tp = 1, .pp = 1, .n_mb = 2, .zero1 = 1};
    assert_int_equal(ov_run(&L), 0);
}

/* tp 2: the qk-norms are partial over tp, so their buckets wait for the partial sums */
static void d2t2(void **state) {
    (void)state;
    pt_layout L = {.name = "d2t2", .dp = 2, .tp = 2, .pp = 1, .n_mb = 2};
    assert_int_equal(ov_run(&L), 0);
}

/* pp 2 with the synthetic model's tied embedding: its copies wait for their sum */
static void d2p2_zero1(void **state) {
    (void)state;
    pt_layout L = {.name = "d2p2-zero1", .dp = 2, .tp = 1, .pp = 2, .n_mb = 2, .zero1 = 1};
    assert_int_equal(ov_run(&L), 0);
}

/* all three at once: tp partials and the tied pipeline copies wait, ZeRO-1 pieces over dp */
static void d2p2t2_zero1(void **state) {
    (void)state;
    pt_layout L = {.name = "d2p2t2-z1", .dp = 2, .tp = 2, .pp = 2, .n_mb = 2, .zero1 = 1};
    assert_int_equal(ov_run(&L), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(d2),           cmocka_unit_test(d4),   cmocka_unit_test(d2_zero1),
        cmocka_unit_test(d4_zero1),     cmocka_unit_test(d2t2), cmocka_unit_test(d2p2_zero1),
        cmocka_unit_test(d2p2t2_zero1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
