/*
 * step.h - one optimizer step of a parallel layout on this rank's shard:
 * the composition of the pieces (pipe.h, fsdp.h, dp.h, reduce.h, ppo.h,
 * vocab.h) that the trainer (worker/train) and the equivalence tests
 * (tests/par_test_util.h) both run, so the layout a test proves equal to
 * one process is the layout the trainer trains with.
 *
 * A step is three calls, each made by every rank of the layout alike:
 *   areal_par_step_logprobs  the no-grad forward (proximal-logprob
 *                            recompute): vocab-parallel logprobs on the
 *                            last stage, shared to every stage;
 *   areal_par_step_grads     forward and backward (1F1B, or FSDP's
 *                            layer-by-layer), the loss summed over the data
 *                            group, the partial (tp / ep) and tied-embedding
 *                            gradients reduced, and for plain data
 *                            parallelism the gradients summed over the data
 *                            group;
 *   areal_par_step_apply     the global gradient norm, clipping and AdamW:
 *                            whole (AREAL_PAR_ADAMW), on the rank's 1/dp
 *                            range (AREAL_PAR_ZERO1: reduce-scatter, update,
 *                            all-gather), or on FSDP's ranges.
 * The split between grads and apply is there so a test can check the summed
 * gradient before it is clipped; areal_par_step_grpo runs both with
 * worker/rl's decoupled PPO loss.
 *
 * The data group is the one the tokens are split over (the layout's dp
 * group; dp-cp under context parallelism, whose ranks hold parts of each
 * sequence; NULL where every rank sees the same tokens, e.g. the replicated
 * expert dispatch): the loss's token count and the gradients are summed
 * over it. Rejected: one entry point per layout kind (the trainer would
 * branch per kind again) and a step that owns the model (the tests load
 * synthetic weights into the shard, the trainer HF checkpoints).
 *
 * Two compositions are switched on after init, before the first call:
 *   areal_par_step_cp   context parallelism (cp.h): every call takes the
 *                       whole micro-batches of the rank's dp slice (the same
 *                       on every cp rank) and cuts each into this rank's
 *                       load-balanced causal shard itself, so the caller
 *                       never handles shards; the GRPO data are gathered to
 *                       the shard's tokens, the recomputed logprobs come back
 *                       in whole micro-batch order on every rank;
 *   areal_par_step_ep   expert parallelism with all-to-all token dispatch
 *                       (ep.h): the dispatcher bound to the shard, expert
 *                       gradients summed over edp and the rest over dp-cp,
 *                       ep.h's norm. The ep ranks hold different tokens, so
 *                       the data group is the dp group that contains them.
 */
#ifndef AREAL_PARALLEL_STEP_H
#define AREAL_PARALLEL_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "areal/comm/coll.h"
#include "areal/error.h"
#include "areal/model/model.h"
#include "areal/model/optim.h"
#include "areal/parallel/cp.h"
#include "areal/parallel/dp.h"
#include "areal/parallel/ep.h"
#include "areal/parallel/fsdp.h"
#include "areal/parallel/groups.h"
#include "areal/parallel/overlap.h"
#include "areal/parallel/pipe.h"
#include "areal/parallel/ppo.h"
#include "areal/parallel/vocab.h"

/* Where the optimizer state lives. */
typedef enum areal_par_optim {
    AREAL_PAR_ADAMW = 0, /* whole on every rank (moments of the local shard) */
    AREAL_PAR_ZERO1 = 1, /* moments of 1/dp of the local shard (Megatron's distributed optimizer) */
    AREAL_PAR_FSDP = 2,  /* parameters, gradients and moments all sharded (fsdp.h) */
} areal_par_optim;

