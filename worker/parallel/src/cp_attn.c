/*
 * cp_attn.c - context-parallel attention (see cp.h): the load-balanced
 * shard of a micro-batch, and the attention of a rank's queries over the
 * keys and values all-gathered from its cp group, with the backward's key
 * and value gradients reduce-scattered back.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "areal/parallel/cp.h"
#include "areal/parallel/groups.h"

int areal_par_cp_shard_make(const areal_batch *whole, int cp, int r, areal_par_cp_shard *out,
                            areal_error *err) {
    memset(out, 0, sizeof *out);
    if (cp < 1 || r < 0 || r >= cp)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "cp shard: rank %d of cp %d: cp must be >= 1, the rank in 0..cp-1",
                               r, cp);
    int T = whole->n_tokens, n = 0, ch = 2 * cp;
    for (int s = 0; s < whole->n_seqs; s++) {
        int t0 = whole->cu_seqlens[s], L = whole->cu_seqlens[s + 1] - t0;
        n += L * (r + 1) / ch - L * r / ch;
        n += L * (ch - r) / ch - L * (ch - 1 - r) / ch;
    }
    if (n == 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "cp shard: rank %d of cp %d holds no token of a micro-batch of %d "
                               "tokens in %d sequences (use larger micro-batches or a smaller cp)",
                               r, cp, T, whole->n_seqs);
    out->buf = malloc(sizeof(int32_t) * ((size_t)n * 3 + 2));
    if (out->buf == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "cp shard: out of memory");
    int32_t *tok = out->buf, *pos = tok + n, *gidx = pos + n, *cu = gidx + n;
    int k = 0;
    for (int s = 0; s < whole->n_seqs; s++) {
        int t0 = whole->cu_seqlens[s], L = whole->cu_seqlens[s + 1] - t0;
        int chunks[2] = {r, ch - 1 - r};
        for (int c = 0; c < 2; c++)
            for (int p = L * chunks[c] / ch; p < L * (chunks[c] + 1) / ch; p++, k++) {
                tok[k] = whole->tokens[t0 + p];
                pos[k] = p;
                gidx[k] = t0 + p;
            }
    }
    cu[0] = 0, cu[1] = n;
    out->b = (areal_batch){.tokens = tok, .cu_seqlens = cu, .n_tokens = n, .n_seqs = 1};
    out->t = (areal_cp_tokens){.pos = pos, .gidx = gidx};
    return AREAL_OK;
}

void areal_par_cp_shard_free(areal_par_cp_shard *s) {
    free(s->buf);
    memset(s, 0, sizeof *s);
}

/* One layer's forward, kept for its backward. */
typedef struct cp_saved {
    int T, maxT, c, nh, nkv, hd, Tw; /* local tokens, padded shard, cp, heads, whole micro-batch */
    float scale;
    int32_t *pos, *gidx; /* [T] (copies) */
    int32_t *slot_of;    /* [Tw] micro-batch index -> row of the gathered layout */
    float *K, *V;        /* [c * maxT, nkv * hd] gathered */
    float *q;            /* [T, nh * hd] */
    float *P;            /* probabilities: query t, head h at off[t] + h * (pos[t] + 1) */
    size_t *off;         /* [T] */
} cp_saved;

static void saved_free(void *p) {
    cp_saved *s = p;
    if (s == NULL)
        return;
    free(s->pos);
    free(s->slot_of);
    free(s->K);
    free(s->P);
    free(s->off);
    free(s);
}

static const areal_cp_tokens *tokens_of(void *ctx, const areal_batch *b) {
    const areal_par_cp *c = ctx;
    for (int i = 0; i < c->n_shards; i++)
        if (c->shards[i].b.tokens == b->tokens)
            return &c->shards[i].t;
    return NULL;
}

static int oom(int layer, areal_error *err) {
    return areal_error_set(err, AREAL_ENOMEM, -1, "layer %d: out of memory in cp attention", layer);
}

/* All-gathers the padded [maxT, w] rows of src (T of them) into dst [c * maxT, w]. */
static int gather_rows(areal_coll *g, const float *src, int T, int maxT, int w, float *dst,
                       float *pad, areal_error *err) {
    memset(pad, 0, sizeof(float) * (size_t)maxT * w);
    memcpy(pad, src, sizeof(float) * (size_t)T * w);
    if (areal_par_size(g) < 2) {
        memcpy(dst, pad, sizeof(float) * (size_t)maxT * w);
        return AREAL_OK;
    }
    return areal_coll_all_gather(g, pad, dst, (size_t)maxT * w, AREAL_DT_F32, err);
}

