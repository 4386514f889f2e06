/*
 * gpu_test_model.c - the GPU model against the CPU model (make test-gpu):
 * one training step (forward, mean token cross-entropy, backward, global
 * norm clipping, AdamW) of the tiny Qwen3 (tied embeddings, q/k norm), the
 * tiny Qwen3-MoE (a routed layer and a dense one) and the tiny Qwen2 (q/k/v
 * biases) from worker/model's bf16 fixtures, and decode steps over the paged
 * cache against the CPU forward's logits. Both models start from the same
 * weights (the fixtures are bf16, so the CPU's fp32 parameters are exactly
 * the GPU's bf16 copy). Without a device every test is skipped.
 *
 * Tolerances, and why (the CPU is fp32 throughout; the GPU rounds every
 * activation to bf16, relative error 2^-9 each, with fp32 accumulation):
 * - loss: |gpu - cpu| <= 0.5% of the loss: the log-softmax of bf16 logits
 *   averages their independent roundings, so the loss carries well under one
 *   bf16 ulp (0.4%) of its own scale.
 * - gradients, per tensor: ||gpu - cpu|| <= 5% ||cpu|| + 0.1% of the global
 *   norm. A gradient passes through about 15 bf16 roundings over two layers
 *   (projections, norms, residual adds, the attention's bf16 dq/dk/dv);
 *   independent errors add in quadrature, sqrt(15) * 2^-9 ~ 0.8%, and the
 *   residual gradient's bf16 accumulation can double it: 5% leaves margin
 *   without hiding a wrong formula (a missing term is tens of percent). The
 *   absolute floor is for tensors whose gradient nearly cancels (k_proj's
 *   bias: softmax ignores a constant shift of the keys, so only RoPE's
 *   rotation of the bias leaves a small gradient, a difference of large
 *   bf16 terms). Global norm: 3%.
 * - updated weights: the first AdamW step moves each weight by lr * g /
 *   (|g| + eps) ~ lr * sign(g) (plus the decay, identical on both), so the
 *   change is insensitive to the gradient's size but flips where a gradient
 *   is within the bf16 noise of zero: every element within 2.2 lr of the
 *   CPU's (no update is larger than lr (1 + wd |w|)), and of the elements
 *   whose CPU gradient exceeds 0.2 of its tensor's rms (4 sigma of a 5%
 *   noise) at least 99% within 0.05 lr.
 * - decode logits, per row: ||gpu - cpu|| / ||cpu|| <= 3% (bf16 weights,
 *   activations and cache; no backward); the greedy token equals the CPU's
 *   argmax wherever the CPU's top two logits differ by more than 2% of the
 *   row's largest magnitude, and its log-probability is within 0.05 of the
 *   CPU's.
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

#include "areal/gpumodel/model.h"
#include "areal/model/optim.h"

#define HF "worker/model/tests/fixtures/hf/"

#define OK(call)                                                                                   \
    do {                                                                                           \
        areal_error e_;                                                                            \
        areal_error_clear(&e_);                                                                    \
        int rc_ = (call);                                                                          \
        if (rc_ != AREAL_OK)                                                                       \
            printf("%s: %s\n", #call, e_.msg);                                                     \
        assert_int_equal(rc_, AREAL_OK);                                                           \
    } while (0)
#define ERR (&e_)

static void need_device(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("no CUDA device (%s); skipped\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        skip();
    }
}

static uint32_t rnd(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (uint32_t)((*s * 2685821657736338717ull) >> 32);
}

/* log-softmax of row z[V] at index t, in double */
static double log_softmax_at(const float *z, int V, int t) {
    double mx = z[0], s = 0;
    for (int i = 1; i < V; i++)
        mx = z[i] > mx ? z[i] : mx;
    for (int i = 0; i < V; i++)
        s += exp(z[i] - mx);
    return z[t] - mx - log(s);
}

static double l2(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (b != NULL ? b[i] : 0.0f);
        s += d * d;
    }
    return sqrt(s);
}

static const int lens[] = {7, 12, 5};
#define NSEQ 3

