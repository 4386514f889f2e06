/*
 * test_rl_loss.c - areal_ppo_actor_loss against AReaL's own
 * ppo_actor_loss_fn (worker/rl/tests/fixtures/rl-loss.json, made by
 * worker/rl/fixtures/make_rl_fixtures.py): the loss, d loss / d logprob per
 * token (torch autograd) and the stats within 1e-5, for eps / eps_high, dual
 * clip, GSPO and every rejection-sampling variant; a minibatch of 3
 * micro-batches on each of 2 DP ranks aggregated with AReaL's engine scale;
 * the closed forms of the reference (§6.1); bad options and layouts. The
 * per-token split of areal/rl/ppo_terms.h (what a device kernel fuses with
 * the softmax) rebuilds every token-level case's loss and gradient from the
 * terms and a surrogate written here in float, as the kernel evaluates it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "areal/rl/loss.h"
#include "areal/rl/ppo_terms.h"
#include "rl_test_util.h"

typedef struct {
    int T, n;
    float logp[256], prox[256], behav[256], adv[256], mask[256];
    int64_t cu[64];
} mb;

static void mb_from(const json_t *in, mb *m) {
    memset(m, 0, sizeof *m);
    m->T = (int)rl_floats(json_object_get(in, "logp"), m->logp);
    rl_floats(json_object_get(in, "prox"), m->prox);
    rl_floats(json_object_get(in, "behav"), m->behav);
    rl_floats(json_object_get(in, "adv"), m->adv);
    rl_floats(json_object_get(in, "mask"), m->mask);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(in, "cu_seqlens"), i, v) m->cu[i] = json_integer_value(v);
    m->n = (int)json_array_size(json_object_get(in, "cu_seqlens")) - 1;
}

static void rs_from(const json_t *j, areal_rejection_config *rs) {
    memset(rs, 0, sizeof *rs);
    if (!json_is_object(j))
        return;
    rs->enabled = true;
    rs->upper = 5.0;
    const char *s;
    json_t *v;
    if ((v = json_object_get(j, "level")) != NULL)
        rs->level =
            strcmp(json_string_value(v), "sequence") == 0 ? AREAL_RS_SEQUENCE : AREAL_RS_TOKEN;
    if ((v = json_object_get(j, "action")) != NULL)
        rs->action = strcmp(json_string_value(v), "clamp") == 0 ? AREAL_RS_CLAMP : AREAL_RS_MASK;
    if ((v = json_object_get(j, "metric")) != NULL) {
        s = json_string_value(v);
        rs->metric = strcmp(s, "kl_k1") == 0   ? AREAL_RS_KL_K1
                     : strcmp(s, "kl_k2") == 0 ? AREAL_RS_KL_K2
                     : strcmp(s, "kl_k3") == 0 ? AREAL_RS_KL_K3
                                               : AREAL_RS_RATIO;
    }
    if ((v = json_object_get(j, "agg")) != NULL) {
        s = json_string_value(v);
        rs->agg = strcmp(s, "sum") == 0   ? AREAL_RS_AGG_SUM
                  : strcmp(s, "max") == 0 ? AREAL_RS_AGG_MAX
                                          : AREAL_RS_AGG_MEAN;
    }
    if ((v = json_object_get(j, "upper")) != NULL)
        rs->upper = json_number_value(v);
    if ((v = json_object_get(j, "lower")) != NULL && json_is_number(v)) {
        rs->has_lower = true;
        rs->lower = json_number_value(v);
    }
}

static areal_ppo_loss_opts opts_from(const json_t *j, areal_rejection_config *rs) {
    areal_ppo_loss_opts o;
    memset(&o, 0, sizeof o);
    o.scale = 1.0;
    o.eps_clip = json_number_value(json_object_get(j, "eps_clip"));
    json_t *v;
    if ((v = json_object_get(j, "eps_clip_higher")) != NULL && json_is_number(v)) {
        o.has_eps_clip_higher = true;
        o.eps_clip_higher = json_number_value(v);
    }
    if ((v = json_object_get(j, "c_clip")) != NULL && json_is_number(v)) {
        o.has_c_clip = true;
        o.c_clip = json_number_value(v);
    }
    if ((v = json_object_get(j, "importance_sampling_level")) != NULL)
        o.sequence_level = strcmp(json_string_value(v), "sequence") == 0;
    rs_from(json_object_get(j, "rejection_sampling"), rs);
    o.rejection = rs->enabled ? rs : NULL;
    return o;
}

static void check_grad(const char *name, const float *got, const json_t *want, int T) {
    float w[256];
    assert_int_equal(rl_floats(want, w), (size_t)T);
    for (int t = 0; t < T; t++)
        if (!rl_close(got[t], w[t], 1e-5))
            fail_msg("%s: dloss/dlogp[%d] = %.8g, AReaL (autograd) %.8g", name, t, got[t], w[t]);
}

static void every_case_matches_areal(void **st) {
    (void)st;
    json_t *fx = rl_load_fixture("rl-loss.json");
    assert_non_null(fx);
    size_t i;
    json_t *cs;
    int n_cases = 0, n_dual = 0, n_filtered = 0;
    json_array_foreach(json_object_get(fx, "cases"), i, cs) {
        const char *name = json_string_value(json_object_get(cs, "name"));
        mb m;
        mb_from(json_object_get(cs, "inputs"), &m);
        areal_rejection_config rs;
        areal_ppo_loss_opts o = opts_from(json_object_get(cs, "opts"), &rs);
        double loss;
        float dlogp[256];
        areal_ppo_loss_stats s;
        areal_error err;
        int rc = areal_ppo_actor_loss(m.logp, m.prox, m.behav, m.adv, m.mask, m.T, m.cu, m.n, &o,
                                      &loss, dlogp, &s, &err);
        if (rc != AREAL_OK)
            fail_msg("%s: %s", name, err.msg);
        double want = json_number_value(json_object_get(cs, "loss"));
        if (!rl_close(loss, want, 1e-5))
            fail_msg("%s: loss %.8g, AReaL %.8g", name, loss, want);
        check_grad(name, dlogp, json_object_get(cs, "dlogp"), m.T);
        json_t *ws = json_object_get(cs, "stats");
        json_t *v;
        if ((v = json_object_get(ws, "n_clipped")) != NULL)
            assert_int_equal(s.n_clipped, json_integer_value(v));
        if ((v = json_object_get(ws, "n_dual_clipped")) != NULL)
            assert_int_equal(s.n_dual_clipped, json_integer_value(v));
        n_dual += s.n_dual_clipped > 0;
        if ((v = json_object_get(ws, "ratio_sum")) != NULL &&
            !rl_close(s.ratio_sum, rl_num(v), 1e-5))
            fail_msg("%s: ratio_sum %.8g, AReaL %.8g", name, s.ratio_sum, rl_num(v));
        if ((v = json_object_get(ws, "approx_kl_sum")) != NULL &&
            !rl_close(s.approx_kl_sum, rl_num(v), 1e-5))
            fail_msg("%s: approx_kl_sum %.8g, AReaL %.8g", name, s.approx_kl_sum, rl_num(v));
        if ((v = json_object_get(ws, "token_loss_sum")) != NULL &&
            !rl_close(s.token_loss_sum, rl_num(v), 1e-5))
            fail_msg("%s: token_loss_sum %.8g, AReaL %.8g", name, s.token_loss_sum, rl_num(v));
        if ((v = json_object_get(ws, "n_behave")) != NULL)
            assert_int_equal(s.n_behave, json_integer_value(v));
        if ((v = json_object_get(ws, "behave_w_sum")) != NULL &&
            !rl_close(s.behave_w_sum, rl_num(v), 1e-5))
            fail_msg("%s: behave_w_sum %.8g, AReaL %.8g", name, s.behave_w_sum, rl_num(v));
        if ((v = json_object_get(ws, "behave_kl_sum")) != NULL &&
            !rl_close(s.behave_kl_sum, rl_num(v), 1e-5))
            fail_msg("%s: behave_kl_sum %.8g, AReaL %.8g", name, s.behave_kl_sum, rl_num(v));
        if ((v = json_object_get(ws, "filtered_fraction")) != NULL) {
            double ff = (double)s.n_filtered / (double)(s.n_valid > 0 ? s.n_valid : 1);
            if (!rl_close(ff, rl_num(v), 1e-9))
                fail_msg("%s: filtered fraction %.6f, AReaL %.6f", name, ff, rl_num(v));
            n_filtered += s.n_filtered > 0;
        }
        n_cases++;
    }
    assert_true(n_cases >= 20);
    assert_true(n_dual >= 1);     /* the dual-clip branch was exercised */
    assert_true(n_filtered >= 8); /* and rejection sampling filtered something */
    json_decref(fx);
}

