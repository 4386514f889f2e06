/*
 * model_paged.c - the paged KV cache and the incremental forward over block
 * tables (paged.h).
 *
 * The layer is model_infer.c's layer_step with two changes: the new rows'
 * rotated keys and values go to block table[pos / bt] row pos % bt, and the
 * attention reads keys through the table. The per-(row, head) attention loop
 * repeats k_attention.c's softmax_row and accumulation in the same order, so
 * that the engine's greedy tokens equal areal_generate's (the slot cache) and
 * logprobs agree to fp32 rounding. A paged variant of k_attn_decode in
 * kernels.h was the other choice; it stays here to keep the shared kernel
 * header (which the tensor-parallel work edits) untouched. Attention scratch
 * is taken for a group of rows at a time, at most ATTN_SCRATCH floats, since
 * a chunk of prefill rows x heads x keys would otherwise be hundreds of MB.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/paged.h"
#include "kernels.h"
#include "model_internal.h"

#define ATTN_SCRATCH ((size_t)1 << 20)

size_t areal_paged_kv_block_bytes(const areal_model_config *cfg, int block_tokens) {
    return (size_t)2 * sizeof(float) * (size_t)cfg->num_layers * (size_t)block_tokens *
           (size_t)cfg->num_kv_heads * (size_t)cfg->head_dim;
}

int areal_paged_kv_init(areal_paged_kv *c, const areal_model_config *cfg, int n_blocks,
                        int block_tokens, areal_error *err) {
    memset(c, 0, sizeof *c);
    if (n_blocks < 1 || block_tokens < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "paged kv: %d blocks of %d tokens; both must be >= 1", n_blocks,
                               block_tokens);
    c->n_layers = cfg->num_layers;
    c->n_blocks = n_blocks;
    c->block_tokens = block_tokens;
    c->kv_dim = cfg->num_kv_heads * cfg->head_dim;
    size_t n = (size_t)c->n_layers * n_blocks * block_tokens * c->kv_dim;
    c->k = malloc(sizeof(float) * (n ? n : 1));
    c->v = malloc(sizeof(float) * (n ? n : 1));
    if (c->k == NULL || c->v == NULL) {
        areal_paged_kv_free(c);
        return areal_error_set(err, AREAL_ENOMEM, -1,
                               "paged kv: no memory for %d blocks of %d tokens (%zu MiB)", n_blocks,
                               block_tokens, 2 * n * sizeof(float) >> 20);
    }
    return AREAL_OK;
}

void areal_paged_kv_free(areal_paged_kv *c) {
    free(c->k);
    free(c->v);
    memset(c, 0, sizeof *c);
}

void areal_paged_kv_copy_block(areal_paged_kv *c, int dst, int src) {
    size_t bs = (size_t)c->block_tokens * c->kv_dim, ls = bs * c->n_blocks;
    for (int l = 0; l < c->n_layers; l++) {
        memcpy(c->k + l * ls + dst * bs, c->k + l * ls + src * bs, sizeof(float) * bs);
        memcpy(c->v + l * ls + dst * bs, c->v + l * ls + src * bs, sizeof(float) * bs);
    }
}

typedef struct paged_buf {
    float *x, *ln, *q, *k, *v, *ao, *tmp, *g, *u, *h, *moe, *att, *last;
    int32_t *pos;
    int *n_keys;
    const int32_t **table; /* per row: its sequence's block table */
    int max_keys;
} paged_buf;

static int check_paged(const areal_model *m, const areal_paged_kv *c, const int32_t *tokens,
                       const int32_t *cu, const areal_paged_seq *seqs, int n_seqs,
                       const int32_t *out_rows, int n_out, areal_error *err) {
    if (n_seqs < 1 || cu[0] != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "paged step: %d sequences (need >= 1) and cu[0] = %d (must be 0)",
                               n_seqs, cu[0]);
    int bt = c->block_tokens;
    for (int s = 0; s < n_seqs; s++) {
        if (cu[s + 1] <= cu[s])
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "paged step: sequence %d has no new tokens (cu[%d] = %d, "
                                   "cu[%d] = %d)",
                                   s, s, cu[s], s + 1, cu[s + 1]);
        const areal_paged_seq *q = &seqs[s];
        long need = (long)q->start + (cu[s + 1] - cu[s]);
        if (q->start < 0 || (long)q->n_table * bt < need)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "paged step: sequence %d needs %ld positions but its table "
                                   "of %d blocks holds %ld (start %d)",
                                   s, need, q->n_table, (long)q->n_table * bt, q->start);
        for (long b = 0; b < (need + bt - 1) / bt; b++)
            if (q->table[b] < 0 || q->table[b] >= c->n_blocks)
                return areal_error_set(err, AREAL_EINVAL, -1,
                                       "paged step: sequence %d block %ld is id %d, outside "
                                       "[0, %d)",
                                       s, b, q->table[b], c->n_blocks);
    }
    for (int t = 0; t < cu[n_seqs]; t++)
        if (tokens[t] < 0 || tokens[t] >= m->cfg.vocab_size)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "paged step: token %d is id %d, outside the vocabulary [0, %d)",
                                   t, tokens[t], m->cfg.vocab_size);
    if (n_out < 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "paged step: n_out %d < 0", n_out);
    for (int i = 0; i < n_out; i++)
        if (out_rows[i] < 0 || out_rows[i] >= cu[n_seqs])
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "paged step: out_rows[%d] = %d is outside [0, %d)", i,
                                   out_rows[i], cu[n_seqs]);
    return AREAL_OK;
}

