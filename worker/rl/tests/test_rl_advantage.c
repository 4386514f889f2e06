/*
 * test_rl_advantage.c - areal_rl_compute_advantages against AReaL's own
 * PPOActor._compute_advantages (worker/rl/tests/fixtures/rl-advantages.json,
 * made by worker/rl/fixtures/make_rl_fixtures.py from the areal package):
 * every case's advantages, rolled mask, old logprobs, returns and KL rewards
 * within 1e-5, including a batch split over 2 DP ranks whose statistics AReaL
 * all-reduced over gloo (here: a reducer that sums both ranks' values, the
 * two ranks run in lock step on two threads). Plus the closed-form GRPO
 * values of the reference, bad layouts, and the dynamic-sampling filter.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "areal/rl/advantage.h"
#include "rl_test_util.h"

/* AReaL's PPOActorConfig code defaults for the fields the advantages read. */
static areal_actor_config actor_defaults(void) {
    areal_actor_config c;
    memset(&c, 0, sizeof c);
    c.reward_scaling = 1.0;
    c.reward_clip = 20.0;
    c.kl_ctl = 0.1;
    c.kl_estimator = AREAL_KL_K1;
    c.discount = 1.0;
    c.gae_lambda = 1.0;
    c.max_new_tokens = 1024;
    return c;
}

static areal_norm_level level_of(const json_t *v) {
    if (!json_is_string(v))
        return AREAL_NORM_NONE;
    return strcmp(json_string_value(v), "batch") == 0 ? AREAL_NORM_BATCH : AREAL_NORM_GROUP;
}

static void norm_from(const json_t *j, areal_norm_config *n) {
    memset(n, 0, sizeof *n);
    if (!json_is_object(j))
        return;
    n->enabled = true;
    n->mean_level = AREAL_NORM_BATCH;
    n->std_level = AREAL_NORM_BATCH;
    n->std_unbiased = true;
    n->eps = 1e-5;
    n->group_size = 1;
    json_t *v;
    if ((v = json_object_get(j, "mean_level")) != NULL)
        n->mean_level = level_of(v);
    if ((v = json_object_get(j, "std_level")) != NULL)
        n->std_level = level_of(v);
    if ((v = json_object_get(j, "mean_leave1out")) != NULL)
        n->mean_leave1out = json_is_true(v);
    if ((v = json_object_get(j, "std_unbiased")) != NULL)
        n->std_unbiased = json_is_true(v);
    if ((v = json_object_get(j, "eps")) != NULL)
        n->eps = json_number_value(v);
    if ((v = json_object_get(j, "group_size")) != NULL)
        n->group_size = (int)json_integer_value(v);
}

static areal_actor_config config_from(const json_t *j) {
    areal_actor_config c = actor_defaults();
    json_t *v;
#define NUM(k, f)                                                                                  \
    if ((v = json_object_get(j, k)) != NULL)                                                       \
    c.f = json_number_value(v)
    NUM("reward_bias", reward_bias);
    NUM("reward_scaling", reward_scaling);
    NUM("reward_clip", reward_clip);
    NUM("kl_ctl", kl_ctl);
    NUM("discount", discount);
    NUM("gae_lambda", gae_lambda);
    NUM("overlong_penalty_factor", overlong_penalty_factor);
#undef NUM
    if ((v = json_object_get(j, "overlong_tokens")) != NULL)
        c.overlong_tokens = (long)json_integer_value(v);
    if ((v = json_object_get(j, "max_new_tokens")) != NULL)
        c.max_new_tokens = (long)json_integer_value(v);
    if ((v = json_object_get(j, "overlong_reward_penalty")) != NULL)
        c.overlong_reward_penalty = json_is_true(v);
    if ((v = json_object_get(j, "mask_no_eos_with_zero")) != NULL)
        c.mask_no_eos_with_zero = json_is_true(v);
    if ((v = json_object_get(j, "use_decoupled_loss")) != NULL)
        c.use_decoupled_loss = json_is_true(v);
    if ((v = json_object_get(j, "recompute_logprob")) != NULL)
        c.recompute_logprob = json_is_true(v);
    if ((v = json_object_get(j, "kl_estimator")) != NULL) {
        const char *s = json_string_value(v);
        c.kl_estimator = strcmp(s, "k2") == 0   ? AREAL_KL_K2
                         : strcmp(s, "k3") == 0 ? AREAL_KL_K3
                                                : AREAL_KL_K1;
    }
    norm_from(json_object_get(j, "reward_norm"), &c.reward_norm);
    norm_from(json_object_get(j, "adv_norm"), &c.adv_norm);
    return c;
}

