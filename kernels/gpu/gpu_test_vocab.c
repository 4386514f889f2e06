/*
 * gpu_test_vocab.c - the fused logprob / entropy over the vocabulary
 * (areal/kernels/vocab.h) and the sampler (areal/kernels/sample.h) against
 * double-precision CPU references written here from the definitions, on the
 * same bf16 logits: odd vocabularies (1, 7, 1001), Qwen2's 151936, a masked
 * (-inf) token, and temperatures != 1.
 * Tolerances: logprob / entropy atol 2e-4 * (1 + |ref|) (fp32 sums over 151k
 * terms in a different order); dlogits (bf16) rtol 2^-8, atol 2^-9 * max|ref|.
 * Sampler: the kept count must equal the reference's exactly; the token must
 * be kept and its cumulative-mass interval must hold u within 1e-4 of the
 * kept mass (fp32 prefix sums); logprob atol 2e-4. Greedy: exact token.
 */
#include "ktest.h"

#include "areal/kernels/sample.h"
#include "areal/kernels/vocab.h"

/* logz, logprob of t, entropy of softmax(z / temp) in double */
static void ref_row(const float *z, int V, float temp, int t, double *lz, double *lp, double *H) {
    double m = -INFINITY;
    for (int i = 0; i < V; i++)
        m = z[i] / temp > m ? z[i] / temp : m;
    double s = 0, e = 0;
    for (int i = 0; i < V; i++)
        s += exp(z[i] / temp - m);
    *lz = m + log(s);
    for (int i = 0; i < V; i++) {
        double l = z[i] / temp - *lz;
        if (isfinite(l))
            e -= exp(l) * l;
    }
    *H = e;
    *lp = z[t] / temp - *lz;
}

static void logprob_case(size_t rows, int V, float temp, uint64_t seed) {
    uint64_t s = seed;
    size_t n = rows * (size_t)V;
    uint16_t *lb = malloc(n * 2);
    float *l = malloc(n * 4);
    int32_t *tg = malloc(rows * 4);
    kt_fill_bf16(lb, l, n, &s, 8.0f);
    if (V > 3) { /* a masked token in row 0 */
        lb[2] = 0xff80;
        l[2] = -INFINITY;
    }
    float *rl = malloc(rows * 4), *rh = malloc(rows * 4), *rz = malloc(rows * 4);
    float *glp = malloc(rows * 4), *gent = malloc(rows * 4), *rd = malloc(n * 4),
          *got = malloc(n * 4);
    for (size_t r = 0; r < rows; r++) {
        tg[r] = (int32_t)(kt_rnd(&s) % V);
        if (r == 0 && V > 3 && tg[r] == 2)
            tg[r] = 1;
        double lz, lp, H;
        ref_row(l + r * V, V, temp, tg[r], &lz, &lp, &H);
        rl[r] = (float)lp, rh[r] = (float)H, rz[r] = (float)lz;
        glp[r] = kt_unif(&s, 1.0f), gent[r] = kt_unif(&s, 0.5f);
        for (int i = 0; i < V; i++) { /* d(glp lp + gent H)/dl */
            double lpi = l[r * V + i] / temp - lz, p = exp(lpi);
            double d = glp[r] * ((i == tg[r]) - p) - (p > 0 ? gent[r] * p * (lpi + H) : 0);
            rd[r * V + i] = (float)(d / temp);
        }
    }
    uint16_t *dl = kt_up(lb, n * 2), *ddl = kt_dev(n * 2);
    int32_t *dtg = kt_up(tg, rows * 4);
    float *dlp = kt_dev(rows * 4), *dh = kt_dev(rows * 4), *dz = kt_dev(rows * 4);
    float *dglp = kt_up(glp, rows * 4), *dgent = kt_up(gent, rows * 4);
    KT_OK(areal_k_logprob_fwd(dlp, dh, dz, dl, V, dtg, rows, V, temp, NULL, KT_ERR));
    KT_OK(areal_k_logprob_bwd(ddl, dl, V, dtg, dz, dh, dglp, dgent, rows, V, temp, NULL, KT_ERR));
    float *g = malloc(rows * 4);
    printf("logprob rows %zu V %d temp %g\n", rows, V, (double)temp);
    kt_down(g, dlp, rows * 4);
    assert_int_equal(kt_close("  logprob", g, rl, rows, 2e-4, 2e-4), 0);
    kt_down(g, dh, rows * 4);
    assert_int_equal(kt_close("  entropy", g, rh, rows, 2e-4, 2e-4), 0);
    kt_down(g, dz, rows * 4);
    assert_int_equal(kt_close("  logz", g, rz, rows, 2e-4, 2e-4), 0);
    kt_down_bf16(got, ddl, n);
    assert_int_equal(kt_close("  dlogits", got, rd, n, 1.0 / 256, kt_maxabs(rd, n) / 512), 0);
    cudaFree(dl), cudaFree(ddl), cudaFree(dtg), cudaFree(dlp), cudaFree(dh), cudaFree(dz);
    cudaFree(dglp), cudaFree(dgent);
    free(lb), free(l), free(tg), free(rl), free(rh), free(rz), free(glp), free(gent), free(rd);
    free(got), free(g);
}

