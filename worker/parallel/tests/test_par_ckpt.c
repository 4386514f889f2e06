/*
 * test_par_ckpt.c - layout-independent checkpoints on forked ranks (CPU
 * backend): layout A takes one GRPO step and writes the HF checkpoint and
 * the AdamW state (areal/parallel/ckpt_layout.h); layout B, of other tp /
 * pp / ep / dp sizes, loads them and takes the next step, which must equal
 * one process's second step (the step A itself would take, A being equal to
 * one process by the other tests and, for its first step, here again).
 * par_test_util.h: the harness, its step and its tolerances.
 *
 * The same pairs in the sharded format (ckpt_shard.h: each rank writes its
 * own file, moments included, and an index): ZeRO-1 d2 into t2 p2 (and
 * each ZeRO-1 rank's file holds half the moments), e2 into t2, fsdp d4
 * into t2 p2 and d2 t2 into fsdp d2 (the FSDP side's step is fsdp.h's,
 * checked on the gathered weights); a checkpoint with a shard missing or
 * without its index is refused with the file named.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <dirent.h>
#include <sys/stat.h>

#include "par_test_util.h"
#include "areal/parallel/ckpt_layout.h"
#include "areal/parallel/ckpt_shard.h"
#include "areal/parallel/fsdp.h"
#include "areal/model/safetensors.h"

typedef struct ck_case {
    pt_layout L;            /* the layout of this run */
    const char *dir;        /* the checkpoint */
    int load;               /* 0: step 1 from the start and save; 1: load and take step 2 */
    int fresh_optim;        /* the harness's own check: load the weights only, AdamW from zero */
    int sharded;            /* ckpt_shard.h's format instead of ckpt_layout.h's */
    int fsdp;               /* this run is fsdp over L.dp ranks (sharded only) */
    const char *expect_err; /* load: must fail with this in the message */
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

