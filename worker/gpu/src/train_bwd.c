/*
 * train_bwd.c - the LM head with its loss rows, and the training backward of
 * the GPU model: model_bwd.c's exact reverse in bf16 activations with fp32
 * parameter gradients (GEMMs accumulate into them with beta 1; RMSNorm's
 * kernel adds its weight gradient; the embedding's rows are scatter-added).
 *
 * The head runs `chunk` rows at a time: logits [chunk, V] (bf16), the fused
 * log-softmax gives each row's log-probability and logZ, and - since the
 * loss's gradient per row is known before the loss (-1/N on rows with a
 * target, 0 elsewhere) - the backward of the same chunk follows at once:
 * dlogits, d(lnf) rows and the head's weight gradient. So no [T, V] buffer
 * ever exists. The decoupled PPO loss keeps that property: its per-row
 * gradient needs only the row's own log-probability (the rejection weights
 * and the token-level denominator are known before the step), so one fused
 * kernel (areal/kernels/ppo.h) does softmax, loss and dlogits per chunk. The
 * residual gradient flows in one bf16 [T, H] buffer; each
 * norm's backward writes its input gradient into a scratch that is then
 * added (the kernels write dx, the CPU's add).
 */
#include "areal/kernels/attention.h"
#include "areal/kernels/cast.h"
#include "areal/kernels/embed.h"
#include "areal/kernels/layers.h"
#include "areal/kernels/moe.h"
#include "areal/kernels/ppo.h"
#include "areal/kernels/vocab.h"
#include "ginternal.h"

int gpu_head_fwd_bwd(areal_gpu_model *g, int T, const areal_k_ppo_cfg *ppo, areal_error *err) {
    const areal_gpu_plan *p = &g->plan;
    char *r = g->arena;
    int H = g->H, V = g->V;
    uint16_t *lnf = A16(r, p->lnf), *dln = A16(r, p->dln);
    uint16_t *logits = A16(r, p->logits), *dlogits = A16(r, p->dlogits);
    for (int r0 = 0; r0 < T; r0 += p->chunk) {
        int C = T - r0 < p->chunk ? T - r0 : p->chunk;
        size_t rh = (size_t)r0 * H;
        TRY(gpu_lin_fwd(g, logits, lnf + rh, g->wl.lm_head, AREAL_GPU_NONE, C, H, V, 0.0f, err));
        const int32_t *tgt = AI(r, p->target) + r0;
        float *logz = A32(r, p->logz) + r0;
        if (ppo != NULL) {
            TRY(areal_k_ppo_logprob(dlogits, A32(r, p->logprob) + r0, A32(r, p->tok_loss) + r0,
                                    logits, (size_t)V, tgt, A32(r, p->prox) + r0,
                                    A32(r, p->adv) + r0, A32(r, p->w) + r0, (size_t)C, V, *ppo,
                                    g->stream, err));
        } else {
            TRY(areal_k_logprob_fwd(A32(r, p->logprob) + r0, NULL, logz, logits, (size_t)V, tgt,
                                    (size_t)C, V, 1.0f, g->stream, err));
            TRY(areal_k_logprob_bwd(dlogits, logits, (size_t)V, tgt, logz, NULL,
                                    A32(r, p->g_lp) + r0, NULL, (size_t)C, V, 1.0f, g->stream,
                                    err));
        }
        TRY(gpu_lin_bwd(g, dln + rh, 0.0f, dlogits, lnf + rh, g->wl.lm_head, AREAL_GPU_NONE, C, H,
                        V, NULL, err));
    }
    return AREAL_OK;
}