static void test_logprob(void **state) {
    (void)state;
    kt_need_device();
    logprob_case(1, 1, 1.0f, 1);
    logprob_case(3, 7, 0.7f, 2);
    logprob_case(37, 1001, 1.0f, 3);
    logprob_case(9, 151936, 1.0f, 4); /* Qwen2's vocabulary */
    logprob_case(4, 151936, 0.6f, 5);
}

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* the sampler's keep rule on one row (sorted, in double): the kept count and
 * the cut value *thr (tokens >= it are kept) */
static int ref_kept(const float *z, int V, areal_k_sample_cfg c, float *thr) {
    float *v = malloc(V * 4);
    memcpy(v, z, V * 4);
    float tk = -INFINITY;
    qsort(v, V, 4, cmp_desc);
    if (c.top_k > 0 && c.top_k < V)
        tk = v[c.top_k - 1];
    double m = v[0], tot = 0;
    for (int i = 0; i < V && v[i] >= tk; i++)
        tot += exp((v[i] - m) / c.temp);
    float tp = tk;
    if (c.top_p < 1.0f) { /* smallest prefix (by value, ties whole) with mass >= p tot */
        double acc = 0;
        for (int i = 0; i < V && v[i] >= tk; i++) {
            acc += exp((v[i] - m) / c.temp);
            if (acc >= c.top_p * tot && (i + 1 == V || v[i + 1] < v[i])) {
                tp = v[i];
                break;
            }
        }
    }
    *thr = tp > tk ? tp : tk;
    int k = 0;
    for (int i = 0; i < V; i++)
        k += z[i] >= *thr;
    free(v);
    return k;
}

