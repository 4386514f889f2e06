/*
 * k_attention.c - causal grouped-query attention over packed sequences
 * (cu_seqlens), and the row-by-row variant against a KV cache.
 *
 * Training works per (sequence, query head) with BLAS, in blocks of ATT_BQ
 * query rows: block [i0, e) sees only keys [0, e), so S = scale Q K^T, the
 * causal softmax and O = P V take the block's rows against its e keys, and
 * the products never touch the all-zero upper-right blocks (at L = 256 and
 * 64-row blocks, 10/16 of the full L x L work: the attention products were
 * 6% of the step's matrix FLOPs, written whole). The backward is, block by
 * block: dP = dO V^T, dV += P^T dO, dS = P (dP - rowsum(P dP)) scale,
 * dQ += dS K, dK += dS^T Q. Q, K and V are read in place through sgemm's
 * leading dimensions (no head transposes). P is kept for the backward: nh *
 * sum L^2 floats at att_off (zero above the diagonal), fine for the
 * reference path (a flash-style recompute from a saved log-sum-exp was
 * rejected here as the GPU path's job: on this CPU the saved P costs one
 * write and one read of a buffer the step keeps (arena.c), the recompute
 * the score product Q K^T and its exp again). The blocks run one after another on the caller and
 * OpenBLAS threads each product, since concurrent calls from pool threads would oversubscribe the
 * cores and race on the shared dK/dV of a GQA group; a per-row loop version was measured at a third
 * of a training step and replaced. Decode rows (one query against a cache) are memory-bound dot
 * products and run on the pool, one (row, head) per task.
 */
#include <cblas.h>
#include <math.h>

#include "kernels.h"

size_t k_attn_offsets(size_t *att_off, const int32_t *cu, int n_seqs, int nh) {
    size_t off = 0;
    for (int s = 0; s < n_seqs; s++) {
        att_off[s] = off;
        size_t L = (size_t)(cu[s + 1] - cu[s]);
        off += (size_t)nh * L * L;
    }
    att_off[n_seqs] = off;
    return off;
}

/* Softmax of scale * q . k_j over j < n into p[0..n); keys at k with row stride ks. */
static void softmax_row(float *p, const float *q, const float *k, size_t ks, int n, int hd,
                        float scale) {
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) {
        const float *kj = k + (size_t)j * ks;
        float s = 0;
        for (int c = 0; c < hd; c++)
            s += q[c] * kj[c];
        p[j] = s * scale;
        if (p[j] > mx)
            mx = p[j];
    }
    float sum = 0;
    for (int j = 0; j < n; j++) {
        p[j] = expf(p[j] - mx);
        sum += p[j];
    }
    float inv = 1.0f / sum;
    for (int j = 0; j < n; j++)
        p[j] *= inv;
}

enum { ATT_BQ = 64 }; /* query rows per block: large enough for sgemm to run near peak */

/* Causal softmax in place over rows [i0, e) of the L-wide score block (j > i set to 0). */
static void causal_softmax(float *P, int L, int i0, int e) {
    for (int i = i0; i < e; i++) {
        float *r = P + (size_t)i * L, mx = r[0], sum = 0;
        for (int j = 1; j <= i; j++)
            mx = r[j] > mx ? r[j] : mx;
        for (int j = 0; j <= i; j++)
            sum += (r[j] = expf(r[j] - mx));
        float inv = 1.0f / sum;
        for (int j = 0; j <= i; j++)
            r[j] *= inv;
        for (int j = i + 1; j < L; j++)
            r[j] = 0;
    }
}

void k_attn_fwd(areal_pool *p, float *out, float *att, const float *q, const float *k,
                const float *v, const int32_t *cu, int n_seqs, const size_t *att_off,
                k_attn_dims d) {
    (void)p;
    int qd = d.nh * d.hd, kvd = d.nkv * d.hd, grp = d.nh / d.nkv;
    for (int s = 0; s < n_seqs; s++) {
        int t0 = cu[s], L = cu[s + 1] - t0;
        for (int h = 0; h < d.nh; h++) {
            float *P = att + att_off[s] + (size_t)h * L * L;
            const float *Q = q + (size_t)t0 * qd + h * d.hd;
            const float *K = k + (size_t)t0 * kvd + (h / grp) * d.hd;
            const float *V = v + (size_t)t0 * kvd + (h / grp) * d.hd;
            float *O = out + (size_t)t0 * qd + h * d.hd;
            for (int i0 = 0; i0 < L; i0 += ATT_BQ) {
                int e = i0 + ATT_BQ < L ? i0 + ATT_BQ : L, nb = e - i0;
                float *Pb = P + (size_t)i0 * L;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb, e, d.hd, d.scale,
                            Q + (size_t)i0 * qd, qd, K, kvd, 0.0f, Pb, L);
                causal_softmax(P, L, i0, e);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nb, d.hd, e, 1.0f, Pb, L, V,
                            kvd, 0.0f, O + (size_t)i0 * qd, qd);
            }
        }
    }
}

