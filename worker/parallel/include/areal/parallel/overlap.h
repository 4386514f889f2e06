/*
 * overlap.h - the data-parallel gradient reduction overlapped with the
 * backward: gradients in buckets of contiguous tensors, each bucket's
 * collective queued (areal_coll_*_async: the CPU backend's per-group worker
 * thread moves it while this thread computes) as soon as the model's
 * gradient-ready hook (areal_model_set_grad_ready) has reported all of it,
 * everything waited before the optimizer. Plain DP all-reduces each bucket
 * in place; ZeRO-1 reduce-scatters it, so each rank owns 1/dp of every
 * bucket (Megatron's distributed optimizer: a rank's range is one piece per
 * bucket, not one contiguous range as areal_par_zero1's is).
 *
 * What is overlapped and what is not, and why:
 * - every tensor whose gradient the stage's backward completes: the head and
 *   final norm, each layer, the embedding (pp 1, or untied);
 * - not the tensors partial over tp or ep (qk-norm, sequence-parallel norms,
 *   the router: areal_model_shard_grad_partial) nor a pipeline's tied
 *   embedding: their dp sum must follow areal_par_reduce_partial_grads /
 *   areal_par_reduce_tied_embed, which the caller runs after the backward;
 *   they sit in buckets of their own ("late"), launched by finish;
 * - expert tensors ("mlp.experts.") go over edp when one is given (token
 *   dispatch, ep.h), in buckets of their own, else over dp.
 * Buckets are cut in backward order (from the buffer's end) and launched in
 * the order the hook completes them, which every rank of a group shares
 * (same shard, same backward), so the queued collectives match.
 *
 * The reduction order of each element is that of the same bucket's blocking
 * collective: the result is bitwise the non-overlapped reduction of the same
 * buckets (the reducer with the hook unset). Against areal_par_dp_reduce_grads
 * / areal_par_zero1_step with other bucket boundaries it differs by the
 * collective's reassociation (within 1e-6 relative; test_par_overlap).
 *
 * Rejected: a hook per tensor (hundreds of tiny reports per layer for one
 * bucket's decision), and for ZeRO-1 keeping areal_par_zero1's contiguous
 * range (its reduce-scatter can start only when the whole buffer is done,
 * since rank 0's range is the embedding, which completes last).
 */
#ifndef AREAL_PARALLEL_OVERLAP_H
#define AREAL_PARALLEL_OVERLAP_H

#include <stddef.h>

#include "areal/comm/coll.h"
#include "areal/error.h"
#include "areal/model/model.h"
#include "areal/model/optim.h"
#include "areal/parallel/groups.h"

typedef struct areal_par_bucket {
    size_t lo, n;          /* floats [lo, lo + n) of the flat gradient */
    size_t ready;          /* floats of it reported in this step */
    int late;              /* waits for the caller's partial / tied sums: launched by finish */
    int expert;            /* over edp */
    int launched;          /* in this step */
    size_t c, goff, soff;  /* ZeRO-1: floats per rank, offset in gshard, in the staging buffer */
    areal_coll_work *work; /* the queued collective (NULL: none or done) */
} areal_par_bucket;

typedef struct areal_par_overlap_stats {
    long early, late;        /* buckets launched from the hook (inside the backward) / by finish */
    size_t early_bytes;      /* gradient bytes launched from the hook */
    long done_before_finish; /* early buckets already complete when finish began */
} areal_par_overlap_stats;

typedef struct areal_par_overlap {
    areal_model *m;       /* borrowed */
    areal_coll *dp, *edp; /* borrowed; edp NULL: experts over dp */
    int zero1;            /* reduce-scatter into pieces instead of all-reduce in place */
    areal_par_bucket *b;  /* [nb] in launch order (descending lo) */
    size_t nb, bucket;    /* buckets; floats per bucket (the cap) */
    float *stage;         /* ZeRO-1: [sum c * dp] padded bucket inputs, gathered outputs */
    float *gshard;        /* ZeRO-1: [S = sum c] this rank's piece of every bucket, summed */
    float *pshard;        /* ZeRO-1: [S] the same pieces of the parameters */
    size_t S;             /* ZeRO-1: floats this rank owns (pads included) */
    areal_adamw adam;     /* ZeRO-1: moments of the pieces */
    areal_par_overlap_stats stats; /* of the step under way, or the last finished one */
    areal_par_overlap_stats total; /* summed over finished steps */
    int fresh;                     /* finish ran: the next launch starts a step's stats */
} areal_par_overlap;

/*
 * Plans the buckets of m (`bucket` floats each at most, 0: 1 Mi floats; a
 * larger tensor is a bucket of its own), allocates ZeRO-1's pieces when
 * zero1, and sets m's gradient-ready hook to o (which must not move until
 * areal_par_overlap_free). dp, edp borrowed (NULL: size one). AREAL_EINVAL
 * for ZeRO-1 with an edp of size > 1 (its pieces would follow two groups;
 * not built), AREAL_ENOMEM; on failure *o is empty and m's hook unset.
 */
int areal_par_overlap_init(areal_par_overlap *o, areal_model *m, areal_coll *dp, areal_coll *edp,
                           size_t bucket, int zero1, areal_error *err);

/*
 * The hook (an areal_model_grad_ready_fn, ctx an areal_par_overlap): counts
 * [lo, hi) into the buckets it covers and queues each bucket it completes.
 * The collective's issue error.
 */
int areal_par_overlap_ready(void *ctx, size_t lo, size_t hi, areal_error *err);

/*
 * After the backward and the caller's partial / tied sums: queues every
 * bucket not yet launched, waits every handle (all of them, also after a
 * failure; the first error is kept) and readies o for the next step. Plain
 * DP: m->grads then holds the sum over dp (edp for experts). ZeRO-1:
 * o->gshard holds this rank's summed pieces, m->grads is left as it was.
 */
int areal_par_overlap_finish(areal_par_overlap *o, areal_error *err);

/*
 * ZeRO-1's optimizer step on o's pieces: finish, the global gradient norm
 * over dp and g's model-parallel groups (*norm, before clipping), clipping
 * to max_norm (> 0), AdamW on the pieces, the parameters all-gathered
 * bucket by bucket (queued at once). AREAL_EINVAL when o is not ZeRO-1; the
 * collective's error.
 */
int areal_par_overlap_zero1_step(areal_par_overlap *o, const areal_par_groups *g,
                                 const areal_adamw_cfg *cfg, double lr, double max_norm,
                                 double *norm, areal_pool *pool, areal_error *err);

/*
 * ZeRO-1: this rank's flat range [*lo, *hi) of bucket k (empty past the
 * bucket's end); its moments are o->adam's floats from o->b[k].goff on.
 * This is what ckpt_shard.h's areal_par_ckpt_save_shards_overlap writes:
 * the same saved form as areal_par_zero1's one range (pieces of HF
 * tensors), so either reads the other's checkpoints and any layout reads
 * both.
 */
void areal_par_overlap_piece(const areal_par_overlap *o, size_t k, size_t *lo, size_t *hi);

/*
 * ZeRO-1: takes this rank's pieces of `full` (AdamW state over all of the
 * model's local parameters, e.g. areal_par_ckpt_load_shards') into o's
 * moments, and its step; the pads stay zero. AREAL_EINVAL when o is not
 * ZeRO-1 or full is not of the model's parameter count.
 */
int areal_par_overlap_load(areal_par_overlap *o, const areal_adamw *full, areal_error *err);

/* Waits whatever is still queued, unsets m's hook, frees o. */
void areal_par_overlap_free(areal_par_overlap *o);

#endif
