/*
 * ep_test_util.h - one training step of a layout with MoE token dispatch
 * (areal/parallel/ep.h) on forked ranks against the same step in one
 * process, in the manner of par_test_util.h (whose model, batch, loss,
 * reference step and error measures it uses): the data is split over the
 * whole dp group (the ep ranks hold different tokens), the experts' slots
 * travel by all-to-all(v), expert gradients are summed over edp and the rest
 * over dp, all through areal/parallel/step.h's areal_par_step_ep (the
 * trainer's step). Each rank checks its logits, loss, grad norm, summed gradients and
 * updated weights against the reference at PT_TOL (see par_test_util.h for
 * why 1e-5 in fp32 holds: the layouts only reassociate sums), and the
 * router's load exactly: the rows each of its experts received, summed over
 * edp, against the one-process forward's (token, expert) counts.
 */
#ifndef EP_TEST_UTIL_H
#define EP_TEST_UTIL_H

#include "areal/parallel/ep.h"
#include "par_test_util.h"

typedef struct ep_layout {
    pt_layout base;  /* name, dp, tp, pp, ep, n_mb, model */
    int etp;         /* expert tensor parallel (0: 1) */
    long want_empty; /* at least this many (layer, expert) forwards without a token, layout-wide */
    int tie_router;  /* router rows 2.. copied from row 0: ties go to the lower index, so the
                        last expert is never chosen (an empty expert on its rank) */
} ep_layout;

/* With EL->tie_router: every router's rows 2..E-1 := row 0, in the reference and the shard alike.
 */
static inline void ep_tie_router(const ep_layout *EL, areal_model *m) {
    if (!EL->tie_router)
        return;
    int E = m->cfg.num_experts, H = m->cfg.hidden_size;
    for (size_t i = 0; i < m->n_specs; i++) {
        const char *n = m->specs[i].name, *t = strstr(n, "mlp.gate.weight");
        if (t == NULL || strcmp(t, "mlp.gate.weight") != 0)
            continue;
        float *w = m->params + m->offset[i];
        for (int e = 2; e < E; e++)
            memcpy(w + (size_t)e * H, w, sizeof(float) * (size_t)H);
    }
}

/*
 * The step's loss (par_test_util.h's mean token NLL over whole rows, the
 * logits checked against the reference's rows), kept here so these tests do
 * not follow changes of pt_loss made for other layouts (vocab-parallel
 * columns, the GRPO loss).
 */
typedef struct ep_loss {
    const pt_batch *b;
    const pt_mb *mbs;
    long n_total;
    const float *ref_logits; /* NULL: not checked */
    double logits_err;
} ep_loss;

static inline int ep_loss_fn(void *ctx, int mb, const float *logits, int T, int V, float *dlogits,
                             double *loss, areal_error *err) {
    ep_loss *L = ctx;
    int tok0 = L->mbs[mb].tok0;
    const int32_t *tg = L->b->targets + tok0;
    float *logp = malloc(sizeof(float) * (size_t)T), *dlogp = malloc(sizeof(float) * (size_t)T);
    if (logp == NULL || dlogp == NULL) {
        free(logp), free(dlogp);
        return areal_error_set(err, AREAL_ENOMEM, -1, "ep test loss: out of memory");
    }
    areal_token_logprobs(NULL, logits, T, V, tg, 1.0f, logp, NULL);
    double sum = 0;
    for (int t = 0; t < T; t++) {
        sum += tg[t] >= 0 ? logp[t] : 0;
        dlogp[t] = tg[t] >= 0 ? (float)(-1.0 / (double)L->n_total) : 0.0f;
    }
    *loss += -sum / (double)L->n_total;
    areal_token_logprobs_backward(NULL, logits, T, V, tg, 1.0f, dlogp, NULL, dlogits);
    double e = L->ref_logits == NULL
                   ? 0
                   : pt_rel_err(logits, L->ref_logits + (size_t)tok0 * V, (size_t)T * V);
    L->logits_err = e > L->logits_err ? e : L->logits_err;
    free(logp), free(dlogp);
    return AREAL_OK;
}