/*
 * 2 DP ranks x 3 micro-batches: each micro-batch's scaled loss and gradient
 * match AReaL's engine (loss * n_valid_mb / n_valid_global * dp); and the DP
 * average of the summed scaled losses is the token mean over the whole
 * minibatch.
 */
static void micro_batches_and_dp_ranks_aggregate_as_areal(void **st) {
    (void)st;
    json_t *fx = rl_load_fixture("rl-loss.json");
    assert_non_null(fx);
    json_t *dp = json_object_get(fx, "dp2");
    areal_rejection_config rs = {
        true, AREAL_RS_TOKEN, AREAL_RS_MASK, AREAL_RS_RATIO, AREAL_RS_AGG_MEAN, 2.0, false, 0.0};
    /* n_valid_global: the all-reduce of every micro-batch's count */
    long global = 0;
    for (size_t r = 0; r < 2; r++) {
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(json_array_get(dp, r), "mbs"), i, m) {
            mb x;
            mb_from(json_object_get(m, "inputs"), &x);
            global += areal_ppo_count_valid(x.mask, x.T);
        }
    }
    assert_int_equal(
        global, (long)json_number_value(json_object_get(json_array_get(dp, 0), "total_valid")));
    double dp_sum = 0.0, token_sum = 0.0;
    for (size_t r = 0; r < 2; r++) {
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(json_array_get(dp, r), "mbs"), i, m) {
            mb x;
            mb_from(json_object_get(m, "inputs"), &x);
            areal_ppo_loss_opts o = {0.2, true, 0.28, false, 0.0, &rs, false, 1.0};
            o.scale = areal_ppo_mb_scale(areal_ppo_count_valid(x.mask, x.T), global, 2);
            assert_true(rl_close(o.scale, json_number_value(json_object_get(m, "scale")), 1e-7));
            double loss;
            float g[256];
            areal_ppo_loss_stats s;
            assert_int_equal(areal_ppo_actor_loss(x.logp, x.prox, x.behav, x.adv, x.mask, x.T, x.cu,
                                                  x.n, &o, &loss, g, &s, NULL),
                             AREAL_OK);
            double want = json_number_value(json_object_get(m, "loss"));
            if (!rl_close(loss, want, 1e-5))
                fail_msg("rank %zu mb %zu: scaled loss %.8g, AReaL %.8g", r, i, loss, want);
            check_grad("dp2", g, json_object_get(m, "dlogp"), x.T);
            dp_sum += loss;
            token_sum += s.token_loss_sum;
        }
    }
    /* gradient averaging over 2 ranks: sum of scaled losses / dp = token mean */
    assert_true(rl_close(dp_sum / 2.0, token_sum / (double)global, 1e-6));
    json_decref(fx);
}

