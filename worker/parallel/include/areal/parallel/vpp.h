/*
 * vpp.h - the interleaved pipeline schedule (Megatron's virtual pipeline,
 * virtual_pipeline_parallel_size = vpp > 1): each of the p ranks of the pp
 * group holds vpp model chunks, chunk c of rank r being virtual stage
 * c*p + r of p*vpp (areal_model_shard_stage(cfg, c*p + r, p*vpp, ...)), so
 * a micro-batch passes every rank vpp times and the warm-up and cool-down
 * shrink by vpp.
 *
 * Each rank runs Megatron's op order
 * (forward_backward_pipelining_with_interleaving): virtual micro-batch k
 * goes forward on chunk (k mod p*vpp) / p and backward on chunk
 * vpp - 1 - (k mod p*vpp) / p, micro-batch (k / (p*vpp))*p + k mod p;
 * min((p - r - 1)*2 + (vpp - 1)*p, m*vpp) warm-up forwards (all of them
 * when m == p), then one forward and one backward in turn, then the
 * remaining backwards. m must be a multiple of p, as Megatron requires.
 *
 * The transfers are blocking send/recv pairs, so their order matters: every
 * rank replays the same simulation of the schedule (a forward takes one
 * time unit, a backward two, an op starts when its input has arrived and
 * its rank's previous op is done, sends are instantaneous in the model) and
 * numbers each transfer by (arrival time, message). Each rank then runs its
 * ops and its transfers merged in that order, transfers first at equal
 * times. The smallest pending transfer then always has both ends ready
 * (everything before it on both ranks is an earlier transfer or an op whose
 * inputs arrived earlier), so no buffering is needed and nothing deadlocks.
 * Rejected: Megatron's batched isend/irecv (the comm runtime has no
 * non-blocking point-to-point) and the stage-parity pairing of pipe.c
 * (the chunk hop from rank p-1 back to rank 0 makes the pipeline a ring).
 */
#ifndef AREAL_PARALLEL_VPP_H
#define AREAL_PARALLEL_VPP_H

#include "areal/comm/coll.h"
#include "areal/error.h"
#include "areal/model/model.h"
#include "areal/parallel/groups.h"
#include "areal/parallel/pipe.h"

/*
 * The schedule's bubble: the idle share of each rank's time from the first
 * op anywhere to the last, averaged over the ranks, in the simulation above
 * (forward 1, backward 2 per chunk); vpp 1 simulates plain 1F1B, whose
 * bubble is (p - 1) / (m + p - 1). AREAL_EINVAL as the run would refuse
 * (vpp > 1); AREAL_ENOMEM.
 */
int areal_par_vpp_bubble(int p, int vpp, int n_mb, double *bubble, areal_error *err);

/*
 * Runs the interleaved forward and backward of mbs[0..n_mb) on this rank's
 * vpp chunks (chunks[c]: virtual stage c*p + r, made with
 * areal_model_shard_stage of p*vpp stages), accumulating their gradients;
 * *loss (nullable) gets the summed loss on every rank. AREAL_EINVAL (vpp <
 * 2, p < 2, n_mb not a multiple of p, a chunk of the wrong stage, naming
 * which); a model's, the loss's or a collective's error.
 */
int areal_par_pipe_interleaved(areal_model *const *chunks, int vpp, areal_coll *pp,
                               const areal_batch *mbs, int n_mb, areal_par_loss_fn loss_fn,
                               void *loss_ctx, double *loss, areal_error *err);

/*
 * The global L2 norm of the gradient of this rank's chunks (each distinct
 * element once, areal_par_counts), summed over g's tp, pp and ep groups.
 */
int areal_par_vpp_grad_norm(areal_model *const *chunks, int vpp, const areal_par_groups *g,
                            double *norm, areal_error *err);

#endif