static void train_case(const char *dir) {
    need_device();
    areal_model m;
    OK(areal_model_load(&m, dir, NULL, ERR));
    const int V = m.cfg.vocab_size;
    int cu[NSEQ + 1] = {0}, T = 0;
    for (int s = 0; s < NSEQ; s++)
        cu[s + 1] = (T += lens[s]);
    int32_t *tok = malloc(sizeof(int32_t) * T), *tgt = malloc(sizeof(int32_t) * T);
    uint64_t seed = 0x5eedull + (uint64_t)strlen(dir);
    for (int t = 0; t < T; t++)
        tok[t] = (int32_t)(rnd(&seed) % (uint32_t)V);
    int n_tgt = 0;
    for (int s = 0; s < NSEQ; s++)
        for (int t = cu[s]; t < cu[s + 1]; t++) {
            tgt[t] = t + 1 < cu[s + 1] ? tok[t + 1] : -1;
            n_tgt += tgt[t] >= 0;
        }
    areal_batch b = {tok, cu, T, NSEQ};
    const double lr = 1e-3;
    areal_gpu_step_cfg sc = {{(float)lr, 0.9f, 0.999f, 1e-8f, 0.01f, 0}, 1.0f};
    /* GPU: chunk 10 so the head runs in three chunks */
    areal_gpu_model *g = NULL;
    OK(areal_gpu_model_create(&m, T, NSEQ, 10, &g, ERR));
    OK(areal_gpu_model_upload(g, &m, ERR));
    areal_gpu_step_out so;
    OK(areal_gpu_train_step(g, &b, tgt, &sc, &so, ERR));
    size_t n = m.n_params;
    float *p0 = malloc(sizeof(float) * n), *pg = malloc(sizeof(float) * n);
    float *gg = malloc(sizeof(float) * n), *gc = malloc(sizeof(float) * n);
    memcpy(p0, m.params, sizeof(float) * n);
    OK(areal_gpu_model_download(g, pg, gg, ERR));
    /* CPU: the same step */
    areal_acts a;
    OK(areal_model_forward(&m, &b, &a, ERR));
    float *dl = calloc((size_t)T * V, sizeof(float));
    double loss = 0;
    for (int t = 0; t < T; t++) {
        if (tgt[t] < 0)
            continue;
        const float *z = a.logits + (size_t)t * V;
        double lz = z[tgt[t]] - log_softmax_at(z, V, tgt[t]); /* log Z */
        loss -= log_softmax_at(z, V, tgt[t]);
        for (int i = 0; i < V; i++)
            dl[(size_t)t * V + i] = (float)((exp(z[i] - lz) - (i == tgt[t])) / n_tgt);
    }
    loss /= n_tgt;
    areal_model_zero_grad(&m);
    OK(areal_model_backward(&m, &a, dl, ERR));
    memcpy(gc, m.grads, sizeof(float) * n);
    double norm = areal_clip_grad_norm(m.grads, n, sc.max_norm);
    areal_adamw opt;
    OK(areal_adamw_init(&opt, n, ERR));
    areal_adamw_cfg ac = {lr, 0.9, 0.999, 1e-8, 0.01};
    areal_adamw_step(&opt, &ac, lr, m.params, m.grads, NULL);
    printf("%s: loss gpu %.6f cpu %.6f; grad norm gpu %.6f cpu %.6f; %d targets\n", dir, so.loss,
           loss, so.grad_norm, norm, so.n_targets);
    assert_int_equal(so.n_targets, n_tgt);
    assert_true(fabs(so.loss - loss) <= 0.005 * fabs(loss));
    assert_true(fabs(so.grad_norm - norm) <= 0.03 * norm);
    int bad = 0;
    size_t strong = 0, close = 0, worst_i = 0;
    double worst = 0;
    for (size_t i = 0; i < m.n_specs; i++) {
        size_t o = m.offset[i], k = (size_t)m.specs[i].shape[0] *
                                    (size_t)(m.specs[i].ndim == 2 ? m.specs[i].shape[1] : 1);
        double ref = l2(gc + o, NULL, k), diff = l2(gg + o, gc + o, k);
        int fail = !(diff <= 0.05 * ref + 1e-3 * norm);
        if (fail || i < 3)
            printf("  grad %-48s |cpu| %.3e  |gpu - cpu| %.3e (%.4f)%s\n", m.specs[i].name, ref,
                   diff, ref > 0 ? diff / ref : 0.0, fail ? "  <-- over the limit" : "");
        bad += fail;
        double rms = ref / sqrt((double)k);
        for (size_t j = o; j < o + k; j++) {
            double d = fabs(((double)pg[j] - p0[j]) - ((double)m.params[j] - p0[j]));
            if (fabs(gc[j]) > 0.2 * rms) {
                strong++;
                close += d <= 0.05 * lr;
            }
            if (d > worst) {
                worst = d;
                worst_i = j;
            }
        }
    }
    assert_int_equal(bad, 0);
    printf("  updated weights: %zu of %zu with a clear gradient within 0.05 lr; worst of all "
           "[%zu] %.3g lr\n",
           close, strong, worst_i, worst / lr);
    assert_true(worst <= 2.2 * lr);
    assert_true(strong > 0 && (double)close >= 0.99 * (double)strong);
    areal_adamw_free(&opt);
    areal_acts_free(&a);
    areal_gpu_model_free(g);
    free(dl);
    free(p0);
    free(pg);
    free(gg);
    free(gc);
    free(tok);
    free(tgt);
    areal_model_free(&m);
}

static void test_train_qwen3(void **state) {
    (void)state;
    train_case(HF "qwen3-bf16");
}
static void test_train_qwen3_moe(void **state) {
    (void)state;
    train_case(HF "qwen3-moe-bf16");
}
static void test_train_qwen2(void **state) {
    (void)state;
    train_case(HF "qwen2-bf16");
}

#define DL 8 /* decode: two sequences of DL tokens */

