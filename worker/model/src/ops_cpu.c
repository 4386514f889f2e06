/*
 * ops_cpu.c - the CPU implementation of areal/model/ops.h: each entry is the
 * k_*.c kernel of the same name, with the areal_pool as its context.
 */
#include "areal/model/ops.h"
#include "kernels.h"

static void linear_fwd(void *ctx, float *y, const float *x, const float *w, const float *b, int T,
                       int n_in, int n_out, float beta) {
    (void)ctx;
    k_linear_fwd(y, x, w, b, T, n_in, n_out, beta);
}
static void linear_bwd(void *ctx, float *dx, float *dw, float *db, const float *dy, const float *x,
                       const float *w, int T, int n_in, int n_out) {
    (void)ctx;
    k_linear_bwd(dx, dw, db, dy, x, w, T, n_in, n_out);
}
static void rmsnorm_fwd(void *ctx, float *y, float *rstd, const float *x, const float *w,
                        size_t rows, int D, float eps) {
    k_rmsnorm_fwd(ctx, y, rstd, x, w, rows, D, eps);
}
static void rmsnorm_bwd(void *ctx, float *dx, float *dw, const float *dy, const float *x,
                        const float *w, const float *rstd, size_t rows, int D) {
    k_rmsnorm_bwd(ctx, dx, dw, dy, x, w, rstd, rows, D);
}
static void rope_fwd(void *ctx, float *x, const int32_t *pos, const float *inv_freq, int T, int nh,
                     int hd) {
    k_rope_fwd(ctx, x, pos, inv_freq, T, nh, hd);
}
static void rope_bwd(void *ctx, float *dx, const int32_t *pos, const float *inv_freq, int T, int nh,
                     int hd) {
    k_rope_bwd(ctx, dx, pos, inv_freq, T, nh, hd);
}
static void attn_fwd(void *ctx, float *out, float *att, const float *q, const float *k,
                     const float *v, const int32_t *cu, int n_seqs, const size_t *att_off,
                     areal_attn_dims d) {
    k_attn_dims kd = {d.nh, d.nkv, d.hd, d.scale};
    k_attn_fwd(ctx, out, att, q, k, v, cu, n_seqs, att_off, kd);
}
static void attn_bwd(void *ctx, float *dq, float *dk, float *dv, const float *dout,
                     const float *att, const float *q, const float *k, const float *v,
                     const int32_t *cu, int n_seqs, const size_t *att_off, areal_attn_dims d,
                     float *scratch) {
    k_attn_dims kd = {d.nh, d.nkv, d.hd, d.scale};
    k_attn_bwd(ctx, dq, dk, dv, dout, att, q, k, v, cu, n_seqs, att_off, kd, scratch);
}
static void swiglu_fwd(void *ctx, float *h, const float *g, const float *u, size_t n) {
    k_swiglu_fwd(ctx, h, g, u, n);
}
static void swiglu_bwd(void *ctx, float *dg, float *du, const float *dh, const float *g,
                       const float *u, size_t n) {
    k_swiglu_bwd(ctx, dg, du, dh, g, u, n);
}
static void add(void *ctx, float *y, const float *a, const float *b, size_t n) {
    k_add(ctx, y, a, b, n);
}

static const areal_ops cpu_ops = {
    .name = "cpu",
    .linear_fwd = linear_fwd,
    .linear_bwd = linear_bwd,
    .rmsnorm_fwd = rmsnorm_fwd,
    .rmsnorm_bwd = rmsnorm_bwd,
    .rope_fwd = rope_fwd,
    .rope_bwd = rope_bwd,
    .attn_fwd = attn_fwd,
    .attn_bwd = attn_bwd,
    .swiglu_fwd = swiglu_fwd,
    .swiglu_bwd = swiglu_bwd,
    .add = add,
};

const areal_ops *areal_ops_cpu(void) {
    return &cpu_ops;
}
