/*
 * train_fwd.c - the training forward of the GPU model: model_fwd.c's layers
 * in bf16 on the device, each step's output saved in the plan's per-layer
 * slots for train_bwd.c (the same discipline: nothing recomputed but
 * element-wise work, and the attention's probabilities never stored - the
 * flash kernel keeps one log-sum-exp per row instead).
 *
 * Per layer: RMSNorm, q/k/v projections (+bias), Qwen3's per-head q/k
 * RMSNorm, RoPE in place, causal GQA attention over the packed sequences,
 * o projection (+bias) and residual, RMSNorm, SwiGLU MLP or the MoE block,
 * residual into the next layer's input slot; final RMSNorm.
 */
#include <cuda_runtime_api.h>

#include "areal/kernels/attention.h"
#include "areal/kernels/embed.h"
#include "areal/kernels/layers.h"
#include "ginternal.h"

/* the MoE buffers of training layer l */
static gpu_moe_bufs moe_bufs(areal_gpu_model *g, int l) {
    const areal_gpu_plan *p = &g->plan;
    const areal_gpu_layer_plan *a = &p->layers[l];
    char *r = g->arena;
    gpu_moe_bufs b = {A32(r, p->rlogits),
                      A32(r, a->probs),
                      A32(r, a->topk_w),
                      AI(r, a->topk),
                      AI(r, a->off),
                      AI(r, a->slot_of),
                      AI(r, a->slot_tok),
                      A16(r, a->xs),
                      A16(r, a->g),
                      A16(r, a->u),
                      A16(r, a->h),
                      A16(r, a->ys),
                      g->host_off + (size_t)l * (size_t)(g->E + 1)};
    return b;
}

static int layer_fwd(areal_gpu_model *g, int l, int T, int n_seqs, int max_len, uint16_t *out,
                     areal_error *err) {
    const areal_gpu_plan *p = &g->plan;
    const areal_gpu_layer_plan *a = &p->layers[l];
    const areal_gpu_layer_off *o = &g->wl.layers[l];
    char *r = g->arena;
    void *st = g->stream;
    int H = g->H, Q = g->Q, KV = g->KV, hd = g->hd, nh = g->nh, nkv = g->nkv;
    uint16_t *res = A16(r, a->res), *ln1 = A16(r, a->ln1), *qr = A16(r, a->qr);
    uint16_t *kr = A16(r, a->kr), *v = A16(r, a->v), *ao = A16(r, a->ao);
    uint16_t *mid = A16(r, a->mid), *ln2 = A16(r, a->ln2);
    const int32_t *pos = AI(r, p->pos), *cu = AI(r, p->cu);
    TRY(areal_k_rmsnorm_fwd(ln1, A32(r, a->rstd1), res, W16(g, o->ln1), (size_t)T, H, g->eps, st,
                            err));
    if (g->cfg.qk_norm) { /* projections into q/k, normed per head into qr/kr */
        uint16_t *q = A16(r, a->q), *k = A16(r, a->k);
        TRY(gpu_lin_fwd(g, q, ln1, o->wq, o->bq, T, H, Q, 0.0f, err));
        TRY(gpu_lin_fwd(g, k, ln1, o->wk, o->bk, T, H, KV, 0.0f, err));
        TRY(areal_k_rmsnorm_fwd(qr, A32(r, a->rstd_q), q, W16(g, o->q_norm), (size_t)T * nh, hd,
                                g->eps, st, err));
        TRY(areal_k_rmsnorm_fwd(kr, A32(r, a->rstd_k), k, W16(g, o->k_norm), (size_t)T * nkv, hd,
                                g->eps, st, err));
    } else { /* the projections straight into qr/kr: RoPE's backward needs only positions */
        TRY(gpu_lin_fwd(g, qr, ln1, o->wq, o->bq, T, H, Q, 0.0f, err));
        TRY(gpu_lin_fwd(g, kr, ln1, o->wk, o->bk, T, H, KV, 0.0f, err));
    }
    TRY(gpu_lin_fwd(g, v, ln1, o->wv, o->bv, T, H, KV, 0.0f, err));
    TRY(areal_k_rope_fwd(qr, pos, g->inv_freq, T, nh, hd, st, err));
    TRY(areal_k_rope_fwd(kr, pos, g->inv_freq, T, nkv, hd, st, err));
    areal_k_attn_shape s = {T, n_seqs, max_len, nh, nkv, hd, g->attn_scale};
    TRY(areal_k_attn_fwd(ao, A32(r, a->lse), qr, kr, v, cu, s, st, err));
    TRY(gpu_lin_fwd(g, mid, ao, o->wo, o->bo, T, Q, H, 0.0f, err));
    TRY(areal_k_add(mid, mid, res, (size_t)T * H, st, err));
    TRY(areal_k_rmsnorm_fwd(ln2, A32(r, a->rstd2), mid, W16(g, o->ln2), (size_t)T, H, g->eps, st,
                            err));
    if (gpu_is_moe(g, l)) {
        gpu_moe_bufs b = moe_bufs(g, l);
        TRY(gpu_moe_fwd(g, l, ln2, out, T, &b, err));
    } else {
        TRY(gpu_mlp_fwd(g, l, ln2, out, T, A16(r, a->g), A16(r, a->u), A16(r, a->h), err));
    }
    return areal_k_add(out, out, mid, (size_t)T * H, st, err);
}

int gpu_train_fwd(areal_gpu_model *g, int T, int n_seqs, int max_len, areal_error *err) {
    const areal_gpu_plan *p = &g->plan;
    char *r = g->arena;
    uint16_t *x0 = g->L > 0 ? A16(r, p->layers[0].res) : A16(r, p->res_out);
    TRY(areal_k_embed_fwd(x0, W16(g, g->wl.embed), AI(r, p->tokens), T, g->H, g->stream, err));
    for (int l = 0; l < g->L; l++) {
        uint16_t *out = l + 1 < g->L ? A16(r, p->layers[l + 1].res) : A16(r, p->res_out);
        TRY(layer_fwd(g, l, T, n_seqs, max_len, out, err));
    }
    return areal_k_rmsnorm_fwd(A16(r, p->lnf), A32(r, p->rstdf), A16(r, p->res_out),
                               W16(g, g->wl.norm), (size_t)T, g->H, g->eps, g->stream, err);
}