static void sample_case(size_t rows, int V, areal_k_sample_cfg c, uint64_t seed) {
    uint64_t s = seed;
    size_t n = rows * (size_t)V;
    uint16_t *lb = malloc(n * 2);
    float *l = malloc(n * 4), *u = malloc(rows * 4), *lp = malloc(rows * 4);
    int32_t *tok = malloc(rows * 4), *kept = malloc(rows * 4);
    kt_fill_bf16(lb, l, n, &s, 5.0f);
    for (size_t r = 0; r < rows; r++)
        u[r] = (float)(kt_rnd(&s) >> 8) / 16777216.0f;
    uint16_t *dl = kt_up(lb, n * 2);
    float *du = kt_up(u, rows * 4), *dlp = kt_dev(rows * 4);
    int32_t *dtok = kt_dev(rows * 4), *dkept = kt_dev(rows * 4);
    KT_OK(areal_k_sample(dtok, dlp, dkept, dl, V, du, rows, V, c, NULL, KT_ERR));
    kt_down(tok, dtok, rows * 4);
    kt_down(lp, dlp, rows * 4);
    kt_down(kept, dkept, rows * 4);
    printf("sample rows %zu V %d temp %g top_k %d top_p %g\n", rows, V, (double)c.temp, c.top_k,
           (double)c.top_p);
    size_t bad = 0;
    for (size_t r = 0; r < rows; r++) {
        const float *z = l + r * V;
        double lz, rlp, H;
        float t = c.temp > 0 ? c.temp : 1.0f;
        assert_true(tok[r] >= 0 && tok[r] < V);
        ref_row(z, V, t, tok[r], &lz, &rlp, &H);
        if (fabs(lp[r] - rlp) > 2e-4 * (1 + fabs(rlp)) && bad++ < 3)
            printf("  row %zu: logprob %.7g, ref %.7g\n", r, (double)lp[r], rlp);
        if (c.temp <= 0) {
            int best = 0;
            for (int i = 1; i < V; i++)
                best = z[i] > z[best] ? i : best;
            if (tok[r] != best && bad++ < 3)
                printf("  row %zu: greedy %d, ref %d\n", r, tok[r], best);
            continue;
        }
        float thr;
        int k = ref_kept(z, V, c, &thr);
        if (kept[r] != k && bad++ < 3)
            printf("  row %zu: kept %d, ref %d\n", r, kept[r], k);
        if (!(z[tok[r]] >= thr) && bad++ < 3)
            printf("  row %zu: token %d (%g) below the cut %g\n", r, tok[r], (double)z[tok[r]],
                   (double)thr);
        double m = -INFINITY, tot = 0, before = 0;
        for (int i = 0; i < V; i++)
            m = z[i] > m ? z[i] : m;
        for (int i = 0; i < V; i++)
            if (z[i] >= thr) {
                double e = exp((z[i] - m) / c.temp);
                if (i < tok[r])
                    before += e;
                tot += e;
            }
        double mine = exp((z[tok[r]] - m) / c.temp);
        if (!(before / tot <= u[r] + 1e-4 && u[r] - 1e-4 <= (before + mine) / tot) && bad++ < 3)
            printf("  row %zu: u %.6f outside the token's interval [%.6f, %.6f)\n", r, (double)u[r],
                   before / tot, (before + mine) / tot);
    }
    assert_int_equal(bad, 0);
    cudaFree(dl), cudaFree(du), cudaFree(dlp), cudaFree(dtok), cudaFree(dkept);
    free(lb), free(l), free(u), free(lp), free(tok), free(kept);
}

static void test_sample(void **state) {
    (void)state;
    kt_need_device();
    sample_case(5, 1, (areal_k_sample_cfg){1.0f, 0, 1.0f}, 31);
    sample_case(16, 1001, (areal_k_sample_cfg){0.0f, 0, 1.0f}, 32); /* greedy */
    sample_case(64, 1001, (areal_k_sample_cfg){1.0f, 0, 1.0f}, 33);
    sample_case(64, 1001, (areal_k_sample_cfg){0.8f, 20, 1.0f}, 34);
    sample_case(64, 1001, (areal_k_sample_cfg){1.2f, 0, 0.9f}, 35);
    sample_case(32, 151936, (areal_k_sample_cfg){0.7f, 50, 0.95f}, 36);
    sample_case(8, 151936, (areal_k_sample_cfg){1.0f, 0, 0.5f}, 37);
}

static void test_bad_input(void **state) {
    (void)state;
    areal_error err;
    areal_error_clear(&err);
    float f[2];
    int32_t t[2] = {0, 0};
    uint16_t x[4];
    assert_int_equal(areal_k_logprob_fwd(f, f, f, x, 4, t, 1, 4, 0.0f, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "temp"));
    assert_int_equal(areal_k_logprob_fwd(f, f, f, x, 2, t, 1, 4, 1.0f, NULL, &err), AREAL_EINVAL);
    assert_int_equal(
        areal_k_sample(t, f, t, x, 4, NULL, 1, 4, (areal_k_sample_cfg){1, 0, 1}, NULL, &err),
        AREAL_EINVAL);
    assert_int_equal(
        areal_k_sample(t, f, t, x, 4, f, 1, 4, (areal_k_sample_cfg){1, 0, 0}, NULL, &err),
        AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "top_p"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logprob),
        cmocka_unit_test(test_sample),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
