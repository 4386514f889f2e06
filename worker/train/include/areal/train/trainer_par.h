/*
 * trainer_par.h - the trainer split by a layout (fsdp:dN, megatron:dNtNpN):
 * each rank holds its shard of the policy and its optimizer state and runs
 * worker/parallel's step (areal/parallel/step.h) on its data slice, so the
 * ranks together compute what one process computes on the whole batch.
 *
 * The world is the trainer's comm-runtime world (dp.h's areal_train_dp_join);
 * its groups are the layout's (areal_comm_role_groups, Megatron's order).
 * Every rank of one data slice (a dp index: its tp x pp ranks) trains the
 * same sequences; rank 0 sends each rank its slice's share (dp.h).
 *
 * The seam to weight sync and HF saves: after every step the ranks gather
 * the policy's whole HF tensors to rank 0, tensor by tensor
 * (areal_train_par_gather into rank 0's whole parameters), so the existing
 * sender (wsync_send.c, xccl.c) and hf_save.c (the disk update's HF
 * safetensors the servers load with update_weights_from_disk) read it
 * unchanged. A megatron t/p layout in xccl mode skips the per-step gather
 * (trainer.h's defer_gather): its weight update goes shard-direct
 * (xccl_shard.h) and rank 0 gathers only for a catch-up or the gathered
 * fallback (dp.h's areal_train_dp_whole). Rank 0's whole copy is the
 * parameters only (no gradients, no moments), and only weight sync needs it.
 *
 * Checkpoints do not pass through it: every rank writes its own weight
 * slices and optimizer share (trainer_par_ckpt.h over ckpt_shard.h, the
 * layout recorded) and reads any layout's back, and the older gathered form
 * (whole moments on rank 0, what layouts wrote before) still loads into any
 * layout, tensor by tensor. Rejected: the gather-to-rank-0 checkpoint that
 * came first (three whole-model buffers resident on rank 0 for it, and every
 * byte through one rank).
 *
 * The data-parallel gradient sum of megatron dN is overlapped with the
 * backward (overlap.h: ZeRO-1's reduce-scatter bucket by bucket, its moments
 * in per-bucket pieces that ckpt_shard.h saves in the same form) unless the
 * layout says no_overlap (areal-worker train --no-overlap).
 *
 * Scope: data, tensor (vocab-parallel logits when the vocabulary divides),
 * pipeline, context and expert parallelism for megatron: (ZeRO-1 over dp-cp
 * when it has 2+ ranks; plain AdamW under expert parallelism), data
 * parallelism for fsdp: (sharded parameters, gradients and moments). Context
 * parallelism: every cp rank of a data slice receives the slice's whole
 * sequences and the step cuts each micro-batch into the rank's load-balanced
 * causal shard (step.h's areal_par_step_cp); the token count, loss and
 * gradients are summed over dp-cp. Expert parallelism (e, etp from the
 * (attn:|ffn:) form): each rank loads only its experts (and their etp
 * slice), the ep ranks are carved out of dp and hold different sequences,
 * tokens go to their experts by all-to-all (areal_par_step_ep). Both take
 * the gathered weight-sync path (areal_train_par_sharded is false: the
 * shard-direct plan knows tp / pp slices only). Refused with an error
 * naming what is missing: c > 1 with e > 1, fsdp with t > 1 or c > 1.
 * The interleaved pipeline (vpp > 1, from the job config's
 * actor.megatron.virtual_pipeline_parallel_size): each rank loads its vpp
 * chunks (virtual stages c*p + r of p*vpp), trains them with step.h's
 * areal_par_step_vpp (plain AdamW per chunk, no ZeRO-1, no overlap),
 * checkpoints every chunk into its one shard file, and takes the gathered
 * weight-sync path; megatron d, p only so far (t, c, e refused by name).
 */
#ifndef AREAL_TRAIN_TRAINER_PAR_H
#define AREAL_TRAIN_TRAINER_PAR_H

#include <stdbool.h>
#include <stdint.h>

#include "areal/alloc.h"
#include "areal/comm/comm.h"
#include "areal/error.h"
#include "areal/model/model.h"
#include "areal/model/optim.h"
#include "areal/parallel/step.h"
#include "areal/train/wsync_shard.h"

