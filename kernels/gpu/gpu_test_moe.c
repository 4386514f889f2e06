/*
 * gpu_test_moe.c - MoE routing on the GPU (areal/kernels/moe.h) against a
 * reference written here from worker/model/src/moe.c's definitions (softmax
 * over all experts, top-k with ties to the lower index, norm_topk_prob, the
 * stable counting sort into slots, the weighted combine and their backward):
 * the expert ids and slots must be identical, weights and probabilities within
 * fp32 rounding, rows within bf16 rounding. Shapes: E 8 with K 2, E 60 with
 * K 4 (Qwen2-MoE's 60 experts: two lanes' worth), E 128 with K 8 (Qwen3-MoE),
 * with skewed logits so that some experts get no token at all; the grouped
 * GEMM over those slots (empty experts skipped) against a double product.
 * Tolerances: fp32 rtol 1e-5, atol 1e-6; bf16 rows rtol 2^-8, atol 2^-8 *
 * max|ref|; the GEMM rtol 2^-7 (bf16 output) plus atol 2^-8 * max|ref|.
 * Without a device every test is skipped.
 */
#include "ktest.h"

#include "areal/kernels/moe.h"

/* moe.c's softmax over the experts, on doubles */
static void ref_softmax(const float *logits, int T, int E, float *probs) {
    for (int t = 0; t < T; t++) {
        const float *l = logits + (size_t)t * E;
        double mx = l[0], sum = 0;
        for (int e = 1; e < E; e++)
            mx = l[e] > mx ? l[e] : mx;
        for (int e = 0; e < E; e++)
            sum += exp(l[e] - mx);
        for (int e = 0; e < E; e++)
            probs[(size_t)t * E + e] = (float)(exp(l[e] - mx) / sum);
    }
}

/* moe.c's top-k (ties to the lower index) and weights, on given probabilities:
 * the GPU's own, so that a near-tie rounded differently cannot flip a choice */
static void ref_topk(const float *probs, int T, int E, int K, int norm, int32_t *topk, float *w) {
    for (int t = 0; t < T; t++) {
        const float *p = probs + (size_t)t * E;
        double wsum = 0;
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int used = 0;
                for (int j = 0; j < k; j++)
                    used |= topk[t * K + j] == e;
                if (!used && (best < 0 || p[e] > p[best]))
                    best = e;
            }
            topk[t * K + k] = best;
            w[t * K + k] = p[best];
            wsum += p[best];
        }
        if (norm)
            for (int k = 0; k < K; k++)
                w[t * K + k] = (float)(w[t * K + k] / wsum);
    }
}

