/*
 * test_par_fsdp.c - fully sharded data parallelism (fsdp:dN, fsdp.h) on
 * forked ranks: one GRPO step with parameters, gradients and AdamW moments
 * sharded over dp, each layer gathered for its forward and backward and its
 * gradient reduce-scattered, equals one process (the harness's reference
 * and tolerances, par_test_util.h: 1e-5 relative for loss, grad norm, every
 * gradient and updated weight tensor, gathered whole for the check). Each
 * rank also checks that it holds only its ranges (a 1/d share of every
 * unit, moments included), and the memory counters of a step equal
 * lib/layout's plan with fsdp (areal_mem_stage), so `arealctl plan`'s
 * fsdp numbers are the worker's own. Layouts: fsdp d4 on the synthetic
 * Qwen3 (tied, 4 layers), d2 on the Qwen2 fixture (untied, biases) with
 * two micro-batches a rank, d2 on the Qwen3-MoE fixture, the plan's check
 * on a d1 and a d2 step of equal-length sequences.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "par_test_util.h"
#include "areal/parallel/fsdp.h"
#include "areal/parallel/memplan.h"

/* Each tensor of the whole model `src` (its params) into the sharded state. */
static int fsdp_load(areal_par_fsdp *f, const areal_model *src, areal_error *e) {
    int rc = AREAL_OK;
    for (size_t i = 0; rc == AREAL_OK && i < src->n_specs; i++)
        rc = areal_par_fsdp_set_tensor(f, src->specs[i].name, 0, src->params + src->offset[i], e);
    return rc;
}

