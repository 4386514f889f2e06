/*
 * gpu_test_attention.c - the flash-style attention (areal/kernels/attention.h:
 * the dispatch, the tensor-core kernels and the scalar ones) and the paged
 * decode attention (areal/kernels/paged.h) against a double-precision
 * reference written here from the definition (softmax of scale q k^T over
 * the causal keys of the token's own sequence), on the same bf16 inputs:
 * packed sequences of unequal lengths (1 token, shorter than a tile, one
 * past a 64-row tile, longer than several tiles), GQA (nh / nkv = 1, 2, 6,
 * 7), head sizes 8, 33 (not a multiple of the warp), 64 and 128 (the tensor
 * cores' two; run through each kernel family), 160, 256, and paged caches
 * whose blocks are scattered in the pool.
 * Tolerances, scalar kernels: bf16 outputs rtol 2^-8 plus atol 2^-8 *
 * max|ref| (the fp32 online softmax reorders the sums; the output is
 * rounded to bf16 once); gradients rtol 2^-7, atol 2^-7 * max|ref| (the
 * backward subtracts, dP - delta, with delta from the bf16-rounded O); lse
 * rtol 1e-5, atol 1e-5. Tensor-core kernels: twice as wide (out 2^-7,
 * gradients 2^-6; lse 1e-4), because P and dS are rounded to bf16 as the
 * A operand of the next mma (FlashAttention-2 does the same) and the
 * scores go through exp2f / log2f in log2 units.
 * The model's k_attention.c is the same definition on BLAS; the reference is
 * written out again so that a shared mistake cannot hide. Without a device
 * every test is skipped.
 */
#include "ktest.h"

#include "areal/kernels/attention.h"
#include "areal/kernels/paged.h"

typedef struct ref_case {
    int n_seqs, nh, nkv, hd;
    const int *lens;
} ref_case;

/* out, lse and (dout given) dq, dk, dv in double arithmetic, fp32 results */
static void ref_attn(const ref_case *c, const int32_t *cu, const float *q, const float *k,
                     const float *v, const float *dout, float *out, float *lse, float *dq,
                     float *dk, float *dv) {
    const int nh = c->nh, nkv = c->nkv, hd = c->hd, grp = nh / nkv;
    const size_t qd = (size_t)nh * hd, kvd = (size_t)nkv * hd;
    const double scale = 1.0 / sqrt((double)hd);
    const int T = cu[c->n_seqs];
    if (dq != NULL) {
        memset(dq, 0, sizeof(float) * T * qd);
        memset(dk, 0, sizeof(float) * T * kvd);
        memset(dv, 0, sizeof(float) * T * kvd);
    }
    int maxL = 0;
    for (int s = 0; s < c->n_seqs; s++)
        maxL = cu[s + 1] - cu[s] > maxL ? cu[s + 1] - cu[s] : maxL;
    double *P = malloc(sizeof(double) * maxL), *dP = malloc(sizeof(double) * maxL);
    double *o = malloc(sizeof(double) * hd);
    for (int s = 0; s < c->n_seqs; s++)
        for (int h = 0; h < nh; h++)
            for (int i = cu[s]; i < cu[s + 1]; i++) {
                const float *qi = q + (size_t)i * qd + h * hd;
                double mx = -INFINITY, sum = 0;
                for (int j = cu[s]; j <= i; j++) {
                    const float *kj = k + (size_t)j * kvd + (h / grp) * hd;
                    double d = 0;
                    for (int x = 0; x < hd; x++)
                        d += (double)qi[x] * kj[x];
                    P[j - cu[s]] = d * scale;
                    mx = P[j - cu[s]] > mx ? P[j - cu[s]] : mx;
                }
                for (int j = cu[s]; j <= i; j++)
                    sum += (P[j - cu[s]] = exp(P[j - cu[s]] - mx));
                for (int x = 0; x < hd; x++)
                    o[x] = 0;
                for (int j = cu[s]; j <= i; j++) {
                    P[j - cu[s]] /= sum;
                    const float *vj = v + (size_t)j * kvd + (h / grp) * hd;
                    for (int x = 0; x < hd; x++)
                        o[x] += P[j - cu[s]] * vj[x];
                }
                for (int x = 0; x < hd; x++)
                    out[(size_t)i * qd + h * hd + x] = (float)o[x];
                lse[(size_t)i * nh + h] = (float)(mx + log(sum));
                if (dq == NULL)
                    continue;
                const float *gi = dout + (size_t)i * qd + h * hd;
                double D = 0;
                for (int x = 0; x < hd; x++)
                    D += (double)gi[x] * o[x];
                for (int j = cu[s]; j <= i; j++) {
                    const float *vj = v + (size_t)j * kvd + (h / grp) * hd;
                    double d = 0;
                    for (int x = 0; x < hd; x++)
                        d += (double)gi[x] * vj[x];
                    dP[j - cu[s]] = P[j - cu[s]] * (d - D) * scale; /* dS */
                }
                for (int j = cu[s]; j <= i; j++) {
                    const float *kj = k + (size_t)j * kvd + (h / grp) * hd;
                    float *dkj = dk + (size_t)j * kvd + (h / grp) * hd;
                    float *dvj = dv + (size_t)j * kvd + (h / grp) * hd;
                    for (int x = 0; x < hd; x++) {
                        dq[(size_t)i * qd + h * hd + x] += (float)(dP[j - cu[s]] * kj[x]);
                        dkj[x] += (float)(dP[j - cu[s]] * qi[x]);
                        dvj[x] += (float)(P[j - cu[s]] * gi[x]);
                    }
                }
            }
    free(P), free(dP), free(o);
}

