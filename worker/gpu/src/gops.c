/*
 * gops.c - the products and blocks that the training forward, its backward
 * and the decode step share: nn.Linear forward and backward on the cuBLASLt
 * GEMM (row-major, weights [out, in] as the CPU model keeps them), the dense
 * SwiGLU MLP, and the routed MoE block (route, slot sort, permute, grouped
 * expert GEMMs, weighted unpermute; moe.h).
 *
 * The bias gradient is a GEMM too: db[1, out] += ones[1, T] dy[T, out], so no
 * column-sum kernel is needed and the sum runs in fp32 on the tensor cores.
 * Rejected: fusing q/k/v into one product (their tensors are separate in the
 * layout the CPU model and the checkpoints share; a later step, with a
 * concatenated copy).
 */
#include <cuda_runtime_api.h>

#include "areal/kernels/layers.h"
#include "areal/kernels/moe.h"
#include "ginternal.h"

int gpu_lin_fwd(areal_gpu_model *g, uint16_t *y, const uint16_t *x, size_t w, size_t b, int T,
                int in, int out, float beta, areal_error *err) {
    areal_k_gemm_args a = {0};
    a.M = T, a.N = out, a.K = in;
    a.trans_a = 0, a.trans_b = 1; /* y = x W^T */
    a.A = x, a.B = W16(g, w), a.C = y;
    a.c_type = AREAL_K_OUT_BF16, a.alpha = 1.0f, a.beta = beta;
    a.bias = W16(g, b);
    return areal_k_gemm_run(g->gemm, &a, g->stream, err);
}

int gpu_lin_bwd(areal_gpu_model *g, uint16_t *dx, float beta, const uint16_t *dy, const uint16_t *x,
                size_t w, size_t b, int T, int in, int out, const uint16_t *ones,
                areal_error *err) {
    if (dx != NULL) { /* dx[T, in] = dy[T, out] W[out, in] */
        areal_k_gemm_args a = {0};
        a.M = T, a.N = in, a.K = out;
        a.A = dy, a.B = W16(g, w), a.C = dx;
        a.c_type = AREAL_K_OUT_BF16, a.alpha = 1.0f, a.beta = beta;
        TRY(areal_k_gemm_run(g->gemm, &a, g->stream, err));
    }
    { /* dW[out, in] += dy^T x: A = dy stored [T, out] = [K, M] */
        areal_k_gemm_args a = {0};
        a.M = out, a.N = in, a.K = T;
        a.trans_a = 1;
        a.A = dy, a.B = x, a.C = G32(g, w);
        a.c_type = AREAL_K_OUT_F32, a.alpha = 1.0f, a.beta = 1.0f;
        TRY(areal_k_gemm_run(g->gemm, &a, g->stream, err));
    }
    if (b != AREAL_GPU_NONE) { /* db[1, out] += ones[1, T] dy[T, out] */
        areal_k_gemm_args a = {0};
        a.M = 1, a.N = out, a.K = T;
        a.A = ones, a.B = dy, a.C = G32(g, b);
        a.c_type = AREAL_K_OUT_F32, a.alpha = 1.0f, a.beta = 1.0f;
        TRY(areal_k_gemm_run(g->gemm, &a, g->stream, err));
    }
    return AREAL_OK;
}

int gpu_mlp_fwd(areal_gpu_model *g, int l, const uint16_t *x, uint16_t *out, int T, uint16_t *gb,
                uint16_t *ub, uint16_t *hb, areal_error *err) {
    const areal_gpu_layer_off *o = &g->wl.layers[l];
    TRY(gpu_lin_fwd(g, gb, x, o->gate, o->gate_b, T, g->H, g->I, 0.0f, err));
    TRY(gpu_lin_fwd(g, ub, x, o->up, o->up_b, T, g->H, g->I, 0.0f, err));
    TRY(areal_k_swiglu_fwd(hb, gb, ub, (size_t)T * g->I, g->stream, err));
    return gpu_lin_fwd(g, out, hb, o->down, o->down_b, T, g->I, g->H, 0.0f, err);
}

int gpu_moe_fwd(areal_gpu_model *g, int l, const uint16_t *x, uint16_t *out, int T,
                const gpu_moe_bufs *b, areal_error *err) {
    const areal_gpu_layer_off *o = &g->wl.layers[l];
    int H = g->H, E = g->E, K = g->K, Ie = g->Ie, TK = T * K;
    { /* router logits [T, E] in fp32: the softmax and top-k read them */
        areal_k_gemm_args a = {0};
        a.M = T, a.N = E, a.K = H;
        a.trans_b = 1;
        a.A = x, a.B = W16(g, o->router), a.C = b->rlogits;
        a.c_type = AREAL_K_OUT_F32, a.alpha = 1.0f, a.beta = 0.0f;
        TRY(areal_k_gemm_run(g->gemm, &a, g->stream, err));
    }
    TRY(areal_k_moe_route(b->probs, b->topk, b->topk_w, b->rlogits, T, E, K,
                          g->cfg.norm_topk_prob ? 1 : 0, g->stream, err));
    TRY(areal_k_moe_slots(b->off, b->slot_of, b->slot_tok, b->topk, T, E, K, g->stream, err));
    TRY(gpu_cuda(cudaMemcpyAsync(b->host_off, b->off, sizeof(int32_t) * (size_t)(E + 1),
                                 cudaMemcpyDeviceToHost, (cudaStream_t)g->stream),
                 "copy the expert offsets", err));
    TRY(areal_k_moe_permute(b->xs, x, b->slot_tok, TK, H, g->stream, err));
    TRY(gpu_cuda(cudaStreamSynchronize((cudaStream_t)g->stream), "wait for the expert offsets",
                 err));
    /* expert e: gate [Ie, H], up [Ie, H], down [H, Ie] at experts + e * expert_stride */
    const uint16_t *we = W16(g, o->experts);
    size_t st = o->expert_stride, IH = (size_t)Ie * H;
    TRY(areal_k_moe_grouped_gemm(g->gemm, b->host_off, E, Ie, H, b->xs, 0, we, st, 1, b->g, 0,
                                 AREAL_K_OUT_BF16, 0.0f, g->stream, err));
    TRY(areal_k_moe_grouped_gemm(g->gemm, b->host_off, E, Ie, H, b->xs, 0, we + IH, st, 1, b->u, 0,
                                 AREAL_K_OUT_BF16, 0.0f, g->stream, err));
    TRY(areal_k_swiglu_fwd(b->h, b->g, b->u, (size_t)TK * Ie, g->stream, err));
    TRY(areal_k_moe_grouped_gemm(g->gemm, b->host_off, E, H, Ie, b->h, 0, we + 2 * IH, st, 1, b->ys,
                                 0, AREAL_K_OUT_BF16, 0.0f, g->stream, err));
    return areal_k_moe_unpermute(out, b->ys, b->slot_of, b->topk_w, T, K, H, g->stream, err);
}