typedef struct areal_par_step {
    areal_par_optim kind;
    areal_par_groups g;   /* borrowed */
    areal_coll *data;     /* borrowed: the group the batch is split over (NULL: one) */
    areal_model *m;       /* borrowed: the rank's shard, bound to g (ADAMW, ZERO1) */
    areal_par_fsdp *fsdp; /* borrowed (FSDP) */
    areal_adamw adam;     /* ADAMW: moments of m's local parameters (owned) */
    areal_par_zero1 z;    /* ZERO1 (owned) */
    size_t bucket;        /* plain dp gradient buckets in floats (0: dp.h's default) */
    areal_pool *pool;     /* borrowed, nullable */
    /* ADAMW / ZERO1 over a data group of 2+: the gradient's dp sum overlapped with the
     * backward (areal_par_step_overlap; NULL: after it; ZERO1's moments are then its
     * pieces, z unused). Owned; s must not move while set (the model's hook points here). */
    areal_par_overlap *overlap;
    /* areal_par_step_cp: the cp group (cp.cp NULL: none); during a call, the shards of its
     * micro-batches (the attention hook matches them). The model's hook points here. */
    areal_par_cp cp;
    areal_par_ep *ep; /* areal_par_step_ep: the token dispatcher (owned; NULL: none) */
    /* areal_par_step_vpp: the rank's model chunks (chunks[0] == m; the array owned, the
     * chunks borrowed) and the moments of chunks 1.. (cadam[0] unused: chunk 0's are adam) */
    int vpp;
    areal_model **chunks;
    areal_adamw *cadam;
    long tokens_run; /* tokens this rank's model trained on, summed over grads calls (a cp
                        shard's, not its micro-batch's: what a test checks the split by) */
} areal_par_step;

/*
 * Sets up s for the shard model m (ADAMW, ZERO1; bound with areal_par_bind
 * here) or the FSDP state f (FSDP), the groups g and the data group (all
 * borrowed, outliving s), optimizer moments zero. AREAL_EINVAL (the model
 * or state missing for the kind, naming it), AREAL_ENOMEM; on failure s
 * holds nothing.
 */
int areal_par_step_init(areal_par_step *s, areal_par_optim kind, const areal_par_groups *g,
                        areal_coll *data, areal_model *m, areal_par_fsdp *f, areal_pool *pool,
                        areal_error *err);
void areal_par_step_free(areal_par_step *s);

/*
 * Overlaps the data group's gradient sum with the backward from the next
 * areal_par_step_grads on (overlap.h: buckets of s->bucket floats queued as
 * the backward completes them; the tp / ep partial and tied sums still run
 * after it). ADAMW: each bucket all-reduced; ZERO1: each bucket
 * reduce-scattered, the moments then live in o's per-bucket pieces (the
 * one-range state s->z is freed; ckpt_shard.h's
 * areal_par_ckpt_save_shards_overlap saves them in the same form, and
 * areal_par_overlap_load takes them back), so call it before any step or
 * load (AREAL_EINVAL once ZeRO-1's step is not 0). Only where the data
 * group has 2+ ranks (else nothing to overlap: AREAL_OK, no change);
 * AREAL_EINVAL for FSDP. The same step within 1e-6 relative (the buckets'
 * own sums; test_par_dp d2-overlap, test_par_overlap). AREAL_ENOMEM.
 */
int areal_par_step_overlap(areal_par_step *s, areal_error *err);

/*
 * Context parallelism over cp (borrowed, outliving s) from the next call on
 * (see the header): the model's attention bound to the shards the step makes
 * (s must not move after). s's data group must be the dp-cp group (the
 * token count, the loss and the gradients are summed over it; ZeRO-1 shards
 * over it, as Megatron's distributed optimizer does over DP x CP). cp NULL or
 * of one rank: no change. AREAL_EINVAL for FSDP (its layer-by-layer forward
 * takes no shard) or with areal_par_step_ep (not composed yet).
 */
int areal_par_step_cp(areal_par_step *s, areal_coll *cp, areal_error *err);