typedef struct pattn_ctx {
    float *out;
    const float *q, *kc, *vc; /* kc, vc: this layer's blocks */
    size_t block_stride;      /* floats per block in one layer */
    int bt, row0;
    const paged_buf *b;
    k_attn_dims d;
} pattn_ctx;

/* One (row, head) per task; the arithmetic of k_attention.c's dec_tasks. Keys
 * are walked block by block (no division per key: it cost a third of the
 * attention time in the engine bench). */
static void pattn_tasks(void *cv, size_t begin, size_t end) {
    pattn_ctx *x = cv;
    k_attn_dims d = x->d;
    int qd = d.nh * d.hd, kvd = d.nkv * d.hd, grp = d.nh / d.nkv, bt = x->bt;
    for (size_t task = begin; task < end; task++) {
        int r = x->row0 + (int)(task / (size_t)d.nh), h = (int)(task % (size_t)d.nh);
        int kh = h / grp, n = x->b->n_keys[r];
        const int32_t *table = x->b->table[r];
        float *p = x->b->att + task * (size_t)x->b->max_keys;
        const float *q = x->q + (size_t)r * qd + h * d.hd;
        float mx = -INFINITY;
        for (int j0 = 0, blk = 0; j0 < n; j0 += bt, blk++) {
            const float *kb = x->kc + (size_t)table[blk] * x->block_stride + kh * d.hd;
            int m = n - j0 < bt ? n - j0 : bt;
            for (int i = 0; i < m; i++) {
                const float *kj = kb + (size_t)i * kvd;
                float s = 0;
                for (int c = 0; c < d.hd; c++)
                    s += q[c] * kj[c];
                p[j0 + i] = s * d.scale;
                if (p[j0 + i] > mx)
                    mx = p[j0 + i];
            }
        }
        float sum = 0;
        for (int j = 0; j < n; j++) {
            p[j] = expf(p[j] - mx);
            sum += p[j];
        }
        float inv = 1.0f / sum;
        for (int j = 0; j < n; j++)
            p[j] *= inv;
        float *o = x->out + (size_t)r * qd + h * d.hd;
        for (int c = 0; c < d.hd; c++)
            o[c] = 0;
        for (int j0 = 0, blk = 0; j0 < n; j0 += bt, blk++) {
            const float *vb = x->vc + (size_t)table[blk] * x->block_stride + kh * d.hd;
            int m = n - j0 < bt ? n - j0 : bt;
            for (int i = 0; i < m; i++) {
                const float *vj = vb + (size_t)i * kvd;
                float pj = p[j0 + i];
                for (int c = 0; c < d.hd; c++)
                    o[c] += pj * vj[c];
            }
        }
    }
}