/* The FSDP side of a pair: step (k = 1 + load) on L.dp fully sharded ranks, checked gathered. */
static int ck_fsdp(const ck_case *K, areal_comm *c, const areal_model *ref, pt_batch *b,
                   pt_grpo *grpo, areal_coll *dp, areal_coll *wg, double ref_loss, double ref_norm,
                   double max_norm) {
    const pt_layout *L = &K->L;
    int rank = areal_comm_rank(c), rc = 0;
    areal_error e = {0};
    areal_par_fsdp *f = NULL;
    areal_model init = {0};
    char *cfg_text = NULL;
    float *buf = NULL;
    double loss = 0, norm = 0;
    PT_CHECK("fsdp state", areal_par_fsdp_create(&ref->cfg, dp, NULL, &f, &e) == AREAL_OK);
    if (K->load) {
        PT_CHECK("fsdp load", areal_par_ckpt_load_shards_fsdp(K->dir, f, &e) == AREAL_OK);
    } else {
        PT_CHECK("initial model", pt_model(L, NULL, &init, &e) == AREAL_OK);
        for (size_t i = 0; i < init.n_specs; i++)
            PT_CHECK("fsdp set",
                     areal_par_fsdp_set_tensor(f, init.specs[i].name, 0,
                                               init.params + init.offset[i], &e) == AREAL_OK);
    }
    int D = areal_par_size(dp), d = areal_par_rank(dp);
    int s0 = d * PT_SEQS / D, s1 = (d + 1) * PT_SEQS / D, nmb = L->n_mb;
    pt_mb mbs[PT_MAX_MB];
    areal_batch bs[PT_MAX_MB];
    for (int i = 0; i < nmb; i++) {
        pt_mb_make(&mbs[i], b, s0 + i * (s1 - s0) / nmb, s0 + (i + 1) * (s1 - s0) / nmb);
        bs[i] = mbs[i].b;
    }
    pt_loss pl = {.b = b, .mbs = mbs, .n_total = b->n_targets, .V = ref->cfg.vocab_size};
    pl.vocab.Vl = ref->cfg.vocab_size;
    PT_CHECK("grpo loss", pt_grpo_layout(grpo, b, mbs, nmb, dp, &e) == AREAL_OK);
    pl.ppo = &grpo->par;
    PT_CHECK("fsdp step",
             areal_par_fsdp_forward_backward(f, bs, nmb, pt_loss_fn, &pl, &loss, &e) == AREAL_OK);
    float lv[2] = {(float)loss, 0};
    lv[1] = (float)(loss - (double)lv[0]);
    if (D > 1)
        PT_CHECK("loss sum",
                 areal_coll_all_reduce(dp, lv, 2, AREAL_DT_F32, AREAL_SUM, &e) == AREAL_OK);
    loss = (double)lv[0] + (double)lv[1];
    PT_CHECK("fsdp optimizer",
             areal_par_fsdp_optim_step(f, &PT_ADAMW, PT_LR, max_norm, &norm, &e) == AREAL_OK);
    double we = 0;
    const char *worst = "-";
    buf = malloc(sizeof(float) * ref->n_params);
    PT_CHECK("buffer", buf != NULL);
    for (size_t i = 0; i < ref->n_specs; i++) {
        const areal_tensor_spec *t = &ref->specs[i];
        size_t n = (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
        PT_CHECK("gather", areal_par_fsdp_get_tensor(f, t->name, 0, buf, &e) == AREAL_OK);
        double x = pt_rel_err(buf, ref->params + ref->offset[i], n);
        if (x > we || isnan(x))
            we = x, worst = t->name;
    }
    long step = areal_par_fsdp_state(f).adam->step;
    double le = fabs(loss - ref_loss) / fabs(ref_loss), ne = fabs(norm - ref_norm) / ref_norm;
    printf("%-10s %s rank %d (fsdp dp %d/%d): step %ld loss rel err %.1e, grad norm %.1e, "
           "weights %.1e (%s)\n",
           L->name, K->load ? "load+step" : "step+save", rank, d, D, step, le, ne, we, worst);
    if (!(le <= PT_TOL) || !(ne <= PT_TOL) || !(we <= PT_TOL) || step != 1 + K->load) {
        fprintf(stderr, "%s rank %d: differs from one process (tolerance %g)\n", L->name, rank,
                PT_TOL);
        rc = RANK_WRONG;
        goto out;
    }
    if (!K->load) {
        cfg_text = config_text(L);
        PT_CHECK("config text", cfg_text != NULL);
        char layout[32];
        snprintf(layout, sizeof layout, "fsdp:d%d", D);
        PT_CHECK("save",
                 areal_par_ckpt_save_shards_fsdp(K->dir, cfg_text, layout, f, wg, &e) == AREAL_OK);
    }
out:
    free(buf);
    free(cfg_text);
    areal_model_free(&init);
    areal_par_fsdp_free(f);
    return rc;
}

static int ck_rank(areal_comm *c, void *arg) {
    const ck_case *K = arg;
    const pt_layout *L = &K->L;
    int rank = areal_comm_rank(c), world = areal_comm_world(c), rc = 0;
    areal_error e = {0};
    areal_model ref = {0}, m = {0};
    areal_adamw rst = {0}, st = {0};
    areal_par_zero1 z = {0};
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
    if (K->fsdp) {
        rc = ck_fsdp(K, c, &ref, &b, &grpo, g.dp, wg, ref_loss, ref_norm, max_norm);
        goto out;
    }
    areal_model_shard sh;
    PT_CHECK("shard", areal_par_shard_of(&ref.cfg, &g, &sh, &e) == AREAL_OK);
    areal_coll *data = L->ep > 1 ? NULL : g.dp;
    if (K->load && K->sharded) {
        /* the model from the checkpoint's own config.json, then every rank's pieces */
        char cpath[512];
        areal_model_config cfg;
        snprintf(cpath, sizeof cpath, "%s/config.json", K->dir);
        PT_CHECK("config", areal_model_config_load(cpath, &cfg, &e) == AREAL_OK);
        PT_CHECK("shard model", areal_model_init_shard(&m, &cfg, &sh, NULL, &e) == AREAL_OK);
        int lr = areal_par_ckpt_load_shards(K->dir, &m, &st, &e);
        if (K->expect_err != NULL) {
            int seen = lr != AREAL_OK && strstr(e.msg, K->expect_err) != NULL;
            printf("%-10s rank %d: load refused: %s\n", L->name, rank, e.msg);
            rc = seen ? 0 : RANK_WRONG;
            goto out;
        }
        PT_CHECK("load shards", lr == AREAL_OK);
    } else if (K->load) {
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
    if (L->zero1) { /* ZeRO-1: the moments of this rank's range only */
        PT_CHECK("zero1 init", areal_par_zero1_init(&z, &m, data, &e) == AREAL_OK);
        PT_CHECK("zero1 load", areal_par_zero1_load(&z, &st, &e) == AREAL_OK);
        areal_adamw_free(&st);
    }

    /* the harness's step (par_test_util.h's pt_rank, plain AdamW or ZeRO-1) */
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
    if (L->zero1) {
        PT_CHECK("zero1 step", areal_par_zero1_step(&z, &m, &g, &PT_ADAMW, PT_LR, max_norm, &norm,
                                                    NULL, &e) == AREAL_OK);
        st.step = z.adam.step;
    } else {
        PT_CHECK("dp grads", areal_par_dp_reduce_grads(&m, data, 0, &e) == AREAL_OK);
        PT_CHECK("grad norm",
                 areal_par_grad_norm(&m, m.grads, 0, m.n_params, &g, NULL, &norm, &e) == AREAL_OK);
        areal_par_clip(m.grads, m.n_params, norm, max_norm);
        areal_adamw_step(&st, &PT_ADAMW, PT_LR, m.params, m.grads, NULL);
    }

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
        if (K->sharded)
            PT_CHECK("save shards",
                     areal_par_ckpt_save_shards(K->dir, cfg_text, layout, &m, L->zero1 ? NULL : &st,
                                                L->zero1 ? &z : NULL, wg, areal_par_rank(g.dp),
                                                areal_par_rank(edp), &e) == AREAL_OK);
        else
            PT_CHECK("save", areal_par_ckpt_save(K->dir, cfg_text, layout, &m, &st, wg,
                                                 areal_par_rank(g.dp), areal_par_rank(edp),
                                                 &e) == AREAL_OK);
    }
out:
    areal_par_zero1_free(&z);
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
    ck_case A = {.L = a, .dir = dir},
            B = {.L = b, .dir = dir, .load = 1, .fresh_optim = fresh_optim};
    int rc = pt_ranks_run(a.dp * a.tp * a.pp, 30000, ck_rank, &A);
    if (rc == 0)
        rc = pt_ranks_run(b.dp * b.tp * b.pp, 30000, ck_rank, &B);
    rm_dir(dir);
    return rc;
}

static int pair(pt_layout a, pt_layout b) {
    return pair_opt(a, b, 0);
}

/* Floats of the whole model of a fixture (NULL: the synthetic one), from its config alone. */
static size_t model_floats(const char *model) {
    areal_model_config cfg;
    areal_error e;
    char path[256];
    snprintf(path, sizeof path, PT_FIX "%s/config.json", model != NULL ? model : "");
    int rc = model != NULL
                 ? areal_model_config_load(path, &cfg, &e)
                 : areal_model_config_parse(PT_SYNTH, strlen(PT_SYNTH), "synthetic", &cfg, &e);
    areal_tensor_spec *t = NULL;
    size_t nt = 0, n = 0;
    if (rc == AREAL_OK && areal_model_expected_tensors(&cfg, &t, &nt, &e) == AREAL_OK)
        for (size_t i = 0; i < nt; i++)
            n += (size_t)t[i].shape[0] * (t[i].ndim == 2 ? (size_t)t[i].shape[1] : 1);
    free(t);
    return n;
}

/* The moments' elements (kinds 1 and 2) in each shard file of a sharded checkpoint. */
static void moments_per_shard(const char *dir, int world, size_t *out) {
    for (int r = 0; r < world; r++) {
        char path[512];
        snprintf(path, sizeof path, "%s/shard-%05d-of-%05d.safetensors", dir, r, world);
        areal_st_file f;
        areal_error e;
        out[r] = 0;
        if (areal_st_open(path, &f, &e) != AREAL_OK)
            continue;
        for (size_t k = 0; k < f.hdr.n_meta; k++) {
            int kind = -1;
            long long x, y;
            size_t a = 0, b = 0;
            if (sscanf(f.hdr.meta_values[k], "%d %lld %lld %lld %zu %zu", &kind, &x, &x, &y, &a,
                       &b) == 6 &&
                kind > 0)
                out[r] += b - a;
        }
        areal_st_close(&f);
    }
}

/*
 * The sharded pair: a saves (fsdp_a: as fsdp over a.dp), b loads (fsdp_b);
 * `spoil` then removes that file from the checkpoint before b loads, and
 * b must be refused with `want` in its message. *moments (nullable, a.world
 * entries) gets each of a's files' moment elements.
 */
static int sharded(pt_layout a, int fsdp_a, pt_layout b, int fsdp_b, const char *spoil,
                   const char *want, size_t *moments) {
    char dir[] = "/tmp/areal-par-ckpt-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return RANK_COMM_FAIL;
    ck_case A = {.L = a, .dir = dir, .sharded = 1, .fsdp = fsdp_a};
    ck_case B = {.L = b, .dir = dir, .load = 1, .sharded = 1, .fsdp = fsdp_b, .expect_err = want};
    int wa = a.dp * a.tp * a.pp, rc = pt_ranks_run(wa, 30000, ck_rank, &A);
    if (rc == 0 && moments != NULL)
        moments_per_shard(dir, wa, moments);
    if (rc == 0 && spoil != NULL) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, spoil);
        rc = unlink(path) == 0 ? 0 : RANK_COMM_FAIL;
    }
    if (rc == 0)
        rc = pt_ranks_run(b.dp * b.tp * b.pp, 30000, ck_rank, &B);
    rm_dir(dir);
    return rc;
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