/*
 * Expert parallelism with token dispatch over g (copied; its groups
 * borrowed, outliving s) from the next call on: the dispatcher made, bound
 * to the shard (made with areal_par_ep_shard_of, s must not move after), the
 * gradients reduced and the norm counted as ep.h says. ADAMW only (ZeRO-1's
 * reduce-scatter over dp would sum different experts' gradients; FSDP holds
 * no shard), not overlapped, not with areal_par_step_cp: AREAL_EINVAL naming
 * which. AREAL_ENOMEM, areal_par_ep_init's error.
 */
int areal_par_step_ep(areal_par_step *s, const areal_par_ep_groups *g, areal_error *err);

/*
 * The interleaved pipeline (vpp.h) from the next call on: chunks[0..vpp)
 * are this rank's model chunks (borrowed, outliving s; chunks[0] the shard
 * s was initialised with, chunk c virtual stage c*p + r of p*vpp), each
 * bound to s's groups, with AdamW moments of their own (zero). logprobs,
 * grads (the interleaved 1F1B, then the partial, tied and data-group sums
 * chunk by chunk, in one order on every rank), apply (vpp.h's norm over
 * every chunk, each chunk clipped and stepped) and the HF tensors (each
 * looked up in every chunk) then cover every chunk; n_mb must be a multiple
 * of p (AREAL_EINVAL from the schedule). The proximal-logprob recompute
 * runs the interleaved forward-backward with a zero loss gradient (vpp.c
 * has no forward-only schedule yet): the same logprobs at a backward's
 * extra cost, and zero gradients that the next grads call zeroes anyway.
 * ADAMW only, not overlapped, not with cp or ep (AREAL_EINVAL naming which;
 * ZeRO-1's ranges are over one shard's buffer); vpp < 2: no change.
 * AREAL_ENOMEM, areal_adamw_init's error.
 */
int areal_par_step_vpp(areal_par_step *s, areal_model *const *chunks, int vpp, areal_error *err);

/* Chunk c of the rank (c < max(vpp, 1); chunk 0 is s->m) and its moments. */
areal_model *areal_par_step_chunk(const areal_par_step *s, int c);
areal_adamw *areal_par_step_chunk_adam(areal_par_step *s, int c);

/* The number of model chunks this rank holds (1 without areal_par_step_vpp). */
int areal_par_step_n_chunks(const areal_par_step *s);

/*
 * During a call under areal_par_step_cp: micro-batch mb's shard (its tokens'
 * indices in the micro-batch, t.gidx, are what a loss function maps its
 * targets through); NULL without context parallelism or outside a call.
 */
const areal_par_cp_shard *areal_par_step_cp_shard(const areal_par_step *s, int mb);

/* The vocabulary split of this rank's logits (tp NULL: whole rows). */
areal_par_vocab areal_par_step_vocab(const areal_par_step *s);

/* The optimizer's moments over this rank's state and its step counter (borrowed). */
areal_adamw *areal_par_step_adam(areal_par_step *s);

/*
 * The no-grad forward of mbs[0..n_mb): logp[i][t] = log p(targets[i][t]) at
 * `temperature` (0 where the target is < 0) on every rank (computed on the
 * last stage, broadcast over pp). AREAL_EINVAL (n_mb < 1), AREAL_ENOMEM, a
 * model's or a collective's error.
 */
int areal_par_step_logprobs(areal_par_step *s, const areal_batch *mbs,
                            const int32_t *const *targets, int n_mb, float temperature,
                            float *const *logp, areal_error *err);

/*
 * Zeroes the gradients and runs the forward and backward of mbs[0..n_mb)
 * with loss_fn (pipe.h's contract; under areal_par_step_cp it is called with
 * the shard's logits, T its tokens, areal_par_step_cp_shard(s, mb) their
 * indices); *loss (nullable) the loss summed over
 * micro-batches and the data group, on every rank. Then the tp / ep
 * partial and tied-embedding reductions and (ADAMW) the data group's
 * gradient sum, so m->grads is the whole batch's gradient of the rank's
 * shard; ZERO1 leaves the sum to apply's reduce-scatter, FSDP has reduced
 * into its ranges. A model's, the loss's or a collective's error.
 */