/* The sizes and indices of every shard: maxT, the gathered gidx, and slot_of. */
static int gather_index(areal_par_cp *c, cp_saved *s, areal_error *err) {
    int64_t t = s->T, *all = malloc(sizeof(int64_t) * (size_t)s->c);
    if (all == NULL)
        return AREAL_ENOMEM;
    int rc = s->c > 1 ? areal_coll_all_gather(c->cp, &t, all, 1, AREAL_DT_I64, err)
                      : (all[0] = t, AREAL_OK);
    s->maxT = 0, s->Tw = 0;
    for (int j = 0; rc == AREAL_OK && j < s->c; j++) {
        s->maxT = all[j] > s->maxT ? (int)all[j] : s->maxT;
        s->Tw += (int)all[j];
    }
    int32_t *pg = NULL, *ga = NULL;
    if (rc == AREAL_OK) {
        pg = calloc((size_t)s->maxT, sizeof *pg);
        ga = malloc(sizeof *ga * (size_t)s->maxT * s->c);
        s->slot_of = malloc(sizeof *s->slot_of * (size_t)(s->Tw > 0 ? s->Tw : 1));
        if (pg == NULL || ga == NULL || s->slot_of == NULL)
            rc = AREAL_ENOMEM;
    }
    if (rc == AREAL_OK) {
        for (int i = 0; i < s->maxT; i++)
            pg[i] = i < s->T ? s->gidx[i] : -1;
        rc = s->c > 1 ? areal_coll_all_gather(c->cp, pg, ga, (size_t)s->maxT, AREAL_DT_I32, err)
                      : (memcpy(ga, pg, sizeof *pg * (size_t)s->maxT), AREAL_OK);
    }
    for (int i = 0; rc == AREAL_OK && i < s->maxT * s->c; i++)
        if (ga[i] >= 0 && ga[i] < s->Tw)
            s->slot_of[ga[i]] = i;
    free(all);
    free(pg);
    free(ga);
    return rc;
}

static int cp_fwd(void *ctx, const areal_model *m, int layer, int T, const int32_t *pos,
                  const int32_t *gidx, const float *q, const float *k, const float *v, float *out,
                  void **saved, areal_error *err) {
    areal_par_cp *c = ctx;
    cp_saved *s = calloc(1, sizeof *s);
    *saved = s;
    if (s == NULL)
        return oom(layer, err);
    s->T = T, s->c = areal_par_size(c->cp), s->nh = m->nh, s->nkv = m->nkv;
    s->hd = m->cfg.head_dim, s->scale = m->attn_scale;
    s->pos = malloc(sizeof(int32_t) * 2 * (size_t)T);
    s->off = malloc(sizeof(size_t) * (size_t)T);
    if (s->pos == NULL || s->off == NULL)
        return oom(layer, err);
    s->gidx = s->pos + T;
    memcpy(s->pos, pos, sizeof(int32_t) * (size_t)T);
    memcpy(s->gidx, gidx, sizeof(int32_t) * (size_t)T);
    int rc = gather_index(c, s, err);
    if (rc != AREAL_OK)
        return rc == AREAL_ENOMEM ? oom(layer, err) : rc;
    int Q = s->nh * s->hd, KV = s->nkv * s->hd, grp = s->nh / s->nkv;
    size_t rows = (size_t)s->c * s->maxT, np = 0;
    for (int t = 0; t < T; t++)
        s->off[t] = np, np += (size_t)s->nh * (size_t)(pos[t] + 1);
    /* K, V, q and one padded shard of scratch in one block */
    s->K = malloc(sizeof(float) * (2 * rows * KV + (size_t)T * Q + (size_t)s->maxT * KV));
    s->P = malloc(sizeof(float) * (np > 0 ? np : 1));
    if (s->K == NULL || s->P == NULL)
        return oom(layer, err);
    s->V = s->K + rows * KV, s->q = s->V + rows * KV;
    float *pad = s->q + (size_t)T * Q;
    memcpy(s->q, q, sizeof(float) * (size_t)T * Q);
    rc = gather_rows(c->cp, k, T, s->maxT, KV, s->K, pad, err);
    if (rc == AREAL_OK)
        rc = gather_rows(c->cp, v, T, s->maxT, KV, s->V, pad, err);
    if (rc != AREAL_OK)
        return rc;
    for (int t = 0; t < T; t++) {
        int start = gidx[t] - pos[t], n = pos[t] + 1;
        for (int h = 0; h < s->nh; h++) {
            const float *qh = q + (size_t)t * Q + h * s->hd;
            float *P = s->P + s->off[t] + (size_t)h * n, mx = -INFINITY, sum = 0;
            size_t ko = (size_t)(h / grp) * s->hd;
            for (int j = 0; j < n; j++) {
                const float *kj = s->K + (size_t)s->slot_of[start + j] * KV + ko;
                float d = 0;
                for (int x = 0; x < s->hd; x++)
                    d += qh[x] * kj[x];
                P[j] = d * s->scale;
                mx = P[j] > mx ? P[j] : mx;
            }
            for (int j = 0; j < n; j++)
                sum += (P[j] = expf(P[j] - mx));
            float inv = 1.0f / sum, *o = out + (size_t)t * Q + h * s->hd;
            memset(o, 0, sizeof(float) * (size_t)s->hd);
            for (int j = 0; j < n; j++) {
                P[j] *= inv;
                const float *vj = s->V + (size_t)s->slot_of[start + j] * KV + ko;
                for (int x = 0; x < s->hd; x++)
                    o[x] += P[j] * vj[x];
            }
        }
    }
    return AREAL_OK;
}