/* One rank's packed batch and outputs, built from a fixture case. */
typedef struct {
    int n;
    int T;
    int64_t cu[64];
    uint8_t mask[1024], no_eos[64];
    float logp[1024], prox[1024], ref[1024], rewards[64];
    float adv[1024], lm[1024], old[1024], ret[1024], klr[1024];
    int has_ref;
} batch;

static void batch_from(const json_t *seqs, batch *b) {
    memset(b, 0, sizeof *b);
    size_t i;
    json_t *s;
    b->has_ref = 1;
    json_array_foreach(seqs, i, s) {
        int a = b->T;
        float tmp[256];
        size_t L = rl_floats(json_object_get(s, "loss_mask_raw"), tmp);
        for (size_t t = 0; t < L; t++)
            b->mask[a + t] = tmp[t] != 0.0f;
        rl_floats(json_object_get(s, "logprobs_raw"), b->logp + a);
        rl_floats(json_object_get(s, "prox_logp"), b->prox + a);
        if (json_is_array(json_object_get(s, "ref_logp")))
            rl_floats(json_object_get(s, "ref_logp"), b->ref + a);
        else
            b->has_ref = 0;
        b->rewards[i] = (float)json_number_value(json_object_get(s, "reward"));
        b->no_eos[i] = json_is_true(json_object_get(s, "no_eos"));
        b->T += (int)L;
        b->cu[i + 1] = b->T;
        b->n = (int)i + 1;
    }
}

static void compare(const char *name, const json_t *seqs, const batch *b) {
    static const char *fields[] = {"advantages", "loss_mask", "old_logp", "returns", "kl_rewards"};
    const float *got[] = {b->adv, b->lm, b->old, b->ret, b->klr};
    size_t i;
    json_t *s;
    json_array_foreach(seqs, i, s) {
        for (int f = 0; f < 5; f++) {
            float want[256];
            size_t L = rl_floats(json_object_get(s, fields[f]), want);
            for (size_t t = 0; t < L; t++)
                if (!rl_close(got[f][b->cu[i] + t], want[t], 1e-5))
                    fail_msg("%s: seq %zu %s[%zu] = %.7g, AReaL %.7g", name, i, fields[f], t,
                             got[f][b->cu[i] + t], want[t]);
        }
    }
}

static int run(const areal_actor_config *c, batch *b, const areal_rl_reducer *red,
               areal_error *err) {
    areal_rl_adv_input in = {
        b->n, b->cu, b->mask, b->logp, b->prox, b->has_ref ? b->ref : NULL, b->rewards, b->no_eos};
    areal_rl_adv_output out = {b->adv, b->lm, b->old, b->ret, b->klr, NULL};
    return areal_rl_compute_advantages(c, &in, &out, red, err);
}

static void every_case_matches_areal(void **st) {
    (void)st;
    json_t *fx = rl_load_fixture("rl-advantages.json");
    assert_non_null(fx);
    size_t i;
    json_t *cs;
    int n = 0;
    json_array_foreach(json_object_get(fx, "cases"), i, cs) {
        areal_actor_config c = config_from(json_object_get(cs, "config"));
        batch b;
        batch_from(json_object_get(cs, "seqs"), &b);
        areal_error err;
        int rc = run(&c, &b, NULL, &err);
        if (rc != AREAL_OK)
            fail_msg("%s: %s", json_string_value(json_object_get(cs, "name")), err.msg);
        compare(json_string_value(json_object_get(cs, "name")), json_object_get(cs, "seqs"), &b);
        n++;
    }
    assert_true(n >= 12);
    json_decref(fx);
}