/* the MLP branch of MoE layer l: dln (written) from dout = dres */
static int moe_bwd(areal_gpu_model *g, int l, const uint16_t *dout, uint16_t *dln,
                   areal_error *err) {
    const areal_gpu_plan *p = &g->plan;
    const areal_gpu_layer_plan *a = &p->layers[l];
    const areal_gpu_layer_off *o = &g->wl.layers[l];
    char *r = g->arena;
    void *st = g->stream;
    int T = g->T_run, H = g->H, E = g->E, K = g->K, Ie = g->Ie, TK = T * K;
    const int32_t *hoff = g->host_off + (size_t)l * (size_t)(E + 1);
    uint16_t *dys = A16(r, p->dys), *dxs = A16(r, p->dxs);
    uint16_t *dh = A16(r, p->dh), *dg = A16(r, p->dg), *du = A16(r, p->du);
    uint16_t *xs = A16(r, a->xs), *hs = A16(r, a->h), *ys = A16(r, a->ys);
    float *dw = A32(r, p->dw);
    const int32_t *slot_of = AI(r, a->slot_of);
    TRY(areal_k_moe_unpermute_bwd(dys, dw, dout, ys, slot_of, A32(r, a->topk_w), T, K, H, st, err));
    const uint16_t *we = W16(g, o->experts);
    size_t es = o->expert_stride, IH = (size_t)Ie * H;
    /* dh = dys Wd: Wd stored [H, Ie] = [Kd, N] */
    TRY(areal_k_moe_grouped_gemm(g->gemm, hoff, E, Ie, H, dys, 0, we + 2 * IH, es, 0, dh, 0,
                                 AREAL_K_OUT_BF16, 0.0f, st, err));
    TRY(areal_k_swiglu_bwd(dg, du, dh, A16(r, a->g), A16(r, a->u), (size_t)TK * Ie, st, err));
    TRY(areal_k_moe_grouped_gemm(g->gemm, hoff, E, H, Ie, dg, 0, we, es, 0, dxs, 0,
                                 AREAL_K_OUT_BF16, 0.0f, st, err));
    TRY(areal_k_moe_grouped_gemm(g->gemm, hoff, E, H, Ie, du, 0, we + IH, es, 0, dxs, 0,
                                 AREAL_K_OUT_BF16, 1.0f, st, err));
    for (int e = 0; e < E; e++) { /* the experts' weight gradients: dW += dY_e^T X_e */
        int r0 = hoff[e], n = hoff[e + 1] - r0;
        if (n == 0)
            continue; /* an expert without tokens gets no gradient */
        float *gw = G32(g, o->experts) + (size_t)e * es;
        const struct {
            const uint16_t *dy, *x;
            int out, in;
            float *c;
        } w3[3] = {{dg + (size_t)r0 * Ie, xs + (size_t)r0 * H, Ie, H, gw},
                   {du + (size_t)r0 * Ie, xs + (size_t)r0 * H, Ie, H, gw + IH},
                   {dys + (size_t)r0 * H, hs + (size_t)r0 * Ie, H, Ie, gw + 2 * IH}};
        for (int j = 0; j < 3; j++) {
            areal_k_gemm_args ga = {0};
            ga.M = w3[j].out, ga.N = w3[j].in, ga.K = n;
            ga.trans_a = 1;
            ga.A = w3[j].dy, ga.B = w3[j].x, ga.C = w3[j].c;
            ga.c_type = AREAL_K_OUT_F32, ga.alpha = 1.0f, ga.beta = 1.0f;
            TRY(areal_k_gemm_run(g->gemm, &ga, st, err));
        }
    }
    TRY(areal_k_moe_permute_bwd(dln, dxs, slot_of, T, K, H, st, err));
    /* the router: d(weights) -> d(logits), then through the router's product */
    float *dlog32 = A32(r, p->dlog32);
    uint16_t *dlog16 = A16(r, p->dlog16);
    TRY(areal_k_moe_route_bwd(dlog32, dw, A32(r, a->probs), AI(r, a->topk), A32(r, a->topk_w), T, E,
                              K, g->cfg.norm_topk_prob ? 1 : 0, st, err));
    TRY(areal_k_f32_to_bf16(dlog32, dlog16, (size_t)T * E, st, err));
    return gpu_lin_bwd(g, dln, 1.0f, dlog16, A16(r, a->ln2), o->router, AREAL_GPU_NONE, T, H, E,
                       NULL, err);
}