static int cp_bwd(void *ctx, const areal_model *m, int layer, void *saved, const float *dout,
                  float *dq, float *dk, float *dv, areal_error *err) {
    (void)m;
    areal_par_cp *c = ctx;
    cp_saved *s = saved;
    if (s == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "layer %d: cp attention backward without its forward", layer);
    int T = s->T, Q = s->nh * s->hd, KV = s->nkv * s->hd, grp = s->nh / s->nkv, mx = 1;
    size_t rows = (size_t)s->c * s->maxT;
    for (int t = 0; t < T; t++)
        mx = s->pos[t] + 1 > mx ? s->pos[t] + 1 : mx;
    float *dK = calloc(2 * rows * KV + 2 * (size_t)s->maxT * KV + (size_t)mx, sizeof(float));
    if (dK == NULL)
        return oom(layer, err);
    float *dV = dK + rows * KV, *rk = dV + rows * KV, *rv = rk + (size_t)s->maxT * KV;
    float *dS = rv + (size_t)s->maxT * KV;
    for (int t = 0; t < T; t++) {
        int start = s->gidx[t] - s->pos[t], n = s->pos[t] + 1;
        for (int h = 0; h < s->nh; h++) {
            const float *P = s->P + s->off[t] + (size_t)h * n,
                        *qh = s->q + (size_t)t * Q + h * s->hd;
            const float *d = dout + (size_t)t * Q + h * s->hd;
            size_t ko = (size_t)(h / grp) * s->hd;
            float dot = 0;
            for (int j = 0; j < n; j++) {
                size_t r = (size_t)s->slot_of[start + j] * KV + ko;
                float dp = 0;
                for (int x = 0; x < s->hd; x++) {
                    dp += d[x] * s->V[r + x];
                    dV[r + x] += P[j] * d[x];
                }
                dS[j] = dp;
                dot += P[j] * dp;
            }
            float *dqh = dq + (size_t)t * Q + h * s->hd;
            for (int j = 0; j < n; j++) {
                size_t r = (size_t)s->slot_of[start + j] * KV + ko;
                float g = P[j] * (dS[j] - dot) * s->scale;
                for (int x = 0; x < s->hd; x++) {
                    dqh[x] += g * s->K[r + x];
                    dK[r + x] += g * qh[x];
                }
            }
        }
    }
    /* every rank's contributions to each key summed into the rank holding it */
    size_t cnt = (size_t)s->maxT * KV;
    int rc = AREAL_OK;
    if (s->c > 1) {
        rc = areal_coll_reduce_scatter(c->cp, dK, rk, cnt, AREAL_DT_F32, AREAL_SUM, err);
        if (rc == AREAL_OK)
            rc = areal_coll_reduce_scatter(c->cp, dV, rv, cnt, AREAL_DT_F32, AREAL_SUM, err);
    } else {
        memcpy(rk, dK, sizeof(float) * cnt), memcpy(rv, dV, sizeof(float) * cnt);
    }
    for (size_t i = 0; rc == AREAL_OK && i < (size_t)T * KV; i++)
        dk[i] += rk[i], dv[i] += rv[i];
    free(dK);
    return rc;
}

static const areal_cp_attn CP_ATTN = {
    .tokens_of = tokens_of, .fwd = cp_fwd, .bwd = cp_bwd, .saved_free = saved_free};

void areal_par_cp_bind(areal_model *m, areal_par_cp *c) {
    areal_model_set_cp_attn(m, &CP_ATTN, c);
}