/* which kernels attn_case runs: the dispatch (tensor cores for hd 64 / 128), or one family */
typedef enum { ATTN_AUTO, ATTN_TC, ATTN_REF } attn_impl;

static void attn_case(const ref_case *c, uint64_t seed, attn_impl impl) {
    uint64_t s = seed;
    int32_t cu[16];
    cu[0] = 0;
    int maxL = 0;
    for (int i = 0; i < c->n_seqs; i++) {
        cu[i + 1] = cu[i] + c->lens[i];
        maxL = c->lens[i] > maxL ? c->lens[i] : maxL;
    }
    const int T = cu[c->n_seqs];
    const size_t nq = (size_t)T * c->nh * c->hd, nk = (size_t)T * c->nkv * c->hd;
    uint16_t *qb = malloc(nq * 2), *kb = malloc(nk * 2), *vb = malloc(nk * 2), *gb = malloc(nq * 2);
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *g = malloc(nq * 4);
    float *out = malloc(nq * 4), *lse = malloc((size_t)T * c->nh * 4), *dq = malloc(nq * 4);
    float *dk = malloc(nk * 4), *dv = malloc(nk * 4);
    kt_fill_bf16(qb, q, nq, &s, 2.0f);
    kt_fill_bf16(kb, k, nk, &s, 2.0f);
    kt_fill_bf16(vb, v, nk, &s, 1.0f);
    kt_fill_bf16(gb, g, nq, &s, 1.0f);
    ref_attn(c, cu, q, k, v, g, out, lse, dq, dk, dv);

    uint16_t *dqb = kt_up(qb, nq * 2), *dkb = kt_up(kb, nk * 2), *dvb = kt_up(vb, nk * 2);
    uint16_t *dgb = kt_up(gb, nq * 2), *dout = kt_dev(nq * 2), *ddq = kt_dev(nq * 2);
    uint16_t *ddk = kt_dev(nk * 2), *ddv = kt_dev(nk * 2);
    float *dlse = kt_dev((size_t)T * c->nh * 4), *ddelta = kt_dev((size_t)T * c->nh * 4);
    int32_t *dcu = kt_up(cu, sizeof(int32_t) * (c->n_seqs + 1));
    areal_k_attn_shape sh = {T, c->n_seqs, maxL, c->nh, c->nkv, c->hd, 1.0f / sqrtf((float)c->hd)};
    if (impl == ATTN_TC) {
        KT_OK(areal_k_attn_tc_fwd(dout, dlse, dqb, dkb, dvb, dcu, sh, NULL, KT_ERR));
        KT_OK(areal_k_attn_tc_bwd(ddq, ddk, ddv, ddelta, dgb, dout, dlse, dqb, dkb, dvb, dcu, sh,
                                  NULL, KT_ERR));
    } else if (impl == ATTN_REF) {
        KT_OK(areal_k_attn_ref_fwd(dout, dlse, dqb, dkb, dvb, dcu, sh, NULL, KT_ERR));
        KT_OK(areal_k_attn_ref_bwd(ddq, ddk, ddv, ddelta, dgb, dout, dlse, dqb, dkb, dvb, dcu, sh,
                                   NULL, KT_ERR));
    } else {
        KT_OK(areal_k_attn_fwd(dout, dlse, dqb, dkb, dvb, dcu, sh, NULL, KT_ERR));
        KT_OK(areal_k_attn_bwd(ddq, ddk, ddv, ddelta, dgb, dout, dlse, dqb, dkb, dvb, dcu, sh, NULL,
                               KT_ERR));
    }
    /* cudaMalloc'd buffers are aligned: the dispatch takes the tensor cores for hd 64 / 128 */
    const int tc = impl == ATTN_TC || (impl == ATTN_AUTO && (c->hd == 64 || c->hd == 128));
    const double ot = tc ? 1.0 / 128 : 1.0 / 256, gt = tc ? 1.0 / 64 : 1.0 / 128;
    const double lt = tc ? 1e-4 : 1e-5;
    float *go = malloc(nq * 4), *gl = malloc((size_t)T * c->nh * 4), *gq = malloc(nq * 4);
    float *gk = malloc(nk * 4), *gv = malloc(nk * 4);
    kt_down_bf16(go, dout, nq);
    kt_down(gl, dlse, (size_t)T * c->nh * 4);
    kt_down_bf16(gq, ddq, nq);
    kt_down_bf16(gk, ddk, nk);
    kt_down_bf16(gv, ddv, nk);
    printf("attention (%s): %d seqs, T %d, nh %d, nkv %d, hd %d\n", tc ? "tensor cores" : "scalar",
           c->n_seqs, T, c->nh, c->nkv, c->hd);
    assert_int_equal(kt_close("  out", go, out, nq, ot, kt_maxabs(out, nq) * ot), 0);
    assert_int_equal(kt_close("  lse", gl, lse, (size_t)T * c->nh, lt, lt), 0);
    assert_int_equal(kt_close("  dq", gq, dq, nq, gt, kt_maxabs(dq, nq) * gt), 0);
    assert_int_equal(kt_close("  dk", gk, dk, nk, gt, kt_maxabs(dk, nk) * gt), 0);
    assert_int_equal(kt_close("  dv", gv, dv, nk, gt, kt_maxabs(dv, nk) * gt), 0);
    cudaFree(dqb), cudaFree(dkb), cudaFree(dvb), cudaFree(dgb), cudaFree(dout), cudaFree(ddq);
    cudaFree(ddk), cudaFree(ddv), cudaFree(dlse), cudaFree(ddelta), cudaFree(dcu);
    free(qb), free(kb), free(vb), free(gb), free(q), free(k), free(v), free(g), free(out);
    free(lse), free(dq), free(dk), free(dv), free(go), free(gl), free(gq), free(gk), free(gv);
}

