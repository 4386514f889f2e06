/*
 * test_trainer_kl.c - the trainer's KL reward shaping against a frozen
 * reference policy (trainer.h, kl_ctl > 0), on the project's tiny model and
 * hand-made groups:
 *   (a) while the policy equals the reference (first step, old = the
 *       recomputed logprobs) the KL term is exactly 0 for k1, k2 and k3, and
 *       not 0 once a step has moved the policy (so the check can fail);
 *   (b) after steps change the policy, the reference logprobs still equal a
 *       separate forward of the initial model (one sequence at a time, so a
 *       different packing), and the step's KL reward is the rl library's
 *       areal_rl_kl on those hand-computed logprobs and the behaviour
 *       logprobs; a second trainer initialised from the same directory (what
 *       a checkpoint restart does) has the same reference;
 *   (c) kl_ctl = 0 allocates no reference and shapes nothing;
 * and ref.path (AReaL's ref.path) chooses another reference model, a
 * ref.path equal to actor.path means the initial model, a missing one is an
 * error naming it.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "areal/model/heads.h"
#include "areal/model/model.h"
#include "areal/rl/advantage.h"
#include "areal/train/tiny.h"
#include "areal/train/trainer.h"

#define G       4
#define NG      2
#define LEN     9
#define NPROMPT 3

typedef struct fixture {
    char dir[256], other[300]; /* the initial model; another (ref.path) */
    areal_traj s[NG][G];
    int32_t tok[NG][G][LEN], ver[NG][G][LEN];
    float lp[NG][G][LEN];
    areal_group g[NG];
} fixture;

static void make_groups(fixture *f, int vocab) {
    uint64_t x = 12345;
    for (int k = 0; k < NG; k++) {
        for (int i = 0; i < G; i++) {
            int n = LEN - (i % 3); /* unequal lengths: several micro-batch shapes */
            for (int j = 0; j < n; j++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                f->tok[k][i][j] = (int32_t)((x >> 33) % (uint64_t)vocab);
                f->ver[k][i][j] = j < NPROMPT ? -1 : 0;
                f->lp[k][i][j] = j < NPROMPT ? 0.0f : -2.0f - 0.25f * (float)((j + i) % 5);
            }
            f->s[k][i] = (areal_traj){f->tok[k][i], f->lp[k][i], f->ver[k][i],         n,
                                      NPROMPT,      false,       (float)((i + k) % 2), 1};
        }
        f->g[k] = (areal_group){f->s[k], G, k, 0, 0, 0};
    }
}

static int setup(void **st) {
    fixture *f = calloc(1, sizeof *f);
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(f->dir, sizeof f->dir, "%s/areal-kl-XXXXXX", t);
    assert_non_null(mkdtemp(f->dir));
    areal_tiny_cfg tc = areal_tiny_default();
    areal_error err = {0};
    assert_int_equal(areal_tiny_create(f->dir, &tc, &err), AREAL_OK);
    snprintf(f->other, sizeof f->other, "%s/other", f->dir);
    assert_int_equal(mkdir(f->other, 0755), 0);
    tc.seed += 17;
    assert_int_equal(areal_tiny_create(f->other, &tc, &err), AREAL_OK);
    int vocab = 0;
    char *json = NULL;
    assert_int_equal(areal_tiny_tokenizer_json(&json, &vocab, &err), AREAL_OK);
    free(json);
    make_groups(f, vocab);
    *st = f;
    return 0;
}