/* ---- the sharded format */

/* ZeRO-1 d2 (each rank's file: its half of the moments) into t2 p2. */
static void sharded_zero1_d2_to_t2p2(void **state) {
    (void)state;
    pt_layout a = LAYOUT("z1d2>t2p2", 2, 1, 1, 0, 1, "ref-qwen3"), b;
    b = LAYOUT("z1d2>t2p2", 1, 2, 2, 0, 2, "ref-qwen3");
    a.zero1 = 1;
    size_t mo[2] = {0}, n = model_floats("ref-qwen3");
    assert_int_equal(sharded(a, 0, b, 0, NULL, NULL, mo), 0);
    /* m and v of every parameter once, each rank's file its flat half (ZeRO-1's range) */
    printf("z1d2 shard moments: %zu and %zu elements (the model: %zu floats)\n", mo[0], mo[1], n);
    assert_int_equal(mo[0] + mo[1], 2 * n);
    assert_true(mo[0] <= n + 2 && mo[1] <= n + 2);
}

/* Qwen3-MoE experts over ep into tp. */
static void sharded_e2_to_t2(void **state) {
    (void)state;
    assert_int_equal(sharded(LAYOUT("s:e2>t2", 2, 1, 1, 2, 1, "ref-qwen3-moe"), 0,
                             LAYOUT("s:e2>t2", 1, 2, 1, 0, 1, "ref-qwen3-moe"), 0, NULL, NULL,
                             NULL),
                     0);
}