static void moe_case(int T, int E, int K, int H, int norm, uint64_t seed) {
    uint64_t s = seed;
    const int TK = T * K;
    float *logits = malloc(sizeof(float) * T * E);
    for (int i = 0; i < T * E; i++) /* skewed: the high experts are rarely chosen */
        logits[i] = kt_unif(&s, 2.0f) - 4.0f * (float)(i % E) / (float)E;
    float *probs = malloc(sizeof(float) * T * E), *w = malloc(sizeof(float) * TK);
    int32_t *topk = malloc(sizeof(int32_t) * TK), *off = calloc(E + 1, sizeof(int32_t));
    int32_t *slot_of = malloc(sizeof(int32_t) * TK), *slot_tok = malloc(sizeof(int32_t) * TK);
    ref_softmax(logits, T, E, probs);
    float *dlog = kt_up(logits, sizeof(float) * T * E), *dprobs = kt_dev(sizeof(float) * T * E);
    float *dwts = kt_dev(sizeof(float) * TK);
    int32_t *dtopk = kt_dev(sizeof(int32_t) * TK);
    float *gp = malloc(sizeof(float) * T * E);
    KT_OK(areal_k_moe_route(dprobs, dtopk, dwts, dlog, T, E, K, norm, NULL, KT_ERR));
    kt_down(gp, dprobs, sizeof(float) * T * E);
    ref_topk(gp, T, E, K, norm, topk, w);
    for (int i = 0; i < TK; i++)
        off[topk[i] + 1]++;
    int empty = 0;
    for (int e = 0; e < E; e++) {
        empty += off[e + 1] == 0;
        off[e + 1] += off[e];
    }
    int32_t *cur = malloc(sizeof(int32_t) * E);
    memcpy(cur, off, sizeof(int32_t) * E);
    for (int i = 0; i < TK; i++) {
        slot_of[i] = cur[topk[i]]++;
        slot_tok[slot_of[i]] = i / K;
    }
    /* rows: x [T,H], expert outputs ys [TK,H], dout [T,H] */
    uint16_t *xb = malloc((size_t)T * H * 2), *yb = malloc((size_t)TK * H * 2);
    uint16_t *gb = malloc((size_t)T * H * 2);
    float *x = malloc((size_t)T * H * 4), *y = malloc((size_t)TK * H * 4);
    float *g = malloc((size_t)T * H * 4);
    kt_fill_bf16(xb, x, (size_t)T * H, &s, 1.0f);
    kt_fill_bf16(yb, y, (size_t)TK * H, &s, 1.0f);
    kt_fill_bf16(gb, g, (size_t)T * H, &s, 1.0f);
    float *comb = calloc((size_t)T * H, 4), *dys = malloc((size_t)TK * H * 4);
    float *dw = malloc(sizeof(float) * TK), *dx = calloc((size_t)T * H, 4);
    float *dl = malloc(sizeof(float) * T * E);
    for (int i = 0; i < TK; i++) {
        int t = i / K;
        double dot = 0;
        for (int c = 0; c < H; c++) {
            size_t r = (size_t)slot_of[i] * H + c;
            comb[(size_t)t * H + c] += w[i] * y[r];
            dys[r] = w[i] * g[(size_t)t * H + c];
            dot += (double)g[(size_t)t * H + c] * y[r];
            dx[(size_t)t * H + c] += y[r]; /* the permute's backward of dxs = ys */
        }
        dw[i] = (float)dot;
    }
    for (int t = 0; t < T; t++) { /* moe.c's router backward */
        const float *p = probs + (size_t)t * E;
        float *d = dl + (size_t)t * E;
        double S = 0, wdot = 0, pd = 0;
        for (int k = 0; k < K; k++) {
            S += p[topk[t * K + k]];
            wdot += (double)dw[t * K + k] * w[t * K + k];
        }
        for (int e = 0; e < E; e++)
            d[e] = 0;
        for (int k = 0; k < K; k++)
            d[topk[t * K + k]] = norm ? (float)((dw[t * K + k] - wdot) / S) : dw[t * K + k];
        for (int e = 0; e < E; e++)
            pd += (double)p[e] * d[e];
        for (int e = 0; e < E; e++)
            d[e] = (float)(p[e] * (d[e] - pd));
    }

    float *ddw = kt_dev(sizeof(float) * TK), *ddl = kt_dev(sizeof(float) * T * E);
    int32_t *doff = kt_dev(sizeof(int32_t) * (E + 1));
    int32_t *dso = kt_dev(sizeof(int32_t) * TK), *dst = kt_dev(sizeof(int32_t) * TK);
    uint16_t *dx_in = kt_up(xb, (size_t)T * H * 2), *dxs = kt_dev((size_t)TK * H * 2);
    uint16_t *dys_in = kt_up(yb, (size_t)TK * H * 2), *dcomb = kt_dev((size_t)T * H * 2);
    uint16_t *dg = kt_up(gb, (size_t)T * H * 2), *ddys = kt_dev((size_t)TK * H * 2);
    uint16_t *ddx = kt_dev((size_t)T * H * 2);
    KT_OK(areal_k_moe_slots(doff, dso, dst, dtopk, T, E, K, NULL, KT_ERR));
    KT_OK(areal_k_moe_permute(dxs, dx_in, dst, TK, H, NULL, KT_ERR));
    KT_OK(areal_k_moe_unpermute(dcomb, dys_in, dso, dwts, T, K, H, NULL, KT_ERR));
    KT_OK(areal_k_moe_unpermute_bwd(ddys, ddw, dg, dys_in, dso, dwts, T, K, H, NULL, KT_ERR));
    KT_OK(areal_k_moe_permute_bwd(ddx, dys_in, dso, T, K, H, NULL, KT_ERR));
    KT_OK(areal_k_moe_route_bwd(ddl, ddw, dprobs, dtopk, dwts, T, E, K, norm, NULL, KT_ERR));

    int32_t *gtopk = malloc(sizeof(int32_t) * TK), *goff = malloc(sizeof(int32_t) * (E + 1));
    int32_t *gso = malloc(sizeof(int32_t) * TK), *gst = malloc(sizeof(int32_t) * TK);
    float *gw = malloc(sizeof(float) * TK);
    float *gdw = malloc(sizeof(float) * TK), *gdl = malloc(sizeof(float) * T * E);
    float *gxs = malloc((size_t)TK * H * 4), *gcomb = malloc((size_t)T * H * 4);
    float *gdys = malloc((size_t)TK * H * 4), *gdx = malloc((size_t)T * H * 4);
    float *xs = malloc((size_t)TK * H * 4);
    kt_down(gtopk, dtopk, sizeof(int32_t) * TK);
    kt_down(goff, doff, sizeof(int32_t) * (E + 1));
    kt_down(gso, dso, sizeof(int32_t) * TK);
    kt_down(gst, dst, sizeof(int32_t) * TK);
    kt_down(gw, dwts, sizeof(float) * TK);
    kt_down(gdw, ddw, sizeof(float) * TK);
    kt_down(gdl, ddl, sizeof(float) * T * E);
    kt_down_bf16(gxs, dxs, (size_t)TK * H);
    kt_down_bf16(gcomb, dcomb, (size_t)T * H);
    kt_down_bf16(gdys, ddys, (size_t)TK * H);
    kt_down_bf16(gdx, ddx, (size_t)T * H);
    for (int i = 0; i < TK; i++)
        memcpy(xs + (size_t)i * H, x + (size_t)slot_tok[i] * H, (size_t)H * 4);
    printf("moe: T %d, E %d, K %d, H %d, norm %d, %d empty experts\n", T, E, K, H, norm, empty);
    assert_memory_equal(gtopk, topk, sizeof(int32_t) * TK);
    assert_memory_equal(goff, off, sizeof(int32_t) * (E + 1));
    assert_memory_equal(gso, slot_of, sizeof(int32_t) * TK);
    assert_memory_equal(gst, slot_tok, sizeof(int32_t) * TK);
    assert_int_equal(kt_close("  probs", gp, probs, (size_t)T * E, 1e-5, 1e-7), 0);
    assert_int_equal(kt_close("  weights", gw, w, TK, 1e-5, 1e-7), 0);
    assert_int_equal(kt_close("  xs", gxs, xs, (size_t)TK * H, 0, 0), 0); /* a copy */
    assert_int_equal(kt_close("  combine", gcomb, comb, (size_t)T * H, 1.0 / 256,
                              kt_maxabs(comb, (size_t)T * H) / 256),
                     0);
    assert_int_equal(kt_close("  dys", gdys, dys, (size_t)TK * H, 1.0 / 256,
                              kt_maxabs(dys, (size_t)TK * H) / 256),
                     0);
    assert_int_equal(kt_close("  dw", gdw, dw, TK, 1e-5, kt_maxabs(dw, TK) * 1e-6), 0);
    assert_int_equal(
        kt_close("  dx", gdx, dx, (size_t)T * H, 1.0 / 256, kt_maxabs(dx, (size_t)T * H) / 256), 0);
    assert_int_equal(
        kt_close("  dlogits", gdl, dl, (size_t)T * E, 1e-4, kt_maxabs(dl, (size_t)T * E) * 1e-5),
        0);

    /* the grouped GEMM: per expert, out_s = xs_s W_e^T with W_e [N, H] */
    const int N = 24;
    uint16_t *wb = malloc((size_t)E * N * H * 2);
    float *wf = malloc((size_t)E * N * H * 4), *ref = malloc((size_t)TK * N * 4);
    float *got = malloc((size_t)TK * N * 4);
    kt_fill_bf16(wb, wf, (size_t)E * N * H, &s, 0.5f);
    for (int e = 0; e < E; e++)
        for (int r = off[e]; r < off[e + 1]; r++)
            for (int n = 0; n < N; n++) {
                double acc = 0;
                for (int c = 0; c < H; c++)
                    acc += (double)xs[(size_t)r * H + c] * wf[((size_t)e * N + n) * H + c];
                ref[(size_t)r * N + n] = (float)acc;
            }
    areal_k_gemm *gm = NULL;
    KT_OK(areal_k_gemm_create(0, &gm, KT_ERR));
    uint16_t *dwe = kt_up(wb, (size_t)E * N * H * 2), *dout = kt_dev((size_t)TK * N * 2);
    KT_OK(areal_k_moe_grouped_gemm(gm, goff, E, N, H, dxs, 0, dwe, (size_t)N * H, 1, dout, 0,
                                   AREAL_K_OUT_BF16, 0.0f, NULL, KT_ERR));
    kt_down_bf16(got, dout, (size_t)TK * N);
    assert_int_equal(kt_close("  grouped gemm", got, ref, (size_t)TK * N, 1.0 / 128,
                              kt_maxabs(ref, (size_t)TK * N) / 256),
                     0);
    areal_k_gemm_destroy(gm);
    cudaFree(dwe), cudaFree(dout), cudaFree(dlog), cudaFree(dprobs), cudaFree(dwts);
    cudaFree(ddw), cudaFree(ddl), cudaFree(dtopk), cudaFree(doff), cudaFree(dso), cudaFree(dst);
    cudaFree(dx_in), cudaFree(dxs), cudaFree(dys_in), cudaFree(dcomb), cudaFree(dg);
    cudaFree(ddys), cudaFree(ddx);
    free(wb), free(wf), free(ref), free(got), free(logits), free(probs), free(w), free(topk);
    free(off), free(slot_of), free(slot_tok), free(cur), free(xb), free(yb), free(gb), free(x);
    free(y), free(g), free(comb), free(dys), free(dw), free(dx), free(dl), free(gtopk), free(goff);
    free(gso), free(gst), free(gp), free(gw), free(gdw), free(gdl), free(gxs), free(gcomb);
    free(gdys), free(gdx), free(xs);
}

