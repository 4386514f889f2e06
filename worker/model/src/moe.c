/*
 * moe.c - the sparse mixture-of-experts MLP of Qwen3-MoE and Qwen2-MoE,
 * forward and backward.
 *
 * Routing as transformers computes it: router logits x W_r^T, softmax over
 * all experts in fp32, top-k of the probabilities, and (norm_topk_prob) the k
 * weights divided by their sum. The T*K (token, expert) pairs are sorted by
 * expert with a counting sort into "slots", the inputs gathered, and each
 * expert runs as a dense SwiGLU MLP on its contiguous rows with BLAS. The
 * output of token t is the weighted sum of its k slot outputs, plus the
 * shared expert scaled by sigmoid(x . w_gate) where configured (Qwen2-MoE).
 * Capacity limits and token dropping were rejected: HF drops nothing.
 * Kernels go through the model's ops table (areal/model/ops.h).
 *
 * Expert parallelism: a shard runs only its experts (the router and the
 * top-k stay whole, so every shard routes alike); the routed sum is then
 * partial over the ep group and the reduction hook runs on it before the
 * whole shared expert is added; the backward mirrors that on the block's
 * input gradient. The router's gradient is then partial too
 * (areal_model_shard_grad_partial).
 *
 * With a token dispatcher bound (areal/model/moe_dispatch.h, the shard's
 * ep_a2a) the ep ranks hold different tokens: the expert loop is the
 * dispatcher's (all-to-all to the experts' ranks, areal_moe_experts_* there,
 * back), every slot's output comes back complete, and the combine, the
 * shared expert and the router's backward run here as for one process; no
 * reduction hook is called.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/moe_dispatch.h"
#include "model_internal.h"

size_t moe_acts_floats(const areal_model_config *c, int T) {
    if (c->num_experts == 0)
        return 0;
    size_t E = (size_t)c->num_experts, K = (size_t)c->num_experts_per_tok, t = (size_t)T;
    size_t H = (size_t)c->hidden_size, I = (size_t)c->moe_intermediate_size;
    size_t Is = (size_t)c->shared_expert_intermediate_size;
    return t * E + 4 * t * K + E + 1 + t * K * (2 * H + 3 * I) + t * (3 * Is + H + 1);
}

void moe_acts_bind(moe_acts *a, const areal_model_config *c, int T, float *base) {
    size_t E = (size_t)c->num_experts, K = (size_t)c->num_experts_per_tok, t = (size_t)T;
    size_t H = (size_t)c->hidden_size, I = (size_t)c->moe_intermediate_size;
    size_t Is = (size_t)c->shared_expert_intermediate_size;
    float *p = base;
#define TAKE(n) (p += (n), p - (n))
    a->probs = TAKE(t * E);
    a->topk = (int32_t *)TAKE(t * K);
    a->topk_w = TAKE(t * K);
    a->slot_tok = (int32_t *)TAKE(t * K);
    a->slot_of = (int32_t *)TAKE(t * K);
    a->off = (int32_t *)TAKE(E + 1);
    a->xg = TAKE(t * K * H);
    a->g = TAKE(t * K * I);
    a->u = TAKE(t * K * I);
    a->h = TAKE(t * K * I);
    a->y = TAKE(t * K * H);
    a->sg = TAKE(t * Is);
    a->su = TAKE(t * Is);
    a->sh = TAKE(t * Is);
    a->sy = TAKE(t * H);
    a->sgl = TAKE(t);
#undef TAKE
}

/* Softmax over E in place, then top-k (ties: lower index) and weights. */
static void route(const areal_model_config *c, moe_acts *a, int T) {
    int E = c->num_experts, K = c->num_experts_per_tok;
    for (int t = 0; t < T; t++) {
        float *p = a->probs + (size_t)t * E;
        float mx = p[0], sum = 0;
        for (int e = 1; e < E; e++)
            mx = p[e] > mx ? p[e] : mx;
        for (int e = 0; e < E; e++)
            sum += (p[e] = expf(p[e] - mx));
        for (int e = 0; e < E; e++)
            p[e] /= sum;
        int32_t *tk = a->topk + (size_t)t * K;
        float *tw = a->topk_w + (size_t)t * K, wsum = 0;
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int used = 0;
                for (int j = 0; j < k; j++)
                    used |= tk[j] == e;
                if (!used && (best < 0 || p[e] > p[best]))
                    best = e;
            }
            tk[k] = best;
            tw[k] = p[best];
            wsum += p[best];
        }
        if (c->norm_topk_prob)
            for (int k = 0; k < K; k++)
                tw[k] /= wsum;
    }
}