/* rl-systems-2026.md §6.1: closed forms derived from AReaL's CISPO fixture. */
static void reference_closed_forms(void **st) {
    (void)st;
    float lr[6] = {-2.0f, -0.5f, 0.0f, 0.3f, 1.5f, 0.1f};
    float logp[6] = {-1.0f, -2.0f, -0.3f, -1.2f, -0.7f, -2.5f};
    float prox[6], adv[6] = {1, -2, 0.5f, 3, -1, 2}, mask[6] = {1, 1, 1, 1, 1, 0};
    for (int i = 0; i < 6; i++)
        prox[i] = logp[i] - lr[i];
    areal_ppo_loss_opts o = {0.2, false, 0.0, false, 0.0, NULL, false, 1.0};
    double loss;
    float g[6];
    areal_ppo_loss_stats s;
    assert_int_equal(
        areal_ppo_actor_loss(logp, prox, prox, adv, mask, 6, NULL, 0, &o, &loss, g, &s, NULL),
        AREAL_OK);
    assert_true(fabs(loss - 0.369271) < 1e-6);
    assert_int_equal(s.n_clipped, 2);
    const float want[5] = {-0.027067f, 0.0f, -0.1f, 0.0f, 0.896338f};
    for (int i = 0; i < 5; i++)
        assert_true(fabsf(g[i] - want[i]) < 1e-6f);
    assert_true(g[5] == 0.0f);
    o.has_eps_clip_higher = true;
    o.eps_clip_higher = 0.28;
    assert_int_equal(
        areal_ppo_actor_loss(logp, prox, prox, adv, mask, 6, NULL, 0, &o, &loss, g, NULL, NULL),
        AREAL_OK);
    assert_true(fabs(loss - 0.321271) < 1e-6);
    o.has_eps_clip_higher = false;
    o.eps_clip = 0.4;
    assert_int_equal(
        areal_ppo_actor_loss(logp, prox, prox, adv, mask, 6, NULL, 0, &o, &loss, g, &s, NULL),
        AREAL_OK);
    assert_true(fabs(loss - 0.201968) < 1e-6);
    assert_int_equal(s.n_clipped, 0);
    /* with the weight mask w > 5 (log w = [0.2, -0.4, 0, 0.1, -0.3, 0.5]) */
    float lw[6] = {0.2f, -0.4f, 0.0f, 0.1f, -0.3f, 0.5f}, behav[6];
    for (int i = 0; i < 6; i++)
        behav[i] = prox[i] - lw[i];
    areal_rejection_config rs = {
        true, AREAL_RS_TOKEN, AREAL_RS_MASK, AREAL_RS_RATIO, AREAL_RS_AGG_MEAN, 5.0, false, 0.0};
    areal_ppo_loss_opts d = {0.2, false, 0.0, false, 0.0, &rs, false, 1.0};
    assert_int_equal(
        areal_ppo_actor_loss(logp, prox, behav, adv, mask, 6, NULL, 0, &d, &loss, g, NULL, NULL),
        AREAL_OK);
    assert_true(fabs(loss - (-0.050257)) < 1e-6);
}

