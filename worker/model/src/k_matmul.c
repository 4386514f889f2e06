/*
 * k_matmul.c - nn.Linear forward and backward on OpenBLAS sgemm.
 *
 * Row-major throughout: x [T, I], W [O, I] (PyTorch's layout, so checkpoint
 * tensors are used as loaded), y [T, O]. The forward is one sgemm with W
 * transposed; the backward is two (dx = dy W, dW += dy^T x) and a column sum
 * for the bias. A hand-written tiled matmul was rejected: BLAS is the
 * reference the rest of the field uses and is faster than anything small.
 */
#include <cblas.h>

#include "kernels.h"

void k_linear_fwd(float *y, const float *x, const float *w, const float *b, int T, int n_in,
                  int n_out, float beta) {
    if (T == 0)
        return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, n_out, n_in, 1.0f, x, n_in, w, n_in,
                beta, y, n_out);
    if (b != NULL)
        for (int t = 0; t < T; t++)
            for (int o = 0; o < n_out; o++)
                y[(size_t)t * n_out + o] += b[o];
}

void k_linear_bwd(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                  int T, int n_in, int n_out) {
    if (T == 0)
        return;
    if (dx != NULL)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, n_in, n_out, 1.0f, dy, n_out, w,
                    n_in, 1.0f, dx, n_in);
    if (dw != NULL)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n_out, n_in, T, 1.0f, dy, n_out, x,
                    n_in, 1.0f, dw, n_in);
    if (db != NULL)
        for (int t = 0; t < T; t++)
            for (int o = 0; o < n_out; o++)
                db[o] += dy[(size_t)t * n_out + o];
}
