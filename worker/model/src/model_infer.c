/*
 * model_infer.c - the KV cache and the incremental (inference) forward.
 *
 * One call handles any mix of prefill and decode: the new tokens of every
 * sequence are packed into rows, run through the same kernels as the
 * training forward (RMSNorm, projections, q/k norm, RoPE at position
 * len[slot] + i, MLP or MoE), their rotated keys and values are appended to
 * the cache, and every row attends the cache of its slot up to and including
 * itself. Only each sequence's last row goes through the final norm and the
 * LM head. Nothing is saved for a backward; scratch is one allocation per
 * call. Sharing layer_fwd of model_fwd.c was rejected: it writes the
 * training activation record, which inference must not allocate.
 */
#include <stdlib.h>
#include <string.h>

#include "areal/model/generate.h"
#include "kernels.h"
#include "model_internal.h"

int areal_kv_cache_init(areal_kv_cache *c, const areal_model_config *cfg, int n_slots, int cap,
                        areal_error *err) {
    memset(c, 0, sizeof *c);
    if (n_slots < 1 || cap < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "kv cache: %d slots of %d tokens; both must be >= 1", n_slots, cap);
    c->n_layers = cfg->num_layers;
    c->n_slots = n_slots;
    c->cap = cap;
    c->kv_dim = cfg->num_kv_heads * cfg->head_dim;
    size_t n = (size_t)c->n_layers * n_slots * cap * c->kv_dim;
    c->k = malloc(sizeof(float) * (n ? n : 1));
    c->v = malloc(sizeof(float) * (n ? n : 1));
    c->len = calloc((size_t)n_slots, sizeof(int));
    if (c->k == NULL || c->v == NULL || c->len == NULL) {
        areal_kv_cache_free(c);
        return areal_error_set(err, AREAL_ENOMEM, -1,
                               "kv cache: no memory for %d slots of %d tokens (%zu MiB)", n_slots,
                               cap, 2 * n * sizeof(float) >> 20);
    }
    return AREAL_OK;
}

void areal_kv_cache_free(areal_kv_cache *c) {
    free(c->k);
    free(c->v);
    free(c->len);
    memset(c, 0, sizeof *c);
}

typedef struct infer_buf {
    float *x, *ln, *q, *k, *v, *ao, *tmp, *g, *u, *h, *moe, *att, *last;
    int32_t *pos;
    int *slot, *n_keys;
} infer_buf;

static int check_step(const areal_model *m, const areal_kv_cache *c, const int32_t *tokens,
                      const int32_t *cu, const int *slots, int n_seqs, areal_error *err) {
    if (!areal_model_shard_is_whole(&m->cfg, &m->shard)) /* this path runs full-size layers */
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "step: the KV-cache path runs the whole model only; load it "
                               "without a shard (tp, pp and ep 1)");
    if (n_seqs < 1 || n_seqs > c->n_slots || cu[0] != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "step: %d sequences for a cache of %d slots (cu[0] must be 0)",
                               n_seqs, c->n_slots);
    for (int s = 0; s < n_seqs; s++) {
        if (cu[s + 1] <= cu[s])
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "step: sequence %d has no new tokens (cu[%d] = %d, cu[%d] = %d)",
                                   s, s, cu[s], s + 1, cu[s + 1]);
        if (slots[s] < 0 || slots[s] >= c->n_slots)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "step: slot %d of sequence %d is outside [0, %d)", slots[s], s,
                                   c->n_slots);
        for (int r = 0; r < s; r++)
            if (slots[r] == slots[s])
                return areal_error_set(err, AREAL_EINVAL, -1,
                                       "step: sequences %d and %d share slot %d", r, s, slots[s]);
        if (c->len[slots[s]] + (cu[s + 1] - cu[s]) > c->cap)
            return areal_error_set(err, AREAL_ERANGE, -1,
                                   "step: slot %d holds %d tokens; %d more pass its capacity %d",
                                   slots[s], c->len[slots[s]], cu[s + 1] - cu[s], c->cap);
    }
    for (int t = 0; t < cu[n_seqs]; t++)
        if (tokens[t] < 0 || tokens[t] >= m->cfg.vocab_size)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "step: token %d is id %d, outside the vocabulary [0, %d)", t,
                                   tokens[t], m->cfg.vocab_size);
    return AREAL_OK;
}