/* A trainer layout: backend and sizes, and the world it runs on. */
typedef struct areal_train_layout {
    areal_backend backend; /* AREAL_BACKEND_FSDP or AREAL_BACKEND_MEGATRON */
    areal_strategy s;      /* complete (areal_alloc_parse's) */
    areal_comm *comm;      /* borrowed: the trainer's world, of s's world size */
    bool no_overlap;       /* megatron dN: the dp reduction after the backward, not during it */
    size_t dp_bucket;      /* megatron dN: gradient bucket in floats (0: dp.h's default) */
    int vpp; /* megatron p > 1: virtual pipeline chunks per rank (0, 1: none; the job config's
                actor.megatron.virtual_pipeline_parallel_size, set by areal_trainer_init_par) */
} areal_train_layout;

/*
 * Parses a layout "fsdp:d2", "megatron:d1t2p2" (one training component of the
 * allocation grammar, lib/layout/alloc.h, the (attn:|ffn:) hybrid form
 * included) into *out (comm NULL). AREAL_EINVAL naming the string and what is
 * wrong (a rollout backend, several components, a combination the trainer
 * does not build: c > 1 with e > 1, fsdp with t > 1 or c > 1).
 */
int areal_train_layout_parse(const char *s, areal_train_layout *out, areal_error *err);

/* The layout's world size (dp * tp * pp * cp; ep adds no ranks). */
int areal_train_layout_world(const areal_train_layout *l);

typedef struct areal_train_par areal_train_par;

/*
 * Makes this rank's state for layout l (l->comm's rank): the groups, the
 * shard of the HF checkpoint in model_dir (only the shard is read: tensor by
 * tensor for FSDP), the step (AdamW cfg adamw, pool borrowed), and the map of
 * every world rank's data slice. A collective over the world. AREAL_EINVAL
 * (the world is not the layout's; a model the layout cannot split, naming the
 * field), AREAL_EIO, AREAL_ENOMEM, a collective's error; *out NULL on failure.
 */
int areal_train_par_create(const areal_train_layout *l, const char *model_dir,
                           const areal_adamw_cfg *adamw, areal_pool *pool, areal_train_par **out,
                           areal_error *err);
void areal_train_par_free(areal_train_par *p);

/* The step (areal/parallel/step.h), borrowed. */
areal_par_step *areal_train_par_step(areal_train_par *p);

/* The data group's backend group (areal_pg: the advantage normalisation's sums), NULL for one. */
areal_pg *areal_train_par_data_pg(areal_train_par *p);

/* The AdamW configuration given at create. */
const areal_adamw_cfg *areal_train_par_adamw(const areal_train_par *p);

/* What a minibatch's micro-batch count must be a multiple of: p under vpp > 1, else 1. */
int areal_train_par_mb_multiple(const areal_train_par *p);

/* Data slices (the layout's dp) and world rank r's slice. */
int areal_train_par_slices(const areal_train_par *p);
int areal_train_par_slice_of(const areal_train_par *p, int r);

/*
 * Every rank: the policy's whole HF tensors (which: AREAL_PAR_PARAMS, or a
 * moment) gathered to world rank 0 into dst (rank 0's whole model's params
 * for parameters; a test's buffer for a moment: cfg's
 * areal_model_expected_tensors order, which is the whole model's buffer
 * order), one tensor of scratch at a time; dst is ignored on other ranks
 * (NULL). A collective.
 */
int areal_train_par_gather(areal_train_par *p, int which, float *dst, areal_error *err);

/*
 * Whether the layout's weight update can go shard-direct (wsync_shard.h):
 * megatron with t > 1 or p > 1 on more than one rank, without c or e.
 * Elsewhere (fsdp, d-only, cp, ep, one process) the gather through rank 0
 * stays the path.
 */
bool areal_train_par_sharded(const areal_train_par *p);

/*
 * This rank's shard-direct plan (every world rank computes the same one from
 * the shards all-gathered at create; float32 on the wire, buckets of at most
 * bucket_bytes) and *local, its slices in areal_model_shard_tensors order
 * (pointers into the live shard, valid until free; *local freed by the
 * caller, *plan with areal_wsync_plan_free). AREAL_EINVAL when not
 * areal_train_par_sharded; the plan's errors.
 */
int areal_train_par_wsync_plan(const areal_train_par *p, size_t bucket_bytes,
                               areal_wsync_plan **plan, const void ***local, areal_error *err);

#endif
