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
 *
 * A shard runs its own layer range (a pipeline stage: hidden states in and
 * out) with its local heads and columns; after the o_proj and down_proj
 * products it calls the reduction hook (tensor parallelism's all-reduce) and
 * only then adds the row-parallel bias and the residual. Every kernel is
 * called through the model's ops table. With the whole-model shard no hook
 * is set and the bias goes into the product as before, so the arithmetic is
 * unchanged.
 *
 * Sequence parallel keeps only the rank's rows [lo, hi) of the residual
 * stream in the record: each layer's input residual, its post-attention
 * residual and their norms' rstd are [hi - lo] rows (row 0 = row lo; for
 * every other shard lo is 0 and hi is T, so nothing changes), and the
 * row-parallel products, whole before their reduce-scatter, land in one
 * [T, H] scratch shared by the stage's layers (the record's `wide`). The
 * stage's output (res_out) stays [T, H], as the pipeline passes it.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels.h" /* k_attn_offsets: the CPU layout of the saved probabilities */
#include "areal/model/cp_attn.h"
#include "model_internal.h"

static bool is_moe(const areal_model_config *c, int l) {
    return c->num_experts > 0 && c->moe_layer[l];
}

/* The rows of the residual stream this shard keeps: hi - lo of T (T unless sequence-parallel). */
static size_t rows_kept(const areal_model *m, size_t T) {
    int lo, hi;
    areal_model_sp_rows(&m->shard, (int)T, &lo, &hi);
    return (size_t)(hi - lo);
}

/* Floats of one layer's record (att excluded), with the shard's local sizes. */
static size_t layer_floats(const areal_model *m, int l, size_t T) {
    const areal_model_config *c = &m->cfg;
    size_t H = (size_t)c->hidden_size, Q = (size_t)m->nh * c->head_dim;
    size_t KV = (size_t)m->nkv * c->head_dim, I = (size_t)m->inter, R = rows_kept(m, T);
    /* res and mid, rstd1 and rstd2: R rows; ln1 and ln2 whole (the gathered inputs) */
    size_t n =
        R * H * 2 + T * H * 2 + R * 2 + T * Q * 3 + T * KV * 4 + T * (size_t)(m->nh + m->nkv);
    return n + (is_moe(c, l) ? moe_acts_floats(c, (int)T) : 3 * T * I);
}