/* Two ranks in lock step: each sum() call waits for the other rank's values. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    double vals[2][8];
    int n[2];
    int arrived, generation;
    double result[8];
} dp2;

typedef struct {
    dp2 *g;
    int rank;
} dp2_rank;

static int dp2_sum(void *ctx, double *v, int n, areal_error *err) {
    (void)err;
    dp2_rank *r = ctx;
    dp2 *g = r->g;
    pthread_mutex_lock(&g->mu);
    int gen = g->generation;
    memcpy(g->vals[r->rank], v, sizeof(double) * (size_t)n);
    g->n[r->rank] = n;
    if (++g->arrived == 2) {
        for (int i = 0; i < n; i++)
            g->result[i] = g->vals[0][i] + g->vals[1][i];
        g->arrived = 0;
        g->generation++;
        pthread_cond_broadcast(&g->cv);
    } else {
        while (g->generation == gen)
            pthread_cond_wait(&g->cv, &g->mu);
    }
    memcpy(v, g->result, sizeof(double) * (size_t)n);
    pthread_mutex_unlock(&g->mu);
    return AREAL_OK;
}

typedef struct {
    dp2_rank r;
    areal_actor_config c;
    batch b;
    int rc;
} dp2_job;

static void *dp2_thread(void *p) {
    dp2_job *j = p;
    areal_rl_reducer red = {dp2_sum, &j->r};
    areal_error err;
    j->rc = run(&j->c, &j->b, &red, &err);
    return NULL;
}

static void two_dp_ranks_match_areal_allreduce(void **st) {
    (void)st;
    json_t *fx = rl_load_fixture("rl-advantages.json");
    assert_non_null(fx);
    json_t *dp = json_object_get(fx, "dp2");
    assert_int_equal(json_array_size(dp), 2);
    static dp2 g;
    memset(&g, 0, sizeof g);
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    static dp2_job jobs[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        json_t *rk = json_array_get(dp, (size_t)r);
        jobs[r].r.g = &g;
        jobs[r].r.rank = r;
        jobs[r].c = config_from(json_object_get(rk, "config"));
        batch_from(json_object_get(rk, "seqs"), &jobs[r].b);
        pthread_create(&th[r], NULL, dp2_thread, &jobs[r]);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(jobs[r].rc, AREAL_OK);
        compare(r == 0 ? "dp2 rank 0" : "dp2 rank 1",
                json_object_get(json_array_get(dp, (size_t)r), "seqs"), &jobs[r].b);
    }
    /* without the reducer the batch statistics are local and differ */
    batch solo = jobs[0].b;
    assert_int_equal(run(&jobs[0].c, &solo, NULL, NULL), AREAL_OK);
    int differs = 0;
    for (int t = 0; t < solo.T; t++)
        differs |= fabsf(solo.adv[t] - jobs[0].b.adv[t]) > 1e-3f;
    assert_true(differs);
    pthread_mutex_destroy(&g.mu);
    pthread_cond_destroy(&g.cv);
    json_decref(fx);
}

/* rl-systems-2026.md §6.2: (r - 0.5) * 10, group mean/std over 4 (unbiased, eps 1e-5). */
static void reference_group_values(void **st) {
    (void)st;
    areal_norm_config n = {true, AREAL_NORM_GROUP, false, AREAL_NORM_GROUP, true, 1e-5, 4};
    float r[16] = {1, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0};
    for (int i = 0; i < 16; i++)
        r[i] = (r[i] - 0.5f) * 10.0f;
    assert_int_equal(areal_rl_normalize_scalars(&n, r, 16, NULL, NULL), AREAL_OK);
    const double want[16] = {0.866024,  -0.866024, -0.866024, 0.866024, 1.499997, -0.499999,
                             -0.499999, -0.499999, 0.499999,  0.499999, 0.499999, -1.499997,
                             0,         0,         0,         0};
    for (int i = 0; i < 16; i++)
        if (fabs(r[i] - want[i]) > 2e-6)
            fail_msg("group value %d = %.7f, reference %.6f", i, r[i], want[i]);
}

