/*
 * gpu_test_grpo.c - the trainer's first two GRPO steps on the GPU model
 * against the CPU trainer's arithmetic (make test-gpu; skipped without a
 * device). What the trainer's GPU backend (worker/train/gpu/src/
 * backend_gpu.c) calls, in its order, on the tiny Qwen3 in fp32: per step,
 * the proximal logprobs of each micro-batch without a gradient
 * (areal_gpu_logprobs), then zero + two micro-batches accumulated
 * (areal_gpu_accum_ppo, each with its own areal_ppo_mb_scale) + one optimizer
 * step (areal_gpu_apply: norm, clip 1.0, AdamW with weight decay); on the
 * CPU, what trainer.c's CPU backend does: the CPU model's forward,
 * areal_token_logprobs, areal_ppo_actor_loss (worker/rl, never the
 * per-token terms), areal_token_logprobs_backward, the backward, the clip
 * and areal_adamw_step. Behaviour logprobs drawn near the proximal ones so
 * the behaviour weights vary; proximal = the current policy (one minibatch),
 * so the ratio is 1 on both sides and no clip branch can flip.
 *
 * Tolerances (bf16 activations and weights copy, fp32 masters): proximal
 * logprobs within 0.05 of the CPU's (gpu_test_ppo's bound), and within 1e-3
 * of the logprobs the accumulating forward sees (the same kernels on the same
 * weights); the step's loss within 2% + 1e-4; the gradient norm within 6%;
 * after each step every tensor's update (w_new - w_old) within 30% of the
 * CPU's update in L2 (Adam's first steps are ~lr * sign(g), so the elements
 * whose tiny gradients bf16 noise flips move the other way: a bound on the
 * whole update, not per element, plus 1e-5 per sqrt(element)); after both
 * steps AdamW's first moment within 10% of the CPU's (L2).
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

#include "../../../kernels/gpu/ktest.h"
#include "areal/gpumodel/model.h"
#include "areal/model/heads.h"
#include "areal/model/optim.h"
#include "areal/rl/loss.h"
#include "areal/rl/ppo_terms.h"

#define HF "worker/model/tests/fixtures/hf/"

enum { NS = 4, MB = 2 }; /* sequences per step, micro-batches (two sequences each) */

typedef struct batch {
    int cu[NS + 1], T;
    int64_t cu64[NS + 1];
    int32_t tok[128], tgt[128];
    float prox[128], behav[128], adv[128], mask[128];
} batch;

/* micro-batch k: sequences 2k, 2k + 1, rebased */
typedef struct mbv {
    areal_batch b;
    int cu[3];
    int64_t cu64[3];
    int at, T;
} mbv;

static mbv mb_of(const batch *B, int k) {
    mbv m;
    m.at = B->cu[2 * k];
    m.T = B->cu[2 * k + 2] - m.at;
    for (int i = 0; i < 3; i++)
        m.cu64[i] = m.cu[i] = B->cu[2 * k + i] - m.at;
    m.b = (areal_batch){B->tok + m.at, m.cu, m.T, 2};
    return m;
}

static void draw(batch *B, uint64_t *s, int V, int step) {
    static const int lens[2][NS] = {{9, 14, 6, 11}, {12, 7, 10, 8}};
    B->T = 0;
    B->cu[0] = 0;
    B->cu64[0] = 0;
    for (int i = 0; i < NS; i++)
        B->cu64[i + 1] = B->cu[i + 1] = (B->T += lens[step][i]);
    for (int t = 0; t < B->T; t++)
        B->tok[t] = (int32_t)(kt_rnd(s) % (uint32_t)V);
    for (int i = 0; i < NS; i++)
        for (int t = B->cu[i]; t < B->cu[i + 1]; t++) {
            bool last = t + 1 == B->cu[i + 1];
            B->tgt[t] = last ? -1 : B->tok[t + 1];
            B->mask[t] = last || t - B->cu[i] < 3 ? 0.0f : 1.0f; /* 3 prompt tokens */
            B->adv[t] = (i % 2 ? 1.0f : -1.0f) * (0.5f + 0.1f * (float)i);
        }
}

