/*
 * cp_attn.c - context-parallel attention (see cp.h): the load-balanced
 * shard of a micro-batch, and the attention of a rank's queries over the
 * keys and values all-gathered from its cp group, with the backward's key
 * and value gradients reduce-scattered back.
 *
 * The gathered keys and values are put back in micro-batch order, so each
 * sequence's are contiguous; a rank's queries come in runs of consecutive
 * positions (its two chunks of each sequence), cut into blocks of at most
 * CP_BQ rows, and block [p0, p1) of a sequence attends to its keys [0, p1)
 * with BLAS, as the one-process attention does (worker/model k_attention.c):
 * S = scale Q K^T, the causal softmax, O = P V; backward dP = dO V^T, dV +=
 * P^T dO, dS = P (dP - rowsum(P dP)) scale, dQ += dS K, dK += dS^T Q. P is
 * kept per block ([rows, p1], zero above the diagonal). Measured before it
 * (a dot product per query, head and key through the gather's index): cp's
 * CPU per token was 2.2-2.4x one process's at c2 on the bench model.
 */
#include <cblas.h>
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

#define CP_BQ                                                                                      \
    64 /* query rows per block: fewer skip more of the causal zeros, more use BLAS better */

/* Local query rows t0 .. t0 + rows - 1: positions p1 - rows .. p1 - 1 of the sequence whose first
 * token is micro-batch index seq; they attend to its keys 0 .. p1 - 1. */
typedef struct cp_block {
    int t0, rows, seq, p1;
    size_t off; /* its probabilities: head h's [rows, p1] at P + off + h * rows * p1 */
} cp_block;

/* One layer's forward, kept for its backward. */
typedef struct cp_saved {
    int T, maxT, c, nh, nkv, hd, Tw; /* local tokens, padded shard, cp, heads, whole micro-batch */
    float scale;
    int32_t *pos, *gidx; /* [T] (copies) */
    int32_t *slot_of;    /* [Tw] micro-batch index -> row of the gathered layout */
    float *K, *V;        /* [Tw, nkv * hd]: the gathered keys and values in micro-batch order */
    float *q;            /* [T, nh * hd] */
    float *P;            /* probabilities, by block */
    cp_block *blk;
    int n_blk;
} cp_saved;

static void saved_free(void *p) {
    cp_saved *s = p;
    if (s == NULL)
        return;
    free(s->pos);
    free(s->slot_of);
    free(s->K);
    free(s->P);
    free(s->blk);
    free(s);
}

/* The blocks of the T local queries (runs of consecutive positions of one sequence, cut at
 * CP_BQ rows); returns how many (at most T), their probabilities' floats in *np. */
static int make_blocks(const int32_t *pos, const int32_t *gidx, int T, int nh, cp_block *b,
                       size_t *np) {
    int n = 0;
    size_t off = 0;
    for (int t = 0; t < T;) {
        int e = t + 1;
        while (e < T && e - t < CP_BQ && gidx[e] == gidx[e - 1] + 1 && pos[e] == pos[e - 1] + 1)
            e++;
        b[n] = (cp_block){
            .t0 = t, .rows = e - t, .seq = gidx[t] - pos[t], .p1 = pos[e - 1] + 1, .off = off};
        off += (size_t)nh * (size_t)(e - t) * (size_t)b[n].p1;
        n++, t = e;
    }
    *np = off;
    return n;
}

/* Row i of a block (position p1 - rows + i) sees keys 0 .. p1 - rows + i: the causal softmax of
 * its scaled scores in place, zero after its last key. */
