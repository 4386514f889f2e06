/*
 * model_bwd.c - the training backward of the CPU reference model: the exact
 * reverse of model_fwd.c, reading only the saved activations, adding every
 * parameter gradient into m->grads (tied embeddings get both the LM head's
 * and the embedding's share because both views point at one buffer).
 *
 * The residual gradient flows in one [T, H] buffer; each layer adds its
 * branch gradients into it. Scratch for the layer's inner gradients is one
 * allocation per call, sized for the widest layer.
 *
 * A shard runs its stage's layers in reverse with its local sizes. The
 * gradients of the column-parallel inputs (the normed input of q/k/v, and of
 * gate/up in a dense layer) are partial over tensor parallelism: the
 * reduction hook runs on them before the norm's backward, the conjugate of
 * the forward's two points. Kernels go through the ops table.
 *
 * The gradient-ready hook, when armed, hears of the buffer's suffix as it
 * completes (the buffer is embed | layers | norm | lm_head, so a backward
 * finishes it from the end): a cursor walks down from n_params and each
 * report is [the next boundary, cursor).
 */
#include <stdlib.h>
#include <string.h>

#include "areal/model/cp_attn.h"
#include "model_internal.h"

typedef struct bwd_scratch {
    float *dln, *dao, *dq, *dk, *dv, *dqr, *dkr, *dh, *dg, *du, *attn;
    float *dfull; /* [T, H] sequence-parallel: the rows' gradient gathered */
} bwd_scratch;

static int reduce_at(const areal_model *m, areal_reduce_point pt, int l, float *buf, size_t n,
                     areal_error *err) {
    /* these points are partial over tp only: complete (no call) when tp is 1 */
    if (m->reduce == NULL || m->shard.tp == 1)
        return AREAL_OK;
    return m->reduce(m->reduce_ctx, pt, l, buf, n, err);
}

static int sp_at(const areal_model *m, areal_sp_op op, int l, float *buf, int T, areal_error *err) {
    if (m->sp == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "layer %d: a sequence-parallel shard needs its hook "
                               "(areal_model_set_sp)",
                               l);
    return m->sp(m->sp_ctx, op, l, buf, T, m->cfg.hidden_size, err);
}

/* The tp reduction of a column-parallel input gradient: all-reduce, or reduce-scatter with sp. */
static int reduce_rows(const areal_model *m, bool sp, areal_reduce_point pt, int l, float *buf,
                       int T, areal_error *err) {
    return sp ? sp_at(m, AREAL_SP_SCATTER, l, buf, T, err)
              : reduce_at(m, pt, l, buf, (size_t)T * m->cfg.hidden_size, err);
}

/* d(rows) -> every row's gradient (sp: dres holds only this rank's rows). */
static int gather_rows(const areal_model *m, bool sp, int l, const float *dres, float *dfull, int T,
                       areal_error *err) {
    if (!sp)
        return AREAL_OK;
    memcpy(dfull, dres, sizeof(float) * (size_t)T * m->cfg.hidden_size);
    return sp_at(m, AREAL_SP_GATHER, l, dfull, T, err);
}

