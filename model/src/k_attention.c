/*
 * k_attention.c - causal grouped-query attention over packed sequences
 * (cu_seqlens), and the one-row decode variant against a KV cache.
 *
 * Training keeps the softmax probabilities of every (sequence, head) as an
 * L x L block (only j <= i is used) because the backward needs them; that is
 * nh * sum L^2 floats, fine for the reference path (a flash-style recompute
 * from a saved log-sum-exp was rejected here as the GPU path's job).
 * Forward tasks are (sequence, query head) pairs; backward tasks are
 * (sequence, key/value head) pairs so that the query heads sharing one K/V
 * head accumulate dk/dv without races.
 */
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

typedef struct attn_ctx {
    float *out, *att, *dq, *dk, *dv;
    const float *q, *k, *v, *dout, *att_in;
    const int32_t *cu;
    const size_t *att_off;
    k_attn_dims d;
    float *scratch;
} attn_ctx;

/* Softmax of scale * q . k_j over j <= i into p[0..i]; keys at k with row stride ks. */
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

static void fwd_tasks(void *c, size_t b, size_t e) {
    attn_ctx *x = c;
    k_attn_dims d = x->d;
    int qd = d.nh * d.hd, kvd = d.nkv * d.hd, grp = d.nh / d.nkv;
    for (size_t task = b; task < e; task++) {
        int s = (int)(task / (size_t)d.nh), h = (int)(task % (size_t)d.nh), kh = h / grp;
        int t0 = x->cu[s], L = x->cu[s + 1] - t0;
        for (int i = 0; i < L; i++) {
            float *p = x->att + x->att_off[s] + ((size_t)h * L + i) * L;
            const float *qi = x->q + (size_t)(t0 + i) * qd + h * d.hd;
            softmax_row(p, qi, x->k + (size_t)t0 * kvd + kh * d.hd, kvd, i + 1, d.hd, d.scale);
            float *o = x->out + (size_t)(t0 + i) * qd + h * d.hd;
            for (int c2 = 0; c2 < d.hd; c2++)
                o[c2] = 0;
            for (int j = 0; j <= i; j++) {
                const float *vj = x->v + (size_t)(t0 + j) * kvd + kh * d.hd;
                for (int c2 = 0; c2 < d.hd; c2++)
                    o[c2] += p[j] * vj[c2];
            }
        }
    }
}

void k_attn_fwd(areal_pool *p, float *out, float *att, const float *q, const float *k,
                const float *v, const int32_t *cu, int n_seqs, const size_t *att_off,
                k_attn_dims d) {
    attn_ctx x = {
        .out = out, .att = att, .q = q, .k = k, .v = v, .cu = cu, .att_off = att_off, .d = d};
    areal_pool_for(p, (size_t)n_seqs * d.nh, 1, fwd_tasks, &x);
}

static void bwd_tasks(void *c, size_t b, size_t e) {
    attn_ctx *x = c;
    k_attn_dims d = x->d;
    int qd = d.nh * d.hd, kvd = d.nkv * d.hd, grp = d.nh / d.nkv;
    for (size_t task = b; task < e; task++) {
        int s = (int)(task / (size_t)d.nkv), kh = (int)(task % (size_t)d.nkv);
        int t0 = x->cu[s], L = x->cu[s + 1] - t0;
        float *ds = x->scratch + (size_t)t0 * d.nkv + (size_t)kh * L;
        for (int h = kh * grp; h < (kh + 1) * grp; h++) {
            for (int i = 0; i < L; i++) {
                const float *pr = x->att_in + x->att_off[s] + ((size_t)h * L + i) * L;
                const float *doi = x->dout + (size_t)(t0 + i) * qd + h * d.hd;
                const float *qi = x->q + (size_t)(t0 + i) * qd + h * d.hd;
                float *dqi = x->dq + (size_t)(t0 + i) * qd + h * d.hd;
                float dot = 0;
                for (int j = 0; j <= i; j++) {
                    const float *vj = x->v + (size_t)(t0 + j) * kvd + kh * d.hd;
                    float *dvj = x->dv + (size_t)(t0 + j) * kvd + kh * d.hd;
                    float dp = 0;
                    for (int c2 = 0; c2 < d.hd; c2++) {
                        dp += doi[c2] * vj[c2];
                        dvj[c2] += pr[j] * doi[c2];
                    }
                    ds[j] = dp;
                    dot += pr[j] * dp;
                }
                for (int j = 0; j <= i; j++) {
                    float g = pr[j] * (ds[j] - dot) * d.scale;
                    const float *kj = x->k + (size_t)(t0 + j) * kvd + kh * d.hd;
                    float *dkj = x->dk + (size_t)(t0 + j) * kvd + kh * d.hd;
                    for (int c2 = 0; c2 < d.hd; c2++) {
                        dqi[c2] += g * kj[c2];
                        dkj[c2] += g * qi[c2];
                    }
                }
            }
        }
    }
}

void k_attn_bwd(areal_pool *p, float *dq, float *dk, float *dv, const float *dout, const float *att,
                const float *q, const float *k, const float *v, const int32_t *cu, int n_seqs,
                const size_t *att_off, k_attn_dims d, float *scratch) {
    attn_ctx x = {.dq = dq,
                  .dk = dk,
                  .dv = dv,
                  .dout = dout,
                  .att_in = att,
                  .q = q,
                  .k = k,
                  .v = v,
                  .cu = cu,
                  .att_off = att_off,
                  .d = d,
                  .scratch = scratch};
    areal_pool_for(p, (size_t)n_seqs * d.nkv, 1, bwd_tasks, &x);
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
