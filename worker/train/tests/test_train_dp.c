/*
 * test_train_dp.c - data-parallel trainer ranks in the job loop (dp.h): a
 * run of two ranks (rank 0 drives the rollouts through the reference
 * SGLang-API server, rank 1 follows; the ranks are threads joined by the
 * comm runtime over loopback) ends with the weights of a one-rank run on
 * the same batches, within 1e-5: fixed seeds, eta = 0 (every step's batch
 * is the same set of groups), seeded sampling on a deterministic server,
 * token-level loss normalised over both ranks and gradients averaged
 * (areal.md 4.3). Also: the follower ends when rank 0 says stop, after as
 * many steps.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "areal/comm/comm.h"
#include "areal/model/model.h"
#include "areal/model/tokenizer.h"
#include "areal/train/hf_save.h"
#include "areal/train/dp.h"
#include "areal/train/job_config.h"
#include "areal/train/tiny.h"
#include "areal/train/train_loop.h"
#include "areal/train/warmup.h"
#include "sgl_ref_server.h"

#define STEPS 3

static void logline(void *c, const char *line) {
    fprintf(stderr, "  [%s] %s\n", (const char *)c, line);
}

static void job_for(areal_train_job *job, areal_rl_config *cfg, const char *model,
                    const char *job_dir, const char *const *servers, const char *tag) {
    areal_train_config_demo(cfg);
    cfg->rollout.consumer_batch_size = cfg->train_dataset.batch_size = 8;
    cfg->rollout.max_head_offpolicyness = 0;
    cfg->rollout.max_concurrent_rollouts = 8;
    cfg->gconfig.n_samples = cfg->actor.group_size = cfg->actor.reward_norm.group_size = 4;
    cfg->actor.optimizer.lr = 3e-4; /* the demo's: a missing or doubled share moves far more */
    areal_error err;
    assert_int_equal(areal_train_config_settle(cfg, &err), AREAL_OK);
    memset(job, 0, sizeof *job);
    job->model_dir = model;
    job->job_dir = job_dir;
    job->servers = servers;
    job->n_servers = 1;
    job->cfg = cfg;
    job->total_steps = STEPS;
    job->task = (areal_synth_cfg){9, "+", 0.2, 7};
    job->eval_every = 0;
    job->eval_n = 4;
    job->rollout_workers = 2;
    job->threads = 1;
    job->log = logline;
    job->ctx = (void *)tag;
}

typedef struct rank {
    int r, port;
    areal_train_job *job;
    int rc;
    long steps;
    char msg[600];
} rank;

static void *rank_main(void *ud) {
    rank *k = ud;
    areal_comm_config cc = {.rank = k->r,
                            .world = 2,
                            .store_host = "127.0.0.1",
                            .store_port = k->port,
                            .bind_host = "127.0.0.1",
                            .advertise_host = "127.0.0.1",
                            .timeout_ms = 60000,
                            .connect_timeout_ms = 20000};
    areal_comm *c = NULL;
    areal_pg *pg = NULL;
    areal_error err;
    static const int ranks[2] = {0, 1};
    k->rc = areal_comm_init(&cc, &c, &err);
    if (k->rc == AREAL_OK)
        k->rc = areal_comm_group(c, "dp", ranks, 2, &pg, &err);
    if (k->rc == AREAL_OK && k->r == 0) {
        k->job->dp = pg;
        areal_train_result res;
        k->rc = areal_train_run(k->job, &res, &err);
        k->steps = res.steps_done;
    } else if (k->rc == AREAL_OK) {
        k->rc = areal_train_follow(k->job, STEPS, pg, &k->steps, &err);
    }
    if (k->rc != AREAL_OK)
        snprintf(k->msg, sizeof k->msg, "rank %d: %s", k->r, err.msg);
    areal_pg_destroy(pg);
    areal_comm_destroy(c);
    return NULL;
}

