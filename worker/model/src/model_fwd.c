/*
 * model_fwd.c - the training forward of the CPU reference model.
 *
 * Embedding, then per layer: RMSNorm, q/k/v projections (+bias), Qwen3's
 * per-head q/k RMSNorm, RoPE, causal GQA attention per packed sequence, o
 * projection and residual, RMSNorm, SwiGLU MLP or the MoE block, residual;
 * final RMSNorm and the LM head. Each step's output is kept in the layer's
 * activation record (model_internal.h), so the backward recomputes nothing.
 * Layer l writes its output straight into layer l+1's input slot, so the
 * residual stream is never copied.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "model_internal.h"

static bool is_moe(const areal_model_config *c, int l) {
    return c->num_experts > 0 && c->moe_layer[l];
}

/* Floats of one layer's record (att excluded). */
static size_t layer_floats(const areal_model_config *c, int l, size_t T) {
    size_t H = (size_t)c->hidden_size, Q = (size_t)c->num_heads * c->head_dim;
    size_t KV = (size_t)c->num_kv_heads * c->head_dim, I = (size_t)c->intermediate_size;
    size_t n =
        T * H * 4 + T * 2 + T * Q * 3 + T * KV * 4 + T * (size_t)(c->num_heads + c->num_kv_heads);
    return n + (is_moe(c, l) ? moe_acts_floats(c, (int)T) : 3 * T * I);
}

static void bind_layer(const areal_model_config *c, int l, size_t T, layer_acts *a, float *p,
                       float *att) {
    size_t H = (size_t)c->hidden_size, Q = (size_t)c->num_heads * c->head_dim;
    size_t KV = (size_t)c->num_kv_heads * c->head_dim, I = (size_t)c->intermediate_size;
#define TAKE(n) (p += (n), p - (n))
    a->res = TAKE(T * H);
    a->ln1 = TAKE(T * H);
    a->rstd1 = TAKE(T);
    a->q = TAKE(T * Q);
    a->k = TAKE(T * KV);
    a->v = TAKE(T * KV);
    a->rstd_q = TAKE(T * (size_t)c->num_heads);
    a->rstd_k = TAKE(T * (size_t)c->num_kv_heads);
    a->qr = TAKE(T * Q);
    a->kr = TAKE(T * KV);
    a->ao = TAKE(T * Q);
    a->mid = TAKE(T * H);
    a->ln2 = TAKE(T * H);
    a->rstd2 = TAKE(T);
    if (is_moe(c, l)) {
        moe_acts_bind(&a->moe, c, (int)T, p);
    } else {
        a->g = TAKE(T * I);
        a->u = TAKE(T * I);
        a->h = TAKE(T * I);
    }
#undef TAKE
    a->att = att;
}

void areal_acts_free(areal_acts *a) {
    if (a->priv != NULL) {
        free(a->priv->tokens);
        free(a->priv->att_off);
        free(a->priv->layers);
        free(a->priv->arena);
        free(a->priv);
    }
    memset(a, 0, sizeof *a);
}

static int acts_alloc(const areal_model *m, const areal_batch *b, areal_acts *a, areal_error *err) {
    const areal_model_config *c = &m->cfg;
    size_t T = (size_t)b->n_tokens, H = (size_t)c->hidden_size, V = (size_t)c->vocab_size;
    areal_acts_priv *p = calloc(1, sizeof *p);
    a->priv = p;
    if (p == NULL)
        goto oom;
    p->T = b->n_tokens;
    p->n_seqs = b->n_seqs;
    p->tokens = malloc(sizeof(int32_t) * (2 * T + (size_t)b->n_seqs + 1));
    p->att_off = malloc(sizeof(size_t) * ((size_t)b->n_seqs + 1));
    p->layers = calloc((size_t)c->num_layers, sizeof *p->layers);
    if (p->tokens == NULL || p->att_off == NULL || p->layers == NULL)
        goto oom;
    p->pos = p->tokens + T;
    p->cu = p->pos + T;
    memcpy(p->tokens, b->tokens, sizeof(int32_t) * T);
    memcpy(p->cu, b->cu_seqlens, sizeof(int32_t) * ((size_t)b->n_seqs + 1));
    for (int s = 0; s < b->n_seqs; s++)
        for (int t = p->cu[s]; t < p->cu[s + 1]; t++)
            p->pos[t] = t - p->cu[s];
    p->att_total = k_attn_offsets(p->att_off, p->cu, b->n_seqs, c->num_heads);
    size_t total = T * H * 2 + T + T * V;
    for (int l = 0; l < c->num_layers; l++)
        total += layer_floats(c, l, T) + p->att_total;
    p->arena = malloc(sizeof(float) * total);
    if (p->arena == NULL)
        goto oom;
    float *f = p->arena;
    for (int l = 0; l < c->num_layers; l++) {
        bind_layer(c, l, T, &p->layers[l], f, f + layer_floats(c, l, T));
        f += layer_floats(c, l, T) + p->att_total;
    }
    p->res_out = f;
    p->lnf = f + T * H;
    p->rstdf = f + 2 * T * H;
    a->logits = f + 2 * T * H + T;
    a->T = b->n_tokens;
    a->V = c->vocab_size;
    return AREAL_OK;
oom:
    areal_acts_free(a);
    return areal_error_set(
        err, AREAL_ENOMEM, -1,
        "no memory for the activations of %zu tokens (try smaller micro-batches)", T);
}

