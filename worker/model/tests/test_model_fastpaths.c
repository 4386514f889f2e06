/*
 * test_model_fastpaths.c - the training step's faster kernels against
 * straightforward double-precision references written here, so a fused,
 * blocked or vectorised path that computed something different fails:
 *   - cross-entropy (one fused pass per row: max, vector exp kept in the
 *     dlogits row, scale) against log-softmax in double with libm's exp,
 *     including rows without a target (exact zeros) and a near one-hot row
 *     (p_y ~ 1: its element held to 1e-5 of itself);
 *   - the logprob / entropy head and its backward (exp reused from the kept
 *     terms) against the same double reference;
 *   - causal GQA attention in 64-row query blocks (k_attention.c) against the
 *     whole L x L softmax attention in double, forward and backward, on
 *     sequence lengths that end mid-block (1, 63, 64, 65, 130);
 *   - SwiGLU's eight-lane body against its scalar tail (bitwise: the same
 *     value at a body and a tail position) and against libm in double.
 * Tolerances: float products reassociate sums (sgemm's blocking, vector
 * lanes) and the vector exp is ~1 ulp, so each value is held to 2e-6 of the
 * reference's largest element (attention: 1e-5, its sums run over L keys and
 * 64 dims); a wrong block boundary, a missed row or a lost term moves values
 * by 1e-2 or more.
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

#include "areal/model/heads.h"
#include "areal/model/ops.h"

static uint64_t rng = 88172645463325252ull;

static float uni(void) { /* [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* max |got - want| over n, divided by max |want| (1 when want is all zero). */
static double rel_err(const float *got, const double *want, size_t n) {
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)got[i] - want[i]));
        s = fmax(s, fabs(want[i]));
    }
    return e / (s > 0 ? s : 1);
}

/* log-softmax of row z (V) in double: lp[j], returns the row's entropy. */
static double ref_logsoftmax(const float *z, int V, double inv_t, double *lp) {
    double mx = -INFINITY, s = 0, h = 0;
    for (int j = 0; j < V; j++)
        mx = fmax(mx, z[j] * inv_t);
    for (int j = 0; j < V; j++)
        s += exp(z[j] * inv_t - mx);
    for (int j = 0; j < V; j++) {
        lp[j] = z[j] * inv_t - mx - log(s);
        h -= exp(lp[j]) * lp[j];
    }
    return h;
}

static void cross_entropy_matches_double_reference(void **st) {
    (void)st;
    enum { T = 6, V = 1003 }; /* V: an eight-lane body and a tail */
    float *z = malloc(sizeof(float) * T * V), *dz = malloc(sizeof(float) * T * V);
    double *want = malloc(sizeof(double) * T * V), *lp = malloc(sizeof(double) * V);
    assert_true(z != NULL && dz != NULL && want != NULL && lp != NULL);
    int32_t tgt[T] = {5, -1, 1002, 0, -1, 77};
    for (int i = 0; i < T * V; i++)
        z[i] = 4.0f * uni();
    z[3 * V + 0] = 14.0f; /* row 3: its target holds all but ~1e-3 of the mass */
    int n = 4;
    double loss_want = 0;
    for (int t = 0; t < T; t++) {
        ref_logsoftmax(z + t * V, V, 1.0, lp);
        for (int j = 0; j < V; j++)
            want[t * V + j] = tgt[t] < 0 ? 0.0 : (exp(lp[j]) - (j == tgt[t])) / n;
        if (tgt[t] >= 0)
            loss_want -= lp[tgt[t]] / n;
    }
    double loss = 0;
    for (int i = 0; i < T * V; i++)
        dz[i] = NAN; /* every element must be written */
    assert_int_equal(areal_cross_entropy(NULL, z, T, V, tgt, &loss, dz, NULL), AREAL_OK);
    assert_true(fabs(loss - loss_want) <= 2e-6 * fabs(loss_want));
    double e = rel_err(dz, want, (size_t)T * V);
    if (!(e <= 2e-6))
        fail_msg("cross-entropy dlogits differ from the double reference by %.3g", e);
    for (int j = 0; j < V; j++) /* rows without a target: exact zeros */
        assert_true(dz[1 * V + j] == 0.0f && dz[4 * V + j] == 0.0f);
    /* the near one-hot target: (p_y - 1) / n to its own relative precision */
    double w = want[3 * V + 0];
    assert_true(fabs(dz[3 * V + 0] - w) <= 1e-5 * fabs(w));
    /* and with no dlogits, the same loss */
    double loss2 = 0;
    assert_int_equal(areal_cross_entropy(NULL, z, T, V, tgt, &loss2, NULL, NULL), AREAL_OK);
    assert_true(loss2 == loss);
    free(z);
    free(dz);
    free(want);
    free(lp);
}

