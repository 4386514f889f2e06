/*
 * gpu_test_ppo.c - the decoupled PPO (GRPO) loss on the GPU against the CPU
 * loss of worker/rl (areal_ppo_actor_loss) on the same inputs (make
 * test-gpu; skipped without a device):
 * - the fused kernel (areal/kernels/ppo.h) on random bf16 logits, vocabularies
 *   1001 and Qwen2's 151936, temperatures 1 and 0.7, proximal logprobs
 *   scattered around the policy's so that ratios fall on both sides of the
 *   clip band, the dual clip, behaviour weights from token-level rejection
 *   sampling (mask) and sequence-level (clamp), masked rows;
 * - a whole GPU training step with the PPO loss (areal_gpu_train_step_ppo) of
 *   the tiny Qwen3 against the CPU model's forward, the CPU loss's dlogp
 *   chained through the softmax, and the CPU backward.
 * The per-token terms come from areal_ppo_token_terms (tested on the CPU
 * against AReaL's fixtures in test_rl_loss); the reference loss and gradient
 * from the full CPU loss, which never sees the terms.
 *
 * Tolerances: kernel logprob 2e-4 (1 + |ref|) (fp32 sums over 151k terms in
 * another order); loss 1e-4 |ref| + 1e-6 (the ratios carry the logprob's
 * 1e-5 error); dlogits (bf16) rtol 2^-8, atol 2^-9 max|ref|. The model step:
 * log-ratios kept 0.07 away from every clip bound, so bf16's logprob noise
 * (~1e-2, bound 0.05) flips no branch; the loss within 1% + 1e-4 (the
 * ratio's exponential carries that noise), per-tensor gradients within 6% + 0.1% of
 * the global norm (gpu_test_model's 5% bound, plus the ratio's noise).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "../../../kernels/gpu/ktest.h"
#include "areal/gpumodel/model.h"
#include "areal/rl/loss.h"
#include "areal/rl/ppo_terms.h"

#define HF "worker/model/tests/fixtures/hf/"

/* log-softmax of z[V] / temp at t, and log Z, in double */
static double ref_lp(const float *z, int V, float temp, int t, double *lz) {
    double m = -INFINITY, s = 0;
    for (int i = 0; i < V; i++)
        m = z[i] / temp > m ? z[i] / temp : m;
    for (int i = 0; i < V; i++)
        s += exp(z[i] / temp - m);
    *lz = m + log(s);
    return z[t] / temp - *lz;
}

/* prox near lp (|d| < spread), behav near prox, adv in [-1, 1] (some 0), mask with holes */
static void draw_terms(uint64_t *s, const float *lp, int T, float spread, float *prox, float *behav,
                       float *adv, float *mask) {
    for (int t = 0; t < T; t++) {
        prox[t] = lp[t] + kt_unif(s, spread);
        behav[t] = prox[t] + kt_unif(s, 0.8f);
        adv[t] = t % 11 == 3 ? 0.0f : kt_unif(s, 1.0f);
        mask[t] = t % 7 == 5 ? 0.0f : 1.0f;
    }
}

static areal_k_ppo_cfg kcfg(const areal_ppo_terms *t, float temp) {
    areal_k_ppo_cfg c = {t->clip_lo, t->clip_hi, t->c_clip, (float)t->coef, temp};
    return c;
}

typedef struct {
    int rows, V;
    float temp;
    bool dual, eps_high;
    areal_rejection_config rs;
} kcase;