/* fsdp d4's ranges into t2 p2, and d2 t2's slices into fsdp d2. */
static void sharded_fsdp_d4_to_t2p2(void **state) {
    (void)state;
    size_t mo[4] = {0};
    assert_int_equal(sharded(LAYOUT("fsdp4>t2p2", 4, 1, 1, 0, 1, NULL), 1,
                             LAYOUT("fsdp4>t2p2", 1, 2, 2, 0, 3, NULL), 0, NULL, NULL, mo),
                     0);
    size_t n = model_floats(NULL);
    printf("fsdp d4 shard moments: %zu %zu %zu %zu elements (the model: %zu floats)\n", mo[0],
           mo[1], mo[2], mo[3], n);
    assert_int_equal(mo[0] + mo[1] + mo[2] + mo[3], 2 * n);
    for (int r = 0; r < 4; r++) /* a quarter of each unit (4 layers and the root), padded */
        assert_true(mo[r] <= 2 * (n / 4 + 5));
}

static void sharded_d2t2_to_fsdp_d2(void **state) {
    (void)state;
    assert_int_equal(sharded(LAYOUT("d2t2>fsdp2", 2, 2, 1, 0, 1, NULL), 0,
                             LAYOUT("d2t2>fsdp2", 2, 1, 1, 0, 2, NULL), 1, NULL, NULL, NULL),
                     0);
}

/* A shard removed, or the index (the checkpoint never finished): refused, the file named. */
static void sharded_incomplete_is_refused(void **state) {
    (void)state;
    pt_layout a = LAYOUT("s:missing", 1, 2, 1, 0, 1, "ref-qwen3");
    pt_layout b = LAYOUT("s:missing", 1, 1, 2, 0, 2, "ref-qwen3");
    assert_int_equal(sharded(a, 0, b, 0, "shard-00001-of-00002.safetensors", "shard-00001", NULL),
                     0);
    assert_int_equal(sharded(a, 0, b, 0, "index.json", "no index.json", NULL), 0);
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
        cmocka_unit_test(tp_to_pp),
        cmocka_unit_test(pp_to_tp),
        cmocka_unit_test(d2t2_to_t2p2),
        cmocka_unit_test(t4_to_d2p2),
        cmocka_unit_test(ep_to_pp),
        cmocka_unit_test(pp_to_ep),
        cmocka_unit_test(ep_to_tp),
        cmocka_unit_test(fresh_optimizer_is_seen),
        cmocka_unit_test(sharded_zero1_d2_to_t2p2),
        cmocka_unit_test(sharded_e2_to_t2),
        cmocka_unit_test(sharded_fsdp_d4_to_t2p2),
        cmocka_unit_test(sharded_d2t2_to_fsdp_d2),
        cmocka_unit_test(sharded_incomplete_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