static double l2(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (b != NULL ? b[i] : 0.0f);
        s += d * d;
    }
    return sqrt(s);
}

static void test_two_grpo_steps(void **state) {
    (void)state;
    kt_need_device();
    areal_model m;
    KT_OK(areal_model_load(&m, HF "qwen3-bf16", NULL, KT_ERR));
    const int V = m.cfg.vocab_size;
    size_t n = m.n_params;
    areal_gpu_model *g = NULL;
    KT_OK(areal_gpu_model_create(&m, 64, NS, 0, &g, KT_ERR));
    KT_OK(areal_gpu_model_upload(g, &m, KT_ERR));
    areal_adamw opt;
    KT_OK(areal_adamw_init(&opt, n, KT_ERR));
    areal_adamw_cfg ac = {1e-3, 0.9, 0.999, 1e-8, 0.01};
    areal_gpu_step_cfg sc = {{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 0}, 1.0f};
    areal_ppo_loss_opts o = {.eps_clip = 0.2, .scale = 1.0};
    float *w_old = malloc(sizeof(float) * n), *w_gpu = malloc(sizeof(float) * n);
    float *dl = malloc(sizeof(float) * 64 * (size_t)V);
    uint64_t seed = 0x6770ull;
    for (int step = 0; step < 2; step++) {
        batch B;
        draw(&B, &seed, V, step);
        float lp_cpu[128] = {0}, lp_acc[128] = {0}, dlogp[128], w[128];
        memcpy(w_old, m.params, sizeof(float) * n);
        /* proximal logprobs: each side's own policy, micro-batch by micro-batch */
        float prox_gpu[128];
        for (int k = 0; k < MB; k++) {
            mbv v = mb_of(&B, k);
            areal_acts a;
            KT_OK(areal_model_forward(&m, &v.b, &a, KT_ERR));
            areal_token_logprobs(NULL, a.logits, a.T, a.V, B.tgt + v.at, 1.0f, lp_cpu + v.at, NULL);
            areal_acts_free(&a);
            KT_OK(areal_gpu_logprobs(g, &v.b, B.tgt + v.at, 1.0f, prox_gpu + v.at, KT_ERR));
        }
        double prox_err = 0;
        for (int t = 0; t < B.T; t++) {
            B.prox[t] = lp_cpu[t];
            B.behav[t] = lp_cpu[t] + kt_unif(&seed, 0.3f);
            if (B.tgt[t] >= 0)
                prox_err = fmax(prox_err, fabs((double)prox_gpu[t] - lp_cpu[t]));
        }
        printf("step %d: proximal logprobs worst |gpu - cpu| %.3g\n", step, prox_err);
        assert_true(prox_err <= 0.05);
        long nv = areal_ppo_count_valid(B.mask, B.T);
        /* CPU trainer */
        areal_model_zero_grad(&m);
        double loss_cpu = 0, loss_gpu = 0;
        for (int k = 0; k < MB; k++) {
            mbv v = mb_of(&B, k);
            areal_ppo_loss_opts ok = o;
            ok.scale = areal_ppo_mb_scale(areal_ppo_count_valid(B.mask + v.at, v.T), nv, 1);
            areal_acts a;
            KT_OK(areal_model_forward(&m, &v.b, &a, KT_ERR));
            float lp[64];
            areal_token_logprobs(NULL, a.logits, a.T, a.V, B.tgt + v.at, 1.0f, lp, NULL);
            double l = 0;
            KT_OK(areal_ppo_actor_loss(lp, B.prox + v.at, B.behav + v.at, B.adv + v.at,
                                       B.mask + v.at, v.T, v.cu64, 2, &ok, &l, dlogp, NULL,
                                       KT_ERR));
            loss_cpu += l;
            areal_token_logprobs_backward(NULL, a.logits, a.T, a.V, B.tgt + v.at, 1.0f, dlogp, NULL,
                                          dl);
            KT_OK(areal_model_backward(&m, &a, dl, KT_ERR));
            areal_acts_free(&a);
        }
        double norm_cpu = areal_clip_grad_norm(m.grads, n, 1.0);
        areal_adamw_step(&opt, &ac, ac.lr, m.params, m.grads, NULL);
        KT_OK(areal_gpu_zero_grad(g, KT_ERR));
        for (int k = 0; k < MB; k++) {
            mbv v = mb_of(&B, k);
            areal_ppo_loss_opts ok = o;
            ok.scale = areal_ppo_mb_scale(areal_ppo_count_valid(B.mask + v.at, v.T), nv, 1);
            areal_ppo_terms terms;
            KT_OK(areal_ppo_token_terms(prox_gpu + v.at, B.behav + v.at, B.adv + v.at,
                                        B.mask + v.at, v.T, v.cu64, 2, &ok, w, &terms, KT_ERR));
            areal_gpu_ppo ppo = {
                prox_gpu + v.at,
                B.adv + v.at,
                w,
                {terms.clip_lo, terms.clip_hi, terms.c_clip, (float)terms.coef, 1.0f}};
            double l = 0;
            KT_OK(areal_gpu_accum_ppo(g, &v.b, B.tgt + v.at, &ppo, &l, lp_acc + v.at, KT_ERR));
            loss_gpu += l;
        }
        double acc_err = 0;
        for (int t = 0; t < B.T; t++)
            if (B.tgt[t] >= 0)
                acc_err = fmax(acc_err, fabs((double)lp_acc[t] - prox_gpu[t]));
        double norm_gpu = 0;
        KT_OK(areal_gpu_apply(g, &sc, &norm_gpu, KT_ERR));
        KT_OK(areal_gpu_model_download(g, w_gpu, NULL, KT_ERR));
        printf("step %d: loss gpu %.6f cpu %.6f; grad norm gpu %.6f cpu %.6f; logprob accum vs "
               "no-grad %.3g\n",
               step, loss_gpu, loss_cpu, norm_gpu, norm_cpu, acc_err);
        assert_true(acc_err <= 1e-3);
        assert_true(fabs(loss_gpu - loss_cpu) <= 0.02 * fabs(loss_cpu) + 1e-4);
        assert_true(fabs(norm_gpu - norm_cpu) <= 0.06 * norm_cpu);
        int bad = 0;
        double worst = 0;
        for (size_t i = 0; i < m.n_specs; i++) {
            size_t off = m.offset[i], k = (size_t)m.specs[i].shape[0] *
                                          (size_t)(m.specs[i].ndim == 2 ? m.specs[i].shape[1] : 1);
            float *du = malloc(sizeof(float) * k), *dg = malloc(sizeof(float) * k);
            for (size_t j = 0; j < k; j++) {
                du[j] = m.params[off + j] - w_old[off + j];
                dg[j] = w_gpu[off + j] - w_old[off + j];
            }
            double ref = l2(du, NULL, k), diff = l2(dg, du, k);
            int fail = !(diff <= 0.3 * ref + 1e-5 * sqrt((double)k));
            worst = fmax(worst, ref > 0 ? diff / ref : 0);
            if (fail)
                printf("  update %-44s |cpu| %.3e |gpu - cpu| %.3e  <-- over the limit\n",
                       m.specs[i].name, ref, diff);
            bad += fail;
            free(du), free(dg);
        }
        printf("step %d: worst relative update difference %.3g over %zu tensors\n", step, worst,
               m.n_specs);
        assert_int_equal(bad, 0);
        /* the next step starts from each side's own weights, as each trainer would */
    }
    /* the moments come back in the model's layout, the step count with them */
    float *m1 = malloc(sizeof(float) * n), *m2 = malloc(sizeof(float) * n);
    long st = -1;
    KT_OK(areal_gpu_model_moments(g, false, m1, m2, &st, KT_ERR));
    assert_int_equal(st, 2);
    double mdiff = l2(m1, opt.m, n), mref = l2(opt.m, NULL, n);
    printf("AdamW first moment: |gpu - cpu| %.3e of |cpu| %.3e\n", mdiff, mref);
    assert_true(mdiff <= 0.1 * mref);
    free(m1), free(m2);
    free(w_old), free(w_gpu), free(dl);
    areal_adamw_free(&opt);
    areal_gpu_model_free(g);
    areal_model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_two_grpo_steps)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
