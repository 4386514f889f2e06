/*
 * infer_step.c - the incremental forward of infer_step.h: one layer body for
 * the slot cache (generate.h) and the paged cache (paged.h).
 *
 * Per layer: RMSNorm, the q/k/v projections of all T rows at once
 * (k_linear_infer: batch-invariant, so a row's numbers do not depend on
 * which rows share its step), q/k norm, RoPE at each row's position, the
 * rotated keys and values written to their block rows, per-(row, head)
 * attention over the row's block table, the output projection with the
 * residual added in place, then the MLP (or MoE) and its residual. Scratch
 * is one allocation per call; attention scratch is taken for a group of rows
 * at a time (at most ATTN_SCRATCH floats), since a chunk of prefill rows x
 * heads x keys would otherwise be hundreds of MB.
 *
 * Attention walks the keys block by block (no division per key: it cost a
 * third of the attention time in the engine bench), reading them in place
 * (no gather copy of a sequence's keys), one task per (row, key/value head)
 * so the query heads of a GQA group share each key's load; the score is
 * k_dot_lanes, the softmax an ordered loop, the value sum one FMA chain per
 * element.
 *
 * A tensor-parallel shard (paged.h) runs the same body on its local heads
 * and columns; its row-parallel products go through the reduction hook.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "infer_step.h"
#include "kernels.h"
#include "model_internal.h"

#define ATTN_SCRATCH ((size_t)1 << 20)

typedef struct step_buf {
    float *x, *ln, *q, *k, *v, *ao, *tmp, *g, *u, *h, *moe, *att, *last;
    const int32_t *const *table; /* per row: its sequence's block table */
    const int32_t *pos;
    int max_keys;
} step_buf;

typedef struct attn_ctx {
    float *out;
    const float *q, *kc, *vc; /* kc, vc: this layer's blocks */
    size_t block_stride;      /* floats per block in one layer */
    int bt, row0;
    const step_buf *b;
    k_attn_dims d;
} attn_ctx;

/* o[0..n) += p * v[0..n): one chain per element, the same in every build of
 * this file (AVX2 when the CPU has it). */
static void axpy(float *o, float p, const float *v, int n) {
    for (int c = 0; c < n; c++)
        o[c] = __builtin_fmaf(p, v[c], o[c]);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
__attribute__((target("avx2,fma"))) static void axpy_avx2(float *o, float p, const float *v,
                                                          int n) {
    int c = 0;
    __m256 pv = _mm256_set1_ps(p);
    for (; c + 8 <= n; c += 8)
        _mm256_storeu_ps(o + c,
                         _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + c), _mm256_loadu_ps(o + c)));
    for (; c < n; c++)
        o[c] = __builtin_fmaf(p, v[c], o[c]);
}
static bool use_avx2(void) {
    static int known; /* 0 unknown, 1 no, 2 yes; a benign race */
    if (known == 0)
        known = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 2 : 1;
    return known == 2;
}
#else
#define axpy_avx2 axpy
static bool use_avx2(void) {
    return false;
}
#endif

/* One (row, key/value head) per task: the query heads of the group read each
 * key and value once; each head's sums are those it would get alone. */
static void attn_tasks(void *cv, size_t begin, size_t end) {
    attn_ctx *x = cv;
    k_attn_dims d = x->d;
    int qd = d.nh * d.hd, kvd = d.nkv * d.hd, grp = d.nh / d.nkv, bt = x->bt;
    void (*acc)(float *, float, const float *, int) = use_avx2() ? axpy_avx2 : axpy;
    for (size_t task = begin; task < end; task++) {
        int r = x->row0 + (int)(task / (size_t)d.nkv), kh = (int)(task % (size_t)d.nkv);
        int n = x->b->pos[r] + 1, h0 = kh * grp;
        const int32_t *table = x->b->table[r];
        /* scratch: max_keys floats per query head of this task */
        float *p0 = x->b->att + task * (size_t)grp * (size_t)x->b->max_keys;
        const float *q0 = x->q + (size_t)r * qd + h0 * d.hd;
        for (int j0 = 0, blk = 0; j0 < n; j0 += bt, blk++) {
            const float *kb = x->kc + (size_t)table[blk] * x->block_stride + kh * d.hd;
            int m = n - j0 < bt ? n - j0 : bt;
            for (int i = 0; i < m; i++)
                for (int g = 0; g < grp; g++)
                    p0[(size_t)g * x->b->max_keys + j0 + i] =
                        k_dot_lanes(q0 + g * d.hd, kb + (size_t)i * kvd, d.hd) * d.scale;
        }
        for (int g = 0; g < grp; g++) {
            float *p = p0 + (size_t)g * x->b->max_keys, mx = -INFINITY, sum = 0;
            for (int j = 0; j < n; j++)
                mx = p[j] > mx ? p[j] : mx;
            for (int j = 0; j < n; j++) {
                p[j] = expf(p[j] - mx);
                sum += p[j];
            }
            float inv = 1.0f / sum;
            for (int j = 0; j < n; j++)
                p[j] *= inv;
            float *o = x->out + (size_t)r * qd + (h0 + g) * d.hd;
            for (int c = 0; c < d.hd; c++)
                o[c] = 0;
        }
        for (int j0 = 0, blk = 0; j0 < n; j0 += bt, blk++) {
            const float *vb = x->vc + (size_t)table[blk] * x->block_stride + kh * d.hd;
            int m = n - j0 < bt ? n - j0 : bt;
            for (int i = 0; i < m; i++)
                for (int g = 0; g < grp; g++)
                    acc(x->out + (size_t)r * qd + (h0 + g) * d.hd,
                        p0[(size_t)g * x->b->max_keys + j0 + i], vb + (size_t)i * kvd, d.hd);
        }
    }
}

