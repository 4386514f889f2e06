/*
 * sp.c - the sequence-parallel hook: in-place all-gather and reduce-scatter
 * of a [T, H] buffer's row blocks over tp, padded to equal blocks (see
 * sp.h).
 */
#include "areal/parallel/sp.h"

#include <stdlib.h>
#include <string.h>

#include "areal/parallel/groups.h"

int areal_par_sp(void *ctx, areal_sp_op op, int layer, float *buf, int T, int H, areal_error *err) {
    const areal_par_groups *g = ctx;
    if (g->tp == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "layer %d: the model asked for a sequence-parallel exchange but no "
                               "tp group was given (set areal_par_groups.tp)",
                               layer);
    int n = areal_coll_size(g->tp), r = areal_coll_rank(g->tp);
    size_t B = (size_t)(T + n - 1) / (size_t)n, h = (size_t)H, all = (size_t)T * h;
    size_t lo = (size_t)r * B < (size_t)T ? (size_t)r * B : (size_t)T;
    size_t hi = lo + B < (size_t)T ? lo + B : (size_t)T;
    float *pad = malloc(sizeof(float) * (B * (size_t)n + B) * h + sizeof(float));
    if (pad == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1,
                               "layer %d: no memory for the sequence-parallel exchange of %d rows",
                               layer, T);
    float *mine = pad + B * (size_t)n * h; /* [B, H] this rank's block */
    int rc;
    if (op == AREAL_SP_GATHER) {
        memcpy(mine, buf + lo * h, sizeof(float) * (hi - lo) * h);
        memset(mine + (hi - lo) * h, 0, sizeof(float) * (B - (hi - lo)) * h);
        rc = areal_coll_all_gather(g->tp, mine, pad, B * h, AREAL_DT_F32, err);
        if (rc == AREAL_OK)
            memcpy(buf, pad, sizeof(float) * all);
    } else {
        memcpy(pad, buf, sizeof(float) * all);
        memset(pad + all, 0, sizeof(float) * (B * (size_t)n * h - all));
        rc = areal_coll_reduce_scatter(g->tp, pad, mine, B * h, AREAL_DT_F32, AREAL_SUM, err);
        if (rc == AREAL_OK)
            memcpy(buf + lo * h, mine, sizeof(float) * (hi - lo) * h);
    }
    free(pad);
    return rc;
}