static void paged_layer(const areal_model *m, areal_paged_kv *c, int l, int T, paged_buf *b) {
    const areal_model_config *cf = &m->cfg;
    const areal_layer_w *w = &m->w.layers[l];
    int H = cf->hidden_size, hd = cf->head_dim, nh = cf->num_heads, nkv = cf->num_kv_heads;
    int Q = nh * hd, KV = nkv * hd, I = cf->intermediate_size, bt = c->block_tokens;
    float eps = (float)cf->rms_norm_eps;
    k_rmsnorm_fwd(m->pool, b->ln, NULL, b->x, w->ln1, (size_t)T, H, eps);
    k_linear_fwd(b->q, b->ln, w->wq, w->bq, T, H, Q, 0.0f);
    k_linear_fwd(b->k, b->ln, w->wk, w->bk, T, H, KV, 0.0f);
    k_linear_fwd(b->v, b->ln, w->wv, w->bv, T, H, KV, 0.0f);
    if (cf->qk_norm) {
        k_rmsnorm_fwd(m->pool, b->q, NULL, b->q, w->q_norm, (size_t)T * nh, hd, eps);
        k_rmsnorm_fwd(m->pool, b->k, NULL, b->k, w->k_norm, (size_t)T * nkv, hd, eps);
    }
    k_rope_fwd(m->pool, b->q, b->pos, m->inv_freq, T, nh, hd);
    k_rope_fwd(m->pool, b->k, b->pos, m->inv_freq, T, nkv, hd);
    size_t block_stride = (size_t)bt * KV, layer_off = (size_t)l * c->n_blocks * block_stride;
    for (int t = 0; t < T; t++) {
        size_t at = layer_off + (size_t)b->table[t][b->pos[t] / bt] * block_stride +
                    (size_t)(b->pos[t] % bt) * KV;
        memcpy(c->k + at, b->k + (size_t)t * KV, sizeof(float) * (size_t)KV);
        memcpy(c->v + at, b->v + (size_t)t * KV, sizeof(float) * (size_t)KV);
    }
    pattn_ctx x = {b->ao,
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
        areal_pool_for(m->pool, (size_t)R * nh, 1, pattn_tasks, &x);
    }
    k_linear_fwd(b->x, b->ao, w->wo, w->bo, T, Q, H, 1.0f); /* residual added in place */
    k_rmsnorm_fwd(m->pool, b->ln, NULL, b->x, w->ln2, (size_t)T, H, eps);
    if (cf->num_experts > 0 && cf->moe_layer[l]) {
        moe_acts ma;
        moe_acts_bind(&ma, cf, T, b->moe);
        moe_fwd(m, w, &ma, b->ln, b->tmp, T);
    } else {
        k_linear_fwd(b->g, b->ln, w->gate, w->gate_b, T, H, I, 0.0f);
        k_linear_fwd(b->u, b->ln, w->up, w->up_b, T, H, I, 0.0f);
        k_swiglu_fwd(m->pool, b->h, b->g, b->u, (size_t)T * I);
        k_linear_fwd(b->tmp, b->h, w->down, w->down_b, T, I, H, 0.0f);
    }
    k_add(m->pool, b->x, b->x, b->tmp, (size_t)T * H);
}

int areal_model_step_paged(areal_model *m, areal_paged_kv *c, const int32_t *tokens,
                           const int32_t *cu, const areal_paged_seq *seqs, int n_seqs,
                           const int32_t *out_rows, int n_out, float *logits, areal_error *err) {
    int rc = check_paged(m, c, tokens, cu, seqs, n_seqs, out_rows, n_out, err);
    if (rc != AREAL_OK)
        return rc;
    const areal_model_config *cf = &m->cfg;
    size_t T = (size_t)cu[n_seqs], H = (size_t)cf->hidden_size;
    size_t Q = (size_t)cf->num_heads * cf->head_dim, KV = (size_t)c->kv_dim;
    size_t I = (size_t)cf->intermediate_size, nh = (size_t)cf->num_heads;
    int max_keys = 1;
    for (int s = 0; s < n_seqs; s++)
        if (seqs[s].start + cu[s + 1] - cu[s] > max_keys)
            max_keys = seqs[s].start + cu[s + 1] - cu[s];
    size_t per_row = nh * (size_t)max_keys, group = ATTN_SCRATCH / per_row;
    group = group < 1 ? 1 : group > T ? T : group;
    size_t nf = T * H * 3 + T * Q * 2 + T * KV * 2 + T * I * 3 + moe_acts_floats(cf, (int)T) +
                group * per_row + (size_t)(n_out > 0 ? n_out : 1) * H + 2 * T;
    float *buf = malloc(sizeof(float) * nf);
    const int32_t **table = malloc(sizeof *table * T);
    if (buf == NULL || table == NULL) {
        free(buf);
        free(table);
        return areal_error_set(err, AREAL_ENOMEM, -1, "paged step: no memory for %zu new tokens",
                               T);
    }
    paged_buf b;
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
    b.pos = (int32_t *)TAKE(T);
    b.n_keys = (int *)TAKE(T);
#undef TAKE
    b.table = table;
    b.max_keys = max_keys;
    for (int s = 0; s < n_seqs; s++)
        for (int t = cu[s]; t < cu[s + 1]; t++) {
            b.table[t] = seqs[s].table;
            b.pos[t] = seqs[s].start + (t - cu[s]);
            b.n_keys[t] = b.pos[t] + 1;
        }
    for (size_t t = 0; t < T; t++)
        memcpy(b.x + t * H, m->w.embed + (size_t)tokens[t] * H, sizeof(float) * H);
    for (int l = 0; l < cf->num_layers; l++)
        paged_layer(m, c, l, (int)T, &b);
    if (n_out > 0) {
        for (int i = 0; i < n_out; i++)
            memcpy(b.last + (size_t)i * H, b.x + (size_t)out_rows[i] * H, sizeof(float) * H);
        k_rmsnorm_fwd(m->pool, b.last, NULL, b.last, m->w.norm, (size_t)n_out, (int)H,
                      (float)cf->rms_norm_eps);
        k_linear_fwd(logits, b.last, m->w.lm_head, NULL, n_out, (int)H, cf->vocab_size, 0.0f);
    }
    free(buf);
    free(table);
    return AREAL_OK;
}