/* weight NAME's packed twin when the model has one of shape [O, I] */
#define TWIN(name, O, I) infer_twin(&pw->name, (O), (I))

/* y[T, H] += b per row: a row-parallel bias, added once after the reduction. */
static void add_bias(float *y, const float *bias, int T, int H) {
    for (int t = 0; bias != NULL && t < T; t++)
        for (int i = 0; i < H; i++)
            y[(size_t)t * H + i] += bias[i];
}

/*
 * A row-parallel product of a tensor-parallel shard (o_proj, down_proj):
 * out = W a without the bias, summed over tp by the model's hook (the
 * training forward's reduction points), then the bias once. With tp 1 the
 * callers keep the fused forms (bias and residual inside k_linear_infer), so
 * the whole model's numbers are unchanged by this path's existence.
 */
static int row_parallel(const areal_model *m, areal_reduce_point pt, int l, float *out,
                        const float *a, const float *wt, const float *wp, const float *bias, int T,
                        int in, int H, areal_error *err) {
    k_linear_infer_packed(m->pool, out, a, wt, wp, NULL, T, in, H, 0.0f);
    if (m->reduce == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "paged step: layer %d of a tp %d shard has no reduction hook "
                               "(areal_model_set_reduce)",
                               l, m->shard.tp);
    int rc = m->reduce(m->reduce_ctx, pt, l, out, (size_t)T * H, err);
    if (rc == AREAL_OK)
        add_bias(out, bias, T, H);
    return rc;
}

static int layer(const areal_model *m, const infer_kv *c, int l, int T, step_buf *b,
                 areal_error *err) {
    const areal_model_config *cf = &m->cfg;
    const areal_layer_w *w = &m->w.layers[l];
    const areal_layer_pw *pw = infer_pack_layer(m, l);
    areal_pool *pl = m->pool;
    /* the shard's local heads and columns (the whole model's with tp 1) */
    int H = cf->hidden_size, hd = cf->head_dim, nh = m->nh, nkv = m->nkv;
    int Q = nh * hd, KV = nkv * hd, I = m->inter, bt = c->block_tokens;
    bool split = m->shard.tp > 1;
    int rc = AREAL_OK;
    float eps = (float)cf->rms_norm_eps;
    k_rmsnorm_fwd(pl, b->ln, NULL, b->x, w->ln1, (size_t)T, H, eps);
    k_linear_infer_packed(pl, b->q, b->ln, w->wq, TWIN(wq, Q, H), w->bq, T, H, Q, 0.0f);
    k_linear_infer_packed(pl, b->k, b->ln, w->wk, TWIN(wk, KV, H), w->bk, T, H, KV, 0.0f);
    k_linear_infer_packed(pl, b->v, b->ln, w->wv, TWIN(wv, KV, H), w->bv, T, H, KV, 0.0f);
    if (cf->qk_norm) {
        k_rmsnorm_fwd(pl, b->q, NULL, b->q, w->q_norm, (size_t)T * nh, hd, eps);
        k_rmsnorm_fwd(pl, b->k, NULL, b->k, w->k_norm, (size_t)T * nkv, hd, eps);
    }
    k_rope_fwd(pl, b->q, b->pos, m->inv_freq, T, nh, hd);
    k_rope_fwd(pl, b->k, b->pos, m->inv_freq, T, nkv, hd);
    size_t block_stride = (size_t)bt * KV, layer_off = (size_t)l * c->n_blocks * block_stride;
    for (int t = 0; t < T; t++) {
        size_t at = layer_off + (size_t)b->table[t][b->pos[t] / bt] * block_stride +
                    (size_t)(b->pos[t] % bt) * KV;
        memcpy(c->k + at, b->k + (size_t)t * KV, sizeof(float) * (size_t)KV);
        memcpy(c->v + at, b->v + (size_t)t * KV, sizeof(float) * (size_t)KV);
    }
    attn_ctx x = {b->ao,
                  b->q,
                  c->k + layer_off,
                  c->v + layer_off,
                  block_stride,
                  bt,
                  0,
                  b,
                  {nh, nkv, hd, m->attn_scale}};
    size_t per_row = (size_t)nh * (size_t)b->max_keys;
    int group = (int)(ATTN_SCRATCH / per_row);
    group = group < 1 ? 1 : group;
    for (int r0 = 0; r0 < T; r0 += group) {
        int R = T - r0 < group ? T - r0 : group;
        x.row0 = r0;
        areal_pool_for(pl, (size_t)R * nkv, 1, attn_tasks, &x);
    }
    if (!split) { /* the residual added in place */
        k_linear_infer_packed(pl, b->x, b->ao, w->wo, TWIN(wo, H, Q), w->bo, T, Q, H, 1.0f);
    } else {
        rc = row_parallel(m, AREAL_REDUCE_ATTN_OUT, l, b->tmp, b->ao, w->wo, TWIN(wo, H, Q), w->bo,
                          T, Q, H, err);
        if (rc != AREAL_OK)
            return rc;
        k_add(pl, b->x, b->x, b->tmp, (size_t)T * H);
    }
    k_rmsnorm_fwd(pl, b->ln, NULL, b->x, w->ln2, (size_t)T, H, eps);
    if (cf->num_experts > 0 && cf->moe_layer[l]) {
        /* experts are replicated over tp (etp 1): every rank computes the whole sum */
        moe_acts ma;
        moe_acts_bind(&ma, cf, T, b->moe);
        moe_fwd(m, w, &ma, b->ln, b->tmp, T);
    } else {
        k_linear_infer_packed(pl, b->g, b->ln, w->gate, TWIN(gate, I, H), w->gate_b, T, H, I, 0.0f);
        k_linear_infer_packed(pl, b->u, b->ln, w->up, TWIN(up, I, H), w->up_b, T, H, I, 0.0f);
        k_swiglu_infer(pl, b->h, b->g, b->u, (size_t)T * I);
        if (!split)
            k_linear_infer_packed(pl, b->tmp, b->h, w->down, TWIN(down, H, I), w->down_b, T, I, H,
                                  0.0f);
        else if ((rc = row_parallel(m, AREAL_REDUCE_MLP_OUT, l, b->tmp, b->h, w->down,
                                    TWIN(down, H, I), w->down_b, T, I, H, err)) != AREAL_OK)
            return rc;
    }
    k_add(pl, b->x, b->x, b->tmp, (size_t)T * H);
    return AREAL_OK;
}