/* The one-process forward's load, [num_layers * num_experts] (zero for dense layers). */
static inline int ep_ref_load(areal_model *ref, const pt_batch *b, int64_t *load, areal_error *e) {
    areal_batch whole = {
        .tokens = b->tokens, .cu_seqlens = b->cu, .n_tokens = b->T, .n_seqs = PT_SEQS};
    areal_acts a;
    int rc = areal_model_forward(ref, &whole, &a, e), E = ref->cfg.num_experts;
    for (int l = 0; rc == AREAL_OK && l < ref->cfg.num_layers; l++)
        if (ref->cfg.moe_layer[l])
            rc = areal_acts_moe_load(ref, &a, l, load + (size_t)l * E, e);
    areal_acts_free(&a);
    return rc;
}

/* Runs one rank's step; returns 0 when equal to one process. */
static inline int ep_rank(areal_comm *c, void *arg) {
    const ep_layout *EL = arg;
    const pt_layout *L = &EL->base;
    int rank = areal_comm_rank(c), rc = 0;
    areal_error e = {0};
    areal_model ref = {0}, m = {0};
    areal_coll *gs[AREAL_GROUP_KIND_COUNT] = {0};
    float *ref_logits = NULL, *ref_grads = NULL;
    areal_par_step ps = {0};
    int64_t *ref_load = NULL, *load = NULL;
    long load_wrong = 0;
    pt_batch b;
    double ref_loss = 0, ref_norm = 0, max_norm = 0, loss = 0, norm = 0;
    PT_CHECK("reference model", pt_model(L, NULL, &ref, &e) == AREAL_OK);
    ep_tie_router(EL, &ref);
    pt_batch_make(&b, ref.cfg.vocab_size);
    size_t nl = (size_t)ref.cfg.num_layers * ref.cfg.num_experts;
    ref_load = calloc(nl, sizeof *ref_load), load = calloc(nl, sizeof *load);
    PT_CHECK("load buffers", ref_load != NULL && load != NULL);
    PT_CHECK("reference load", ep_ref_load(&ref, &b, ref_load, &e) == AREAL_OK);
    PT_CHECK("reference step", pt_reference(&ref, &b, &ref_logits, &ref_grads, &ref_loss, &ref_norm,
                                            &max_norm, &e) == AREAL_OK);
    areal_strategy s = areal_strategy_single();
    s.dp = L->dp, s.tp = L->tp, s.pp = L->pp, s.ep = L->ep, s.etp = EL->etp > 1 ? EL->etp : 1;
    s.edp = 0;
    areal_role_plan role;
    areal_coll_factory f = areal_comm_coll_factory(c);
    PT_CHECK("role", areal_comm_role_of_strategy(&s, &role, &e) == AREAL_OK);
    PT_CHECK("groups", areal_comm_role_groups(&role, &f, gs, &e) == AREAL_OK);
    areal_par_groups g = areal_par_groups_of(gs);
    areal_par_ep_groups eg = areal_par_ep_groups_of(gs);
    areal_model_shard sh;
    PT_CHECK("shard", areal_par_ep_shard_of(&ref.cfg, &eg, &sh, &e) == AREAL_OK);
    PT_CHECK("shard model", pt_model(L, &sh, &m, &e) == AREAL_OK);
    ep_tie_router(EL, &m);
    int D = areal_par_size(g.dp), d = areal_par_rank(g.dp), nmb = L->n_mb;
    int s0 = d * PT_SEQS / D, s1 = (d + 1) * PT_SEQS / D;
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
    ep_loss pl = {.b = &b, .mbs = mbs, .n_total = n_total, .ref_logits = ref_logits};
    /* the step itself: areal/parallel/step.h with token dispatch (areal_par_step_ep), the
     * trainer's; the data group is the dp group that holds the ep ranks */
    PT_CHECK("step init",
             areal_par_step_init(&ps, AREAL_PAR_ADAMW, &g, eg.dp, &m, NULL, NULL, &e) == AREAL_OK);
    PT_CHECK("step ep", areal_par_step_ep(&ps, &eg, &e) == AREAL_OK);
    areal_par_ep *disp = ps.ep;
    disp->load = load;
    PT_CHECK("step grads",
             areal_par_step_grads(&ps, bs, nmb, ep_loss_fn, &pl, &loss, &e) == AREAL_OK);
    const char *gworst = "-", *worst = "-";
    double ge = pt_tensors_err(&m, m.grads, &ref, ref_grads, &gworst);
    PT_CHECK("step apply",
             areal_par_step_apply(&ps, &PT_ADAMW, PT_LR, max_norm, &norm, &e) == AREAL_OK);

    /* the empty experts of the whole layout: summed over every rank of the stage */
    float emp = (float)disp->empty;
    if (areal_par_size(eg.tp_dp_cp) > 1)
        PT_CHECK("empty count", areal_coll_all_reduce(eg.tp_dp_cp, &emp, 1, AREAL_DT_F32, AREAL_SUM,
                                                      &e) == AREAL_OK);
    /* the load: each expert's rows over its edp replicas (disjoint tokens) */
    if (areal_par_size(eg.edp) > 1)
        PT_CHECK("load sum",
                 areal_coll_all_reduce(eg.edp, load, nl, AREAL_DT_I64, AREAL_SUM, &e) == AREAL_OK);
    for (int l = sh.first_layer; l < sh.first_layer + sh.n_layers; l++) {
        int e0, ne, inter;
        areal_moe_local(&m, &e0, &ne, &inter);
        for (int x = e0; x < e0 + ne; x++) {
            size_t k = (size_t)l * ref.cfg.num_experts + x;
            load_wrong += load[k] != ref_load[k];
        }
    }
    double le = fabs(loss - ref_loss) / fabs(ref_loss), ne = fabs(norm - ref_norm) / ref_norm;
    double we = pt_tensors_err(&m, m.params, &ref, ref.params, &worst);
    int last = sh.pp_stage == sh.pp - 1;
    printf("%-10s rank %d (tp %d/%d etp %d/%d ep %d/%d pp %d/%d dp %d/%d): loss %.6f (rel err "
           "%.1e), grad norm %.6f (%.1e), grads %.1e (%s), weights %.1e (%s), rows in %ld, empty "
           "experts %ld (stage %.0f), load mismatches %ld",
           L->name, rank, sh.tp_rank, sh.tp, sh.etp_rank, sh.etp, sh.ep_rank, sh.ep, sh.pp_stage,
           sh.pp, d, D, loss, le, norm, ne, ge, gworst, we, worst, disp->rows_in, disp->empty,
           (double)emp, load_wrong);
    if (last)
        printf(", logits %.1e", pl.logits_err);
    printf("\n");
    if (n_total != b.n_targets || !(le <= PT_TOL) || !(ne <= PT_TOL) || !(we <= PT_TOL) ||
        !(ge <= PT_GRAD_TOL) || !(pl.logits_err <= PT_TOL) || (long)emp < EL->want_empty ||
        load_wrong != 0) {
        fprintf(stderr,
                "%s rank %d: differs from one process (tolerance %g) or saw %.0f < %ld "
                "empty experts\n",
                L->name, rank, PT_TOL, (double)emp, EL->want_empty);
        rc = RANK_WRONG;
    }
out:
    free(ref_load);
    free(load);
    areal_par_step_free(&ps);
    areal_model_free(&m);
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(gs[k]);
    areal_model_free(&ref);
    free(ref_logits);
    free(ref_grads);
    return rc;
}

static inline int ep_run(const ep_layout *EL) {
    const pt_layout *L = &EL->base;
    return pt_ranks_run(L->dp * L->tp * L->pp, 30000, ep_rank, (void *)EL);
}

#endif