/* Layer l (global; li its index in the stage's records): dres d(out) in, d(res) out. */
static int layer_bwd(const areal_model *m, int l, int li, const areal_acts_priv *p, float *dres,
                     bwd_scratch *s, areal_error *err) {
    const areal_model_config *c = &m->cfg;
    const areal_ops *o = m->ops;
    void *x = m->ops_ctx;
    const areal_layer_w *w = &m->w.layers[l], *g = &m->g.layers[l];
    const layer_acts *a = &p->layers[li];
    int T = p->T, H = c->hidden_size, hd = c->head_dim, nh = m->nh, nkv = m->nkv;
    int Q = nh * hd, KV = nkv * hd, I = m->inter, rc = AREAL_OK;
    size_t tH = (size_t)T * H;
    /* sequence-parallel: dres holds this rank's rows; dfull every row's */
    bool sp = m->shard.tp > 1 && m->shard.sequence_parallel;
    int lo, hi;
    areal_model_sp_rows(&m->shard, T, &lo, &hi);
    size_t r0 = (size_t)lo * H, nr = (size_t)(hi - lo);
    const float *dout = sp ? s->dfull : dres;
    /* MLP branch: dres is d(out) = d(mid) through the residual */
    memset(s->dln, 0, sizeof(float) * tH);
    if ((rc = gather_rows(m, sp, l, dres, s->dfull, T, err)) != AREAL_OK)
        return rc;
    if (c->num_experts > 0 && c->moe_layer[l]) {
        rc = moe_bwd(m, l, w, g, &a->moe, a->ln2, dres, s->dln, T, err);
    } else {
        memset(s->dh, 0, sizeof(float) * (size_t)T * I);
        o->linear_bwd(x, s->dh, g->down, g->down_b, dout, a->h, w->down, T, I, H);
        o->swiglu_bwd(x, s->dg, s->du, s->dh, a->g, a->u, (size_t)T * I);
        o->linear_bwd(x, s->dln, g->gate, g->gate_b, s->dg, a->ln2, w->gate, T, H, I);
        o->linear_bwd(x, s->dln, g->up, g->up_b, s->du, a->ln2, w->up, T, H, I);
        rc = reduce_rows(m, sp, AREAL_REDUCE_MLP_GRAD, l, s->dln, T, err);
    }
    if (rc != AREAL_OK)
        return rc;
    o->rmsnorm_bwd(x, dres + r0, g->ln2, s->dln + r0, a->mid, w->ln2, a->rstd2, nr, H);
    /* attention branch: dres is now d(mid) */
    if ((rc = gather_rows(m, sp, l, dres, s->dfull, T, err)) != AREAL_OK)
        return rc;
    memset(s->dao, 0, sizeof(float) * (size_t)T * Q);
    o->linear_bwd(x, s->dao, g->wo, g->bo, dout, a->ao, w->wo, T, Q, H);
    memset(s->dqr, 0, sizeof(float) * (size_t)T * Q);
    memset(s->dkr, 0, sizeof(float) * (size_t)T * KV);
    memset(s->dv, 0, sizeof(float) * (size_t)T * KV);
    areal_attn_dims d = {nh, nkv, hd, m->attn_scale};
    if (a->cp != NULL && m->cp_attn != NULL) {
        rc = m->cp_attn->bwd(m->cp_attn_ctx, m, l, a->cp, s->dao, s->dqr, s->dkr, s->dv, err);
        if (rc != AREAL_OK)
            return rc;
    } else {
        o->attn_bwd(x, s->dqr, s->dkr, s->dv, s->dao, a->att, a->qr, a->kr, a->v, p->cu, p->n_seqs,
                    p->att_off, d, s->attn);
    }
    o->rope_bwd(x, s->dqr, p->pos, m->inv_freq, T, nh, hd);
    o->rope_bwd(x, s->dkr, p->pos, m->inv_freq, T, nkv, hd);
    float *dq = s->dqr, *dk = s->dkr;
    if (c->qk_norm) {
        memset(s->dq, 0, sizeof(float) * (size_t)T * Q);
        memset(s->dk, 0, sizeof(float) * (size_t)T * KV);
        o->rmsnorm_bwd(x, s->dq, g->q_norm, s->dqr, a->q, w->q_norm, a->rstd_q, (size_t)T * nh, hd);
        o->rmsnorm_bwd(x, s->dk, g->k_norm, s->dkr, a->k, w->k_norm, a->rstd_k, (size_t)T * nkv,
                       hd);
        dq = s->dq;
        dk = s->dk;
    }
    memset(s->dln, 0, sizeof(float) * tH);
    o->linear_bwd(x, s->dln, g->wq, g->bq, dq, a->ln1, w->wq, T, H, Q);
    o->linear_bwd(x, s->dln, g->wk, g->bk, dk, a->ln1, w->wk, T, H, KV);
    o->linear_bwd(x, s->dln, g->wv, g->bv, s->dv, a->ln1, w->wv, T, H, KV);
    if ((rc = reduce_rows(m, sp, AREAL_REDUCE_ATTN_GRAD, l, s->dln, T, err)) != AREAL_OK)
        return rc;
    o->rmsnorm_bwd(x, dres + r0, g->ln1, s->dln + r0, a->res, w->ln1, a->rstd1, nr, H);
    return AREAL_OK;
}

/* Reports [lo, *cur) to an armed gradient-ready hook and moves the cursor down to lo. */
static int ready_to(const areal_model *m, size_t *cur, size_t lo, areal_error *err) {
    if (m->grad_ready == NULL || !m->grad_ready_armed || lo >= *cur)
        return AREAL_OK;
    size_t hi = *cur;
    *cur = lo;
    return m->grad_ready(m->grad_ready_ctx, lo, hi, err);
}

int areal_model_backward(areal_model *m, const areal_acts *a, const float *dlogits,
                         areal_error *err) {
    return areal_model_backward_stage(m, a, dlogits, NULL, err);
}

