/*
 * kernels.h - the layer kernels of the CPU fp32 reference model (internal):
 * the CPU implementation behind the ops table (areal/model/ops.h,
 * ops_cpu.c), which the training layers call; the KV-cache path
 * (model_infer.c) still calls them directly.
 *
 * Each layer's forward and backward live together in one small k_*.c file, in
 * the llm.c manner: row-major float arrays, shapes named in the comments (T
 * tokens, H hidden, D a row width), forward writes its outputs and whatever the
 * backward needs, backward *accumulates* (+=) into parameter gradients and
 * into input gradients unless it says "writes". Matrix products go to
 * OpenBLAS; element-wise loops run on the caller's areal_pool (NULL: serial).
 */
#ifndef AREAL_MODEL_KERNELS_H
#define AREAL_MODEL_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "areal/model/pool.h"

/* ---- k_matmul.c: y = x W^T + b, W [O, I] as nn.Linear stores it */
/* y[T,O] = x[T,I] W^T (+ b); beta 0 overwrites y, 1 adds to it. */
void k_linear_fwd(float *y, const float *x, const float *w, const float *b, int T, int n_in,
                  int n_out, float beta);
/* dx[T,I] += dy W (when dx), dw[O,I] += dy^T x (when dw), db[O] += sum_t dy (when db). */
void k_linear_bwd(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                  int T, int n_in, int n_out);

/* ---- k_linear_infer.c: the same product for the KV-cache paths, on the pool:
 * every element computed the same way whatever T (batch-invariant), W streamed
 * once per call. beta 0 overwrites y, 1 adds to it (before the bias). */
void k_linear_infer(areal_pool *p, float *y, const float *x, const float *w, const float *b, int T,
                    int n_in, int n_out, float beta);
/* The same with wp, W's packed twin (infer_pack.c's layout; NULL: none), read
 * instead of packing W: the same numbers, bit for bit. */
void k_linear_infer_packed(areal_pool *p, float *y, const float *x, const float *w, const float *wp,
                           const float *b, int T, int n_in, int n_out, float beta);
/* sum a[i] b[i] over [0, n) with k_linear_infer's per-element arithmetic (8 FMA
 * lanes, one fixed tree, the tail in order): attention scores of the KV paths. */
float k_dot_lanes(const float *a, const float *b, int n);

/* ---- k_softmax.c: the sampler's reductions over a logits row (the same
 * numbers with or without AVX2) */
/* max of x[0..n) (-inf when n is 0). */
float k_max(const float *x, int n);
/* sum over j < n of e[j] = exp(x[j] * scale - shift) (float terms, ~1 ulp, 0
 * below -87.3; e NULL: not kept), summed in double in a fixed order. */
double k_exp_sum(float *e, const float *x, float scale, float shift, int n);

/* ---- k_rmsnorm.c: HF RMSNorm y = w * x / sqrt(mean(x^2) + eps), over rows of D */
void k_rmsnorm_fwd(areal_pool *p, float *y, float *rstd, const float *x, const float *w,
                   size_t rows, int D, float eps);
/* dx[rows,D] += ..., dw[D] += ... (dw accumulated serially: rows may be many) */
void k_rmsnorm_bwd(areal_pool *p, float *dx, float *dw, const float *dy, const float *x,
                   const float *w, const float *rstd, size_t rows, int D);

/* ---- k_rope.c: rotate-half RoPE in place on x[T, nh, hd]; pos[T] positions */
void k_rope_fwd(areal_pool *p, float *x, const int32_t *pos, const float *inv_freq, int T, int nh,
                int hd);
/* the transpose rotation, in place on dx */
void k_rope_bwd(areal_pool *p, float *dx, const int32_t *pos, const float *inv_freq, int T, int nh,
                int hd);

/* ---- k_attention.c: causal GQA attention over packed sequences */
typedef struct k_attn_dims {
    int nh, nkv, hd;
    float scale;
} k_attn_dims;
/*
 * For each sequence s (rows cu[s]..cu[s+1]) and head h: out = softmax(scale q
 * k^T, causal) v, with key/value head h / (nh / nkv). q, out [T, nh*hd];
 * k, v [T, nkv*hd]. att receives the probabilities (zero above the diagonal) at
 * att_off[s] + (h * L + i) * L + j, att_off from k_attn_offsets.
 */
void k_attn_fwd(areal_pool *p, float *out, float *att, const float *q, const float *k,
                const float *v, const int32_t *cu, int n_seqs, const size_t *att_off,
                k_attn_dims d);
/* dq, dk, dv [same shapes] += gradients, from dout and the saved att;
 * scratch holds L * L floats for the longest sequence L. */
void k_attn_bwd(areal_pool *p, float *dq, float *dk, float *dv, const float *dout, const float *att,
                const float *q, const float *k, const float *v, const int32_t *cu, int n_seqs,
                const size_t *att_off, k_attn_dims d, float *scratch);
/* att_off[0..n_seqs] (prefix sums of nh * L^2); returns the total. */
size_t k_attn_offsets(size_t *att_off, const int32_t *cu, int n_seqs, int nh);
/*
 * Query rows against a KV cache: row r of q [R, nh*hd] attends the first
 * n_keys[r] rows of cache slot slot[r] (slot NULL: slot r), stored at
 * kc/vc + slot * kv_stride as [n, nkv*hd] rows; out [R, nh*hd]. scratch
 * holds R * nh * max_keys floats, max_keys >= every n_keys[r].
 */
void k_attn_decode(areal_pool *p, float *out, const float *q, const float *kc, const float *vc,
                   size_t kv_stride, const int *slot, const int *n_keys, int R, k_attn_dims d,
                   float *scratch, int max_keys);

/* ---- k_swiglu.c: h = silu(g) * u over n elements, exp from k_vexp.h */
void k_swiglu_fwd(areal_pool *p, float *h, const float *g, const float *u, size_t n);
/* the same for the KV-cache paths (the very same numbers: one kernel) */
void k_swiglu_infer(areal_pool *p, float *h, const float *g, const float *u, size_t n);
/* dg, du (writes) from dh */
void k_swiglu_bwd(areal_pool *p, float *dg, float *du, const float *dh, const float *g,
                  const float *u, size_t n);

/* ---- element-wise helpers (k_swiglu.c) */
void k_add(areal_pool *p, float *y, const float *a, const float *b, size_t n); /* y = a + b */

#endif
