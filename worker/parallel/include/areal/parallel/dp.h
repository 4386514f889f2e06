/*
 * dp.h - data parallelism: every dp rank runs the same shard on its own
 * sequences; the gradients are summed over the dp group, and the optimizer
 * either runs whole on every rank (plain DP) or sharded (ZeRO-1).
 *
 * Averaging is the loss's business, not the reduction's: the caller scales
 * its per-token loss by 1 / the global token count (areal_par_global_count),
 * so the summed gradient is that of the mean over every rank's tokens, as
 * one process computes it on the whole batch. Rejected: AREAL_AVG over dp
 * (it averages per-rank means, which differs whenever ranks hold unequal
 * token counts).
 *
 * ZeRO-1 (Megatron's distributed optimizer): the flat gradient, padded to a
 * multiple of dp, is reduce-scattered so rank r holds the summed gradient of
 * elements [r*n/dp, (r+1)*n/dp); AdamW's moments exist only for that range;
 * the updated range is all-gathered back into every rank's parameters.
 * Plain DP's gradients move in buckets, every bucket's all-reduce queued at
 * once on the group's worker thread (areal_coll_*_async), so the transfer of
 * one bucket overlaps the reduction of the next. ZeRO-1 does one
 * reduce-scatter and one all-gather of the whole flat buffer. Both run
 * after the backward; areal/parallel/overlap.h is the form that starts each
 * bucket while the backward computes (ZeRO-1 there with Megatron's per-bucket
 * pieces, a discontiguous range per rank).
 */
#ifndef AREAL_PARALLEL_DP_H
#define AREAL_PARALLEL_DP_H

#include <stddef.h>

#include "areal/comm/coll.h"
#include "areal/error.h"
#include "areal/model/model.h"
#include "areal/model/optim.h"
#include "areal/parallel/groups.h"

#define AREAL_PAR_BUCKET_FLOATS ((size_t)1 << 20) /* 4 MiB buckets */

/* *out = sum over dp of `local` (dp NULL: local). The collective's error. */
int areal_par_global_count(areal_coll *dp, long local, long *out, areal_error *err);

/*
 * Sums m->grads over dp in buckets of `bucket` floats (0: the default),
 * every bucket queued at once. dp NULL or of size one: nothing to do.
 */
int areal_par_dp_reduce_grads(areal_model *m, areal_coll *dp, size_t bucket, areal_error *err);

/* ZeRO-1 optimizer state of one rank. */
typedef struct areal_par_zero1 {
    areal_coll *dp;   /* borrowed */
    size_t n, n_pad;  /* parameters; padded to a multiple of dp */
    size_t lo, hi;    /* this rank's range of the flat buffers, clipped to n */
    size_t shard;     /* n_pad / dp */
    float *gshard;    /* [shard] the summed gradient of the range */
    float *pad;       /* [n_pad] scratch: padded gradient in, gathered parameters out */
    areal_adamw adam; /* moments of [lo, hi) */
} areal_par_zero1;

/* State for m over dp (borrowed; NULL means dp 1). AREAL_ENOMEM; on failure *z is empty. */
int areal_par_zero1_init(areal_par_zero1 *z, const areal_model *m, areal_coll *dp,
                         areal_error *err);
void areal_par_zero1_free(areal_par_zero1 *z);

/*
 * Takes this rank's range [lo, hi) of `full` (AdamW state over all of the
 * model's local parameters, e.g. read from a checkpoint) into z's moments,
 * and its step. AREAL_EINVAL when full is not of z's parameter count.
 */
int areal_par_zero1_load(areal_par_zero1 *z, const areal_adamw *full, areal_error *err);

/*
 * One optimizer step: reduce-scatters m->grads over dp, computes
 * the global gradient norm over dp and the model-parallel groups g
 * (*norm, before clipping), clips to max_norm (> 0), runs AdamW on the range
 * and all-gathers the parameters. m->grads is left as it was (the caller
 * zeroes it). The collective's error.
 */
int areal_par_zero1_step(areal_par_zero1 *z, areal_model *m, const areal_par_groups *g,
                         const areal_adamw_cfg *cfg, double lr, double max_norm, double *norm,
                         areal_pool *pool, areal_error *err);

#endif