static void kernel_case(const kcase *kc, uint64_t seed) {
    kt_need_device();
    uint64_t s = seed;
    int R = kc->rows, V = kc->V;
    size_t n = (size_t)R * V;
    uint16_t *lb = malloc(n * 2);
    float *l = malloc(n * 4), *rd = malloc(n * 4), *got = malloc(n * 4);
    int32_t *tg = malloc(sizeof(int32_t) * R);
    float *lp = malloc(4 * R), *prox = malloc(4 * R), *behav = malloc(4 * R), *adv = malloc(4 * R);
    float *mask = malloc(4 * R), *w = malloc(4 * R), *dlogp = malloc(4 * R);
    float *glp = malloc(4 * R), *gloss = malloc(4 * R);
    double *lz = malloc(sizeof(double) * R);
    kt_fill_bf16(lb, l, n, &s, 4.0f);
    for (int r = 0; r < R; r++) {
        tg[r] = (int32_t)(kt_rnd(&s) % (uint32_t)V);
        lp[r] = (float)ref_lp(l + (size_t)r * V, V, kc->temp, tg[r], &lz[r]);
    }
    draw_terms(&s, lp, R, 0.5f, prox, behav, adv, mask);
    for (int r = 0; r < R; r++) { /* every branch, whatever the draw */
        if (r % 6 == 1) {         /* ratio e^1.3 > c_clip 3 with A < 0: the dual clip */
            prox[r] = lp[r] - 1.3f;
            adv[r] = -0.1f - fabsf(adv[r]);
        } else if (r % 6 == 2) { /* ratio e^0.35 above 1 + eps with A > 0: clipped */
            prox[r] = lp[r] - 0.35f;
            adv[r] = 0.1f + fabsf(adv[r]);
        }
        if (r < R / 3) /* behaviour weight e^0.5: over every rejection bound used below */
            behav[r] = prox[r] - 0.5f;
        else
            behav[r] = prox[r] + kt_unif(&s, 0.3f);
    }
    int64_t cu[4] = {0, R / 3, (2 * R) / 3, R};
    areal_ppo_loss_opts o = {.eps_clip = 0.2, .scale = 0.5};
    o.has_eps_clip_higher = kc->eps_high;
    o.eps_clip_higher = 0.28;
    o.has_c_clip = kc->dual;
    o.c_clip = 3.0;
    o.rejection = kc->rs.enabled ? &kc->rs : NULL;
    /* the reference: the CPU loss on the double-precision logprobs */
    double loss = 0;
    areal_ppo_loss_stats st;
    KT_OK(
        areal_ppo_actor_loss(lp, prox, behav, adv, mask, R, cu, 3, &o, &loss, dlogp, &st, KT_ERR));
    areal_ppo_terms terms;
    KT_OK(areal_ppo_token_terms(prox, behav, adv, mask, R, cu, 3, &o, w, &terms, KT_ERR));
    for (int r = 0; r < R; r++)
        for (int i = 0; i < V; i++) {
            double p = exp(l[(size_t)r * V + i] / kc->temp - lz[r]);
            rd[(size_t)r * V + i] = (float)(dlogp[r] * ((i == tg[r]) - p) / kc->temp);
        }
    uint16_t *d_l = kt_up(lb, n * 2), *d_dl = kt_dev(n * 2);
    int32_t *d_tg = kt_up(tg, 4 * (size_t)R);
    float *d_prox = kt_up(prox, 4 * (size_t)R), *d_adv = kt_up(adv, 4 * (size_t)R);
    float *d_w = kt_up(w, 4 * (size_t)R), *d_lp = kt_dev(4 * (size_t)R),
          *d_loss = kt_dev(4 * (size_t)R);
    KT_OK(areal_k_ppo_logprob(d_dl, d_lp, d_loss, d_l, (size_t)V, d_tg, d_prox, d_adv, d_w,
                              (size_t)R, V, kcfg(&terms, kc->temp), NULL, KT_ERR));
    kt_down(glp, d_lp, 4 * (size_t)R);
    kt_down(gloss, d_loss, 4 * (size_t)R);
    kt_down_bf16(got, d_dl, n);
    double gsum = 0;
    for (int r = 0; r < R; r++)
        gsum += gloss[r];
    printf("V %d rows %d temp %.2f: loss gpu %.8f cpu %.8f; clipped %ld dual %ld filtered %ld of "
           "%ld\n",
           V, R, (double)kc->temp, gsum, loss, st.n_clipped, st.n_dual_clipped, st.n_filtered,
           st.n_valid);
    assert_true(st.n_clipped > 0); /* the clip branch was exercised */
    if (kc->dual)
        assert_true(st.n_dual_clipped > 0);
    if (kc->rs.enabled)
        assert_true(st.n_filtered > 0);
    assert_int_equal(kt_close("logprob", glp, lp, (size_t)R, 2e-4, 2e-4), 0);
    assert_true(fabs(gsum - loss) <= 1e-4 * fabs(loss) + 1e-6);
    assert_int_equal(kt_close("dlogits", got, rd, n, 1.0 / 256, kt_maxabs(rd, n) / 512), 0);
    cudaFree(d_l), cudaFree(d_dl), cudaFree(d_tg), cudaFree(d_prox), cudaFree(d_adv);
    cudaFree(d_w), cudaFree(d_lp), cudaFree(d_loss);
    free(lb), free(l), free(rd), free(got), free(tg), free(lp), free(prox), free(behav);
    free(adv), free(mask), free(w), free(dlogp), free(glp), free(gloss), free(lz);
}