int areal_model_backward_stage(areal_model *m, const areal_acts *a, const float *d_out,
                               float *dx_in, areal_error *err) {
    const areal_model_config *c = &m->cfg;
    const areal_acts_priv *p = a->priv;
    const areal_model_shard *sh = &m->shard;
    bool first = sh->pp_stage == 0, last = sh->pp_stage == sh->pp - 1;
    if (p == NULL || d_out == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "backward: needs the activations of a successful forward and "
                               "%s",
                               last ? "dlogits" : "the gradient of the stage's hidden output");
    size_t T = (size_t)p->T, H = (size_t)c->hidden_size, Q = (size_t)m->nh * c->head_dim;
    size_t KV = (size_t)m->nkv * c->head_dim, I = (size_t)m->inter;
    size_t maxL = 0;
    for (int s2 = 0; s2 < p->n_seqs; s2++)
        if ((size_t)(p->cu[s2 + 1] - p->cu[s2]) > maxL)
            maxL = (size_t)(p->cu[s2 + 1] - p->cu[s2]);
    bool sp = sh->tp > 1 && sh->sequence_parallel;
    size_t need = T * H * (sp ? 3 : 2) + T * Q * 3 + T * KV * 5 + T * I * 3 + maxL * maxL;
    size_t got;
    float *buf = areal_arena_alloc(sizeof(float) * need, &got);
    if (buf == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1,
                               "no memory for the backward of %zu tokens (try smaller "
                               "micro-batches)",
                               T);
    float *dres = buf, *f = buf + T * H;
    bwd_scratch s;
#define TAKE(n) (f += (n), f - (n))
    s.dln = TAKE(T * H);
    s.dao = TAKE(T * Q);
    s.dq = TAKE(T * Q);
    s.dqr = TAKE(T * Q);
    s.dk = TAKE(T * KV);
    s.dkr = TAKE(T * KV);
    s.dv = TAKE(T * KV);
    s.dh = TAKE(T * I);
    s.dg = TAKE(T * I);
    s.du = TAKE(T * I);
    s.attn = TAKE(maxL * maxL);
    s.dfull = sp ? TAKE(T * H) : NULL;
#undef TAKE
    int v0, nv = areal_model_shard_vocab(c, sh, &v0), rc = AREAL_OK;
    if (last) { /* LM head and final norm */
        memset(s.dln, 0, sizeof(float) * T * H);
        m->ops->linear_bwd(m->ops_ctx, s.dln, m->g.lm_head, NULL, d_out, p->lnf, m->w.lm_head,
                           (int)T, (int)H, nv);
        /* a vocab-parallel head's input gradient covers only its columns */
        if (nv != c->vocab_size)
            rc = reduce_rows(m, sp, AREAL_REDUCE_HEAD_GRAD, -1, s.dln, (int)T, err);
        memset(dres, 0, sizeof(float) * T * H);
        int lo, hi;
        areal_model_sp_rows(sh, (int)T, &lo, &hi);
        size_t r0 = (size_t)lo * H;
        m->ops->rmsnorm_bwd(m->ops_ctx, dres + r0, m->g.norm, s.dln + r0, p->res_out + r0,
                            m->w.norm, p->rstdf + lo, (size_t)(hi - lo), (int)H);
    } else {
        memcpy(dres, d_out, sizeof(float) * T * H);
    }
    size_t cur = m->n_params; /* the gradient-ready cursor: [cur, n_params) reported */
    if (rc == AREAL_OK && last)
        rc = ready_to(m, &cur, (size_t)(m->g.norm - m->grads), err);
    for (int i = sh->n_layers - 1; i >= 0 && rc == AREAL_OK; i--) {
        int l = sh->first_layer + i;
        rc = layer_bwd(m, l, i, p, dres, &s, err);
        if (rc == AREAL_OK) /* input_layernorm is each layer's first tensor */
            rc = ready_to(m, &cur, (size_t)(m->g.layers[l].ln1 - m->grads), err);
    }
    if (rc == AREAL_OK && dx_in != NULL && !first)
        memcpy(dx_in, dres, sizeof(float) * T * H);
    /* sequence-parallel: the embedding's gradient needs every row's */
    if (rc == AREAL_OK && first && sp)
        rc = sp_at(m, AREAL_SP_GATHER, -1, dres, (int)T, err);
    if (rc == AREAL_OK && first)
        for (size_t t = 0; t < T; t++) {
            int row = p->tokens[t] - v0; /* vocab-parallel: only the rows this shard holds */
            if (row < 0 || row >= nv)
                continue;
            float *ge = m->g.embed + (size_t)row * H;
            for (size_t i = 0; i < H; i++)
                ge[i] += dres[t * H + i];
        }
    /* a pipeline's tied embedding is final only once its two copies are summed */
    if (rc == AREAL_OK && first && !(c->tie_word_embeddings && sh->pp > 1))
        rc = ready_to(m, &cur, 0, err);
    areal_arena_free(buf, got);
    return rc;
}