/* Counting sort of the T*K pairs by expert into slots. */
static void assign_slots(const areal_model_config *c, moe_acts *a, int T) {
    int E = c->num_experts, K = c->num_experts_per_tok;
    memset(a->off, 0, sizeof(int32_t) * (size_t)(E + 1));
    for (int i = 0; i < T * K; i++)
        a->off[a->topk[i] + 1]++;
    for (int e = 0; e < E; e++)
        a->off[e + 1] += a->off[e];
    /* stable: within an expert, slots keep token order */
    for (int i = 0; i < T * K; i++) {
        int32_t s = a->off[a->topk[i]]++;
        a->slot_tok[s] = i / K;
        a->slot_of[i] = s;
    }
    for (int e = E; e > 0; e--) /* the cursors ended at the next expert's start */
        a->off[e] = a->off[e - 1];
    a->off[0] = 0;
}

/* This shard's experts [*e0, *e0 + *ne) (expert parallelism; all of them for the whole model). */
static void local_experts(const areal_model *m, int *e0, int *ne) {
    *ne = m->cfg.num_experts / m->shard.ep;
    *e0 = m->shard.ep_rank * *ne;
}

void areal_moe_local(const areal_model *m, int *e0, int *ne, int *inter) {
    local_experts(m, e0, ne);
    *inter = m->cfg.moe_intermediate_size / areal_model_shard_etp(&m->shard);
}

void areal_model_set_moe_dispatch(areal_model *m, const areal_moe_dispatch *d, void *ctx) {
    m->moe_dispatch = d;
    m->moe_dispatch_ctx = d != NULL ? ctx : NULL;
}

/* Local expert j's gate, up and down weights (or their gradients, from base gw->experts). */
static void expert_w(const areal_model *m, const float *base, size_t stride, int j, int inter,
                     const float **wg, const float **wu, const float **wd) {
    *wg = base + (size_t)j * stride;
    *wu = *wg + (size_t)inter * m->cfg.hidden_size;
    *wd = *wu + (size_t)inter * m->cfg.hidden_size;
}

void areal_moe_experts_fwd(const areal_model *m, int layer, const float *x, const int *counts,
                           float *g, float *u, float *h, float *y) {
    const areal_layer_w *w = &m->w.layers[layer];
    int e0, ne, I, H = m->cfg.hidden_size;
    areal_moe_local(m, &e0, &ne, &I);
    size_t r = 0;
    for (int j = 0; j < ne; r += (size_t)counts[j], j++) {
        int n = counts[j];
        if (n == 0)
            continue; /* an empty expert on this rank: nothing to run */
        const float *wg, *wu, *wd;
        expert_w(m, w->experts, w->expert_stride, j, I, &wg, &wu, &wd);
        m->ops->linear_fwd(m->ops_ctx, g + r * I, x + r * H, wg, NULL, n, H, I, 0.0f);
        m->ops->linear_fwd(m->ops_ctx, u + r * I, x + r * H, wu, NULL, n, H, I, 0.0f);
        m->ops->swiglu_fwd(m->ops_ctx, h + r * I, g + r * I, u + r * I, (size_t)n * I);
        m->ops->linear_fwd(m->ops_ctx, y + r * H, h + r * I, wd, NULL, n, I, H, 0.0f);
    }
}

/* out [T, H] = each token's slot outputs weighted by the router. */
static void combine(const areal_model_config *c, const moe_acts *a, float *out, int T) {
    int K = c->num_experts_per_tok, H = c->hidden_size;
    for (int t = 0; t < T; t++) {
        float *o = out + (size_t)t * H;
        memset(o, 0, sizeof(float) * (size_t)H);
        for (int k = 0; k < K; k++) {
            float wk = a->topk_w[(size_t)t * K + k];
            const float *y = a->y + (size_t)a->slot_of[(size_t)t * K + k] * H;
            for (int i = 0; i < H; i++)
                o[i] += wk * y[i];
        }
    }
}

/*
 * out [T, H] = the routed experts' weighted sum (this shard's experts only: a
 * partial sum; complete with a dispatcher, whose error it returns).
 */