static void bad_options_and_layouts(void **st) {
    (void)st;
    float x[4] = {-1, -1, -1, -1}, m[4] = {0, 1, 1, 1};
    int64_t cu[3] = {0, 2, 4};
    double loss;
    areal_error err;
    areal_ppo_loss_opts o = {1.5, false, 0.0, false, 0.0, NULL, false, 1.0};
    assert_int_equal(areal_ppo_actor_loss(x, x, x, x, m, 4, cu, 2, &o, &loss, NULL, NULL, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "eps_clip"));
    o.eps_clip = 0.2;
    o.has_c_clip = true;
    o.c_clip = 0.5;
    assert_int_equal(areal_ppo_actor_loss(x, x, x, x, m, 4, cu, 2, &o, &loss, NULL, NULL, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "c_clip"));
    o.has_c_clip = false;
    o.sequence_level = true;
    assert_int_equal(areal_ppo_actor_loss(x, x, x, x, m, 4, NULL, 0, &o, &loss, NULL, NULL, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "cu_seqlens"));
    int64_t bad[3] = {0, 3, 2};
    assert_int_equal(areal_ppo_actor_loss(x, x, x, x, m, 4, bad, 2, &o, &loss, NULL, NULL, &err),
                     AREAL_EINVAL);
    o.sequence_level = false;
    float nanlp[4] = {-1, NAN, -1, -1};
    assert_int_equal(areal_ppo_actor_loss(nanlp, x, x, x, m, 4, cu, 2, &o, &loss, NULL, NULL, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "token 1"));
    /* a NaN under a zero mask is fine */
    nanlp[0] = NAN;
    nanlp[1] = -1;
    assert_int_equal(areal_ppo_actor_loss(nanlp, x, x, x, m, 4, cu, 2, &o, &loss, NULL, NULL, &err),
                     AREAL_OK);
    /* no valid token: loss 0, as AReaL's count "or 1" */
    float none[4] = {0, 0, 0, 0};
    float g[4];
    assert_int_equal(areal_ppo_actor_loss(x, x, x, x, none, 4, cu, 2, &o, &loss, g, NULL, &err),
                     AREAL_OK);
    assert_true(loss == 0.0 && g[0] == 0.0f && g[3] == 0.0f);
    assert_true(areal_ppo_mb_scale(3, 0, 2) == 0.0);
}

/* the per-token surrogate in float (k_ppo.cu's arithmetic): pg and d pg / d r */
static float term_pg(float A, float r, const areal_ppo_terms *t, float *g) {
    float cr = r < t->clip_lo ? t->clip_lo : (r > t->clip_hi ? t->clip_hi : r);
    float l1 = -A * r, l2 = -A * cr, dc = (r >= t->clip_lo && r <= t->clip_hi) ? 1.0f : 0.0f;
    float pg = l1 >= l2 ? l1 : l2;
    float gr = l1 > l2 ? -A : (l1 < l2 ? -A * dc : 0.5f * (-A) + 0.5f * (-A * dc));
    if (t->c_clip > 1.0f) {
        float l3 = (A > 0 ? 1.0f : (A < 0 ? -1.0f : 0.0f)) * t->c_clip * A;
        if (l3 < pg) {
            pg = l3;
            gr = 0.0f;
        } else if (l3 == pg) {
            gr *= 0.5f;
        }
    }
    *g = gr;
    return pg;
}