static void causal_softmax(float *P, int rows, int p1) {
    for (int i = 0; i < rows; i++) {
        float *r = P + (size_t)i * p1, mx = -INFINITY, sum = 0;
        int n = p1 - rows + i + 1;
        for (int j = 0; j < n; j++)
            mx = r[j] > mx ? r[j] : mx;
        for (int j = 0; j < n; j++)
            sum += (r[j] = expf(r[j] - mx));
        float inv = 1.0f / sum;
        for (int j = 0; j < n; j++)
            r[j] *= inv;
        for (int j = n; j < p1; j++)
            r[j] = 0;
    }
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
    s->blk = malloc(sizeof *s->blk * (size_t)(T > 0 ? T : 1));
    if (s->pos == NULL || s->blk == NULL)
        return oom(layer, err);
    s->gidx = s->pos + T;
    memcpy(s->pos, pos, sizeof(int32_t) * (size_t)T);
    memcpy(s->gidx, gidx, sizeof(int32_t) * (size_t)T);
    int rc = gather_index(c, s, err);
    if (rc != AREAL_OK)
        return rc == AREAL_ENOMEM ? oom(layer, err) : rc;
    int Q = s->nh * s->hd, KV = s->nkv * s->hd, grp = s->nh / s->nkv;
    size_t rows = (size_t)s->c * s->maxT, np = 0;
    s->n_blk = make_blocks(pos, gidx, T, s->nh, s->blk, &np);
    /* K, V (micro-batch order), q; then the gathered K and V and one padded shard, scratch */
    size_t keep = 2 * (size_t)s->Tw * KV + (size_t)T * Q;
    float *tmp = malloc(sizeof(float) * (2 * rows * KV + (size_t)s->maxT * KV));
    s->K = malloc(sizeof(float) * (keep > 0 ? keep : 1));
    s->P = malloc(sizeof(float) * (np > 0 ? np : 1));
    if (tmp == NULL || s->K == NULL || s->P == NULL) {
        free(tmp);
        return oom(layer, err);
    }
    s->V = s->K + (size_t)s->Tw * KV, s->q = s->V + (size_t)s->Tw * KV;
    float *gk = tmp, *gv = gk + rows * KV, *pad = gv + rows * KV;
    memcpy(s->q, q, sizeof(float) * (size_t)T * Q);
    rc = gather_rows(c->cp, k, T, s->maxT, KV, gk, pad, err);
    if (rc == AREAL_OK)
        rc = gather_rows(c->cp, v, T, s->maxT, KV, gv, pad, err);
    for (int g = 0; rc == AREAL_OK && g < s->Tw; g++) {
        memcpy(s->K + (size_t)g * KV, gk + (size_t)s->slot_of[g] * KV, sizeof(float) * KV);
        memcpy(s->V + (size_t)g * KV, gv + (size_t)s->slot_of[g] * KV, sizeof(float) * KV);
    }
    free(tmp);
    if (rc != AREAL_OK)
        return rc;
    for (int bi = 0; bi < s->n_blk; bi++) {
        const cp_block *b = &s->blk[bi];
        for (int h = 0; h < s->nh; h++) {
            float *P = s->P + b->off + (size_t)h * b->rows * b->p1;
            size_t ko = (size_t)b->seq * KV + (size_t)(h / grp) * s->hd;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b->rows, b->p1, s->hd, s->scale,
                        q + (size_t)b->t0 * Q + h * s->hd, Q, s->K + ko, KV, 0.0f, P, b->p1);
            causal_softmax(P, b->rows, b->p1);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b->rows, s->hd, b->p1, 1.0f, P,
                        b->p1, s->V + ko, KV, 0.0f, out + (size_t)b->t0 * Q + h * s->hd, Q);
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
    int T = s->T, Q = s->nh * s->hd, KV = s->nkv * s->hd, grp = s->nh / s->nkv;
    size_t rows = (size_t)s->c * s->maxT, most = 1;
    for (int bi = 0; bi < s->n_blk; bi++)
        if ((size_t)s->blk[bi].rows * s->blk[bi].p1 > most)
            most = (size_t)s->blk[bi].rows * s->blk[bi].p1;
    /* dK, dV in micro-batch order; the gathered layout of both; this rank's rows; dP scratch */
    size_t tw = (size_t)s->Tw * KV;
    float *dKw = calloc(2 * tw + 2 * rows * KV + 2 * (size_t)s->maxT * KV + most, sizeof(float));
    if (dKw == NULL)
        return oom(layer, err);
    float *dVw = dKw + tw, *dK = dVw + tw, *dV = dK + rows * KV, *rk = dV + rows * KV;
    float *rv = rk + (size_t)s->maxT * KV, *dS = rv + (size_t)s->maxT * KV;
    for (int bi = 0; bi < s->n_blk; bi++) {
        const cp_block *b = &s->blk[bi];
        for (int h = 0; h < s->nh; h++) {
            const float *P = s->P + b->off + (size_t)h * b->rows * b->p1;
            const float *dO = dout + (size_t)b->t0 * Q + h * s->hd;
            const float *qb = s->q + (size_t)b->t0 * Q + h * s->hd;
            size_t ko = (size_t)b->seq * KV + (size_t)(h / grp) * s->hd;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b->rows, b->p1, s->hd, 1.0f, dO, Q,
                        s->V + ko, KV, 0.0f, dS, b->p1);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, b->p1, s->hd, b->rows, 1.0f, P,
                        b->p1, dO, Q, 1.0f, dVw + ko, KV);
            for (int i = 0; i < b->rows; i++) {
                float *d = dS + (size_t)i * b->p1, dot = 0;
                const float *p = P + (size_t)i * b->p1;
                for (int j = 0; j < b->p1; j++)
                    dot += p[j] * d[j];
                for (int j = 0; j < b->p1; j++)
                    d[j] = p[j] * (d[j] - dot) * s->scale;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b->rows, s->hd, b->p1, 1.0f, dS,
                        b->p1, s->K + ko, KV, 1.0f, dq + (size_t)b->t0 * Q + h * s->hd, Q);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, b->p1, s->hd, b->rows, 1.0f, dS,
                        b->p1, qb, Q, 1.0f, dKw + ko, KV);
        }
    }
    /* back to the gathered layout, then every rank's contributions to each key summed into the
     * rank holding it */
    for (int g = 0; g < s->Tw; g++) {
        memcpy(dK + (size_t)s->slot_of[g] * KV, dKw + (size_t)g * KV, sizeof(float) * KV);
        memcpy(dV + (size_t)s->slot_of[g] * KV, dVw + (size_t)g * KV, sizeof(float) * KV);
    }
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
    free(dKw);
    return rc;
}

static const areal_cp_attn CP_ATTN = {
    .tokens_of = tokens_of, .fwd = cp_fwd, .bwd = cp_bwd, .saved_free = saved_free};

void areal_par_cp_bind(areal_model *m, areal_par_cp *c) {
    areal_model_set_cp_attn(m, &CP_ATTN, c);
}
