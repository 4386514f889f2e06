/*
 * test_par_ckpt.c - layout-independent checkpoints on forked ranks (CPU
 * backend): layout A takes one GRPO step and writes the HF checkpoint and
 * the AdamW state (areal/parallel/ckpt_layout.h); layout B, of other tp /
 * pp / ep / dp sizes, loads them and takes the next step, which must equal
 * one process's second step (the step A itself would take, A being equal to
 * one process by the other tests and, for its first step, here again).
 * par_test_util.h: the harness, its step and its tolerances.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <dirent.h>
#include <sys/stat.h>

#include "par_test_util.h"
#include "areal/parallel/ckpt_layout.h"

typedef struct ck_case {
    pt_layout L;     /* the layout of this run */
    const char *dir; /* the checkpoint */
    int load;        /* 0: step 1 from the start and save; 1: load and take step 2 */
    int fresh_optim; /* the harness's own check: load the weights only, AdamW from zero */
} ck_case;

/* The config.json text of L's model (caller frees). */
static char *config_text(const pt_layout *L) {
    if (L->model == NULL)
        return strdup(PT_SYNTH);
    char path[256];
    snprintf(path, sizeof path, PT_FIX "%s/config.json", L->model);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    char *t = calloc(1, 1 << 16);
    size_t n = t != NULL ? fread(t, 1, (1 << 16) - 1, f) : 0;
    fclose(f);
    (void)n;
    return t;
}

/* One-process step k on ref (persistent AdamW st): *max_norm the clip the layouts use. */
static int ref_step(areal_model *ref, pt_batch *b, areal_adamw *st, double *loss, double *norm,
                    double *max_norm, areal_error *e) {
    areal_batch whole = {
        .tokens = b->tokens, .cu_seqlens = b->cu, .n_tokens = b->T, .n_seqs = PT_SEQS};
    areal_acts a;
    int V = ref->cfg.vocab_size, rc = areal_model_forward(ref, &whole, &a, e);
    if (rc != AREAL_OK)
        return rc;
    float *dl = malloc(sizeof(float) * (size_t)b->T * V);
    pt_loss pl = {.b = b, .n_total = b->n_targets, .ppo = &b->grpo->ref, .V = V};
    *loss = 0;
    rc = dl == NULL ? AREAL_ENOMEM : pt_loss_fn(&pl, 0, a.logits, b->T, V, dl, loss, e);
    if (rc == AREAL_OK)
        rc = areal_model_backward(ref, &a, dl, e);
    areal_acts_free(&a);
    free(dl);
    if (rc != AREAL_OK)
        return rc;
    *norm = areal_clip_grad_norm(ref->grads, ref->n_params, 0);
    *max_norm = 0.5 * *norm;
    areal_clip_grad_norm(ref->grads, ref->n_params, *max_norm);
    areal_adamw_step(st, &PT_ADAMW, PT_LR, ref->params, ref->grads, NULL);
    areal_model_zero_grad(ref);
    return AREAL_OK;
}