static void token_terms_rebuild_areal(void **st) {
    (void)st;
    json_t *fx = rl_load_fixture("rl-loss.json");
    assert_non_null(fx);
    size_t i;
    json_t *cs;
    int n_token = 0, n_seq = 0, n_rs = 0;
    json_array_foreach(json_object_get(fx, "cases"), i, cs) {
        const char *name = json_string_value(json_object_get(cs, "name"));
        mb m;
        mb_from(json_object_get(cs, "inputs"), &m);
        areal_rejection_config rs;
        areal_ppo_loss_opts o = opts_from(json_object_get(cs, "opts"), &rs);
        o.scale = 0.75; /* a micro-batch scale, applied to loss and gradient alike */
        float w[256];
        areal_ppo_terms t;
        areal_error err;
        int rc =
            areal_ppo_token_terms(m.prox, m.behav, m.adv, m.mask, m.T, m.cu, m.n, &o, w, &t, &err);
        if (o.sequence_level) { /* GSPO: refused, naming the setting */
            assert_int_equal(rc, AREAL_EINVAL);
            assert_non_null(strstr(err.msg, "sequence"));
            n_seq++;
            continue;
        }
        if (rc != AREAL_OK)
            fail_msg("%s: %s", name, err.msg);
        assert_int_equal(t.n_valid, areal_ppo_count_valid(m.mask, m.T));
        double loss = 0;
        float dlogp[256];
        for (int k = 0; k < m.T; k++) {
            dlogp[k] = 0.0f;
            if (w[k] == 0.0f)
                continue;
            float r = expf(m.logp[k] - m.prox[k]), g;
            float pg = term_pg(m.adv[k], r, &t, &g);
            loss += t.coef * w[k] * pg;
            dlogp[k] = (float)(t.coef * w[k] * g * r);
        }
        double want = 0.75 * json_number_value(json_object_get(cs, "loss"));
        if (!rl_close(loss, want, 1e-5))
            fail_msg("%s: loss from the terms %.8g, AReaL %.8g", name, loss, want);
        float wg[256];
        assert_int_equal(rl_floats(json_object_get(cs, "dlogp"), wg), (size_t)m.T);
        for (int k = 0; k < m.T; k++)
            if (!rl_close(dlogp[k], 0.75f * wg[k], 1e-5))
                fail_msg("%s: dlogp[%d] from the terms %.8g, AReaL %.8g", name, k, dlogp[k],
                         0.75f * wg[k]);
        n_token++;
        n_rs += o.rejection != NULL;
    }
    assert_true(n_token >= 10);
    assert_true(n_seq >= 1);
    assert_true(n_rs >= 4); /* rejection sampling's weights went through the terms */
    json_decref(fx);
    /* rejection sampling without behaviour logprobs is named */
    areal_rejection_config rs = {.enabled = true, .upper = 5.0};
    areal_ppo_loss_opts o = {.eps_clip = 0.2, .rejection = &rs, .scale = 1.0};
    float v[2] = {0.0f, 0.0f}, mask[2] = {1.0f, 1.0f}, w[2];
    areal_ppo_terms t;
    areal_error err;
    assert_int_equal(areal_ppo_token_terms(v, NULL, v, mask, 2, NULL, 0, &o, w, &t, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "behav"));
    o.rejection = NULL;
    o.eps_clip = 1.5; /* the full loss's option checks */
    assert_int_equal(areal_ppo_token_terms(v, NULL, v, mask, 2, NULL, 0, &o, w, &t, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "eps_clip"));
}

static void stats_add_combines(void **st) {
    (void)st;
    areal_ppo_loss_stats a = {0}, b = {0};
    a.ratio_min = 0.5;
    a.ratio_max = 1.5;
    a.n_valid = 3;
    a.behave_w_min = INFINITY;
    a.behave_w_max = -INFINITY;
    b.ratio_min = 0.2;
    b.ratio_max = 1.1;
    b.n_valid = 4;
    b.behave_w_min = 0.9;
    b.behave_w_max = 1.2;
    areal_ppo_loss_stats_add(&a, &b);
    assert_int_equal(a.n_valid, 7);
    assert_true(a.ratio_min == 0.2 && a.ratio_max == 1.5);
    assert_true(a.behave_w_min == 0.9 && a.behave_w_max == 1.2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_case_matches_areal),
        cmocka_unit_test(micro_batches_and_dp_ranks_aggregate_as_areal),
        cmocka_unit_test(reference_closed_forms),
        cmocka_unit_test(bad_options_and_layouts),
        cmocka_unit_test(stats_add_combines),
        cmocka_unit_test(token_terms_rebuild_areal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