void k_attn_bwd(areal_pool *p, float *dq, float *dk, float *dv, const float *dout, const float *att,
                const float *q, const float *k, const float *v, const int32_t *cu, int n_seqs,
                const size_t *att_off, k_attn_dims d, float *scratch) {
    (void)p;
    int qd = d.nh * d.hd, kvd = d.nkv * d.hd, grp = d.nh / d.nkv;
    for (int s = 0; s < n_seqs; s++) {
        int t0 = cu[s], L = cu[s + 1] - t0;
        for (int h = 0; h < d.nh; h++) {
            const float *P = att + att_off[s] + (size_t)h * L * L;
            size_t qo = (size_t)t0 * qd + h * d.hd, ko = (size_t)t0 * kvd + (h / grp) * d.hd;
            for (int i0 = 0; i0 < L; i0 += ATT_BQ) {
                int e = i0 + ATT_BQ < L ? i0 + ATT_BQ : L, nb = e - i0;
                const float *Pb = P + (size_t)i0 * L;
                size_t qb = qo + (size_t)i0 * qd; /* the block's rows of q, dq, dout */
                float *dS = scratch + (size_t)i0 * L;
                /* dP = dO V^T, dV += P^T dO (keys [0, e)) */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb, e, d.hd, 1.0f, dout + qb,
                            qd, v + ko, kvd, 0.0f, dS, L);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, e, d.hd, nb, 1.0f, Pb, L,
                            dout + qb, qd, 1.0f, dv + ko, kvd);
                /* dS = P * (dP - rowsum(P * dP)) * scale on j <= i, 0 on (i, e) */
                for (int i = i0; i < e; i++) {
                    const float *pr = P + (size_t)i * L;
                    float *r = scratch + (size_t)i * L, dot = 0;
                    for (int j = 0; j <= i; j++)
                        dot += pr[j] * r[j];
                    for (int j = 0; j <= i; j++)
                        r[j] = pr[j] * (r[j] - dot) * d.scale;
                    for (int j = i + 1; j < e; j++)
                        r[j] = 0;
                }
                /* dQ += dS K, dK += dS^T Q */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nb, d.hd, e, 1.0f, dS, L,
                            k + ko, kvd, 1.0f, dq + qb, qd);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, e, d.hd, nb, 1.0f, dS, L,
                            q + qb, qd, 1.0f, dk + ko, kvd);
            }
        }
    }
}

typedef struct dec_ctx {
    float *out;
    const float *q, *kc, *vc;
    size_t kv_stride;
    const int *slot, *n_keys;
    k_attn_dims d;
    float *scratch;
    int max_keys;
} dec_ctx;

static void dec_tasks(void *c, size_t b, size_t e) {
    dec_ctx *x = c;
    k_attn_dims d = x->d;
    int qd = d.nh * d.hd, kvd = d.nkv * d.hd, grp = d.nh / d.nkv;
    for (size_t task = b; task < e; task++) {
        int s = (int)(task / (size_t)d.nh), h = (int)(task % (size_t)d.nh), kh = h / grp;
        int n = x->n_keys[s];
        float *pr = x->scratch + task * (size_t)x->max_keys;
        size_t base = (size_t)(x->slot != NULL ? x->slot[s] : s) * x->kv_stride;
        const float *kb = x->kc + base + kh * d.hd;
        const float *vb = x->vc + base + kh * d.hd;
        softmax_row(pr, x->q + (size_t)s * qd + h * d.hd, kb, kvd, n, d.hd, d.scale);
        float *o = x->out + (size_t)s * qd + h * d.hd;
        for (int c2 = 0; c2 < d.hd; c2++)
            o[c2] = 0;
        for (int j = 0; j < n; j++)
            for (int c2 = 0; c2 < d.hd; c2++)
                o[c2] += pr[j] * vb[(size_t)j * kvd + c2];
    }
}

void k_attn_decode(areal_pool *p, float *out, const float *q, const float *kc, const float *vc,
                   size_t kv_stride, const int *slot, const int *n_keys, int B, k_attn_dims d,
                   float *scratch, int max_keys) {
    dec_ctx x = {out, q, kc, vc, kv_stride, slot, n_keys, d, scratch, max_keys};
    areal_pool_for(p, (size_t)B * d.nh, 1, dec_tasks, &x);
}