/* The worst error of the gathered tensors `which` (0 params, 1 grads) against ref's `theirs`. */
static int fsdp_err(areal_par_fsdp *f, const areal_model *ref, const float *theirs, int which,
                    double *worst, const char **name, areal_error *e) {
    float *buf = malloc(sizeof(float) * ref->n_params);
    int rc = buf == NULL ? areal_error_set(e, AREAL_ENOMEM, -1, "out of memory") : AREAL_OK;
    *worst = 0;
    for (size_t i = 0; rc == AREAL_OK && i < ref->n_specs; i++) {
        const areal_tensor_spec *t = &ref->specs[i];
        size_t n = (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
        rc = areal_par_fsdp_get_tensor(f, t->name, which, buf, e);
        double x = rc == AREAL_OK ? pt_rel_err(buf, theirs + ref->offset[i], n) : INFINITY;
        if (x > *worst || isnan(x))
            *worst = x, *name = t->name;
    }
    free(buf);
    return rc;
}

static int fsdp_rank(areal_comm *c, void *arg) {
    const pt_layout *L = arg;
    int rank = areal_comm_rank(c), rc = 0;
    areal_error e = {0};
    areal_model ref = {0}, init = {0};
    areal_coll *gs[AREAL_GROUP_KIND_COUNT] = {0};
    areal_par_fsdp *f = NULL;
    areal_par_step ps = {0};
    float *ref_logits = NULL, *ref_grads = NULL;
    pt_grpo grpo = {0};
    pt_batch b;
    double ref_loss = 0, ref_norm = 0, max_norm = 0, loss = 0, norm = 0;
    PT_CHECK("reference model", pt_model(L, NULL, &ref, &e) == AREAL_OK);
    PT_CHECK("initial model", pt_model(L, NULL, &init, &e) == AREAL_OK);
    pt_batch_make(&b, ref.cfg.vocab_size);
    PT_CHECK("grpo batch", pt_grpo_prepare(&grpo, &ref, &b, &e) == AREAL_OK);
    b.grpo = &grpo;
    PT_CHECK("reference step", pt_reference(&ref, &b, &ref_logits, &ref_grads, &ref_loss, &ref_norm,
                                            &max_norm, &e) == AREAL_OK);

    areal_strategy s = areal_strategy_single();
    s.dp = L->dp, s.edp = 0;
    areal_role_plan role;
    areal_coll_factory fac = areal_comm_coll_factory(c);
    PT_CHECK("role", areal_comm_role_of_strategy(&s, &role, &e) == AREAL_OK);
    PT_CHECK("groups", areal_comm_role_groups(&role, &fac, gs, &e) == AREAL_OK);
    areal_par_groups g = areal_par_groups_of(gs);
    PT_CHECK("fsdp state", areal_par_fsdp_create(&ref.cfg, g.dp, NULL, &f, &e) == AREAL_OK);
    PT_CHECK("fsdp load", fsdp_load(f, &init, &e) == AREAL_OK);
    areal_model_free(&init);

    /* this rank's sequences in n_mb micro-batches (the harness's split) */
    int D = areal_par_size(g.dp), d = areal_par_rank(g.dp);
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
    PT_CHECK("token count", areal_par_global_count(g.dp, local, &n_total, &e) == AREAL_OK);
    pt_loss pl = {.b = &b,
                  .mbs = mbs,
                  .n_total = n_total,
                  .ref_logits = ref_logits,
                  .V = ref.cfg.vocab_size,
                  .vocab = {.Vl = ref.cfg.vocab_size}};
    PT_CHECK("grpo loss", pt_grpo_layout(&grpo, &b, mbs, nmb, g.dp, &e) == AREAL_OK);
    grpo.par.vocab = pl.vocab;
    pl.ppo = &grpo.par;
    /* the step itself: areal/parallel/step.h with FSDP's state, the trainer's */
    PT_CHECK("step init",
             areal_par_step_init(&ps, AREAL_PAR_FSDP, &g, g.dp, NULL, f, NULL, &e) == AREAL_OK);
    double lpe = pt_check_recompute(&ps, &b, mbs, bs, nmb, &grpo, &e);
    PT_CHECK("step grads",
             areal_par_step_grads(&ps, bs, nmb, pt_loss_fn, &pl, &loss, &e) == AREAL_OK);
    const char *gworst = "-", *worst = "-";
    double ge = 0, we = 0;
    PT_CHECK("grads", fsdp_err(f, &ref, ref_grads, 1, &ge, &gworst, &e) == AREAL_OK);
    PT_CHECK("step apply",
             areal_par_step_apply(&ps, &PT_ADAMW, PT_LR, max_norm, &norm, &e) == AREAL_OK);
    PT_CHECK("weights", fsdp_err(f, &ref, ref.params, 0, &we, &worst, &e) == AREAL_OK);

    /* the rank holds its ranges only: about 1/d of every unit, moments included */
    areal_par_fsdp_view v = areal_par_fsdp_state(f);
    size_t most = ref.n_params / (size_t)D + (size_t)v.n_units;
    areal_par_fsdp_mem mem = areal_par_fsdp_memory(f);
    printf("%-10s rank %d (dp %d/%d): loss %.6f (rel err %.1e), grad norm %.6f (%.1e), grads "
           "%.1e (%s), weights %.1e (%s), logits %.1e, recompute %.1e; holds %zu of %zu floats "
           "(moments %zu), "
           "peak %lld bytes (gathered %lld, activations %lld)\n",
           L->name, rank, d, D, loss, fabs(loss - ref_loss) / fabs(ref_loss), norm,
           fabs(norm - ref_norm) / ref_norm, ge, gworst, we, worst, pl.logits_err, lpe, v.n,
           ref.n_params, v.adam->n, (long long)mem.peak, (long long)mem.peak_gathered,
           (long long)mem.peak_acts);
    if (v.n > most || v.adam->n != v.n || mem.persistent != (int64_t)v.n * 16) {
        fprintf(stderr, "%s rank %d: holds %zu floats (moments %zu), more than 1/%d of %zu\n",
                L->name, rank, v.n, v.adam->n, D, ref.n_params);
        rc = RANK_WRONG;
    }
    double le = fabs(loss - ref_loss) / fabs(ref_loss), ne = fabs(norm - ref_norm) / ref_norm;
    if (n_total != b.n_targets || !(le <= PT_TOL) || !(ne <= PT_TOL) || !(we <= PT_TOL) ||
        !(ge <= PT_GRAD_TOL) || !(pl.logits_err <= PT_TOL) || !(lpe <= PT_TOL)) {
        fprintf(stderr, "%s rank %d: differs from one process (tolerance %g)\n", L->name, rank,
                PT_TOL);
        rc = RANK_WRONG;
    }
out:
    pt_grpo_free(&grpo);
    areal_par_step_free(&ps);
    areal_par_fsdp_free(f);
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(gs[k]);
    areal_model_free(&init);
    areal_model_free(&ref);
    free(ref_logits);
    free(ref_grads);
    return rc;
}

static int fsdp_run(const pt_layout *L) {
    return pt_ranks_run(L->dp, 30000, fsdp_rank, (void *)L);
}

static void fsdp_d4(void **state) {
    (void)state;
    pt_layout L = {.name = "fsdp-d4", .dp = 4, .tp = 1, .pp = 1, .n_mb = 1};
    assert_int_equal(fsdp_run(&L), 0);
}

static void fsdp_d2_qwen2_mb2(void **state) {
    (void)state;
    pt_layout L = {
        .name = "fsdp-d2-q2", .dp = 2, .tp = 1, .pp = 1, .n_mb = 2, .model = "ref-qwen2"};
    assert_int_equal(fsdp_run(&L), 0);
}

static void fsdp_d2_qwen3_moe(void **state) {
    (void)state;
    pt_layout L = {
        .name = "fsdp-d2-moe", .dp = 2, .tp = 1, .pp = 1, .n_mb = 1, .model = "ref-qwen3-moe"};
    assert_int_equal(fsdp_run(&L), 0);
}

/* ---- the memory plan against a step's counters (equal-length sequences: the plan's shape) */

#define SEQ  6
#define NSEQ 3

static int nll_loss(void *ctx, int mb, const float *logits, int T, int V, float *dlogits,
                    double *loss, areal_error *err) {
    (void)ctx, (void)mb, (void)err;
    for (int t = 0; t < T; t++) /* d/dlogits of the mean logit: any loss's shapes */
        for (int v = 0; v < V; v++) {
            dlogits[(size_t)t * V + v] = 1.0f / (float)(T * V);
            *loss += logits[(size_t)t * V + v] / (double)(T * V);
        }
    return AREAL_OK;
}

typedef struct plan_case {
    const char *model;
    int dp;
} plan_case;

static int plan_rank(areal_comm *c, void *arg) {
    const plan_case *P = arg;
    const pt_layout lay = {.name = P->model, .model = P->model}, *L = &lay;
    int rank = areal_comm_rank(c), rc = 0;
    areal_error e = {0};
    areal_model whole = {0};
    areal_coll *gs[AREAL_GROUP_KIND_COUNT] = {0};
    areal_par_fsdp *f = NULL;
    PT_CHECK("model", pt_model(L, NULL, &whole, &e) == AREAL_OK);
    areal_strategy s = areal_strategy_single();
    s.dp = P->dp, s.edp = 0;
    areal_role_plan role;
    areal_coll_factory fac = areal_comm_coll_factory(c);
    PT_CHECK("role", areal_comm_role_of_strategy(&s, &role, &e) == AREAL_OK);
    PT_CHECK("groups", areal_comm_role_groups(&role, &fac, gs, &e) == AREAL_OK);
    areal_coll *dp = areal_par_groups_of(gs).dp;
    PT_CHECK("fsdp state", areal_par_fsdp_create(&whole.cfg, dp, NULL, &f, &e) == AREAL_OK);
    PT_CHECK("fsdp load", fsdp_load(f, &whole, &e) == AREAL_OK);
    int32_t tok[SEQ * NSEQ], cu[NSEQ + 1];
    for (int t = 0; t < SEQ * NSEQ; t++)
        tok[t] = (t * 7 + rank) % whole.cfg.vocab_size;
    for (int i = 0; i <= NSEQ; i++)
        cu[i] = i * SEQ;
    areal_batch b = {tok, cu, SEQ * NSEQ, NSEQ};
    double loss = 0;
    PT_CHECK("step",
             areal_par_fsdp_forward_backward(f, &b, 1, nll_loss, NULL, &loss, &e) == AREAL_OK);
    areal_mem_model mm = areal_par_mem_model(&whole.cfg);
    areal_mem_opts o = {.mb_tokens = SEQ * NSEQ, .seq_len = SEQ, .n_mb = 1, .fsdp = true};
    areal_mem_rank r;
    PT_CHECK("plan", areal_mem_stage(&mm, &s, &o, 0, &r, &e) == AREAL_OK);
    areal_par_fsdp_mem m = areal_par_fsdp_memory(f);
    printf("%-14s fsdp d%d rank %d: ranges %lld bytes (plan %lld), gathered %lld (plan %lld), "
           "activations %lld (plan %lld); the whole model is %zu floats\n",
           P->model, P->dp, rank, (long long)m.persistent,
           (long long)(r.params + r.grads + r.optim), (long long)m.peak_gathered,
           (long long)r.gathered, (long long)m.peak_acts, (long long)r.acts, whole.n_params);
    if (m.persistent != r.params + r.grads + r.optim || m.peak_gathered != r.gathered ||
        m.peak_acts != r.acts || r.n_params != (int64_t)whole.n_params) {
        fprintf(stderr, "%s rank %d: the step's memory differs from the plan\n", P->model, rank);
        rc = RANK_WRONG;
    }
out:
    areal_par_fsdp_free(f);
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(gs[k]);
    areal_model_free(&whole);
    return rc;
}

static void plan_equals_the_step(void **state) {
    (void)state;
    plan_case one = {"ref-qwen2", 1}; /* untied: lm_head in the root unit */
    assert_int_equal(pt_ranks_run(1, 30000, plan_rank, &one), 0);
    plan_case moe = {"ref-qwen3-moe", 1};
    assert_int_equal(pt_ranks_run(1, 30000, plan_rank, &moe), 0);
    plan_case two = {"ref-qwen3", 2}; /* tied, units padded to a multiple of 2 */
    assert_int_equal(pt_ranks_run(2, 30000, plan_rank, &two), 0);
}

/* A plan for fsdp with pipeline stages is refused, naming the backend to use. */
static void plan_refuses_pp(void **state) {
    (void)state;
    areal_mem_model mm = {.vocab = 64,
                          .hidden = 16,
                          .inter = 32,
                          .layers = 2,
                          .heads = 2,
                          .kv_heads = 2,
                          .head_dim = 8};
    areal_strategy s = areal_strategy_single();
    s.dp = 2, s.pp = 2;
    areal_mem_opts o = {.mb_tokens = 8, .seq_len = 8, .n_mb = 1, .fsdp = true};
    areal_mem_rank r;
    areal_error e;
    assert_int_equal(areal_mem_stage(&mm, &s, &o, 0, &r, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "megatron"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fsdp_d4),           cmocka_unit_test(fsdp_d2_qwen2_mb2),
        cmocka_unit_test(fsdp_d2_qwen3_moe), cmocka_unit_test(plan_equals_the_step),
        cmocka_unit_test(plan_refuses_pp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
