/*
 * test_par_failure.c - a rank killed in the middle of a pipeline step: the
 * last of four stages dies in its second micro-batch's loss (after the first
 * micro-batch's forward and backward went through every stage), and every
 * other stage's 1F1B call returns AREAL_EIO naming the pp group and a peer
 * within the comm deadline, with no hang (the comm runtime breaks a failed
 * group, so the failure spreads stage by stage instead of each stage waiting
 * out its own deadline).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>

#include <cmocka.h>

#include "par_test_util.h"

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

static void killed_stage_fails_the_pipeline(void **state) {
    (void)state;
    assert_int_equal(pt_ranks_run(4, DEADLINE_MS, victim_rank, NULL), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(killed_stage_fails_the_pipeline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