static int routed_fwd(const areal_model *m, int l, const areal_layer_w *w, moe_acts *a,
                      const float *x, float *out, int T, areal_error *err) {
    const areal_model_config *c = &m->cfg;
    int E = c->num_experts, K = c->num_experts_per_tok, H = c->hidden_size;
    int I = c->moe_intermediate_size, e0, ne;
    local_experts(m, &e0, &ne);
    m->ops->linear_fwd(m->ops_ctx, a->probs, x, w->router, NULL, T, H, E, 0.0f);
    route(c, a, T);
    assign_slots(c, a, T);
    for (int s = 0; s < T * K; s++)
        memcpy(a->xg + (size_t)s * H, x + (size_t)a->slot_tok[s] * H, sizeof(float) * (size_t)H);
    if (m->moe_dispatch != NULL) {
        int rc = m->moe_dispatch->fwd(m->moe_dispatch_ctx, m, l, T, a->slot_tok, a->off, a->xg,
                                      a->y, &a->disp, err);
        a->disp_free = m->moe_dispatch->saved_free;
        if (rc != AREAL_OK)
            return rc;
        combine(c, a, out, T);
        return AREAL_OK;
    }
    if (ne < E) { /* slots of other shards' experts contribute nothing here */
        memset(a->y, 0, sizeof(float) * (size_t)a->off[e0] * H);
        memset(a->y + (size_t)a->off[e0 + ne] * H, 0,
               sizeof(float) * (size_t)(T * K - a->off[e0 + ne]) * H);
    }
    for (int e = e0; e < e0 + ne; e++) {
        int b = a->off[e], n = a->off[e + 1] - b;
        if (n == 0)
            continue;
        const float *wg = w->experts + (size_t)(e - e0) * w->expert_stride;
        const float *wu = wg + (size_t)I * H, *wd = wu + (size_t)I * H;
        size_t r = (size_t)b;
        m->ops->linear_fwd(m->ops_ctx, a->g + r * I, a->xg + r * H, wg, NULL, n, H, I, 0.0f);
        m->ops->linear_fwd(m->ops_ctx, a->u + r * I, a->xg + r * H, wu, NULL, n, H, I, 0.0f);
        m->ops->swiglu_fwd(m->ops_ctx, a->h + r * I, a->g + r * I, a->u + r * I, (size_t)n * I);
        m->ops->linear_fwd(m->ops_ctx, a->y + r * H, a->h + r * I, wd, NULL, n, I, H, 0.0f);
    }
    combine(c, a, out, T);
    return AREAL_OK;
}

/* out [T, H] += the shared expert scaled by its sigmoid gate (whole on every shard). */
static void shared_fwd(const areal_model *m, const areal_layer_w *w, moe_acts *a, const float *x,
                       float *out, int T) {
    const areal_model_config *c = &m->cfg;
    int H = c->hidden_size, Is = c->shared_expert_intermediate_size;
    if (Is <= 0)
        return;
    m->ops->linear_fwd(m->ops_ctx, a->sg, x, w->sh_gate, NULL, T, H, Is, 0.0f);
    m->ops->linear_fwd(m->ops_ctx, a->su, x, w->sh_up, NULL, T, H, Is, 0.0f);
    m->ops->swiglu_fwd(m->ops_ctx, a->sh, a->sg, a->su, (size_t)T * Is);
    m->ops->linear_fwd(m->ops_ctx, a->sy, a->sh, w->sh_down, NULL, T, Is, H, 0.0f);
    m->ops->linear_fwd(m->ops_ctx, a->sgl, x, w->sh_gate_w, NULL, T, H, 1, 0.0f);
    for (int t = 0; t < T; t++) {
        float sig = 1.0f / (1.0f + expf(-a->sgl[t]));
        for (int i = 0; i < H; i++)
            out[(size_t)t * H + i] += sig * a->sy[(size_t)t * H + i];
    }
}

void moe_fwd(const areal_model *m, const areal_layer_w *w, moe_acts *a, const float *x, float *out,
             int T) {
    /* the whole model: no dispatcher, no error */
    (void)routed_fwd(m, -1, w, a, x, out, T, NULL);
    shared_fwd(m, w, a, x, out, T);
}

int moe_fwd_reduced(const areal_model *m, int l, const areal_layer_w *w, moe_acts *a,
                    const float *x, float *out, int T, areal_error *err) {
    int rc0 = routed_fwd(m, l, w, a, x, out, T, err);
    if (rc0 != AREAL_OK)
        return rc0;
    if (m->reduce != NULL && m->shard.ep > 1 && m->moe_dispatch == NULL) {
        int rc = m->reduce(m->reduce_ctx, AREAL_REDUCE_MOE_OUT, l, out,
                           (size_t)T * m->cfg.hidden_size, err);
        if (rc != AREAL_OK)
            return rc;
    }
    shared_fwd(m, w, a, x, out, T);
    return AREAL_OK;
}