static void layer_step(const areal_model *m, areal_kv_cache *c, int l, int T, infer_buf *b,
                       int max_keys) {
    const areal_model_config *cf = &m->cfg;
    const areal_layer_w *w = &m->w.layers[l];
    int H = cf->hidden_size, hd = cf->head_dim, nh = cf->num_heads, nkv = cf->num_kv_heads;
    int Q = nh * hd, KV = nkv * hd, I = cf->intermediate_size;
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
    size_t slot_stride = (size_t)c->cap * KV, layer_off = (size_t)l * c->n_slots * slot_stride;
    for (int t = 0; t < T; t++) {
        size_t at = layer_off + (size_t)b->slot[t] * slot_stride + (size_t)b->pos[t] * KV;
        memcpy(c->k + at, b->k + (size_t)t * KV, sizeof(float) * (size_t)KV);
        memcpy(c->v + at, b->v + (size_t)t * KV, sizeof(float) * (size_t)KV);
    }
    k_attn_dims d = {nh, nkv, hd, m->attn_scale};
    k_attn_decode(m->pool, b->ao, b->q, c->k + layer_off, c->v + layer_off, slot_stride, b->slot,
                  b->n_keys, T, d, b->att, max_keys);
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

int areal_model_step(areal_model *m, areal_kv_cache *c, const int32_t *tokens, const int32_t *cu,
                     const int *slots, int n_seqs, float *logits, areal_error *err) {
    int rc = check_step(m, c, tokens, cu, slots, n_seqs, err);
    if (rc != AREAL_OK)
        return rc;
    const areal_model_config *cf = &m->cfg;
    size_t T = (size_t)cu[n_seqs], H = (size_t)cf->hidden_size;
    size_t Q = (size_t)cf->num_heads * cf->head_dim, KV = (size_t)c->kv_dim;
    size_t I = (size_t)cf->intermediate_size;
    int max_keys = 0;
    for (int s = 0; s < n_seqs; s++)
        if (c->len[slots[s]] + cu[s + 1] - cu[s] > max_keys)
            max_keys = c->len[slots[s]] + cu[s + 1] - cu[s];
    size_t nf = T * H * 3 + T * Q * 2 + T * KV * 2 + T * I * 3 + moe_acts_floats(cf, (int)T) +
                T * (size_t)cf->num_heads * (size_t)max_keys + (size_t)n_seqs * H + 3 * T;
    float *buf = malloc(sizeof(float) * nf);
    if (buf == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "step: no memory for %zu new tokens", T);
    infer_buf b;
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
    b.att = TAKE(T * (size_t)cf->num_heads * (size_t)max_keys);
    b.last = TAKE((size_t)n_seqs * H);
    b.pos = (int32_t *)TAKE(T);
    b.slot = (int *)TAKE(T);
    b.n_keys = (int *)TAKE(T);
#undef TAKE
    for (int s = 0; s < n_seqs; s++)
        for (int t = cu[s]; t < cu[s + 1]; t++) {
            b.slot[t] = slots[s];
            b.pos[t] = c->len[slots[s]] + (t - cu[s]);
            b.n_keys[t] = b.pos[t] + 1;
        }
    for (size_t t = 0; t < T; t++)
        memcpy(b.x + t * H, m->w.embed + (size_t)tokens[t] * H, sizeof(float) * H);
    for (int l = 0; l < cf->num_layers; l++)
        layer_step(m, c, l, (int)T, &b, max_keys);
    for (int s = 0; s < n_seqs; s++)
        memcpy(b.last + (size_t)s * H, b.x + (size_t)(cu[s + 1] - 1) * H, sizeof(float) * H);
    k_rmsnorm_fwd(m->pool, b.last, NULL, b.last, m->w.norm, (size_t)n_seqs, (int)H,
                  (float)cf->rms_norm_eps);
    k_linear_fwd(logits, b.last, m->w.lm_head, NULL, n_seqs, (int)H, cf->vocab_size, 0.0f);
    for (int s = 0; s < n_seqs; s++)
        c->len[slots[s]] += cu[s + 1] - cu[s];
    free(buf);
    return AREAL_OK;
}
