/*
 * model_bwd.c - the training backward of the CPU reference model: the exact
 * reverse of model_fwd.c, reading only the saved activations, adding every
 * parameter gradient into m->grads (tied embeddings get both the LM head's
 * and the embedding's share because both views point at one buffer).
 *
 * The residual gradient flows in one [T, H] buffer; each layer adds its
 * branch gradients into it. Scratch for the layer's inner gradients is one
 * allocation per call, sized for the widest layer.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "model_internal.h"

typedef struct bwd_scratch {
    float *dln, *dao, *dq, *dk, *dv, *dqr, *dkr, *dh, *dg, *du, *attn;
} bwd_scratch;

static void layer_bwd(const areal_model *m, int l, const areal_acts_priv *p, float *dres,
                      bwd_scratch *s, int *rc, areal_error *err) {
    const areal_model_config *c = &m->cfg;
    const areal_layer_w *w = &m->w.layers[l], *g = &m->g.layers[l];
    const layer_acts *a = &p->layers[l];
    int T = p->T, H = c->hidden_size, hd = c->head_dim, nh = c->num_heads, nkv = c->num_kv_heads;
    int Q = nh * hd, KV = nkv * hd, I = c->intermediate_size;
    size_t tH = (size_t)T * H;
    /* MLP branch: dres is d(out) = d(mid) through the residual */
    memset(s->dln, 0, sizeof(float) * tH);
    if (c->num_experts > 0 && c->moe_layer[l]) {
        int r = moe_bwd(m, w, g, &a->moe, a->ln2, dres, s->dln, T, err);
        if (r != AREAL_OK)
            *rc = r;
    } else {
        memset(s->dh, 0, sizeof(float) * (size_t)T * I);
        k_linear_bwd(s->dh, g->down, g->down_b, dres, a->h, w->down, T, I, H);
        k_swiglu_bwd(m->pool, s->dg, s->du, s->dh, a->g, a->u, (size_t)T * I);
        k_linear_bwd(s->dln, g->gate, g->gate_b, s->dg, a->ln2, w->gate, T, H, I);
        k_linear_bwd(s->dln, g->up, g->up_b, s->du, a->ln2, w->up, T, H, I);
    }
    k_rmsnorm_bwd(m->pool, dres, g->ln2, s->dln, a->mid, w->ln2, a->rstd2, (size_t)T, H);
    /* attention branch: dres is now d(mid) */
    memset(s->dao, 0, sizeof(float) * (size_t)T * Q);
    k_linear_bwd(s->dao, g->wo, g->bo, dres, a->ao, w->wo, T, Q, H);
    memset(s->dqr, 0, sizeof(float) * (size_t)T * Q);
    memset(s->dkr, 0, sizeof(float) * (size_t)T * KV);
    memset(s->dv, 0, sizeof(float) * (size_t)T * KV);
    k_attn_dims d = {nh, nkv, hd, m->attn_scale};
    k_attn_bwd(m->pool, s->dqr, s->dkr, s->dv, s->dao, a->att, a->qr, a->kr, a->v, p->cu, p->n_seqs,
               p->att_off, d, s->attn);
    k_rope_bwd(m->pool, s->dqr, p->pos, m->inv_freq, T, nh, hd);
    k_rope_bwd(m->pool, s->dkr, p->pos, m->inv_freq, T, nkv, hd);
    float *dq = s->dqr, *dk = s->dkr;
    if (c->qk_norm) {
        memset(s->dq, 0, sizeof(float) * (size_t)T * Q);
        memset(s->dk, 0, sizeof(float) * (size_t)T * KV);
        k_rmsnorm_bwd(m->pool, s->dq, g->q_norm, s->dqr, a->q, w->q_norm, a->rstd_q, (size_t)T * nh,
                      hd);
        k_rmsnorm_bwd(m->pool, s->dk, g->k_norm, s->dkr, a->k, w->k_norm, a->rstd_k,
                      (size_t)T * nkv, hd);
        dq = s->dq;
        dk = s->dk;
    }
    memset(s->dln, 0, sizeof(float) * tH);
    k_linear_bwd(s->dln, g->wq, g->bq, dq, a->ln1, w->wq, T, H, Q);
    k_linear_bwd(s->dln, g->wk, g->bk, dk, a->ln1, w->wk, T, H, KV);
    k_linear_bwd(s->dln, g->wv, g->bv, s->dv, a->ln1, w->wv, T, H, KV);
    k_rmsnorm_bwd(m->pool, dres, g->ln1, s->dln, a->res, w->ln1, a->rstd1, (size_t)T, H);
}

int areal_model_backward(areal_model *m, const areal_acts *a, const float *dlogits,
                         areal_error *err) {
    const areal_model_config *c = &m->cfg;
    const areal_acts_priv *p = a->priv;
    if (p == NULL || dlogits == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "backward: needs the activations of a successful forward and "
                               "dlogits");
    size_t T = (size_t)p->T, H = (size_t)c->hidden_size, Q = (size_t)c->num_heads * c->head_dim;
    size_t KV = (size_t)c->num_kv_heads * c->head_dim, I = (size_t)c->intermediate_size;
    size_t maxL = 0;
    for (int s2 = 0; s2 < p->n_seqs; s2++)
        if ((size_t)(p->cu[s2 + 1] - p->cu[s2]) > maxL)
            maxL = (size_t)(p->cu[s2 + 1] - p->cu[s2]);
    size_t need = T * H * 2 + T * Q * 3 + T * KV * 5 + T * I * 3 + maxL * maxL;
    float *buf = malloc(sizeof(float) * need);
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
#undef TAKE
    /* LM head and final norm */
    memset(s.dln, 0, sizeof(float) * T * H);
    k_linear_bwd(s.dln, m->g.lm_head, NULL, dlogits, p->lnf, m->w.lm_head, (int)T, (int)H,
                 c->vocab_size);
    memset(dres, 0, sizeof(float) * T * H);
    k_rmsnorm_bwd(m->pool, dres, m->g.norm, s.dln, p->res_out, m->w.norm, p->rstdf, T, (int)H);
    int rc = AREAL_OK;
    for (int l = c->num_layers - 1; l >= 0 && rc == AREAL_OK; l--)
        layer_bwd(m, l, p, dres, &s, &rc, err);
    if (rc == AREAL_OK)
        for (size_t t = 0; t < T; t++) {
            float *ge = m->g.embed + (size_t)p->tokens[t] * H;
            for (size_t i = 0; i < H; i++)
                ge[i] += dres[t * H + i];
        }
    free(buf);
    return rc;
}