static void layer_fwd(const areal_model *m, int l, areal_acts_priv *p, float *out) {
    const areal_model_config *c = &m->cfg;
    const areal_layer_w *w = &m->w.layers[l];
    layer_acts *a = &p->layers[l];
    int T = p->T, H = c->hidden_size, hd = c->head_dim, nh = c->num_heads, nkv = c->num_kv_heads;
    int Q = nh * hd, KV = nkv * hd, I = c->intermediate_size;
    float eps = (float)c->rms_norm_eps;
    k_rmsnorm_fwd(m->pool, a->ln1, a->rstd1, a->res, w->ln1, (size_t)T, H, eps);
    k_linear_fwd(a->q, a->ln1, w->wq, w->bq, T, H, Q, 0.0f);
    k_linear_fwd(a->k, a->ln1, w->wk, w->bk, T, H, KV, 0.0f);
    k_linear_fwd(a->v, a->ln1, w->wv, w->bv, T, H, KV, 0.0f);
    if (c->qk_norm) {
        k_rmsnorm_fwd(m->pool, a->qr, a->rstd_q, a->q, w->q_norm, (size_t)T * nh, hd, eps);
        k_rmsnorm_fwd(m->pool, a->kr, a->rstd_k, a->k, w->k_norm, (size_t)T * nkv, hd, eps);
    } else {
        memcpy(a->qr, a->q, sizeof(float) * (size_t)T * Q);
        memcpy(a->kr, a->k, sizeof(float) * (size_t)T * KV);
    }
    k_rope_fwd(m->pool, a->qr, p->pos, m->inv_freq, T, nh, hd);
    k_rope_fwd(m->pool, a->kr, p->pos, m->inv_freq, T, nkv, hd);
    k_attn_dims d = {nh, nkv, hd, m->attn_scale};
    k_attn_fwd(m->pool, a->ao, a->att, a->qr, a->kr, a->v, p->cu, p->n_seqs, p->att_off, d);
    k_linear_fwd(a->mid, a->ao, w->wo, w->bo, T, Q, H, 0.0f);
    k_add(m->pool, a->mid, a->mid, a->res, (size_t)T * H);
    k_rmsnorm_fwd(m->pool, a->ln2, a->rstd2, a->mid, w->ln2, (size_t)T, H, eps);
    if (is_moe(c, l)) {
        moe_fwd(m, w, &a->moe, a->ln2, out, T);
    } else {
        k_linear_fwd(a->g, a->ln2, w->gate, w->gate_b, T, H, I, 0.0f);
        k_linear_fwd(a->u, a->ln2, w->up, w->up_b, T, H, I, 0.0f);
        k_swiglu_fwd(m->pool, a->h, a->g, a->u, (size_t)T * I);
        k_linear_fwd(out, a->h, w->down, w->down_b, T, I, H, 0.0f);
    }
    k_add(m->pool, out, out, a->mid, (size_t)T * H);
}

int areal_model_forward(areal_model *m, const areal_batch *b, areal_acts *a, areal_error *err) {
    memset(a, 0, sizeof *a);
    int rc = areal_batch_check(m, b, err);
    if (rc == AREAL_OK)
        rc = acts_alloc(m, b, a, err);
    if (rc != AREAL_OK)
        return rc;
    const areal_model_config *c = &m->cfg;
    areal_acts_priv *p = a->priv;
    int T = p->T, H = c->hidden_size;
    float *x0 = c->num_layers > 0 ? p->layers[0].res : p->res_out;
    for (int t = 0; t < T; t++)
        memcpy(x0 + (size_t)t * H, m->w.embed + (size_t)p->tokens[t] * H,
               sizeof(float) * (size_t)H);
    for (int l = 0; l < c->num_layers; l++)
        layer_fwd(m, l, p, l + 1 < c->num_layers ? p->layers[l + 1].res : p->res_out);
    k_rmsnorm_fwd(m->pool, p->lnf, p->rstdf, p->res_out, m->w.norm, (size_t)T, H,
                  (float)c->rms_norm_eps);
    k_linear_fwd(a->logits, p->lnf, m->w.lm_head, NULL, T, H, c->vocab_size, 0.0f);
    return AREAL_OK;
}
