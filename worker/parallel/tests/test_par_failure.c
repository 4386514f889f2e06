/*
 * test_par_failure.c - a rank killed in the middle of a pipeline step: the
 * last of four stages dies in its second micro-batch's loss (after the first
 * micro-batch's forward and backward went through every stage), and every
 * other stage's 1F1B call returns AREAL_EIO naming the pp group and a peer
 * within the comm deadline, with no hang (the comm runtime breaks a failed
 * group, so the failure spreads stage by stage instead of each stage waiting
 * out its own deadline).
 *
 * The same for expert parallelism's all-to-all: one rank of an e4 (every rank
 * in one ep group) and of an e2 t2 layout dies as its first MoE layer's
 * dispatch begins, and every other rank's step fails with AREAL_EIO naming
 * a group (ep in e4; in e2 t2 the other ep group's ranks fail on the next
 * collective they share with the dead rank's group) and a peer, within the
 * deadline.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>

#include <cmocka.h>

#include "ep_test_util.h"

#define DEADLINE_MS 3000

static int dying_loss(void *ctx, int mb, const float *logits, int T, int V, float *dlogits,
                      double *loss, areal_error *err) {
    if (mb == 1)
        _exit(0); /* killed mid-step; its exit code is not what the test reads */
    return pt_loss_fn(ctx, mb, logits, T, V, dlogits, loss, err);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int victim_rank(areal_comm *c, void *arg) {
    (void)arg;
    const pt_layout lay = {.name = "p4-kill", .dp = 1, .tp = 1, .pp = 4, .n_mb = 4}, *L = &lay;
    int rank = areal_comm_rank(c), rc = 0;
    areal_error e = {0};
    areal_model m = {0};
    areal_coll *gs[AREAL_GROUP_KIND_COUNT] = {0};
    areal_strategy s = areal_strategy_single();
    s.pp = 4, s.edp = 0;
    areal_role_plan role;
    areal_coll_factory f = areal_comm_coll_factory(c);
    areal_model_config cfg;
    PT_CHECK("config", areal_model_config_parse(PT_SYNTH, sizeof PT_SYNTH - 1, "synthetic", &cfg,
                                                &e) == AREAL_OK);
    PT_CHECK("role", areal_comm_role_of_strategy(&s, &role, &e) == AREAL_OK);
    PT_CHECK("groups", areal_comm_role_groups(&role, &f, gs, &e) == AREAL_OK);
    areal_par_groups g = areal_par_groups_of(gs);
    areal_model_shard sh;
    PT_CHECK("shard", areal_par_shard_of(&cfg, &g, &sh, &e) == AREAL_OK);
    PT_CHECK("model", pt_model(L, &sh, &m, &e) == AREAL_OK);
    pt_batch b;
    pt_batch_make(&b, cfg.vocab_size);
    pt_mb mbs[4];
    areal_batch bs[4];
    for (int i = 0; i < 4; i++) {
        pt_mb_make(&mbs[i], &b, 2 * i, 2 * i + 1);
        bs[i] = mbs[i].b;
    }
    pt_loss pl = {.b = &b, .mbs = mbs, .n_total = b.n_targets};
    double t0 = now_ms(), loss = 0;
    int prc = areal_par_pipe_1f1b(&m, g.pp, bs, 4, dying_loss, &pl, &loss, &e);
    double took = now_ms() - t0;
    printf("stage %d: rc %d after %.0f ms: %s\n", sh.pp_stage, prc, took, e.msg);
    if (prc != AREAL_EIO || strstr(e.msg, "group pp/") == NULL || strstr(e.msg, "rank ") == NULL ||
        took > DEADLINE_MS + 1000) {
        fprintf(stderr, "stage %d: want AREAL_EIO naming the pp group and a peer within %d ms\n",
                sh.pp_stage, DEADLINE_MS);
        rc = RANK_WRONG;
    }
out:
    areal_model_free(&m);
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(gs[k]);
    return rc;
}

/* ---- a rank killed at the MoE all-to-all */

typedef struct kill_ctx {
    const char *want_group; /* the group every message must name ("group ep/"), or "group " */
    int victim;             /* the global rank that dies */
    int tp, ep;             /* the layout on 4 ranks (dp = 4 / tp) */
} kill_ctx;

static int g_victim_here; /* set in the victim's process */

static int dying_fwd(void *ctx, const areal_model *m, int layer, int T, const int32_t *slot_tok,
                     const int32_t *off, const float *xg, float *y, void **saved,
                     areal_error *err) {
    if (g_victim_here)
        _exit(0); /* killed as the dispatch begins: the peers are inside the all-to-all */
    return areal_par_ep_dispatch_ops()->fwd(ctx, m, layer, T, slot_tok, off, xg, y, saved, err);
}

