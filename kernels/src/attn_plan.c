/*
 * attn_plan.c - the tensor-core attention's launch plan, the cu_seqlens
 * check and the FLOP count (areal/kernels/attention_plan.h). Host-only C:
 * the shared-memory sizes here are what k_attention_tc.cu's kernels carve
 * their tiles from, in the same order.
 */
#include "areal/kernels/attention_plan.h"

#include <string.h>

enum { BM = AREAL_K_ATTN_TC_BM, BN = AREAL_K_ATTN_TC_BN, BQ = AREAL_K_ATTN_TC_BQ };

static void grid(unsigned g[3], int tiles, int heads, int seqs) {
    g[0] = (unsigned)tiles, g[1] = (unsigned)heads, g[2] = (unsigned)seqs;
}

int areal_k_attn_plan_make(areal_k_attn_shape s, areal_k_attn_plan *p, areal_error *err) {
    if (p == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "areal_k_attn_plan_make: NULL plan");
    memset(p, 0, sizeof *p);
    if (s.nh < 1 || s.nkv < 1 || s.nh % s.nkv != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "attention plan: nh %d must be a positive multiple of nkv %d", s.nh,
                               s.nkv);
    if (s.hd < 1 || s.hd > 256)
        return areal_error_set(err, AREAL_EINVAL, -1, "attention plan: hd %d outside 1..256", s.hd);
    if (s.T < 0 || s.n_seqs < 0 || s.max_len < 0 || s.max_len > s.T)
        return areal_error_set(
            err, AREAL_EINVAL, -1,
            "attention plan: T %d, n_seqs %d, max_len %d: need 0 <= max_len <= T", s.T, s.n_seqs,
            s.max_len);
    if (s.n_seqs > 65535 || s.nh > 65535)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "attention plan: n_seqs %d or nh %d past the grid's 65535", s.n_seqs,
                               s.nh);
    const int tiles = (s.max_len + BM - 1) / BM;
    grid(p->grid_fwd, tiles, s.nh, s.n_seqs);
    grid(p->grid_dkdv, (s.max_len + BN - 1) / BN, s.nkv, s.n_seqs);
    grid(p->grid_dq, tiles, s.nh, s.n_seqs);
    if (s.hd != 64 && s.hd != 128) {
        p->why = "hd is not 64 or 128 (the tensor-core kernels' two instances)";
        return AREAL_OK;
    }
    const size_t row = (size_t)(s.hd + AREAL_K_ATTN_TC_PAD) * 2; /* bf16 bytes */
    p->smem_fwd = (size_t)(BM + 2 * BN) * row;                   /* Q, K, V */
    p->smem_dkdv = (size_t)(2 * BN + 2 * BQ) * row + 2 * BQ * 4; /* K, V, Q, dO, lse, delta */
    p->smem_dq = (size_t)(2 * BM + 2 * BN) * row;                /* Q, dO, K, V */
    p->tc = 1;
    return AREAL_OK;
}

int areal_k_attn_check_cu(const int32_t *cu, areal_k_attn_shape s, areal_error *err) {
    if (cu == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "cu_seqlens: NULL");
    if (s.n_seqs < 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "cu_seqlens: n_seqs %d is negative",
                               s.n_seqs);
    if (cu[0] != 0)
        return areal_error_set(err, AREAL_EINVAL, 0,
                               "cu_seqlens[0] is %d: the packed sequences must start at token 0",
                               cu[0]);
    for (int i = 0; i < s.n_seqs; i++) {
        const int64_t len = (int64_t)cu[i + 1] - cu[i];
        if (len < 0)
            return areal_error_set(err, AREAL_EINVAL, i + 1,
                                   "cu_seqlens[%d] = %d is below cu_seqlens[%d] = %d: offsets "
                                   "must not decrease",
                                   i + 1, cu[i + 1], i, cu[i]);
        if (len > s.max_len)
            return areal_error_set(err, AREAL_EINVAL, i + 1,
                                   "sequence %d has %lld tokens, past max_len %d: set max_len to "
                                   "the longest sequence",
                                   i, (long long)len, s.max_len);
    }
    if (cu[s.n_seqs] != s.T)
        return areal_error_set(err, AREAL_EINVAL, s.n_seqs,
                               "cu_seqlens[%d] = %d but T is %d: the last offset is the packed "
                               "token count",
                               s.n_seqs, cu[s.n_seqs], s.T);
    return AREAL_OK;
}

double areal_k_attn_flops_fwd(const int32_t *cu, int n_seqs, int nh, int hd) {
    double f = 0;
    for (int i = 0; cu != NULL && i < n_seqs; i++) {
        const double len = (double)cu[i + 1] - cu[i];
        f += 4.0 * len * len / 2.0 * nh * hd;
    }
    return f;
}