static void test_kernel_plain(void **state) {
    (void)state;
    kcase c = {67, 1001, 1.0f, false, false, {0}};
    kernel_case(&c, 0x9901ull);
}

static void test_kernel_dual_eps_high_token_rejection(void **state) {
    (void)state;
    kcase c = {131, 1001, 0.7f, true, true, {0}};
    c.rs.enabled = true;
    c.rs.level = AREAL_RS_TOKEN;
    c.rs.action = AREAL_RS_MASK;
    c.rs.upper = 1.3;
    kernel_case(&c, 0x9902ull);
}

static void test_kernel_qwen_vocab_sequence_clamp(void **state) {
    (void)state;
    kcase c = {24, 151936, 1.0f, true, false, {0}};
    c.rs.enabled = true;
    c.rs.level = AREAL_RS_SEQUENCE;
    c.rs.action = AREAL_RS_CLAMP;
    c.rs.upper = 1.1;
    kernel_case(&c, 0x9903ull);
}

static double l2(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (b != NULL ? b[i] : 0.0f);
        s += d * d;
    }
    return sqrt(s);
}

/* a GPU training step with the PPO loss against the CPU model's step */
static void test_model_step(void **state) {
    (void)state;
    kt_need_device();
    areal_model m;
    KT_OK(areal_model_load(&m, HF "qwen3-bf16", NULL, KT_ERR));
    const int V = m.cfg.vocab_size;
    enum { NS = 3 };
    const int lens[NS] = {9, 14, 6};
    int cu[NS + 1] = {0}, T = 0;
    int64_t cu64[NS + 1] = {0};
    for (int s = 0; s < NS; s++)
        cu64[s + 1] = cu[s + 1] = (T += lens[s]);
    int32_t *tok = malloc(sizeof(int32_t) * T), *tgt = malloc(sizeof(int32_t) * T);
    uint64_t seed = 0x9904ull;
    for (int t = 0; t < T; t++)
        tok[t] = (int32_t)(kt_rnd(&seed) % (uint32_t)V);
    for (int s = 0; s < NS; s++)
        for (int t = cu[s]; t < cu[s + 1]; t++)
            tgt[t] = t + 1 < cu[s + 1] ? tok[t + 1] : -1;
    areal_batch b = {tok, cu, T, NS};
    /* CPU: forward, logprobs, the CPU loss and its dlogp through the softmax, backward */
    areal_acts a;
    KT_OK(areal_model_forward(&m, &b, &a, KT_ERR));
    float *lp = calloc(T, 4), *prox = malloc(4 * T), *behav = malloc(4 * T), *adv = malloc(4 * T);
    float *mask = malloc(4 * T), *w = malloc(4 * T), *dlogp = malloc(4 * T);
    double *lz = malloc(sizeof(double) * T);
    for (int t = 0; t < T; t++)
        if (tgt[t] >= 0)
            lp[t] = (float)ref_lp(a.logits + (size_t)t * V, V, 1.0f, tgt[t], &lz[t]);
    draw_terms(&seed, lp, T, 0.4f, prox, behav, adv, mask);
    /* log-ratios at least 0.07 from the clip bounds (log 0.8, log 1.2) and the dual clip's
     * (log 3): the GPU's bf16 logprobs move by ~1e-2, which must not flip a branch */
    static const float lr_set[7] = {-0.5f, -0.3f, -0.05f, 0.05f, 0.3f, 0.6f, 1.3f};
    for (int t = 0; t < T; t++)
        prox[t] = lp[t] - lr_set[(t * 5) % 7];
    for (int t = 0; t < T; t++)
        if (tgt[t] < 0)
            mask[t] = 0.0f; /* the last token of a sequence predicts nothing */
    areal_rejection_config rs = {.enabled = true, .level = AREAL_RS_TOKEN, .upper = 1.5};
    areal_ppo_loss_opts o = {.eps_clip = 0.2, .has_c_clip = true, .c_clip = 3.0, .scale = 1.0};
    o.rejection = &rs;
    double loss = 0;
    KT_OK(areal_ppo_actor_loss(lp, prox, behav, adv, mask, T, cu64, NS, &o, &loss, dlogp, NULL,
                               KT_ERR));
    areal_ppo_terms terms;
    KT_OK(areal_ppo_token_terms(prox, behav, adv, mask, T, cu64, NS, &o, w, &terms, KT_ERR));
    float *dl = calloc((size_t)T * V, sizeof(float));
    for (int t = 0; t < T; t++)
        if (tgt[t] >= 0)
            for (int i = 0; i < V; i++) {
                double p = exp(a.logits[(size_t)t * V + i] - lz[t]);
                dl[(size_t)t * V + i] = (float)(dlogp[t] * ((i == tgt[t]) - p));
            }
    size_t n = m.n_params;
    areal_model_zero_grad(&m);
    KT_OK(areal_model_backward(&m, &a, dl, KT_ERR));
    float *gc = malloc(sizeof(float) * n), *gg = malloc(sizeof(float) * n);
    memcpy(gc, m.grads, sizeof(float) * n);
    /* GPU: the same step, chunk 8 so the head runs in four chunks */
    areal_gpu_model *g = NULL;
    KT_OK(areal_gpu_model_create(&m, T, NS, 8, &g, KT_ERR));
    KT_OK(areal_gpu_model_upload(g, &m, KT_ERR));
    areal_gpu_ppo ppo = {prox, adv, w, kcfg(&terms, 1.0f)};
    areal_gpu_step_cfg sc = {{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 0}, 1.0f};
    areal_gpu_step_out so;
    float *glp = malloc(4 * T);
    KT_OK(areal_gpu_train_step_ppo(g, &b, tgt, &ppo, &sc, &so, glp, KT_ERR));
    KT_OK(areal_gpu_model_download(g, NULL, gg, KT_ERR));
    double norm = l2(gc, NULL, n);
    printf("qwen3 PPO step: loss gpu %.6f cpu %.6f; grad norm gpu %.6f cpu %.6f; %d rows\n",
           so.loss, loss, so.grad_norm, norm, so.n_targets);
    double lp_err = 0;
    for (int t = 0; t < T; t++)
        if (tgt[t] >= 0)
            lp_err = fmax(lp_err, fabs((double)glp[t] - lp[t]));
    printf("  logprob: worst |gpu - cpu| %.3g\n", lp_err);
    assert_true(lp_err <= 0.05);
    assert_true(fabs(so.loss - loss) <= 0.01 * fabs(loss) + 1e-4);
    int bad = 0;
    for (size_t i = 0; i < m.n_specs; i++) {
        size_t off = m.offset[i], k = (size_t)m.specs[i].shape[0] *
                                      (size_t)(m.specs[i].ndim == 2 ? m.specs[i].shape[1] : 1);
        double ref = l2(gc + off, NULL, k), diff = l2(gg + off, gc + off, k);
        int fail = !(diff <= 0.06 * ref + 1e-3 * norm);
        if (fail || i < 3)
            printf("  grad %-48s |cpu| %.3e  |gpu - cpu| %.3e%s\n", m.specs[i].name, ref, diff,
                   fail ? "  <-- over the limit" : "");
        bad += fail;
    }
    assert_int_equal(bad, 0);
    /* refusals: a row in the loss without a target, and a bad dual clip */
    float w_bad[64];
    memcpy(w_bad, w, 4 * T);
    w_bad[cu[1] - 1] = 1.0f; /* the first sequence's last row has no target */
    areal_gpu_ppo bad_ppo = ppo;
    bad_ppo.w = w_bad;
    areal_error e;
    assert_int_equal(areal_gpu_train_step_ppo(g, &b, tgt, &bad_ppo, &sc, &so, NULL, &e),
                     AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "no target"));
    areal_gpu_model_free(g);
    areal_acts_free(&a);
    free(tok), free(tgt), free(lp), free(prox), free(behav), free(adv), free(mask), free(w);
    free(dlogp), free(lz), free(dl), free(gc), free(gg), free(glp);
    areal_model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_plain),
        cmocka_unit_test(test_kernel_dual_eps_high_token_rejection),
        cmocka_unit_test(test_kernel_qwen_vocab_sequence_clamp),
        cmocka_unit_test(test_model_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