static void load_final(const char *job_dir, areal_model *m) {
    char dir[400];
    snprintf(dir, sizeof dir, "%s/weight_update_v%d", job_dir, STEPS);
    areal_error err;
    if (areal_model_load(m, dir, NULL, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
}

static void warm_up(const char *model) {
    areal_model m;
    areal_error err;
    assert_int_equal(areal_model_load(&m, model, NULL, &err), AREAL_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", model);
    areal_tokenizer *tok = NULL;
    assert_int_equal(areal_tokenizer_load(path, &tok, &err), AREAL_OK);
    areal_synth_split sp;
    areal_synth_cfg task = {9, "+", 0.2, 7};
    assert_int_equal(areal_synth_make(&task, &sp, &err), AREAL_OK);
    areal_warmup_cfg wc = {120, 32, 3e-3, 12345};
    if (areal_warmup_run(&m, tok, sp.train, sp.n_train, &wc, NULL, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(areal_hf_save_weights(&m, model, &err), AREAL_OK);
    areal_synth_free(&sp);
    areal_tokenizer_free(tok);
    areal_model_free(&m);
}

static void d2_weights_equal_d1(void **st) {
    (void)st;
    char dir[256], model[300], d1[300], d2[300];
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/areal-dp-XXXXXX", t);
    assert_non_null(mkdtemp(dir));
    snprintf(model, sizeof model, "%s/model", dir);
    snprintf(d1, sizeof d1, "%s/d1", dir);
    snprintf(d2, sizeof d2, "%s/d2", dir);
    assert_int_equal(mkdir(model, 0755), 0);
    areal_tiny_cfg tc = areal_tiny_default();
    areal_error err;
    assert_int_equal(areal_tiny_create(model, &tc, &err), AREAL_OK);
    warm_up(model); /* so that rewards (and gradients) are not all zero */
    sgl_ref *srv = sgl_ref_start(model);
    assert_non_null(srv);
    const char *servers[] = {sgl_ref_addr(srv)};

    /* d1 */
    areal_rl_config cfg1;
    areal_train_job j1;
    job_for(&j1, &cfg1, model, d1, servers, "d1");
    areal_train_result res;
    if (areal_train_run(&j1, &res, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(res.steps_done, STEPS);

    /* d2: the server restarts from the initial model, as a new job's would */
    sgl_ref_stop(srv);
    srv = sgl_ref_start(model);
    assert_non_null(srv);
    servers[0] = sgl_ref_addr(srv);
    areal_rl_config cfg2;
    areal_train_job j2;
    job_for(&j2, &cfg2, model, d2, servers, "d2");
    areal_store_server *store = NULL;
    int port = 0;
    assert_int_equal(areal_store_server_start("127.0.0.1", 0, &store, &port, &err), AREAL_OK);
    rank k[2] = {{0, port, &j2, 0, 0, ""}, {1, port, &j2, 0, 0, ""}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, rank_main, &k[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    areal_store_server_stop(store);
    for (int i = 0; i < 2; i++)
        if (k[i].rc != AREAL_OK)
            fail_msg("%s", k[i].msg);
    assert_int_equal(k[0].steps, STEPS);
    assert_int_equal(k[1].steps, STEPS);

    areal_model m1, m2, m0;
    load_final(d1, &m1);
    load_final(d2, &m2);
    assert_int_equal(areal_model_load(&m0, model, NULL, &err), AREAL_OK);
    assert_int_equal(m1.n_params, m2.n_params);
    double worst = 0, moved = 0;
    for (size_t i = 0; i < m1.n_params; i++) {
        double d = m1.params[i] - m2.params[i];
        d = d < 0 ? -d : d;
        worst = d > worst ? d : worst;
        double mv = m1.params[i] - m0.params[i];
        mv = mv < 0 ? -mv : mv;
        moved = mv > moved ? mv : moved;
    }
    fprintf(stderr, "  d1 vs d2: max |diff| %.3g over %zu parameters (largest move %.3g)\n", worst,
            m1.n_params, moved);
    assert_true(moved > 1e-4); /* training changed the weights */
    assert_true(worst <= 1e-5);
    areal_model_free(&m0);
    areal_model_free(&m1);
    areal_model_free(&m2);
    areal_rl_config_free(&cfg1);
    areal_rl_config_free(&cfg2);
    sgl_ref_stop(srv);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(d2_weights_equal_d1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
