/*
 * sp.h - sequence parallelism's exchanges over the tp group: the model's
 * sequence-parallel hook (areal_model_sp_fn, areal/model/shard.h) bound to
 * the comm runtime's all-gather and reduce-scatter.
 *
 * A rank's rows are one block of B = ceil(T/tp) rows (areal_model_sp_rows),
 * so the blocks in rank order are the batch's rows in order: the gather is
 * one all-gather of B-row blocks (the last blocks zero-padded) whose first T
 * rows are the result, the scatter one reduce-scatter of the batch padded to
 * tp*B rows. Rejected: uneven per-rank counts (an all-gatherv the runtime
 * does not have) and requiring T % tp == 0 (packed batches of any length
 * must train; Megatron pads the sequence instead).
 */
#ifndef AREAL_PARALLEL_SP_H
#define AREAL_PARALLEL_SP_H

#include "areal/error.h"
#include "areal/model/shard.h"

/*
 * The hook: ctx is an areal_par_groups (borrowed), its tp group the one
 * exchanged over. AREAL_EINVAL when tp is NULL, AREAL_ENOMEM, or the
 * collective's error.
 */
int areal_par_sp(void *ctx, areal_sp_op op, int layer, float *buf, int T, int H, areal_error *err);

#endif