static void test_attention(void **state) {
    (void)state;
    kt_need_device();
    const int one[] = {1}, mixed[] = {5, 1, 40, 17}, long1[] = {300}, many[] = {33, 64, 2, 129, 7};
    const ref_case cases[] =
        {
            {1, 1, 1, 8, one},     {4, 2, 1, 8, mixed}, {4, 4, 2, 33, mixed},
            {1, 7, 1, 64, long1},  {5, 4, 4, 64, many}, {2, 2, 2, 128, mixed},
            {4, 14, 2, 64, mixed}, /* Qwen2-0.5B's heads: 14 query heads on 2 KV heads */
            {4, 4, 2, 256, mixed}, /* hd > 128: the widest kernels, past 48 KiB of shared memory */
            {2, 2, 1, 160, mixed},
        };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        attn_case(&cases[i], 100 + i, ATTN_AUTO);
}

/* the tensor-core kernels' shapes through each family: odd lengths (63, 65:
 * one short of and one past a 64-row tile), unequal packed sequences, GQA
 * 1 / 2 / 6 / 7 / 14:2, hd 64 and 128 */
static const int tc_one[] = {1}, tc_mixed[] = {5, 1, 40, 17}, tc_long[] = {300};
static const int tc_many[] = {33, 64, 2, 129, 7}, tc_odd[] = {63, 65, 1, 191};
static const ref_case tc_cases[] = {
    {1, 1, 1, 64, tc_one},    {4, 2, 1, 64, tc_mixed},  {5, 4, 4, 64, tc_many},
    {1, 7, 1, 64, tc_long},   {4, 14, 2, 64, tc_odd},   {1, 1, 1, 128, tc_one},
    {4, 2, 2, 128, tc_odd},   {5, 12, 2, 128, tc_many}, {1, 6, 1, 128, tc_long},
    {4, 4, 2, 128, tc_mixed},
};