static void test_moe(void **state) {
    (void)state;
    kt_need_device();
    moe_case(1, 8, 2, 16, 0, 1);
    moe_case(37, 8, 2, 33, 1, 2);
    moe_case(200, 60, 4, 64, 0, 3);
    moe_case(513, 128, 8, 96, 1, 4);
}

static void test_bad_input(void **state) {
    (void)state;
    kt_need_device();
    areal_error err;
    float *f = kt_dev(64);
    int32_t *i = kt_dev(64);
    assert_int_equal(areal_k_moe_route(f, i, f, f, 2, 4, 5, 0, NULL, &err), AREAL_EINVAL);
    printf("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "K 5"));
    assert_int_equal(areal_k_moe_route(f, i, f, f, 2, 2000, 2, 0, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "E 2000"));
    int32_t off[3] = {3, 1, 4}; /* decreasing: refused before any launch */
    areal_k_gemm *gm = NULL;
    KT_OK(areal_k_gemm_create(0, &gm, KT_ERR));
    assert_int_equal(areal_k_moe_grouped_gemm(gm, off, 2, 4, 4, (uint16_t *)f, 0, (uint16_t *)f, 16,
                                              1, f, 0, AREAL_K_OUT_F32, 0.0f, NULL, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "off[1]"));
    areal_k_gemm_destroy(gm);
    cudaFree(f), cudaFree(i);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moe),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
