/*
 * moe.h - mixture-of-experts routing on device buffers: the router's softmax
 * and top-k, the stable counting sort of (token, choice) pairs into expert
 * slots, the permute that gathers each slot's token row, the grouped expert
 * GEMMs over the slots, and the weighted unpermute; forward and backward.
 * Twin of worker/model's moe.c (the same routing as transformers: softmax over
 * all experts in fp32, top-k of the probabilities with ties to the lower
 * index, norm_topk_prob renormalising the k weights; slots ordered by expert,
 * then by token: the order moe.c's assign_slots gives), checked by
 * kernels/gpu/gpu_test_moe.c.
 *
 * Shapes: T tokens, E experts, K choices per token (K <= E, K <= 32, E <= 1024), H the
 * row width; the T*K pairs i = t*K + k. Types: logits, probabilities and
 * weights are fp32; rows are bf16 bit patterns (uint16_t). All pointers are
 * device pointers except where "host" is said. Returns AREAL_OK, AREAL_EINVAL
 * (NULL buffer or bad shape, named in err) or AREAL_EIO (launch failure).
 * Built only where nvcc is found.
 */
#ifndef AREAL_KERNELS_MOE_H
#define AREAL_KERNELS_MOE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "areal/error.h"
#include "areal/kernels/gemm.h"

/* probs[T,E] = softmax(logits); topk[T,K] the chosen experts in descending
 * probability; topk_w[T,K] their probabilities (renormalised to sum 1 when
 * norm_topk). */
int areal_k_moe_route(float *probs, int32_t *topk, float *topk_w, const float *logits, int T, int E,
                      int K, int norm_topk, void *stream, areal_error *err);

/* off[E+1]: expert e's slots are [off[e], off[e+1]); slot_of[T*K]: pair i's
 * slot; slot_tok[T*K]: the token of each slot. Stable (token order within an
 * expert) and deterministic. */
int areal_k_moe_slots(int32_t *off, int32_t *slot_of, int32_t *slot_tok, const int32_t *topk, int T,
                      int E, int K, void *stream, areal_error *err);

/* xs[s] = x[slot_tok[s]] for the T*K slots (rows of H). */
int areal_k_moe_permute(uint16_t *xs, const uint16_t *x, const int32_t *slot_tok, int TK, int H,
                        void *stream, areal_error *err);

/* out[t] = sum_k topk_w[t,k] * ys[slot_of[t*K+k]] (writes; fp32 sum). */
int areal_k_moe_unpermute(uint16_t *out, const uint16_t *ys, const int32_t *slot_of,
                          const float *topk_w, int T, int K, int H, void *stream, areal_error *err);

/* The unpermute's backward: dys[slot_of[i]] = topk_w[i] * dout[t]; dw[i] =
 * dout[t] . ys[slot_of[i]] (both written). */
int areal_k_moe_unpermute_bwd(uint16_t *dys, float *dw, const uint16_t *dout, const uint16_t *ys,
                              const int32_t *slot_of, const float *topk_w, int T, int K, int H,
                              void *stream, areal_error *err);

/* The permute's backward: dx[t] = sum_k dxs[slot_of[t*K+k]] (writes). */
int areal_k_moe_permute_bwd(uint16_t *dx, const uint16_t *dxs, const int32_t *slot_of, int T, int K,
                            int H, void *stream, areal_error *err);

/* The router's backward: dlogits[T,E] (written) from dw[T,K], through the
 * renormalisation (norm_topk) and the softmax. */
int areal_k_moe_route_bwd(float *dlogits, const float *dw, const float *probs, const int32_t *topk,
                          const float *topk_w, int T, int E, int K, int norm_topk, void *stream,
                          areal_error *err);

/*
 * The grouped expert GEMMs: for each expert e with n_e = off[e+1] - off[e] > 0
 * slots, C_e[n_e, N] = A_e[n_e, Kd] op(B_e) (+ beta C_e), with A_e the slots'
 * rows of `a` (row stride lda), B_e = b + e * b_stride elements (op as
 * trans_b: nn.Linear weights [N, Kd] are trans_b = 1) and C_e the slots' rows
 * of `c`. `host_off` is the off[] of areal_k_moe_slots copied to the host (the
 * per-expert sizes must be known to launch; one E+1 copy per layer).
 * Rejected: one cuBLASLt grouped call - not in the cuBLAS 13 C API of the
 * wheels; E launches are small next to the expert products for E <= 128.
 */
int areal_k_moe_grouped_gemm(areal_k_gemm *g, const int32_t *host_off, int E, int N, int Kd,
                             const uint16_t *a, size_t lda, const uint16_t *b, size_t b_stride,
                             int trans_b, void *c, size_t ldc, areal_k_gemm_out c_type, float beta,
                             void *stream, areal_error *err);

#ifdef __cplusplus
}
#endif

#endif