static int ck_rank(areal_comm *c, void *arg) {
    const ck_case *K = arg;
    const pt_layout *L = &K->L;
    int rank = areal_comm_rank(c), world = areal_comm_world(c), rc = 0;
    areal_error e = {0};
    areal_model ref = {0}, m = {0};
    areal_adamw rst = {0}, st = {0};
    areal_coll *gs[AREAL_GROUP_KIND_COUNT] = {0}, *wg = NULL;
    pt_grpo grpo = {0};
    pt_batch b;
    char *cfg_text = NULL;
    double ref_loss = 0, ref_norm = 0, max_norm = 0, loss = 0, norm = 0;
    PT_CHECK("reference model", pt_model(L, NULL, &ref, &e) == AREAL_OK);
    pt_batch_make(&b, ref.cfg.vocab_size);
    PT_CHECK("grpo batch", pt_grpo_prepare(&grpo, &ref, &b, &e) == AREAL_OK);
    b.grpo = &grpo;
    PT_CHECK("adamw", areal_adamw_init(&rst, ref.n_params, &e) == AREAL_OK);
    for (int k = 0; k <= K->load; k++)
        PT_CHECK("reference step",
                 ref_step(&ref, &b, &rst, &ref_loss, &ref_norm, &max_norm, &e) == AREAL_OK);

    areal_strategy s = areal_strategy_single();
    s.dp = L->dp, s.tp = L->tp, s.pp = L->pp, s.ep = L->ep > 1 ? L->ep : 1, s.edp = 0;
    areal_role_plan role;
    areal_coll_factory f = areal_comm_coll_factory(c);
    PT_CHECK("role", areal_comm_role_of_strategy(&s, &role, &e) == AREAL_OK);
    PT_CHECK("groups", areal_comm_role_groups(&role, &f, gs, &e) == AREAL_OK);
    int all[RANKS_MAX];
    for (int i = 0; i < world; i++)
        all[i] = i;
    PT_CHECK("world", f.group(f.ctx, "world", all, world, &wg, &e) == AREAL_OK);
    areal_par_groups g = areal_par_groups_of(gs);
    areal_model_shard sh;
    PT_CHECK("shard", areal_par_shard_of(&ref.cfg, &g, &sh, &e) == AREAL_OK);
    if (K->load) {
        PT_CHECK("load weights", areal_model_load_shard(&m, K->dir, &sh, NULL, &e) == AREAL_OK);
        if (K->fresh_optim)
            PT_CHECK("adamw", areal_adamw_init(&st, m.n_params, &e) == AREAL_OK);
        else
            PT_CHECK("load optimizer", areal_par_ckpt_load_optim(K->dir, &m, &st, &e) == AREAL_OK);
    } else {
        PT_CHECK("shard model", pt_model(L, &sh, &m, &e) == AREAL_OK);
        PT_CHECK("adamw", areal_adamw_init(&st, m.n_params, &e) == AREAL_OK);
    }
    areal_par_bind(&m, &g);

    /* the harness's step (par_test_util.h's pt_rank, plain AdamW) */
    areal_coll *data = L->ep > 1 ? NULL : g.dp;
    int D = areal_par_size(data), d = areal_par_rank(data);
    int s0 = d * PT_SEQS / D, s1 = (d + 1) * PT_SEQS / D, nmb = L->n_mb;
    pt_mb mbs[PT_MAX_MB];
    areal_batch bs[PT_MAX_MB];
    for (int i = 0; i < nmb; i++) {
        pt_mb_make(&mbs[i], &b, s0 + i * (s1 - s0) / nmb, s0 + (i + 1) * (s1 - s0) / nmb);
        bs[i] = mbs[i].b;
    }
    pt_loss pl = {.b = &b, .mbs = mbs, .n_total = b.n_targets, .V = ref.cfg.vocab_size};
    pl.vocab.Vl = ref.cfg.vocab_size;
    PT_CHECK("grpo loss", pt_grpo_layout(&grpo, &b, mbs, nmb, data, &e) == AREAL_OK);
    pl.ppo = &grpo.par;
    PT_CHECK("1f1b",
             areal_par_pipe_1f1b(&m, g.pp, bs, nmb, pt_loss_fn, &pl, &loss, &e) == AREAL_OK);
    float lv[2] = {(float)loss, 0};
    lv[1] = (float)(loss - (double)lv[0]);
    if (D > 1)
        PT_CHECK("loss sum",
                 areal_coll_all_reduce(data, lv, 2, AREAL_DT_F32, AREAL_SUM, &e) == AREAL_OK);
    loss = (double)lv[0] + (double)lv[1];
    PT_CHECK("partial grads", areal_par_reduce_partial_grads(&m, &g, &e) == AREAL_OK);
    PT_CHECK("tied embedding", areal_par_reduce_tied_embed(&m, &g, &e) == AREAL_OK);
    PT_CHECK("dp grads", areal_par_dp_reduce_grads(&m, data, 0, &e) == AREAL_OK);
    PT_CHECK("grad norm",
             areal_par_grad_norm(&m, m.grads, 0, m.n_params, &g, NULL, &norm, &e) == AREAL_OK);
    areal_par_clip(m.grads, m.n_params, norm, max_norm);
    areal_adamw_step(&st, &PT_ADAMW, PT_LR, m.params, m.grads, NULL);

    const char *worst = "-";
    double le = fabs(loss - ref_loss) / fabs(ref_loss), ne = fabs(norm - ref_norm) / ref_norm;
    double we = pt_tensors_err(&m, m.params, &ref, ref.params, &worst);
    printf("%-10s %s rank %d (tp %d/%d pp %d/%d ep %d/%d dp %d/%d): step %ld loss rel err %.1e, "
           "grad norm %.1e, weights %.1e (%s)\n",
           L->name, K->load ? "load+step" : "step+save", rank, sh.tp_rank, sh.tp, sh.pp_stage,
           sh.pp, sh.ep_rank, sh.ep, d, D, st.step, le, ne, we, worst);
    if (!(le <= PT_TOL) || !(ne <= PT_TOL) || !(we <= PT_TOL) ||
        st.step != 1 + K->load - K->fresh_optim) {
        fprintf(stderr, "%s rank %d: differs from one process (tolerance %g)\n", L->name, rank,
                PT_TOL);
        rc = RANK_WRONG;
        goto out;
    }
    if (!K->load) {
        char layout[64];
        snprintf(layout, sizeof layout, "d%dt%dp%de%d", L->dp, L->tp, L->pp, L->ep > 1 ? L->ep : 1);
        cfg_text = config_text(L);
        areal_coll *edp = gs[AREAL_GROUP_EDP];
        PT_CHECK("config text", cfg_text != NULL);
        PT_CHECK("save",
                 areal_par_ckpt_save(K->dir, cfg_text, layout, &m, &st, wg, areal_par_rank(g.dp),
                                     areal_par_rank(edp), &e) == AREAL_OK);
    }
out:
    free(cfg_text);
    pt_grpo_free(&grpo);
    areal_adamw_free(&st);
    areal_adamw_free(&rst);
    areal_model_free(&m);
    areal_coll_destroy(wg);
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(gs[k]);
    areal_model_free(&ref);
    return rc;
}