/* layer l: dres holds d(out) on entry and d(res) on return */
static int layer_bwd(areal_gpu_model *g, int l, int n_seqs, int max_len, areal_error *err) {
    const areal_gpu_plan *p = &g->plan;
    const areal_gpu_layer_plan *a = &p->layers[l];
    const areal_gpu_layer_off *o = &g->wl.layers[l];
    char *r = g->arena;
    void *st = g->stream;
    int T = g->T_run, H = g->H, Q = g->Q, KV = g->KV, I = g->I, hd = g->hd, nh = g->nh;
    int nkv = g->nkv;
    size_t TH = (size_t)T * H;
    uint16_t *dres = A16(r, p->dres), *dtmp = A16(r, p->dtmp), *dln = A16(r, p->dln);
    const uint16_t *ones = A16(r, p->ones);
    /* MLP branch */
    if (gpu_is_moe(g, l)) {
        TRY(moe_bwd(g, l, dres, dln, err));
    } else {
        uint16_t *dh = A16(r, p->dh), *dg = A16(r, p->dg), *du = A16(r, p->du);
        TRY(gpu_lin_bwd(g, dh, 0.0f, dres, A16(r, a->h), o->down, o->down_b, T, I, H, ones, err));
        TRY(areal_k_swiglu_bwd(dg, du, dh, A16(r, a->g), A16(r, a->u), (size_t)T * I, st, err));
        TRY(gpu_lin_bwd(g, dln, 0.0f, dg, A16(r, a->ln2), o->gate, o->gate_b, T, H, I, ones, err));
        TRY(gpu_lin_bwd(g, dln, 1.0f, du, A16(r, a->ln2), o->up, o->up_b, T, H, I, ones, err));
    }
    TRY(areal_k_rmsnorm_bwd(dtmp, G32(g, o->ln2), dln, A16(r, a->mid), W16(g, o->ln2),
                            A32(r, a->rstd2), (size_t)T, H, st, err));
    TRY(areal_k_add(dres, dres, dtmp, TH, st, err)); /* now d(mid) */
    /* attention branch */
    uint16_t *dao = A16(r, p->dao), *dqr = A16(r, p->dqr), *dkr = A16(r, p->dkr);
    uint16_t *dv = A16(r, p->dv);
    TRY(gpu_lin_bwd(g, dao, 0.0f, dres, A16(r, a->ao), o->wo, o->bo, T, Q, H, ones, err));
    areal_k_attn_shape s = {T, n_seqs, max_len, nh, nkv, hd, g->attn_scale};
    TRY(areal_k_attn_bwd(dqr, dkr, dv, A32(r, p->delta), dao, A16(r, a->ao), A32(r, a->lse),
                         A16(r, a->qr), A16(r, a->kr), A16(r, a->v), AI(r, p->cu), s, st, err));
    const int32_t *pos = AI(r, p->pos);
    TRY(areal_k_rope_bwd(dqr, pos, g->inv_freq, T, nh, hd, st, err));
    TRY(areal_k_rope_bwd(dkr, pos, g->inv_freq, T, nkv, hd, st, err));
    const uint16_t *dq = dqr, *dk = dkr;
    if (g->cfg.qk_norm) {
        uint16_t *dq2 = A16(r, p->dq), *dk2 = A16(r, p->dk);
        TRY(areal_k_rmsnorm_bwd(dq2, G32(g, o->q_norm), dqr, A16(r, a->q), W16(g, o->q_norm),
                                A32(r, a->rstd_q), (size_t)T * nh, hd, st, err));
        TRY(areal_k_rmsnorm_bwd(dk2, G32(g, o->k_norm), dkr, A16(r, a->k), W16(g, o->k_norm),
                                A32(r, a->rstd_k), (size_t)T * nkv, hd, st, err));
        dq = dq2;
        dk = dk2;
    }
    const uint16_t *ln1 = A16(r, a->ln1);
    TRY(gpu_lin_bwd(g, dln, 0.0f, dq, ln1, o->wq, o->bq, T, H, Q, ones, err));
    TRY(gpu_lin_bwd(g, dln, 1.0f, dk, ln1, o->wk, o->bk, T, H, KV, ones, err));
    TRY(gpu_lin_bwd(g, dln, 1.0f, dv, ln1, o->wv, o->bv, T, H, KV, ones, err));
    TRY(areal_k_rmsnorm_bwd(dtmp, G32(g, o->ln1), dln, A16(r, a->res), W16(g, o->ln1),
                            A32(r, a->rstd1), (size_t)T, H, st, err));
    return areal_k_add(dres, dres, dtmp, TH, st, err); /* d(res) */
}

int gpu_train_bwd(areal_gpu_model *g, int T, int n_seqs, int max_len, areal_error *err) {
    const areal_gpu_plan *p = &g->plan;
    char *r = g->arena;
    /* final norm: d(res_out) from d(lnf) */
    TRY(areal_k_rmsnorm_bwd(A16(r, p->dres), G32(g, g->wl.norm), A16(r, p->dln), A16(r, p->res_out),
                            W16(g, g->wl.norm), A32(r, p->rstdf), (size_t)T, g->H, g->stream, err));
    for (int l = g->L - 1; l >= 0; l--)
        TRY(layer_bwd(g, l, n_seqs, max_len, err));
    return areal_k_embed_bwd(G32(g, g->wl.embed), A16(r, p->dres), AI(r, p->tokens), T, g->H,
                             g->stream, err);
}