static void decode_case(const char *dir) {
    need_device();
    areal_model m;
    OK(areal_model_load(&m, dir, NULL, ERR));
    const int V = m.cfg.vocab_size;
    int32_t tok[2 * DL];
    uint64_t seed = 0xdec0deull;
    for (int i = 0; i < 2 * DL; i++)
        tok[i] = (int32_t)(rnd(&seed) % (uint32_t)V);
    int cu[3] = {0, DL, 2 * DL};
    areal_batch b = {tok, cu, 2 * DL, 2};
    areal_acts a;
    OK(areal_model_forward(&m, &b, &a, ERR));
    areal_gpu_model *g = NULL;
    OK(areal_gpu_model_create(&m, 2 * DL, 2, 0, &g, ERR));
    OK(areal_gpu_model_upload(g, &m, ERR));
    /* blocks of 4 rows, the sequences' blocks scattered over the pool */
    areal_gpu_kv_cfg kv = {2, 4, 8, 3};
    OK(areal_gpu_decode_init(g, &kv, ERR));
    int32_t table[2 * 3] = {5, 1, 0, 2, 7, 0};
    float *lg = malloc(sizeof(float) * 2 * V);
    areal_k_sample_cfg greedy = {0.0f, 0, 1.0f};
    int bad = 0, checked = 0;
    double worst = 0;
    for (int i = 0; i < DL; i++) {
        int32_t step_tok[2] = {tok[i], tok[DL + i]}, pos[2] = {i, i}, next[2];
        float lp[2];
        OK(areal_gpu_decode_step(g, 2, step_tok, pos, table, greedy, NULL, next, lp, lg, ERR));
        for (int s = 0; s < 2; s++) {
            const float *ref = a.logits + (size_t)(s * DL + i) * V, *got = lg + (size_t)s * V;
            double rel = l2(got, ref, (size_t)V) / l2(ref, NULL, (size_t)V);
            worst = rel > worst ? rel : worst;
            bad += rel > 0.03;
            int best = 0, second = -1;
            double mx = 0;
            for (int v = 0; v < V; v++) {
                mx = fabs(ref[v]) > mx ? fabs(ref[v]) : mx;
                if (ref[v] > ref[best]) {
                    second = best;
                    best = v;
                } else if (v != best && (second < 0 || ref[v] > ref[second])) {
                    second = v;
                }
            }
            if (ref[best] - ref[second] > 0.02 * mx) {
                checked++;
                if (next[s] != best) {
                    printf("  step %d seq %d: greedy %d, cpu argmax %d\n", i, s, next[s], best);
                    bad++;
                }
                double lref = log_softmax_at(ref, V, best);
                if (fabs(lp[s] - lref) > 0.05) {
                    printf("  step %d seq %d: logprob %.5f, cpu %.5f\n", i, s, lp[s], lref);
                    bad++;
                }
            }
        }
    }
    printf("%s: decode %d steps x 2: worst logits rel err %.4f; %d greedy tokens checked\n", dir,
           DL, worst, checked);
    assert_int_equal(bad, 0);
    free(lg);
    areal_acts_free(&a);
    areal_gpu_model_free(g);
    areal_model_free(&m);
}

static void test_decode_qwen3(void **state) {
    (void)state;
    decode_case(HF "qwen3-bf16");
}
static void test_decode_qwen3_moe(void **state) {
    (void)state;
    decode_case(HF "qwen3-moe-bf16");
}

/* bad input is refused with the field named, before anything runs */
static void test_refusals(void **state) {
    (void)state;
    need_device();
    areal_model m;
    OK(areal_model_load(&m, HF "qwen3-bf16", NULL, ERR));
    areal_gpu_model *g = NULL;
    OK(areal_gpu_model_create(&m, 8, 2, 0, &g, ERR));
    int32_t tok[9] = {0}, tgt[9] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
    int cu[2] = {0, 9};
    areal_batch b = {tok, cu, 9, 1};
    areal_gpu_step_cfg sc = {{1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0}, 0.0f};
    areal_gpu_step_out so;
    areal_error err;
    assert_int_equal(areal_gpu_train_step(g, &b, tgt, &sc, &so, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "planned"));
    b.n_tokens = cu[1] = 8;
    assert_int_equal(areal_gpu_train_step(g, &b, tgt, &sc, &so, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "no row has a target"));
    int32_t next, pos = 0, table = 0;
    float lp;
    areal_k_sample_cfg greedy = {0.0f, 0, 1.0f};
    assert_int_equal(
        areal_gpu_decode_step(g, 1, tok, &pos, &table, greedy, NULL, &next, &lp, NULL, &err),
        AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "areal_gpu_decode_init"));
    areal_gpu_model_free(g);
    areal_model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_qwen3),      cmocka_unit_test(test_train_qwen3_moe),
        cmocka_unit_test(test_train_qwen2),      cmocka_unit_test(test_decode_qwen3),
        cmocka_unit_test(test_decode_qwen3_moe), cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