static void rm_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[512];
    while (d != NULL && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        unlink(path);
    }
    if (d != NULL)
        closedir(d);
    rmdir(dir);
}

/* Saves in layout a, loads in layout b (same model), both runs' worst exit code. */
static int pair_opt(pt_layout a, pt_layout b, int fresh_optim) {
    char dir[] = "/tmp/areal-par-ckpt-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return RANK_COMM_FAIL;
    ck_case A = {a, dir, 0, 0}, B = {b, dir, 1, fresh_optim};
    int rc = pt_ranks_run(a.dp * a.tp * a.pp, 30000, ck_rank, &A);
    if (rc == 0)
        rc = pt_ranks_run(b.dp * b.tp * b.pp, 30000, ck_rank, &B);
    rm_dir(dir);
    return rc;
}

static int pair(pt_layout a, pt_layout b) {
    return pair_opt(a, b, 0);
}

#define LAYOUT(n, d, t, p, e, mb, mdl)                                                             \
    (pt_layout) {                                                                                  \
        .name = n, .dp = d, .tp = t, .pp = p, .ep = e, .n_mb = mb, .model = mdl                    \
    }

/* Qwen3, tied: a tp checkpoint into a pipeline and back. */
static void tp_to_pp(void **state) {
    (void)state;
    assert_int_equal(pair(LAYOUT("t2>p2", 1, 2, 1, 0, 1, "ref-qwen3"),
                          LAYOUT("t2>p2", 1, 1, 2, 0, 2, "ref-qwen3")),
                     0);
}
static void pp_to_tp(void **state) {
    (void)state;
    assert_int_equal(pair(LAYOUT("p2>t2", 1, 1, 2, 0, 2, "ref-qwen3"),
                          LAYOUT("p2>t2", 1, 2, 1, 0, 1, "ref-qwen3")),
                     0);
}

/* The synthetic model: dp and tp into tp and pp; tp 4 into dp and pp. */
static void d2t2_to_t2p2(void **state) {
    (void)state;
    assert_int_equal(
        pair(LAYOUT("d2t2>t2p2", 2, 2, 1, 0, 1, NULL), LAYOUT("d2t2>t2p2", 1, 2, 2, 0, 3, NULL)),
        0);
}
static void t4_to_d2p2(void **state) {
    (void)state;
    assert_int_equal(
        pair(LAYOUT("t4>d2p2", 1, 4, 1, 0, 1, NULL), LAYOUT("t4>d2p2", 2, 1, 2, 0, 2, NULL)), 0);
}

/* Qwen3-MoE: experts split over ep into a pipeline, a pipeline into ep, ep into tp. */
static void ep_to_pp(void **state) {
    (void)state;
    assert_int_equal(pair(LAYOUT("e2>p2", 2, 1, 1, 2, 1, "ref-qwen3-moe"),
                          LAYOUT("e2>p2", 1, 1, 2, 0, 2, "ref-qwen3-moe")),
                     0);
}
static void pp_to_ep(void **state) {
    (void)state;
    assert_int_equal(pair(LAYOUT("p2>e2", 1, 1, 2, 0, 2, "ref-qwen3-moe"),
                          LAYOUT("p2>e2", 2, 1, 1, 2, 1, "ref-qwen3-moe")),
                     0);
}
static void ep_to_tp(void **state) {
    (void)state;
    assert_int_equal(pair(LAYOUT("e2>t2", 2, 1, 1, 2, 1, "ref-qwen3-moe"),
                          LAYOUT("e2>t2", 1, 2, 1, 0, 1, "ref-qwen3-moe")),
                     0);
}

/* Without the optimizer state the next step differs: the harness sees it. */
static void fresh_optimizer_is_seen(void **state) {
    (void)state;
    assert_int_equal(pair_opt(LAYOUT("t2>p2-fresh", 1, 2, 1, 0, 1, "ref-qwen3"),
                              LAYOUT("t2>p2-fresh", 1, 1, 2, 0, 2, "ref-qwen3"), 1),
                     RANK_WRONG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tp_to_pp),     cmocka_unit_test(pp_to_tp),
        cmocka_unit_test(d2t2_to_t2p2), cmocka_unit_test(t4_to_d2p2),
        cmocka_unit_test(ep_to_pp),     cmocka_unit_test(pp_to_ep),
        cmocka_unit_test(ep_to_tp),     cmocka_unit_test(fresh_optimizer_is_seen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