int areal_par_step_grads(areal_par_step *s, const areal_batch *mbs, int n_mb,
                         areal_par_loss_fn loss_fn, void *loss_ctx, double *loss, areal_error *err);

/*
 * The optimizer step after areal_par_step_grads: the global gradient norm
 * (*norm, before clipping) over every distinct element, clipping to
 * max_norm (<= 0: none), AdamW at lr. The collective's error.
 */
int areal_par_step_apply(areal_par_step *s, const areal_adamw_cfg *cfg, double lr, double max_norm,
                         double *norm, areal_error *err);

/* What a GRPO step reports. */
typedef struct areal_par_step_out {
    double loss;                /* summed over micro-batches and the data group */
    double grad_norm;           /* before clipping */
    areal_ppo_loss_stats stats; /* this rank's micro-batches, shared from the last stage */
} areal_par_step_out;

/*
 * One GRPO optimizer step: worker/rl's decoupled PPO loss (ppo.h) on
 * micro-batches mbs[0..n_mb) with their data pmbs (borrowed), the token
 * count summed over the data group, then grads and apply as above.
 * out->stats are the last stage's, broadcast over pp (counts, sums and
 * extremes; fp32 on the wire). Under areal_par_step_cp the stats are this
 * cp rank's tokens', and the sequence-level options (opts->sequence_level,
 * sequence-level rejection) are refused (AREAL_EINVAL): a shard holds parts
 * of sequences. Errors as above.
 */
int areal_par_step_grpo(areal_par_step *s, const areal_batch *mbs, const areal_par_ppo_mb *pmbs,
                        int n_mb, const areal_ppo_loss_opts *opts, float temperature,
                        const areal_adamw_cfg *cfg, double lr, double max_norm,
                        areal_par_step_out *out, areal_error *err);

/*
 * ---- the state as HF tensors (step_hf.c): what weight sync, HF saves and
 * checkpoints read, and what a resume writes, whatever the layout.
 */

/* Which state of a tensor: the parameters or AdamW's moments (fsdp.h's numbering). */
enum { AREAL_PAR_PARAMS = 0, AREAL_PAR_EXP_AVG = 2, AREAL_PAR_EXP_AVG_SQ = 3 };

/*
 * The whole HF tensor hf (an entry of areal_model_expected_tensors) of
 * state `which` into out (its numel floats) on every rank of `world` (the
 * layout's every rank; every rank calls it alike, tensor by tensor in one
 * order). Each distinct element has one owner (areal_par_counts' tp x pp
 * owner on dp rank 0; a ZeRO-1 moment's owner is the dp rank whose range
 * holds it), which writes it into a zeroed buffer, and one all-reduce (sum)
 * over world completes it: exact, since every other term is zero. FSDP
 * gathers over its dp group instead. One tensor of scratch; rejected here:
 * a whole-model buffer (ckpt_layout.h's assembly). AREAL_EINVAL (which),
 * AREAL_ENOMEM, the collective's error.
 */
int areal_par_step_get_tensor(areal_par_step *s, areal_coll *world, const areal_tensor_spec *hf,
                              int which, float *out, areal_error *err);

/*
 * Sets this rank's part of the whole HF tensor hf of state `which` from
 * `whole` (its numel floats): the shard's slice, a ZeRO-1 rank's range of
 * the moments, FSDP's ranges. No collective. A tensor the rank does not hold
 * is skipped. AREAL_EINVAL (which).
 */
int areal_par_step_set_tensor(areal_par_step *s, const areal_tensor_spec *hf, int which,
                              const float *whole, areal_error *err);

#endif