static void bind_layer(const areal_model *m, int l, size_t T, layer_acts *a, float *p, float *att) {
    const areal_model_config *c = &m->cfg;
    size_t H = (size_t)c->hidden_size, Q = (size_t)m->nh * c->head_dim;
    size_t KV = (size_t)m->nkv * c->head_dim, I = (size_t)m->inter, R = rows_kept(m, T);
#define TAKE(n) (p += (n), p - (n))
    a->res = TAKE(R * H);
    a->ln1 = TAKE(T * H);
    a->rstd1 = TAKE(R);
    a->q = TAKE(T * Q);
    a->k = TAKE(T * KV);
    a->v = TAKE(T * KV);
    a->rstd_q = TAKE(T * (size_t)m->nh);
    a->rstd_k = TAKE(T * (size_t)m->nkv);
    a->qr = TAKE(T * Q);
    a->kr = TAKE(T * KV);
    a->ao = TAKE(T * Q);
    a->mid = TAKE(R * H);
    a->ln2 = TAKE(T * H);
    a->rstd2 = TAKE(R);
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

size_t areal_acts_floats(const areal_acts *a) {
    return a->priv != NULL ? a->priv->arena_floats : 0;
}

void areal_acts_free(areal_acts *a) {
    if (a->priv != NULL) {
        for (int i = 0; a->priv->layers != NULL && i < a->priv->n_layers; i++) {
            if (a->priv->layers[i].moe.disp_free != NULL)
                a->priv->layers[i].moe.disp_free(a->priv->layers[i].moe.disp);
            if (a->priv->layers[i].cp_free != NULL)
                a->priv->layers[i].cp_free(a->priv->layers[i].cp);
        }
        free(a->priv->tokens);
        free(a->priv->att_off);
        free(a->priv->layers);
        areal_arena_free(a->priv->arena, a->priv->arena_bytes);
        free(a->priv);
    }
    memset(a, 0, sizeof *a);
}

static int acts_alloc(const areal_model *m, const areal_batch *b, areal_acts *a, areal_error *err) {
    const areal_model_config *c = &m->cfg;
    size_t T = (size_t)b->n_tokens, H = (size_t)c->hidden_size;
    size_t V = (size_t)areal_model_shard_vocab(c, &m->shard, NULL); /* local columns */
    int first = m->shard.first_layer, n = m->shard.n_layers;
    bool last = m->shard.pp_stage == m->shard.pp - 1;
    areal_acts_priv *p = calloc(1, sizeof *p);
    a->priv = p;
    if (p == NULL)
        goto oom;
    p->T = b->n_tokens;
    p->n_seqs = b->n_seqs;
    p->tokens = malloc(sizeof(int32_t) * (3 * T + (size_t)b->n_seqs + 1));
    p->att_off = malloc(sizeof(size_t) * ((size_t)b->n_seqs + 1));
    p->layers = calloc(n > 0 ? (size_t)n : 1, sizeof *p->layers);
    p->n_layers = p->layers != NULL ? n : 0;
    if (p->tokens == NULL || p->att_off == NULL || p->layers == NULL)
        goto oom;
    p->pos = p->tokens + T;
    p->cu = p->pos + T;
    memcpy(p->tokens, b->tokens, sizeof(int32_t) * T);
    memcpy(p->cu, b->cu_seqlens, sizeof(int32_t) * ((size_t)b->n_seqs + 1));
    for (int s = 0; s < b->n_seqs; s++)
        for (int t = p->cu[s]; t < p->cu[s + 1]; t++)
            p->pos[t] = t - p->cu[s];
    const areal_cp_tokens *cpt =
        m->cp_attn != NULL ? m->cp_attn->tokens_of(m->cp_attn_ctx, b) : NULL;
    if (cpt != NULL) { /* a context-parallel shard: the positions are the sequences' own */
        p->gidx = p->cu + b->n_seqs + 1;
        memcpy(p->pos, cpt->pos, sizeof(int32_t) * T);
        memcpy(p->gidx, cpt->gidx, sizeof(int32_t) * T);
    }
    p->att_total = k_attn_offsets(p->att_off, p->cu, b->n_seqs, m->nh);
    bool sp = m->shard.sequence_parallel && m->shard.tp > 1;
    size_t total = T * H + (last ? T * H + T + T * V : 0) + (sp ? T * H : 0);
    for (int i = 0; i < n; i++)
        total += layer_floats(m, first + i, T) + p->att_total;
    p->arena = areal_arena_alloc(sizeof(float) * total, &p->arena_bytes);
    p->arena_floats = total;
    if (p->arena == NULL)
        goto oom;
    float *f = p->arena;
    for (int i = 0; i < n; i++) {
        size_t lf = layer_floats(m, first + i, T);
        bind_layer(m, first + i, T, &p->layers[i], f, f + lf);
        f += lf + p->att_total;
    }
    p->res_out = f;
    if (last) {
        p->lnf = f + T * H;
        p->rstdf = f + 2 * T * H;
        a->logits = f + 2 * T * H + T;
        a->V = (int)V;
        f += 2 * T * H + T + T * V;
    } else {
        a->hidden = p->res_out;
        f += T * H;
    }
    p->wide = sp ? f : NULL;
    a->T = b->n_tokens;
    return AREAL_OK;
oom:
    areal_acts_free(a);
    return areal_error_set(
        err, AREAL_ENOMEM, -1,
        "no memory for the activations of %zu tokens (try smaller micro-batches)", T);
}

/* The reduction hook at point pt of layer l, when one is set. */
static int reduce_at(const areal_model *m, areal_reduce_point pt, int l, float *buf, size_t n,
                     areal_error *err) {
    /* these points are partial over tp only: complete (no call) when tp is 1 */
    if (m->reduce == NULL || m->shard.tp == 1)
        return AREAL_OK;
    return m->reduce(m->reduce_ctx, pt, l, buf, n, err);
}

/* The sequence-parallel exchange op of buf [T, H] (sequence-parallel shards only). */
static int sp_at(const areal_model *m, areal_sp_op op, int l, float *buf, int T, areal_error *err) {
    if (m->sp == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "layer %d: a sequence-parallel shard needs its hook "
                               "(areal_model_set_sp)",
                               l);
    return m->sp(m->sp_ctx, op, l, buf, T, m->cfg.hidden_size, err);
}

/* The tp reduction of a row-parallel product: an all-reduce, or a reduce-scatter with sp. */
static int reduce_rows(const areal_model *m, bool sp, areal_reduce_point pt, int l, float *buf,
                       int T, areal_error *err) {
    return sp ? sp_at(m, AREAL_SP_SCATTER, l, buf, T, err)
              : reduce_at(m, pt, l, buf, (size_t)T * m->cfg.hidden_size, err);
}

/* y[T, H] += b per row: a row-parallel bias, added once after the reduction. */
static void add_bias(float *y, const float *b, int T, int H) {
    for (int t = 0; b != NULL && t < T; t++)
        for (int i = 0; i < H; i++)
            y[(size_t)t * H + i] += b[i];
}

/*
 * Layer l (global number; li its index in the stage's records) from a->res
 * into dst: the next layer's input rows (its res) or the stage output's.
 */
static int layer_fwd(const areal_model *m, int l, int li, areal_acts_priv *p, float *dst,
                     areal_error *err) {
    const areal_model_config *c = &m->cfg;
    const areal_ops *o = m->ops;
    void *x = m->ops_ctx;
    const areal_layer_w *w = &m->w.layers[l];
    layer_acts *a = &p->layers[li];
    int T = p->T, H = c->hidden_size, hd = c->head_dim, nh = m->nh, nkv = m->nkv;
    int Q = nh * hd, KV = nkv * hd, I = m->inter;
    bool split = m->shard.tp > 1; /* row-parallel biases wait for the reduction */
    bool sp = split && m->shard.sequence_parallel;
    int lo, hi, rc = AREAL_OK;
    areal_model_sp_rows(&m->shard, T, &lo, &hi); /* the rows of the norms and residuals */
    size_t r0 = (size_t)lo * H, nr = (size_t)(hi - lo);
    float eps = (float)c->rms_norm_eps;
    /* the row-parallel products, whole: into the rows' own buffers unless sequence-parallel */
    float *wmid = sp ? p->wide : a->mid, *wout = sp ? p->wide : dst;
    o->rmsnorm_fwd(x, a->ln1 + r0, a->rstd1, a->res, w->ln1, nr, H, eps);
    if (sp && (rc = sp_at(m, AREAL_SP_GATHER, l, a->ln1, T, err)) != AREAL_OK)
        return rc;
    o->linear_fwd(x, a->q, a->ln1, w->wq, w->bq, T, H, Q, 0.0f);
    o->linear_fwd(x, a->k, a->ln1, w->wk, w->bk, T, H, KV, 0.0f);
    o->linear_fwd(x, a->v, a->ln1, w->wv, w->bv, T, H, KV, 0.0f);
    if (c->qk_norm) {
        o->rmsnorm_fwd(x, a->qr, a->rstd_q, a->q, w->q_norm, (size_t)T * nh, hd, eps);
        o->rmsnorm_fwd(x, a->kr, a->rstd_k, a->k, w->k_norm, (size_t)T * nkv, hd, eps);
    } else {
        memcpy(a->qr, a->q, sizeof(float) * (size_t)T * Q);
        memcpy(a->kr, a->k, sizeof(float) * (size_t)T * KV);
    }
    o->rope_fwd(x, a->qr, p->pos, m->inv_freq, T, nh, hd);
    o->rope_fwd(x, a->kr, p->pos, m->inv_freq, T, nkv, hd);
    areal_attn_dims d = {nh, nkv, hd, m->attn_scale};
    if (m->cp_attn != NULL && p->gidx != NULL) {
        int rc0 = m->cp_attn->fwd(m->cp_attn_ctx, m, l, T, p->pos, p->gidx, a->qr, a->kr, a->v,
                                  a->ao, &a->cp, err);
        a->cp_free = m->cp_attn->saved_free;
        if (rc0 != AREAL_OK)
            return rc0;
    } else {
        o->attn_fwd(x, a->ao, a->att, a->qr, a->kr, a->v, p->cu, p->n_seqs, p->att_off, d);
    }
    o->linear_fwd(x, wmid, a->ao, w->wo, split ? NULL : w->bo, T, Q, H, 0.0f);
    if ((rc = reduce_rows(m, sp, AREAL_REDUCE_ATTN_OUT, l, wmid, T, err)) != AREAL_OK)
        return rc;
    if (split)
        add_bias(wmid + r0, w->bo, (int)nr, H);
    o->add(x, a->mid, wmid + r0, a->res, nr * H);
    o->rmsnorm_fwd(x, a->ln2 + r0, a->rstd2, a->mid, w->ln2, nr, H, eps);
    if (sp && (rc = sp_at(m, AREAL_SP_GATHER, l, a->ln2, T, err)) != AREAL_OK)
        return rc;
    if (is_moe(c, l)) {
        /* replicated over tp; split by experts over ep (reduced inside) */
        if ((rc = moe_fwd_reduced(m, l, w, &a->moe, a->ln2, wout, T, err)) != AREAL_OK)
            return rc;
    } else {
        o->linear_fwd(x, a->g, a->ln2, w->gate, w->gate_b, T, H, I, 0.0f);
        o->linear_fwd(x, a->u, a->ln2, w->up, w->up_b, T, H, I, 0.0f);
        o->swiglu_fwd(x, a->h, a->g, a->u, (size_t)T * I);
        o->linear_fwd(x, wout, a->h, w->down, split ? NULL : w->down_b, T, I, H, 0.0f);
        if ((rc = reduce_rows(m, sp, AREAL_REDUCE_MLP_OUT, l, wout, T, err)) != AREAL_OK)
            return rc;
        if (split)
            add_bias(wout + r0, w->down_b, (int)nr, H);
    }
    o->add(x, dst, wout + r0, a->mid, nr * H);
    return AREAL_OK;
}

int areal_model_forward(areal_model *m, const areal_batch *b, areal_acts *a, areal_error *err) {
    return areal_model_forward_stage(m, b, NULL, a, err);
}

int areal_model_forward_stage(areal_model *m, const areal_batch *b, const float *x_in,
                              areal_acts *a, areal_error *err) {
    memset(a, 0, sizeof *a);
    const areal_model_shard *sh = &m->shard;
    bool first = sh->pp_stage == 0, last = sh->pp_stage == sh->pp - 1;
    if (first != (x_in == NULL))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "forward: stage %d of %d %s; pass the previous stage's hidden "
                               "states exactly on every stage but the first",
                               sh->pp_stage, sh->pp,
                               first ? "embeds the tokens itself but got x_in" : "needs x_in");
    int rc = areal_batch_check(m, b, err);
    if (rc == AREAL_OK)
        rc = acts_alloc(m, b, a, err);
    if (rc != AREAL_OK)
        return rc;
    const areal_model_config *c = &m->cfg;
    areal_acts_priv *p = a->priv;
    int T = p->T, H = c->hidden_size, n = sh->n_layers, lo, hi;
    bool sp = sh->sequence_parallel && sh->tp > 1;
    areal_model_sp_rows(sh, T, &lo, &hi);
    size_t r0 = (size_t)lo * H, nr = (size_t)(hi - lo);
    /* layer 0's input rows; the embedding of all T rows first where a reduction needs them */
    float *x0 = n > 0 ? p->layers[0].res : p->res_out + r0;
    int v0, nv = areal_model_shard_vocab(c, sh, &v0);
    if (first) {
        bool whole = sp && nv != c->vocab_size; /* reduce-scattered: every row, then ours */
        float *e = whole ? p->wide : x0;
        int t0 = whole ? 0 : lo, t1 = whole ? T : hi;
        /* a vocab-parallel shard holds rows [v0, v0 + nv); the others' rows are zeros */
        for (int t = t0; t < t1; t++) {
            int row = p->tokens[t] - v0;
            float *dst = e + (size_t)(t - t0) * H;
            if (row >= 0 && row < nv)
                memcpy(dst, m->w.embed + (size_t)row * H, sizeof(float) * (size_t)H);
            else
                memset(dst, 0, sizeof(float) * (size_t)H);
        }
        if (nv != c->vocab_size)
            rc = reduce_rows(m, sp, AREAL_REDUCE_EMBED_OUT, -1, e, T, err);
        if (rc == AREAL_OK && whole)
            memcpy(x0, p->wide + r0, sizeof(float) * nr * H);
    } else {
        memcpy(x0, x_in + r0, sizeof(float) * nr * H);
    }
    for (int i = 0; i < n && rc == AREAL_OK; i++)
        rc = layer_fwd(m, sh->first_layer + i, i, p,
                       i + 1 < n ? p->layers[i + 1].res : p->res_out + r0, err);
    if (rc != AREAL_OK) {
        areal_acts_free(a);
        return rc;
    }
    if (last) {
        m->ops->rmsnorm_fwd(m->ops_ctx, p->lnf + r0, p->rstdf + lo, p->res_out + r0, m->w.norm,
                            (size_t)(hi - lo), H, (float)c->rms_norm_eps);
        if (sh->sequence_parallel && sh->tp > 1 &&
            (rc = sp_at(m, AREAL_SP_GATHER, -1, p->lnf, T, err)) != AREAL_OK) {
            areal_acts_free(a);
            return rc;
        }
        m->ops->linear_fwd(m->ops_ctx, a->logits, p->lnf, m->w.lm_head, NULL, T, H, nv, 0.0f);
    }
    return AREAL_OK;
}