/* Backward of the dense SwiGLU MLP on n rows: dx (writes or adds per beta_dx). */
static void mlp_bwd(const areal_model *m, float *dx, const float *x, const float *g, const float *u,
                    const float *h, const float *dy, const float *wg, const float *wu,
                    const float *wd, float *dwg, float *dwu, float *dwd, float *dh, float *dg,
                    float *du, int n, int H, int I) {
    memset(dh, 0, sizeof(float) * (size_t)n * I);
    m->ops->linear_bwd(m->ops_ctx, dh, dwd, NULL, dy, h, wd, n, I, H);
    m->ops->swiglu_bwd(m->ops_ctx, dg, du, dh, g, u, (size_t)n * I);
    m->ops->linear_bwd(m->ops_ctx, dx, dwg, NULL, dg, x, wg, n, H, I);
    m->ops->linear_bwd(m->ops_ctx, dx, dwu, NULL, du, x, wu, n, H, I);
}

int moe_bwd(const areal_model *m, int l, const areal_layer_w *w, const areal_layer_w *gw,
            const moe_acts *a, const float *x, const float *dout, float *dx, int T,
            areal_error *err) {
    const areal_model_config *c = &m->cfg;
    int E = c->num_experts, K = c->num_experts_per_tok, H = c->hidden_size;
    int I = c->moe_intermediate_size, Is = c->shared_expert_intermediate_size;
    size_t TK = (size_t)T * K, mI = (size_t)(I > Is ? I : Is);
    size_t rows = TK > (size_t)T ? TK : (size_t)T;
    size_t need = TK * H * 2 + rows * mI * 3 + (size_t)T * E + TK;
    float *buf = calloc(need, sizeof(float));
    if (buf == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the MoE backward");
    float *dy = buf, *dxg = dy + TK * H, *dh = dxg + TK * H, *dg = dh + rows * mI;
    float *du = dg + rows * mI, *dlog = du + rows * mI, *dw = dlog + (size_t)T * E;
    for (size_t i = 0; i < TK; i++) {
        int t = (int)(i / (size_t)K);
        size_t s = (size_t)a->slot_of[i];
        const float *d = dout + (size_t)t * H, *y = a->y + s * H;
        float wk = a->topk_w[i], dot = 0;
        for (int j = 0; j < H; j++) {
            dy[s * H + j] = wk * d[j];
            dot += d[j] * y[j];
        }
        dw[i] = dot;
    }
    int e0, ne;
    local_experts(m, &e0, &ne);
    if (m->moe_dispatch != NULL) {
        int rc = m->moe_dispatch->bwd(m->moe_dispatch_ctx, m, l, a->disp, dy, dxg, err);
        if (rc != AREAL_OK) {
            free(buf);
            return rc;
        }
        ne = 0; /* the dispatcher ran this rank's experts on the tokens sent to it */
    }
    for (int e = e0; e < e0 + ne; e++) {
        int b = a->off[e], n = a->off[e + 1] - b;
        if (n == 0)
            continue;
        size_t st = (size_t)(e - e0) * w->expert_stride, r = (size_t)b;
        const float *wg = w->experts + st, *wu = wg + (size_t)I * H, *wd = wu + (size_t)I * H;
        float *dwg = gw->experts + st, *dwu = dwg + (size_t)I * H, *dwd = dwu + (size_t)I * H;
        mlp_bwd(m, dxg + r * H, a->xg + r * H, a->g + r * I, a->u + r * I, a->h + r * I, dy + r * H,
                wg, wu, wd, dwg, dwu, dwd, dh, dg, du, n, H, I);
    }
    for (size_t s = 0; s < TK; s++)
        for (int j = 0; j < H; j++)
            dx[(size_t)a->slot_tok[s] * H + j] += dxg[s * H + j];
    /* router: d(weights) -> d(probs) -> d(logits) */
    for (int t = 0; t < T; t++) {
        const float *p = a->probs + (size_t)t * E;
        float *dl = dlog + (size_t)t * E;
        const float *tw = a->topk_w + (size_t)t * K, *dwt = dw + (size_t)t * K;
        const int32_t *tk = a->topk + (size_t)t * K;
        float S = 0, wdot = 0;
        for (int k = 0; k < K; k++) {
            S += p[tk[k]];
            wdot += dwt[k] * tw[k];
        }
        memset(dl, 0, sizeof(float) * (size_t)E); /* d probs first */
        for (int k = 0; k < K; k++)
            dl[tk[k]] = c->norm_topk_prob ? (dwt[k] - wdot) / S : dwt[k];
        float pd = 0;
        for (int e = 0; e < E; e++)
            pd += p[e] * dl[e];
        for (int e = 0; e < E; e++)
            dl[e] = p[e] * (dl[e] - pd);
    }
    m->ops->linear_bwd(m->ops_ctx, dx, gw->router, NULL, dlog, x, w->router, T, H, E);
    /* dx holds the routed part only (the caller zeroed it): partial over ep until reduced */
    if (m->reduce != NULL && m->shard.ep > 1 && m->moe_dispatch == NULL) {
        int rc = m->reduce(m->reduce_ctx, AREAL_REDUCE_MOE_GRAD, l, dx, (size_t)T * H, err);
        if (rc != AREAL_OK) {
            free(buf);
            return rc;
        }
    }
    if (Is > 0) {
        float *dsy = dy, *dsgl = dw; /* reuse: [T, H] and [T] fit */
        for (int t = 0; t < T; t++) {
            float sig = 1.0f / (1.0f + expf(-a->sgl[t])), dot = 0;
            for (int j = 0; j < H; j++) {
                float d = dout[(size_t)t * H + j];
                dsy[(size_t)t * H + j] = sig * d;
                dot += d * a->sy[(size_t)t * H + j];
            }
            dsgl[t] = dot * sig * (1.0f - sig);
        }
        m->ops->linear_bwd(m->ops_ctx, dx, gw->sh_gate_w, NULL, dsgl, x, w->sh_gate_w, T, H, 1);
        mlp_bwd(m, dx, x, a->sg, a->su, a->sh, dsy, w->sh_gate, w->sh_up, w->sh_down, gw->sh_gate,
                gw->sh_up, gw->sh_down, dh, dg, du, T, H, Is);
    }
    free(buf);
    return AREAL_OK;
}

int areal_moe_experts_bwd(const areal_model *m, int layer, const float *x, const int *counts,
                          const float *g, const float *u, const float *h, const float *dy,
                          float *dx, areal_error *err) {
    const areal_layer_w *w = &m->w.layers[layer], *gw = &m->g.layers[layer];
    int e0, ne, I, H = m->cfg.hidden_size, mx = 0;
    areal_moe_local(m, &e0, &ne, &I);
    size_t R = 0;
    for (int j = 0; j < ne; j++) {
        R += (size_t)counts[j];
        mx = counts[j] > mx ? counts[j] : mx;
    }
    memset(dx, 0, sizeof(float) * R * H);
    float *sc = malloc(sizeof(float) * (size_t)(mx > 0 ? mx : 1) * I * 3);
    if (sc == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the experts' backward");
    size_t r = 0;
    for (int j = 0; j < ne; r += (size_t)counts[j], j++) {
        int n = counts[j];
        if (n == 0)
            continue;
        const float *wg, *wu, *wd, *dwg, *dwu, *dwd;
        expert_w(m, w->experts, w->expert_stride, j, I, &wg, &wu, &wd);
        expert_w(m, gw->experts, w->expert_stride, j, I, &dwg, &dwu, &dwd);
        float *dh = sc, *dg = sc + (size_t)n * I, *du = dg + (size_t)n * I;
        mlp_bwd(m, dx + r * H, x + r * H, g + r * I, u + r * I, h + r * I, dy + r * H, wg, wu, wd,
                (float *)dwg, (float *)dwu, (float *)dwd, dh, dg, du, n, H, I);
    }
    free(sc);
    return AREAL_OK;
}

int areal_acts_moe_load(const areal_model *m, const areal_acts *a, int layer, int64_t *counts,
                        areal_error *err) {
    int li = layer - m->shard.first_layer;
    if (a->priv == NULL || li < 0 || li >= a->priv->n_layers || m->cfg.num_experts == 0 ||
        !m->cfg.moe_layer[layer])
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "moe load: layer %d is not a MoE layer of this stage's forward "
                               "(layers %d..%d)",
                               layer, m->shard.first_layer,
                               m->shard.first_layer + m->shard.n_layers - 1);
    const int32_t *off = a->priv->layers[li].moe.off;
    for (int e = 0; e < m->cfg.num_experts; e++)
        counts[e] = off[e + 1] - off[e];
    return AREAL_OK;
}