static void test_attention_tensor_cores(void **state) {
    (void)state;
    kt_need_device();
    for (size_t i = 0; i < sizeof tc_cases / sizeof *tc_cases; i++)
        attn_case(&tc_cases[i], 200 + i, ATTN_TC);
}

/* the scalar kernels on the same shapes: the dispatch no longer sends them there */
static void test_attention_scalar(void **state) {
    (void)state;
    kt_need_device();
    for (size_t i = 0; i < sizeof tc_cases / sizeof *tc_cases; i++)
        attn_case(&tc_cases[i], 300 + i, ATTN_REF);
}

/* the tensor cores refuse what they cannot serve, with the reason; the dispatch serves it */
static void test_tensor_cores_refuse(void **state) {
    (void)state;
    kt_need_device();
    areal_error err;
    uint16_t *b = kt_dev(4096);
    int32_t *cu = kt_dev(64);
    float *f = kt_dev(4096);
    areal_k_attn_shape hd96 = {4, 1, 4, 2, 2, 96, 1.0f};
    assert_int_equal(areal_k_attn_tc_fwd(b, f, b, b, b, cu, hd96, NULL, &err), AREAL_EINVAL);
    printf("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "hd 96"));
    areal_k_attn_shape hd64 = {4, 1, 4, 2, 2, 64, 1.0f};
    assert_int_equal(areal_k_attn_tc_fwd(b + 1, f, b, b, b, cu, hd64, NULL, &err), AREAL_EINVAL);
    printf("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "16-byte aligned"));
    cudaFree(b), cudaFree(cu), cudaFree(f);
}

/* decode over a paged cache: the reference is the same attention with the query as the last row */
static void paged_case(int B, int nh, int nkv, int hd, int bs, uint64_t seed) {
    uint64_t s = seed;
    const int max_blocks = 8, n_blocks = B * max_blocks;
    const size_t kvd = (size_t)nkv * hd, qd = (size_t)nh * hd;
    const size_t pool = (size_t)n_blocks * bs * kvd;
    int32_t *table = malloc(sizeof(int32_t) * B * max_blocks), *nk = malloc(sizeof(int32_t) * B);
    int32_t *pos = malloc(sizeof(int32_t) * B);
    /* blocks scattered: a fixed permutation of the pool */
    for (int i = 0; i < B * max_blocks; i++)
        table[i] = (int32_t)((i * 7 + 3) % n_blocks);
    for (int b = 0; b < B; b++) {
        nk[b] = 1 + (int)(kt_rnd(&s) % (uint32_t)(max_blocks * bs));
        pos[b] = nk[b] - 1;
    }
    uint16_t *kc = calloc(pool, 2), *vc = calloc(pool, 2), *qb = malloc((size_t)B * qd * 2);
    float *kf = calloc(pool, 4), *vf = calloc(pool, 4), *qf = malloc((size_t)B * qd * 4);
    /* keys 0 .. n-2 written on the host; the last one through the append kernel */
    uint16_t *kn = malloc((size_t)B * kvd * 2), *vn = malloc((size_t)B * kvd * 2);
    float *knf = malloc((size_t)B * kvd * 4), *vnf = malloc((size_t)B * kvd * 4);
    kt_fill_bf16(kn, knf, (size_t)B * kvd, &s, 2.0f);
    kt_fill_bf16(vn, vnf, (size_t)B * kvd, &s, 1.0f);
    kt_fill_bf16(qb, qf, (size_t)B * qd, &s, 2.0f);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < nk[b] - 1; j++) {
            size_t r = ((size_t)table[b * max_blocks + j / bs] * bs + j % bs) * kvd;
            kt_fill_bf16(kc + r, kf + r, kvd, &s, 2.0f);
            kt_fill_bf16(vc + r, vf + r, kvd, &s, 1.0f);
        }
    float *ref = malloc((size_t)B * qd * 4), *got = malloc((size_t)B * qd * 4);
    for (int b = 0; b < B; b++) {
        /* the sequence's keys contiguous, then the reference attention's last row */
        int n = nk[b];
        float *q = calloc((size_t)n * qd, 4), *k = malloc((size_t)n * kvd * 4);
        float *v = malloc((size_t)n * kvd * 4), *o = malloc((size_t)n * qd * 4);
        float *l = malloc((size_t)n * nh * 4);
        for (int j = 0; j < n; j++) {
            const float *ks =
                j == n - 1 ? knf + (size_t)b * kvd
                           : kf + ((size_t)table[b * max_blocks + j / bs] * bs + j % bs) * kvd;
            const float *vs =
                j == n - 1 ? vnf + (size_t)b * kvd
                           : vf + ((size_t)table[b * max_blocks + j / bs] * bs + j % bs) * kvd;
            memcpy(k + (size_t)j * kvd, ks, kvd * 4);
            memcpy(v + (size_t)j * kvd, vs, kvd * 4);
        }
        memcpy(q + (size_t)(n - 1) * qd, qf + (size_t)b * qd, qd * 4);
        const int lens[1] = {n};
        int32_t cu[2] = {0, n};
        ref_case c = {1, nh, nkv, hd, lens};
        ref_attn(&c, cu, q, k, v, NULL, o, l, NULL, NULL, NULL);
        memcpy(ref + (size_t)b * qd, o + (size_t)(n - 1) * qd, qd * 4);
        free(q), free(k), free(v), free(o), free(l);
    }
    uint16_t *dkc = kt_up(kc, pool * 2), *dvc = kt_up(vc, pool * 2);
    uint16_t *dkn = kt_up(kn, (size_t)B * kvd * 2), *dvn = kt_up(vn, (size_t)B * kvd * 2);
    uint16_t *dq = kt_up(qb, (size_t)B * qd * 2), *dout = kt_dev((size_t)B * qd * 2);
    int32_t *dt = kt_up(table, sizeof(int32_t) * B * max_blocks);
    int32_t *dnk = kt_up(nk, sizeof(int32_t) * B), *dpos = kt_up(pos, sizeof(int32_t) * B);
    areal_k_paged_shape sh = {B, nh, nkv, hd, bs, max_blocks, 1.0f / sqrtf((float)hd)};
    KT_OK(areal_k_paged_append(dkc, dvc, dkn, dvn, dt, dpos, sh, NULL, KT_ERR));
    KT_OK(areal_k_paged_decode(dout, dq, dkc, dvc, dt, dnk, sh, NULL, KT_ERR));
    kt_down_bf16(got, dout, (size_t)B * qd);
    printf("paged decode: B %d, nh %d, nkv %d, hd %d, block %d\n", B, nh, nkv, hd, bs);
    assert_int_equal(kt_close("  out", got, ref, (size_t)B * qd, 1.0 / 256,
                              kt_maxabs(ref, (size_t)B * qd) / 256),
                     0);
    cudaFree(dkc), cudaFree(dvc), cudaFree(dkn), cudaFree(dvn), cudaFree(dq), cudaFree(dout);
    cudaFree(dt), cudaFree(dnk), cudaFree(dpos);
    free(table), free(nk), free(pos), free(kc), free(vc), free(qb), free(kf), free(vf), free(qf);
    free(kn), free(vn), free(knf), free(vnf), free(ref), free(got);
}

static void test_paged(void **state) {
    (void)state;
    kt_need_device();
    paged_case(1, 1, 1, 8, 1, 1);
    paged_case(3, 4, 2, 33, 16, 2);
    paged_case(8, 14, 2, 64, 16, 3);
    paged_case(5, 8, 8, 128, 32, 4);
    paged_case(2, 4, 2, 256, 16, 5);
}

static void test_bad_input(void **state) {
    (void)state;
    kt_need_device();
    areal_error err;
    uint16_t *b = kt_dev(64);
    int32_t *cu = kt_dev(64);
    float *f = kt_dev(64);
    areal_k_attn_shape bad_gqa = {4, 1, 4, 3, 2, 8, 1.0f};
    assert_int_equal(areal_k_attn_fwd(b, f, b, b, b, cu, bad_gqa, NULL, &err), AREAL_EINVAL);
    printf("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "nkv"));
    areal_k_attn_shape big_hd = {4, 1, 4, 2, 2, 512, 1.0f};
    assert_int_equal(areal_k_attn_fwd(b, f, b, b, b, cu, big_hd, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "hd 512"));
    areal_k_paged_shape ps = {1, 2, 2, 8, 0, 1, 1.0f};
    assert_int_equal(areal_k_paged_decode(b, b, b, b, cu, cu, ps, NULL, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "block_size 0"));
    cudaFree(b), cudaFree(cu), cudaFree(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_tensor_cores),
        cmocka_unit_test(test_attention_scalar),
        cmocka_unit_test(test_tensor_cores_refuse),
        cmocka_unit_test(test_paged),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