static int teardown(void **st) {
    fixture *f = *st;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static void config(areal_rl_config *c, double kl_ctl, areal_kl_estimator est, bool decoupled) {
    areal_rl_config_defaults(c);
    areal_actor_config *a = &c->actor;
    a->optimizer.lr = 3e-2;
    a->optimizer.weight_decay = 0;
    a->optimizer.warmup_steps_proportion = 0;
    a->ppo_n_minibatches = 1;
    a->kl_ctl = kl_ctl;
    a->kl_estimator = est;
    a->recompute_logprob = true;
    a->use_decoupled_loss = decoupled;
    a->group_size = G;
    a->reward_norm.enabled = true;
    a->reward_norm.mean_level = AREAL_NORM_GROUP;
    a->reward_norm.std_level = AREAL_NORM_GROUP;
    a->reward_norm.std_unbiased = true;
    a->reward_norm.eps = 1e-5;
    a->reward_norm.group_size = G;
    a->max_tokens_per_mb = 2 * LEN; /* several micro-batches */
    c->gconfig.n_samples = G;
}

static int total_tokens(const fixture *f) {
    int T = 0;
    for (int k = 0; k < NG; k++)
        for (int i = 0; i < G; i++)
            T += f->s[k][i].n;
    return T;
}

/* Reference logprobs by hand: the initial model loaded on its own, one sequence per forward. */
static void hand_ref(const fixture *f, const char *dir, float temperature, float *out) {
    areal_model m;
    areal_error err = {0};
    assert_int_equal(areal_model_load(&m, dir, NULL, &err), AREAL_OK);
    int at = 0;
    for (int k = 0; k < NG; k++)
        for (int i = 0; i < G; i++) {
            const areal_traj *tr = &f->s[k][i];
            int32_t cu[2] = {0, tr->n}, tgt[LEN];
            for (int j = 0; j < tr->n; j++)
                tgt[j] = j + 1 < tr->n ? tr->tokens[j + 1] : -1;
            areal_batch b = {tr->tokens, cu, tr->n, 1};
            areal_acts a;
            assert_int_equal(areal_model_forward(&m, &b, &a, &err), AREAL_OK);
            areal_token_logprobs(NULL, a.logits, a.T, a.V, tgt, temperature, out + at, NULL);
            areal_acts_free(&a);
            at += tr->n;
        }
    areal_model_free(&m);
}

/* (a) policy == reference: KL exactly 0; after a step it is not. */
static void kl_is_zero_while_policy_is_the_reference(void **st) {
    fixture *f = *st;
    const areal_kl_estimator ests[] = {AREAL_KL_K1, AREAL_KL_K2, AREAL_KL_K3};
    for (int e = 0; e < 3; e++) {
        areal_rl_config c;
        config(&c, 0.1, ests[e], false); /* old = the recomputed (current) logprobs */
        areal_trainer t;
        areal_error err = {0};
        assert_int_equal(areal_trainer_init(&t, f->dir, &c, 10, NULL, NULL, &err), AREAL_OK);
        assert_non_null(t.ref);
        areal_step_stats s1, s2;
        assert_int_equal(areal_trainer_step(&t, f->g, NG, &s1, &err), AREAL_OK);
        assert_true(s1.kl_reward_sum == 0.0);
        assert_true(s1.kl_mean == 0.0);
        assert_int_equal(areal_trainer_step(&t, f->g, NG, &s2, &err), AREAL_OK);
        assert_true(s2.kl_reward_sum != 0.0);
        if (ests[e] != AREAL_KL_K1) /* k2, k3 >= 0: the reward is a penalty */
            assert_true(s2.kl_reward_sum < 0 && s2.kl_mean > 0);
        areal_trainer_free(&t);
        areal_rl_config_free(&c);
    }
}

/* (b) the reference stays the initial model; the shaping is areal_rl_kl on it. */
static void reference_is_frozen_and_shapes_as_the_rl_library(void **st) {
    fixture *f = *st;
    int T = total_tokens(f);
    float *want = malloc((size_t)T * sizeof *want), *got = malloc((size_t)T * sizeof *got);
    float *got2 = malloc((size_t)T * sizeof *got2);
    hand_ref(f, f->dir, 1.0f, want);
    areal_rl_config c;
    config(&c, 0.05, AREAL_KL_K3, true); /* old = the behaviour logprobs */
    areal_trainer t;
    areal_error err = {0};
    assert_int_equal(areal_trainer_init(&t, f->dir, &c, 10, NULL, NULL, &err), AREAL_OK);
    float *p0 = malloc(t.model.n_params * sizeof *p0);
    memcpy(p0, t.model.params, t.model.n_params * sizeof *p0);
    areal_step_stats s;
    for (int step = 0; step < 3; step++) {
        assert_int_equal(areal_trainer_step(&t, f->g, NG, &s, &err), AREAL_OK);
        /* the policy moved ... */
        double moved = 0;
        for (size_t i = 0; i < t.model.n_params; i++)
            moved += fabs((double)t.model.params[i] - p0[i]);
        assert_true(moved > 1e-3);
        /* ... the reference did not: it is the initial model, bit for bit */
        assert_memory_equal(t.ref->params, p0, t.model.n_params * sizeof *p0);
        assert_int_equal(areal_trainer_ref_logprobs(&t, f->g, NG, got, &err), AREAL_OK);
        for (int i = 0; i < T; i++)
            assert_true(fabsf(got[i] - want[i]) <= 1e-5f * (1.0f + fabsf(want[i])));
    }
    /* the next step's KL reward: -kl_ctl * k3(old rolled, ref by hand) over response tokens */
    double want_sum = 0, want_k = 0;
    long n_tr = 0;
    int at = 0;
    for (int k = 0; k < NG; k++)
        for (int i = 0; i < G; i++) {
            const areal_traj *tr = &f->s[k][i];
            for (int j = 0; j + 1 < tr->n; j++) {
                if (j + 1 < tr->n_prompt)
                    continue;
                float kv = areal_rl_kl(AREAL_KL_K3, tr->logprobs[j + 1], want[at + j], true);
                want_sum += -(float)c.actor.kl_ctl * kv;
                want_k += kv;
                n_tr++;
            }
            at += tr->n;
        }
    assert_int_equal(areal_trainer_step(&t, f->g, NG, &s, &err), AREAL_OK);
    assert_true(want_sum < 0);
    assert_true(fabs(s.kl_reward_sum - want_sum) <= 1e-5 * fabs(want_sum));
    assert_true(fabs(s.kl_mean - want_k / (double)n_tr) <= 1e-5 * want_k / (double)n_tr);
    /* a restart initialises from the same directory and loads the checkpoint's policy over
     * the model: the reference is the same */
    areal_trainer t2;
    assert_int_equal(areal_trainer_init(&t2, f->dir, &c, 10, NULL, NULL, &err), AREAL_OK);
    memcpy(t2.model.params, t.model.params, t.model.n_params * sizeof *p0);
    assert_int_equal(areal_trainer_ref_logprobs(&t2, f->g, NG, got2, &err), AREAL_OK);
    assert_int_equal(areal_trainer_ref_logprobs(&t, f->g, NG, got, &err), AREAL_OK);
    assert_memory_equal(got, got2, (size_t)T * sizeof *got);
    areal_trainer_free(&t2);
    areal_trainer_free(&t);
    areal_rl_config_free(&c);
    free(p0);
    free(want);
    free(got);
    free(got2);
}

/* ref.path names another model: the reference is that one; equal to actor.path it is the
 * initial model (--model's directory); a missing one is an error naming it. */
static void ref_path_chooses_the_reference(void **st) {
    fixture *f = *st;
    int T = total_tokens(f);
    float *want = malloc((size_t)T * sizeof *want), *got = malloc((size_t)T * sizeof *got);
    areal_rl_config c;
    config(&c, 0.1, AREAL_KL_K1, true);
    c.ref_path = strdup(f->other);
    areal_trainer t;
    areal_error err = {0};
    assert_int_equal(areal_trainer_init(&t, f->dir, &c, 10, NULL, NULL, &err), AREAL_OK);
    hand_ref(f, f->other, 1.0f, want);
    assert_int_equal(areal_trainer_ref_logprobs(&t, f->g, NG, got, &err), AREAL_OK);
    for (int i = 0; i < T; i++)
        assert_true(fabsf(got[i] - want[i]) <= 1e-5f * (1.0f + fabsf(want[i])));
    /* and it is not the policy */
    assert_true(memcmp(t.ref->params, t.model.params, t.model.n_params * sizeof(float)) != 0);
    areal_trainer_free(&t);
    /* ref.path == actor.path (AReaL's ${actor.path}): the initial model from --model's dir */
    c.actor.path = strdup("Qwen/some-hub-name");
    free(c.ref_path);
    c.ref_path = strdup("Qwen/some-hub-name");
    assert_int_equal(areal_trainer_init(&t, f->dir, &c, 10, NULL, NULL, &err), AREAL_OK);
    assert_memory_equal(t.ref->params, t.model.params, t.model.n_params * sizeof(float));
    areal_trainer_free(&t);
    free(c.ref_path);
    c.ref_path = strdup("/nonexistent-ref-model");
    assert_int_not_equal(areal_trainer_init(&t, f->dir, &c, 10, NULL, NULL, &err), AREAL_OK);
    assert_non_null(strstr(err.msg, "nonexistent-ref-model"));
    areal_rl_config_free(&c);
    free(want);
    free(got);
}

/* (c) no KL, no reference. */
static void no_kl_allocates_no_reference(void **st) {
    fixture *f = *st;
    areal_rl_config c;
    config(&c, 0, AREAL_KL_K1, true);
    areal_trainer t;
    areal_error err = {0};
    assert_int_equal(areal_trainer_init(&t, f->dir, &c, 10, NULL, NULL, &err), AREAL_OK);
    assert_null(t.ref);
    float out[NG * G * LEN];
    assert_int_equal(areal_trainer_ref_logprobs(&t, f->g, NG, out, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "kl_ctl"));
    areal_step_stats s;
    assert_int_equal(areal_trainer_step(&t, f->g, NG, &s, &err), AREAL_OK);
    assert_true(s.kl_reward_sum == 0.0 && s.kl_mean == 0.0);
    areal_trainer_free(&t);
    areal_rl_config_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kl_is_zero_while_policy_is_the_reference),
        cmocka_unit_test(reference_is_frozen_and_shapes_as_the_rl_library),
        cmocka_unit_test(ref_path_chooses_the_reference),
        cmocka_unit_test(no_kl_allocates_no_reference),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
