/*
 * reduce.h - the model's reduction hook bound to real groups, and the
 * gradient reductions a sharded model leaves to its caller.
 *
 * The model (areal/model/shard.h) calls its hook where a tensor-parallel
 * layer holds a partial sum (o_proj, down_proj forward; the q/k/v and
 * gate/up input gradients backward) and where an expert-parallel MoE layer
 * does (the routed experts' sum and its input gradient). areal_par_reduce
 * all-reduces (sum) over tp for the first kind and over ep for the second.
 * After the backward, the gradients that are partial over a group (qk-norm
 * over tp, the router over ep: areal_model_shard_grad_partial) are summed
 * over it, and the tied embedding's two pipeline copies over the embedding
 * group. Rejected: one all-reduce of the whole gradient over tp (it would
 * sum gradients that are already complete and equal on every rank).
 */
#ifndef AREAL_PARALLEL_REDUCE_H
#define AREAL_PARALLEL_REDUCE_H

#include <stddef.h>

#include "areal/error.h"
#include "areal/model/model.h"
#include "areal/parallel/groups.h"

/*
 * The hook (an areal_model_reduce_fn): ctx is an areal_par_groups (borrowed,
 * outliving the model's use). AREAL_EINVAL when the point's group is NULL
 * (the model calls the hook only for a group larger than one), else the
 * collective's error (AREAL_EIO naming group, operation, peer).
 */
int areal_par_reduce(void *ctx, areal_reduce_point point, int layer, float *buf, size_t count,
                     areal_error *err);

/* Binds areal_par_reduce and areal_par_sp (areal/parallel/sp.h) to m with groups g (borrowed). */
void areal_par_bind(areal_model *m, const areal_par_groups *g);

/*
 * Sums over tp the gradients partial over tp, and over ep those partial over
 * ep (one all-reduce per tensor; tiny). Returns AREAL_OK or the collective's
 * error.
 */
int areal_par_reduce_partial_grads(areal_model *m, const areal_par_groups *g, areal_error *err);

/*
 * With tied embeddings and pp > 1: sums the embedding's gradient of the
 * first stage and the last stage's copy over g->embed, so both copies take
 * the same update and stay equal. A no-op otherwise (and on middle stages).
 */
int areal_par_reduce_tied_embed(areal_model *m, const areal_par_groups *g, areal_error *err);

/*
 * Whether this rank counts parameter i in a quantity summed over the model-
 * parallel ranks (the gradient norm): each distinct element is counted by
 * exactly one rank of the tp x pp x ep block. Tensor-parallel slices count on
 * ep rank 0, experts on tp rank 0, replicated tensors on tp and ep rank 0,
 * and the tied embedding's copy on the last stage not at all.
 */
int areal_par_counts(const areal_model *m, size_t i);

/*
 * The global L2 norm of the gradient over every distinct element of the
 * model, from this rank's grads[lo, hi) (a ZeRO shard; 0, n_params for the
 * whole local gradient) summed over `dp_shard` (the group the [lo, hi) shards
 * are spread over, NULL when every rank holds its whole gradient) and over
 * tp, pp and ep. Accumulated in double per rank, summed in fp32 across ranks.
 */
int areal_par_grad_norm(const areal_model *m, const float *grads, size_t lo, size_t hi,
                        const areal_par_groups *g, areal_coll *dp_shard, double *norm,
                        areal_error *err);

/*
 * torch.nn.utils.clip_grad_norm_'s scaling for a norm already computed:
 * grads[0..n) *= max_norm / (norm + 1e-6) when max_norm > 0 and norm >
 * max_norm.
 */
void areal_par_clip(float *grads, size_t n, double norm, double max_norm);

#endif
