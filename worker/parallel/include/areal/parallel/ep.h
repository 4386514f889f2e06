/*
 * ep.h - expert parallelism with token dispatch (Megatron's all-to-all
 * dispatcher): the ep ranks hold different tokens (the ep group is carved
 * out of dp x tp, Megatron's expert rank order), each routes its own, the
 * (token, expert) slots travel by all-to-all(v) over the ep group to the rank
 * holding their expert, run there (split over the etp group: Megatron's
 * expert tensor parallelism, the partial outputs all-reduced over etp), come
 * back by the reverse all-to-all(v) and are combined with the router weights
 * by the model (areal/model/moe_dispatch.h). The backward moves the slots'
 * output gradients the same way and their input gradients back.
 *
 * Tensor parallelism without the etp split (tp > etp): the tp ranks hold the
 * same tokens, and tp / etp of them sit in one ep group, so each dispatches
 * only its part of the tokens (part tp_rank / etp of tp / etp, Megatron's
 * sequence-parallel shard inside the MoE block) and the parts are then
 * summed over tp (each written by its etp-rank-0 holder, zeros elsewhere) so
 * every tp rank holds every slot's output and input gradient. Rejected: every
 * tp rank dispatching all its tokens (each expert would see each token tp /
 * etp times).
 *
 * Gradients: an expert's gradient on a rank covers the tokens of its whole
 * ep group, so expert tensors are summed over edp and every other tensor over
 * dp (areal_par_ep_reduce_grads); the router's gradient is complete per rank
 * (its own tokens) and is a dense tensor. The gradient norm counts dense
 * tensors on dp-cp rank 0 and expert tensors on edp rank 0.
 */
#ifndef AREAL_PARALLEL_EP_H
#define AREAL_PARALLEL_EP_H

#include <stdint.h>

#include "areal/comm/coll.h"
#include "areal/error.h"
#include "areal/groups.h"
#include "areal/model/model.h"
#include "areal/model/moe_dispatch.h"

/* The groups token dispatch uses (borrowed; NULL: size one). */
typedef struct areal_par_ep_groups {
    areal_coll *ep, *etp, *edp; /* the expert layout's groups */
    areal_coll *tp, *pp;        /* the dense layout's */
    areal_coll *dp;             /* dp-cp: the dense tensors' replicas (the dp group when cp 1) */
    areal_coll *tp_dp_cp;       /* every rank of one pipeline stage: the norm's sum */
} areal_par_ep_groups;

/* The groups of a role (out of areal_comm_role_groups' table), borrowed. */
areal_par_ep_groups areal_par_ep_groups_of(areal_coll *const gs[AREAL_GROUP_KIND_COUNT]);

/* The dispatcher of one rank: bind it with areal_par_ep_bind. */
typedef struct areal_par_ep {
    areal_par_ep_groups g;
    int n_parts, part; /* tp / etp token parts, this rank's */
    int contrib;       /* this rank writes its part into the sum over tp (etp rank 0) */
    long rows_in;      /* statistics of the forwards: slots received for local experts */
    long empty;        /* (layer, local expert) pairs that received no token */
    int64_t *load;     /* optional, the caller's [num_layers * num_experts]: += the rows each
                          local expert received, at [layer * num_experts + expert] */
} areal_par_ep;

/*
 * The shard of a rank under dispatch: areal_par_shard_of's (tp, pp, ep from
 * the groups) with etp from g->etp and ep_a2a set. AREAL_EINVAL (naming the
 * field) when cfg cannot be split so, or when etp does not divide tp.
 */
int areal_par_ep_shard_of(const areal_model_config *cfg, const areal_par_ep_groups *g,
                          areal_model_shard *out, areal_error *err);

/* A dispatcher over g (copied; the groups stay borrowed). AREAL_EINVAL when etp does not divide tp.
 */
int areal_par_ep_init(areal_par_ep *d, const areal_par_ep_groups *g, areal_error *err);

/* The dispatcher's table (for a caller wrapping it, as the failure tests do); ctx an areal_par_ep.
 */
const areal_moe_dispatch *areal_par_ep_dispatch_ops(void);

/* Binds d (borrowed, outliving m's forwards and backwards) as m's MoE dispatcher. */
void areal_par_ep_bind(areal_model *m, areal_par_ep *d);

/*
 * After the backward (and the tp partials' and tied embedding's sums): sums
 * the expert tensors' gradients over g->edp and the others' over g->dp, each
 * run of consecutive tensors of one kind in one all-reduce. The collective's
 * error.
 */
int areal_par_ep_reduce_grads(areal_model *m, const areal_par_ep_groups *g, areal_error *err);

/*
 * Whether this rank counts parameter i of m (each distinct element once in
 * the world): expert tensors on edp rank 0 (distinct over ep, etp, pp),
 * dense ones on dp-cp rank 0, a tensor-parallel slice on every tp rank, a
 * replicated tensor on tp rank 0, the tied embedding on the first stage. The
 * norm's rule, and the one owner that writes a whole HF tensor (step.h).
 */
int areal_par_ep_counts(const areal_model *m, const areal_par_ep_groups *g, size_t i);

/*
 * The global L2 norm of m->grads (after areal_par_ep_reduce_grads) over every
 * distinct element: counted as the header says, summed over tp_dp_cp and
 * pp in fp32, accumulated in double per rank.
 */
int areal_par_ep_grad_norm(const areal_model *m, const areal_par_ep_groups *g, double *norm,
                           areal_error *err);

#endif