static void bad_layouts_are_named(void **st) {
    (void)st;
    areal_actor_config c = actor_defaults();
    batch b;
    memset(&b, 0, sizeof b);
    b.n = 2;
    b.cu[1] = 3;
    b.cu[2] = 5;
    b.mask[1] = b.mask[2] = b.mask[4] = 1;
    b.has_ref = 1;
    areal_error err;
    /* sequence 1 starts with a generated token */
    b.mask[3] = 1;
    assert_int_equal(run(&c, &b, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "sequence 1"));
    b.mask[3] = 0;
    b.rewards[0] = NAN;
    assert_int_equal(run(&c, &b, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "reward of sequence 0"));
    b.rewards[0] = 1;
    /* an incomplete group */
    c.adv_norm =
        (areal_norm_config){true, AREAL_NORM_GROUP, false, AREAL_NORM_GROUP, true, 1e-5, 4};
    assert_int_equal(run(&c, &b, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "groups of 4"));
    c.adv_norm.enabled = false;
    c.recompute_logprob = true;
    areal_rl_adv_input in = {b.n, b.cu, b.mask, b.logp, NULL, NULL, b.rewards, NULL};
    areal_rl_adv_output out = {b.adv, b.lm, b.old, NULL, NULL, NULL};
    assert_int_equal(areal_rl_compute_advantages(&c, &in, &out, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "prox_logprobs"));
    b.cu[2] = 4; /* cu_seqlens do not end at T: checked as a decrease-free layout */
    b.cu[1] = 5;
    c.recompute_logprob = false;
    assert_int_equal(run(&c, &b, NULL, &err), AREAL_EINVAL);
}

static void dynamic_filter_drops_uniform_groups(void **st) {
    (void)st;
    float r[12] = {1, 1, 1, 0, 0, 0, 1, 0, 5, 5, 5, 5};
    uint8_t keep[4];
    assert_int_equal(areal_rl_dynamic_filter(r, 12, 4, keep), 2);
    assert_int_equal(keep[0], 1);
    assert_int_equal(keep[1], 1);
    assert_int_equal(keep[2], 0);
    /* groups of 3: {1,1,1} {0,0,0} {1,0,5} {5,5,5} */
    assert_int_equal(areal_rl_dynamic_filter(r, 12, 3, keep), 1);
    assert_int_equal(keep[0], 0);
    assert_int_equal(keep[1], 0);
    assert_int_equal(keep[2], 1);
    assert_int_equal(keep[3], 0);
    assert_int_equal(areal_rl_dynamic_filter(r, 12, 5, keep), -1);
}

static void kl_estimators(void **st) {
    (void)st;
    assert_float_equal(areal_rl_kl(AREAL_KL_K1, -1.0f, -1.5f, true), 0.5, 1e-7);
    assert_float_equal(areal_rl_kl(AREAL_KL_K2, -1.0f, -1.5f, true), 0.125, 1e-7);
    assert_float_equal(areal_rl_kl(AREAL_KL_K3, -1.0f, -1.5f, true), expf(-0.5f) - 1 + 0.5, 1e-7);
    assert_float_equal(areal_rl_kl(AREAL_KL_K1, 0.0f, -30.0f, true), 10.0, 0);
    assert_float_equal(areal_rl_kl(AREAL_KL_K1, 0.0f, -30.0f, false), 30.0, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_case_matches_areal),
        cmocka_unit_test(two_dp_ranks_match_areal_allreduce),
        cmocka_unit_test(reference_group_values),
        cmocka_unit_test(bad_layouts_are_named),
        cmocka_unit_test(dynamic_filter_drops_uniform_groups),
        cmocka_unit_test(kl_estimators),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