static void logprob_head_matches_double_reference(void **st) {
    (void)st;
    enum { T = 4, V = 517 };
    float *z = malloc(sizeof(float) * T * V), *dz = malloc(sizeof(float) * T * V);
    double *want = malloc(sizeof(double) * T * V), *lp = malloc(sizeof(double) * V);
    assert_true(z != NULL && dz != NULL && want != NULL && lp != NULL);
    int32_t tgt[T] = {3, -1, 516, 100};
    float dlogp[T] = {0.5f, 0.7f, -1.25f, 0.0f}, dent[T] = {0.3f, -0.2f, 0.0f, 0.0f};
    float glp[T], gh[T];
    const float temp = 0.7f;
    for (int i = 0; i < T * V; i++)
        z[i] = 3.0f * uni();
    areal_token_logprobs(NULL, z, T, V, tgt, temp, glp, gh);
    areal_token_logprobs_backward(NULL, z, T, V, tgt, temp, dlogp, dent, dz);
    double it = (double)(1.0f / temp); /* the kernels scale by the float 1 / temp */
    for (int t = 0; t < T; t++) {
        double h = ref_logsoftmax(z + t * V, V, it, lp);
        double wl = tgt[t] >= 0 ? lp[tgt[t]] : 0.0;
        assert_true(fabs(glp[t] - wl) <= 2e-6 * fmax(1.0, fabs(wl)));
        assert_true(fabs(gh[t] - h) <= 2e-6 * fmax(1.0, h));
        double dl = tgt[t] >= 0 ? dlogp[t] : 0.0, de = dent[t];
        for (int j = 0; j < V; j++) {
            double p = exp(lp[j]);
            double g = -dl * p - de * p * (lp[j] + h) + (j == tgt[t] ? dl : 0.0);
            want[t * V + j] = g * it;
        }
    }
    double e = rel_err(dz, want, (size_t)T * V);
    if (!(e <= 2e-6))
        fail_msg("logprob backward differs from the double reference by %.3g", e);
    for (int j = 0; j < V; j++) /* row 3: dlogp and dentropy 0, a row with no gradient */
        assert_true(dz[3 * V + j] == 0.0f);
    free(z);
    free(dz);
    free(want);
    free(lp);
}

/* Whole-matrix causal attention of one sequence in double: out, and dq dk dv from dout. */
static void ref_attention(int L, int nh, int nkv, int hd, const float *q, const float *k,
                          const float *v, const float *dout, double *out, double *dq, double *dk,
                          double *dv) {
    int qd = nh * hd, kvd = nkv * hd, grp = nh / nkv;
    double scale = 1.0 / sqrt((double)hd);
    double *P = malloc(sizeof(double) * L * L), *dP = malloc(sizeof(double) * L * L);
    assert_true(P != NULL && dP != NULL);
    for (int h = 0; h < nh; h++) {
        int kh = h / grp;
        for (int i = 0; i < L; i++) {
            double mx = -INFINITY, s = 0;
            for (int j = 0; j <= i; j++) {
                double a = 0;
                for (int c = 0; c < hd; c++)
                    a += (double)q[i * qd + h * hd + c] * k[j * kvd + kh * hd + c];
                P[i * L + j] = a * (double)(float)scale;
                mx = fmax(mx, P[i * L + j]);
            }
            for (int j = 0; j <= i; j++)
                s += (P[i * L + j] = exp(P[i * L + j] - mx));
            for (int j = 0; j <= i; j++)
                P[i * L + j] /= s;
            for (int c = 0; c < hd; c++) {
                double o = 0;
                for (int j = 0; j <= i; j++)
                    o += P[i * L + j] * v[j * kvd + kh * hd + c];
                out[i * qd + h * hd + c] = o;
            }
        }
        for (int i = 0; i < L; i++) {
            double dot = 0;
            for (int j = 0; j <= i; j++) {
                double a = 0;
                for (int c = 0; c < hd; c++)
                    a += (double)dout[i * qd + h * hd + c] * v[j * kvd + kh * hd + c];
                dP[i * L + j] = a;
                dot += a * P[i * L + j];
            }
            for (int j = 0; j <= i; j++) {
                double ds = P[i * L + j] * (dP[i * L + j] - dot) * (double)(float)scale;
                for (int c = 0; c < hd; c++) {
                    dv[j * kvd + kh * hd + c] += P[i * L + j] * dout[i * qd + h * hd + c];
                    dq[i * qd + h * hd + c] += ds * k[j * kvd + kh * hd + c];
                    dk[j * kvd + kh * hd + c] += ds * q[i * qd + h * hd + c];
                }
            }
        }
    }
    free(P);
    free(dP);
}

