/*
 * ckpt_layout.h - layout-independent checkpoints: whatever the layout that
 * trained them, the weights are written as one HF checkpoint (config.json
 * and model.safetensors, whole tensors under their HF names) and the AdamW
 * state as optim.safetensors (each parameter's exp_avg and exp_avg_sq whole,
 * under "<name>.exp_avg" / "<name>.exp_avg_sq", and "optimizer.step"), its
 * metadata recording the layout that wrote it. Any other layout loads the
 * weights with areal_model_load_shard and its slices of the moments with
 * areal_par_ckpt_load_optim, and continues exactly.
 *
 * The assembly: every distinct element has one owner among the ranks (the
 * tp x pp x ep ownership of areal_par_counts, on data-parallel rank 0, or
 * expert-data-parallel rank 0 for the experts); each rank writes what it
 * owns into zeroed whole-model buffers and one all-reduce (sum) over the
 * world completes them, then the world's rank 0 writes the files. Every
 * rank thus holds three whole-model buffers for the call: fine for the
 * tests' models, and the road to take for large ones is the streamed form
 * (each owner sending its slices of one tensor at a time to the writer).
 * The moments are written whole rather than as per-rank shard files, so
 * reading them needs no knowledge of the writer's layout (recorded for the
 * record only). A ZeRO-1 optimizer's flat ranges are not handled here:
 * ckpt_shard.h's per-rank format writes those (and FSDP's) without any
 * whole-model buffer, and reads into any layout the same way.
 */
#ifndef AREAL_PARALLEL_CKPT_LAYOUT_H
#define AREAL_PARALLEL_CKPT_LAYOUT_H

#include "areal/comm/coll.h"
#include "areal/error.h"
#include "areal/model/model.h"
#include "areal/model/optim.h"

/*
 * Writes m's whole model and AdamW state `adam` (moments over m's local
 * parameters) into the existing directory `dir` as above, config.json being
 * `config_json` verbatim and `layout` (e.g. "d2t2p1e1") the metadata. Every
 * rank of `world` (NULL: one process) calls it; dp_rank and edp_rank are
 * this rank's member indices in its data- and expert-data-parallel groups.
 * AREAL_ENOMEM, AREAL_EIO (naming the file) or the collective's error.
 */
int areal_par_ckpt_save(const char *dir, const char *config_json, const char *layout,
                        const areal_model *m, const areal_adamw *adam, areal_coll *world,
                        int dp_rank, int edp_rank, areal_error *err);

/*
 * Initialises *adam for m's local parameters from dir/optim.safetensors
 * (areal_par_ckpt_save's): each moment tensor's slice for this shard, and
 * the step. AREAL_EIO (the file), AREAL_EINVAL (a tensor missing or of the
 * wrong size, naming it), AREAL_ENOMEM; on failure *adam is empty.
 */
int areal_par_ckpt_load_optim(const char *dir, const areal_model *m, areal_adamw *adam,
                              areal_error *err);

#endif