int infer_run(areal_model *m, const infer_kv *kv, const int32_t *tokens, int T_,
              const int32_t *const *table, const int32_t *pos, const int32_t *out_rows, int n_out,
              float *logits, areal_error *err) {
    const areal_model_config *cf = &m->cfg;
    size_t T = (size_t)T_, H = (size_t)cf->hidden_size;
    size_t Q = (size_t)m->nh * cf->head_dim, KV = (size_t)kv->kv_dim;
    size_t I = (size_t)m->inter, nh = (size_t)m->nh;
    int max_keys = 1;
    for (size_t t = 0; t < T; t++)
        if (pos[t] + 1 > max_keys)
            max_keys = pos[t] + 1;
    size_t per_row = nh * (size_t)max_keys, group = ATTN_SCRATCH / per_row;
    group = group < 1 ? 1 : group > T ? T : group;
    size_t nf = T * H * 3 + T * Q * 2 + T * KV * 2 + T * I * 3 + moe_acts_floats(cf, (int)T) +
                group * per_row + (size_t)(n_out > 0 ? n_out : 1) * H;
    float *buf = malloc(sizeof(float) * nf);
    if (buf == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "step: no memory for %zu new tokens", T);
    step_buf b;
    float *f = buf;
#define TAKE(n) (f += (n), f - (n))
    b.x = TAKE(T * H);
    b.ln = TAKE(T * H);
    b.tmp = TAKE(T * H);
    b.q = TAKE(T * Q);
    b.ao = TAKE(T * Q);
    b.k = TAKE(T * KV);
    b.v = TAKE(T * KV);
    b.g = TAKE(T * I);
    b.u = TAKE(T * I);
    b.h = TAKE(T * I);
    b.moe = TAKE(moe_acts_floats(cf, (int)T));
    b.att = TAKE(group * per_row);
    b.last = TAKE((size_t)(n_out > 0 ? n_out : 1) * H);
#undef TAKE
    b.table = table;
    b.pos = pos;
    b.max_keys = max_keys;
    for (size_t t = 0; t < T; t++)
        memcpy(b.x + t * H, m->w.embed + (size_t)tokens[t] * H, sizeof(float) * H);
    int rc = AREAL_OK;
    for (int l = 0; l < cf->num_layers && rc == AREAL_OK; l++)
        rc = layer(m, kv, l, (int)T, &b, err);
    if (rc == AREAL_OK && n_out > 0) {
        for (int i = 0; i < n_out; i++)
            memcpy(b.last + (size_t)i * H, b.x + (size_t)out_rows[i] * H, sizeof(float) * H);
        k_rmsnorm_fwd(m->pool, b.last, NULL, b.last, m->w.norm, (size_t)n_out, (int)H,
                      (float)cf->rms_norm_eps);
        k_linear_infer_packed(m->pool, logits, b.last, m->w.lm_head,
                              infer_twin(infer_pack_lm_head(m), cf->vocab_size, (int)H), NULL,
                              n_out, (int)H, cf->vocab_size, 0.0f);
    }
    free(buf);
    return rc;
}
