/*
 * ckpt_shard.h - sharded, layout-independent checkpoints: every rank
 * writes only what it holds, and any other layout reads them back.
 *
 * A checkpoint directory holds config.json, one safetensors file per rank
 * (shard-RRRRR-of-WWWWW.safetensors) and index.json, written last by rank 0
 * after every shard exists ({"format": "areal-sharded-v1", "world", "layout",
 * "step"}: a directory without it is an unfinished checkpoint). A shard file
 * is a list of pieces, each a 1-D F32 tensor "tK" whose metadata entry "tK"
 * says what it is: "<kind> <dim> <start> <len> <a> <b> <HF name>" - kind 0
 * the parameters, 1 AdamW's exp_avg, 2 its exp_avg_sq; the writer's local
 * tensor being the slice (dim, start, len) of the HF tensor (dim -1: whole,
 * as areal_tensor_slice), the piece its row-major elements [a, b). So:
 * - a model-parallel rank (tp / pp / ep slices, plain AdamW) writes the
 *   local slices it owns whole (the owner of areal_par_counts on dp rank 0,
 *   or edp rank 0 for experts: the same owners as ckpt_layout.h);
 * - a ZeRO-1 rank writes its parameters' slices as above and its moments as
 *   the pieces of its flat range [lo, hi) that fall in each tensor, so each
 *   rank writes 1/dp of the optimizer state and nobody gathers it;
 * - an FSDP rank (fsdp.h) writes its ranges of every tensor, parameters and
 *   moments alike.
 * The reader rebuilds one whole HF tensor at a time from the pieces of all
 * shards that cover it (checking every element is covered) and cuts its
 * own slice, so a layout reads any other's files with one tensor's worth
 * of scratch. Rejected: a whole-model gather (ckpt_layout.h's form, which
 * needs three whole-model buffers on every rank); a rank-0-written index of
 * every piece (the pieces are described where they lie, so writing needs no
 * collective but the final barrier).
 */
#ifndef AREAL_PARALLEL_CKPT_SHARD_H
#define AREAL_PARALLEL_CKPT_SHARD_H

#include "areal/comm/coll.h"
#include "areal/error.h"
#include "areal/model/model.h"
#include "areal/model/optim.h"
#include "areal/parallel/dp.h"
#include "areal/parallel/fsdp.h"
#include "areal/parallel/overlap.h"

/*
 * Writes this rank's shard of m (its parameters) and of its optimizer
 * state into the existing directory dir, then (rank 0 of world, after
 * every rank's shard) config.json (`config_json` verbatim) and index.json
 * recording `layout`. The optimizer is either plain AdamW `adam` over m's
 * local parameters (z NULL) or the ZeRO-1 state z (adam NULL). dp_rank and
 * edp_rank: this rank's member indices in its dp and edp groups. Every rank
 * of world (NULL: one process) calls it. AREAL_EINVAL (both or neither
 * optimizer), AREAL_ENOMEM, AREAL_EIO naming the file, the collective's
 * error.
 */
int areal_par_ckpt_save_shards(const char *dir, const char *config_json, const char *layout,
                               const areal_model *m, const areal_adamw *adam,
                               const areal_par_zero1 *z, areal_coll *world, int dp_rank,
                               int edp_rank, areal_error *err);

/*
 * As areal_par_ckpt_save_shards with the overlapped ZeRO-1 reducer o
 * (overlap.h; its model o->m): the parameters as above, the moments as the
 * pieces of o's per-bucket ranges - the same saved form as one contiguous
 * range, so the reader needs no knowledge of the buckets. AREAL_EINVAL
 * when o is not ZeRO-1; errors as above.
 */
int areal_par_ckpt_save_shards_overlap(const char *dir, const char *config_json, const char *layout,
                                       const areal_par_overlap *o, areal_coll *world, int dp_rank,
                                       int edp_rank, areal_error *err);

/*
 * As areal_par_ckpt_save_shards for a rank holding n model chunks (the
 * interleaved pipeline, step.h's areal_par_step_vpp): ms[c] with its plain
 * AdamW state adams[c], every chunk's pieces in the rank's one shard file
 * (the pieces name their HF tensors, so the reader needs no knowledge of
 * chunks; each chunk reads back with areal_par_ckpt_load_shards). No expert
 * parallelism (the owners are dp rank 0's). The step recorded: adams[0]'s.
 * AREAL_EINVAL (n < 1); errors as above.
 */
int areal_par_ckpt_save_shards_chunks(const char *dir, const char *config_json, const char *layout,
                                      const areal_model *const *ms, const areal_adamw *const *adams,
                                      int n, areal_coll *world, int dp_rank, areal_error *err);

/* As areal_par_ckpt_save_shards for the fully sharded state f (its ranges, moments included). */
int areal_par_ckpt_save_shards_fsdp(const char *dir, const char *config_json, const char *layout,
                                    areal_par_fsdp *f, areal_coll *world, areal_error *err);

/*
 * Reads a sharded checkpoint into m (a model already made for the shard
 * this rank holds, areal_model_init_shard of dir's config.json): its
 * parameters, and when adam is not NULL AdamW's state over m's local
 * parameters (initialised here; a ZeRO-1 rank then takes its range with
 * areal_par_zero1_load). No collective. AREAL_EIO (a file, naming it; no
 * index.json: an unfinished checkpoint), AREAL_EINVAL (a tensor not wholly
 * covered by the shards, naming it and the element count), AREAL_ENOMEM;
 * on failure *adam is empty.
 */
int areal_par_ckpt_load_shards(const char *dir, areal_model *m, areal_adamw *adam,
                               areal_error *err);

/* As areal_par_ckpt_load_shards into the fully sharded state f (parameters, moments, step). */
int areal_par_ckpt_load_shards_fsdp(const char *dir, areal_par_fsdp *f, areal_error *err);

#endif