static int ep_step(areal_model *m, const areal_par_groups *g, const areal_par_ep_groups *eg,
                   pt_batch *b, areal_error *e) {
    int D = areal_par_size(g->dp), d = areal_par_rank(g->dp);
    pt_mb mb;
    pt_mb_make(&mb, b, d * PT_SEQS / D, (d + 1) * PT_SEQS / D);
    ep_loss pl = {.b = b, .mbs = &mb, .n_total = b->n_targets};
    double loss = 0;
    int rc = areal_par_pipe_1f1b(m, g->pp, &mb.b, 1, ep_loss_fn, &pl, &loss, e);
    if (rc == AREAL_OK)
        rc = areal_par_reduce_partial_grads(m, g, e);
    if (rc == AREAL_OK)
        rc = areal_par_ep_reduce_grads(m, eg, e);
    return rc;
}

static int a2a_victim_rank(areal_comm *c, void *arg) {
    const kill_ctx *k = arg;
    const pt_layout lay = {.name = "a2a-kill", .model = "ref-qwen3-moe"}, *L = &lay;
    int rank = areal_comm_rank(c), world = areal_comm_world(c), rc = 0;
    areal_error e = {0};
    areal_model m = {0};
    areal_coll *gs[AREAL_GROUP_KIND_COUNT] = {0};
    areal_strategy s = areal_strategy_single();
    s.tp = k->tp, s.dp = world / k->tp, s.ep = k->ep, s.edp = 0;
    areal_role_plan role;
    areal_coll_factory f = areal_comm_coll_factory(c);
    PT_CHECK("role", areal_comm_role_of_strategy(&s, &role, &e) == AREAL_OK);
    PT_CHECK("groups", areal_comm_role_groups(&role, &f, gs, &e) == AREAL_OK);
    areal_par_groups g = areal_par_groups_of(gs);
    areal_par_ep_groups eg = areal_par_ep_groups_of(gs);
    areal_par_ep disp;
    areal_model_config cfg;
    areal_model_shard sh;
    PT_CHECK("whole model", pt_model(L, NULL, &m, &e) == AREAL_OK);
    cfg = m.cfg;
    areal_model_free(&m);
    PT_CHECK("shard", areal_par_ep_shard_of(&cfg, &eg, &sh, &e) == AREAL_OK);
    PT_CHECK("model", pt_model(L, &sh, &m, &e) == AREAL_OK);
    PT_CHECK("dispatcher", areal_par_ep_init(&disp, &eg, &e) == AREAL_OK);
    areal_moe_dispatch ops = *areal_par_ep_dispatch_ops(); /* outlives the step below */
    ops.fwd = dying_fwd;
    g_victim_here = rank == k->victim;
    areal_par_bind(&m, &g);
    areal_model_set_moe_dispatch(&m, &ops, &disp);
    pt_batch b;
    pt_batch_make(&b, cfg.vocab_size);
    double t0 = now_ms();
    int src = ep_step(&m, &g, &eg, &b, &e);
    double took = now_ms() - t0;
    printf("%s rank %d: rc %d after %.0f ms: %s\n", s.tp > 1 ? "e2t2" : "e4", rank, src, took,
           e.msg);
    if (src != AREAL_EIO || strstr(e.msg, k->want_group) == NULL ||
        strstr(e.msg, "rank ") == NULL || took > DEADLINE_MS + 1000) {
        fprintf(stderr, "rank %d: want AREAL_EIO naming \"%s\" and a peer within %d ms\n", rank,
                k->want_group, DEADLINE_MS);
        rc = RANK_WRONG;
    }
out:
    areal_model_free(&m);
    for (int j = 0; j < AREAL_GROUP_KIND_COUNT; j++)
        areal_coll_destroy(gs[j]);
    return rc;
}

static void killed_rank_fails_the_all_to_all_e4(void **state) {
    (void)state;
    kill_ctx k = {.want_group = "group ep/", .victim = 2, .tp = 1, .ep = 4};
    assert_int_equal(pt_ranks_run(4, DEADLINE_MS, a2a_victim_rank, &k), 0);
}

static void killed_rank_fails_every_rank_e2t2(void **state) {
    (void)state;
    kill_ctx k = {.want_group = "group ", .victim = 1, .tp = 2, .ep = 2};
    assert_int_equal(pt_ranks_run(4, DEADLINE_MS, a2a_victim_rank, &k), 0);
}

static void killed_stage_fails_the_pipeline(void **state) {
    (void)state;
    assert_int_equal(pt_ranks_run(4, DEADLINE_MS, victim_rank, NULL), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(killed_stage_fails_the_pipeline),
        cmocka_unit_test(killed_rank_fails_the_all_to_all_e4),
        cmocka_unit_test(killed_rank_fails_every_rank_e2t2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