static void blocked_attention_matches_whole_matrix(void **st) {
    (void)st;
    enum { NH = 4, NKV = 2, HD = 16, NS = 5 };
    int lens[NS] = {1, 63, 64, 65, 130}; /* ends before, on and after the 64-row blocks */
    int32_t cu[NS + 1] = {0};
    size_t att_off[NS + 1] = {0}, maxL = 0;
    for (int s = 0; s < NS; s++) {
        cu[s + 1] = cu[s] + lens[s];
        att_off[s + 1] = att_off[s] + (size_t)NH * lens[s] * lens[s];
        maxL = (size_t)lens[s] > maxL ? (size_t)lens[s] : maxL;
    }
    int T = cu[NS], qd = NH * HD, kvd = NKV * HD;
    size_t nq = (size_t)T * qd, nk = (size_t)T * kvd;
    float *f = malloc(sizeof(float) * (4 * nq + 4 * nk + att_off[NS] + maxL * maxL));
    double *r = calloc(2 * nq + 2 * nk, sizeof(double));
    assert_true(f != NULL && r != NULL);
    float *q = f, *dout = q + nq, *out = dout + nq, *dq = out + nq, *k = dq + nq, *v = k + nk;
    float *dk = v + nk, *dv = dk + nk, *att = dv + nk, *scratch = att + att_off[NS];
    for (size_t i = 0; i < nq; i++) {
        q[i] = 2.0f * uni();
        dout[i] = uni();
        dq[i] = 0;
    }
    for (size_t i = 0; i < nk; i++) {
        k[i] = 2.0f * uni();
        v[i] = uni();
        dk[i] = dv[i] = 0;
    }
    for (size_t i = 0; i < att_off[NS]; i++)
        att[i] = NAN; /* the saved probabilities: every element below the diagonal written */
    const areal_ops *o = areal_ops_cpu();
    areal_attn_dims d = {NH, NKV, HD, 1.0f / sqrtf((float)HD)};
    o->attn_fwd(NULL, out, att, q, k, v, cu, NS, att_off, d);
    o->attn_bwd(NULL, dq, dk, dv, dout, att, q, k, v, cu, NS, att_off, d, scratch);
    double *rout = r, *rdq = r + nq, *rdk = rdq + nq, *rdv = rdk + nk;
    for (int s = 0; s < NS; s++) {
        size_t t0 = (size_t)cu[s];
        ref_attention(lens[s], NH, NKV, HD, q + t0 * qd, k + t0 * kvd, v + t0 * kvd, dout + t0 * qd,
                      rout + t0 * qd, rdq + t0 * qd, rdk + t0 * kvd, rdv + t0 * kvd);
        for (int h = 0; h < NH; h++) /* zero above the diagonal, as the record promises */
            for (int i = 0; i < lens[s]; i++)
                for (int j = i + 1; j < lens[s]; j++)
                    assert_true(att[att_off[s] + ((size_t)h * lens[s] + i) * lens[s] + j] == 0);
    }
    struct {
        const char *name;
        const float *got;
        const double *want;
        size_t n;
    } c[] = {{"out", out, rout, nq}, {"dq", dq, rdq, nq}, {"dk", dk, rdk, nk}, {"dv", dv, rdv, nk}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        double e = rel_err(c[i].got, c[i].want, c[i].n);
        if (!(e <= 1e-5))
            fail_msg("attention %s differs from the whole-matrix reference by %.3g", c[i].name, e);
    }
    free(f);
    free(r);
}

static void swiglu_lanes_equal_tail_and_libm(void **st) {
    (void)st;
    enum { N = 8 * 4 + 7 }; /* four eight-lane groups and a tail of 7 */
    float g[N], u[N], dh[N], h[N], dg[N], du[N];
    for (int i = 0; i < N; i++) {
        g[i] = 8.0f * uni();
        u[i] = uni();
        dh[i] = uni();
    }
    for (int i = 0; i < 7; i++) { /* the tail repeats the first group's inputs */
        g[32 + i] = g[i];
        u[32 + i] = u[i];
        dh[32 + i] = dh[i];
    }
    g[5] = g[37] = -95.0f; /* exp(-g) past float's range (clamped): silu and its gradient ~0 */
    const areal_ops *o = areal_ops_cpu();
    o->swiglu_fwd(NULL, h, g, u, N);
    o->swiglu_bwd(NULL, dg, du, dh, g, u, N);
    for (int i = 0; i < 7; i++)
        if (h[i] != h[32 + i] || dg[i] != dg[32 + i] || du[i] != du[32 + i])
            fail_msg("element %d: the vector body and the scalar tail differ", i);
    double wh[N], wdg[N], wdu[N];
    for (int i = 0; i < N; i++) {
        double s = 1.0 / (1.0 + exp(-(double)g[i]));
        wh[i] = g[i] * s * u[i];
        wdu[i] = dh[i] * g[i] * s;
        wdg[i] = dh[i] * u[i] * s * (1.0 + g[i] * (1.0 - s));
    }
    assert_true(rel_err(h, wh, N) <= 2e-6);
    assert_true(rel_err(dg, wdg, N) <= 2e-6);
    assert_true(rel_err(du, wdu, N) <= 2e-6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cross_entropy_matches_double_reference),
        cmocka_unit_test(logprob_head_matches_double_reference),
        cmocka_unit_test(blocked_attention_matches_whole_matrix),
        cmocka_unit_test(swiglu_lanes_equal_tail_and_libm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
