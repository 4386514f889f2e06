/*
 * fsdp.h - fully sharded data parallelism (FSDP / ZeRO-3, fsdp:dN): every
 * dp rank holds only 1/d of the parameters, of their gradients and of the
 * AdamW moments; a layer's parameters exist whole only while that layer
 * runs.
 *
 * The units (FSDP's flat parameters): one per decoder layer (the tensors
 * named model.layers.<l>.*), and the root unit (embedding, final norm,
 * lm_head). Each unit's tensors, concatenated in HF order and padded to a
 * multiple of d, are split in d equal ranges; rank r keeps range r of each
 * unit (parameters, gradients, moments). A step runs the model one layer
 * at a time, as the stages of a one-rank pipeline (areal_model_shard_stage
 * with as many stages as layers): before a layer's forward its unit is
 * all-gathered into a stage model made for it, which is freed after the
 * forward (reshard after forward); the backward gathers it again, runs the
 * layer's backward and reduce-scatters the layer's gradient into the
 * rank's range. The root unit stays gathered for the whole step (the
 * embedding runs first and, tied, again as the lm_head last: FSDP2 keeps
 * its root unit unsharded the same way), its gradient reduce-scattered once
 * after the last micro-batch. The optimizer then runs on the rank's ranges
 * only (the norm summed over dp), so nothing whole survives the step.
 *
 * Rejected: all-gathering the whole model before the forward (that is
 * ZeRO-1's memory with ZeRO-3's traffic); hooks inside the model core's
 * layer loop (the stage interface already runs a layer range with
 * activations in and out, and keeps the model core below the comm runtime).
 * Scope: data parallelism only (fsdp's tp / cp combinations and FSDP with
 * pipeline stages are not built); micro-batches run forward then backward
 * one at a time, so one micro-batch's activations are alive.
 *
 * Memory, counted as the step allocates it (areal_par_fsdp_mem, checked
 * against lib/layout's areal_mem_stage with fsdp in the tests): the
 * persistent ranges (params, grads, moments: 16 bytes a float of the
 * rank's ranges), plus while stepping the root unit whole (params and
 * gradient), one layer unit whole (gathered params and the gradient to
 * reduce-scatter) and its stage model (params and grads), and the
 * activation records of one micro-batch (the backward's transient dlogits
 * and two [T, H] gradient buffers are not counted, as the plan's
 * activations do not count the model core's backward scratch).
 */
#ifndef AREAL_PARALLEL_FSDP_H
#define AREAL_PARALLEL_FSDP_H

#include <stddef.h>
#include <stdint.h>

#include "areal/comm/coll.h"
#include "areal/error.h"
#include "areal/model/config.h"
#include "areal/model/model.h"
#include "areal/model/optim.h"
#include "areal/model/pool.h"
#include "areal/parallel/pipe.h"

typedef struct areal_par_fsdp areal_par_fsdp;

/* Bytes the state holds (persistent) and the most it held at once during a step. */
typedef struct areal_par_fsdp_mem {
    int64_t persistent;    /* the rank's ranges: params, grads, AdamW m and v */
    int64_t peak;          /* the largest live total seen: persistent + gathered + activations */
    int64_t peak_gathered; /* the most of whole units and stage models live at once */
    int64_t peak_acts;     /* the most of activation records live at once (areal_acts_floats * 4) */
} areal_par_fsdp_mem;

/*
 * Makes the sharded state of a model of cfg over dp (borrowed; NULL: one
 * rank), parameters zero (set them with areal_par_fsdp_set_tensor), AdamW
 * moments zero. pool is borrowed (NULL: serial). AREAL_EINVAL for a config
 * the model core refuses, AREAL_ENOMEM; on failure *out is NULL.
 */
int areal_par_fsdp_create(const areal_model_config *cfg, areal_coll *dp, areal_pool *pool,
                          areal_par_fsdp **out, areal_error *err);
void areal_par_fsdp_free(areal_par_fsdp *f);

/*
 * Copies this rank's part of the whole HF tensor `name` (values: its
 * numel floats, row-major) into its ranges of the parameters (which 0) or
 * AdamW's m (2) / v (3); no collective, so a loader streams a checkpoint
 * tensor by tensor. AREAL_EINVAL when the model has no such tensor or
 * which is not 0, 2 or 3.
 */
int areal_par_fsdp_set_tensor(areal_par_fsdp *f, const char *name, int which, const float *values,
                              areal_error *err);

/* The model's HF tensors (n of them, in buffer order; borrowed, valid while f lives). */
const areal_tensor_spec *areal_par_fsdp_tensors(const areal_par_fsdp *f, size_t *n);

/*
 * The part of tensor `name` this rank holds: its elements [*a, *b) (row-
 * major, possibly empty) sit at index *at of the state's flat buffers
 * (areal_par_fsdp_state). AREAL_EINVAL when the model has no such tensor.
 */
int areal_par_fsdp_locate(const areal_par_fsdp *f, const char *name, size_t *a, size_t *b,
                          size_t *at, areal_error *err);

/*
 * The whole tensor `name` into out (its numel floats): the parameters
 * (which 0), the gradients (1, before clipping) or AdamW's m (2) / v (3),
 * gathered over dp (a collective: every rank calls it alike).
 */
int areal_par_fsdp_get_tensor(areal_par_fsdp *f, const char *name, int which, float *out,
                              areal_error *err);

/*
 * One step's forward and backward over mbs[0..n_mb) (this rank's
 * micro-batches), each run forward then backward; loss_fn as the
 * pipeline's (areal/parallel/pipe.h), *loss (nullable) the summed loss of
 * the micro-batches. The gradients are summed over dp into the rank's
 * ranges (zeroed first). AREAL_EINVAL for n_mb < 1, a model's, the loss's
 * or a collective's error.
 */
int areal_par_fsdp_forward_backward(areal_par_fsdp *f, const areal_batch *mbs, int n_mb,
                                    areal_par_loss_fn loss_fn, void *loss_ctx, double *loss,
                                    areal_error *err);

/*
 * The optimizer step on the ranges: the global gradient norm (*norm,
 * before clipping; the sum of squares all-reduced over dp), clipping to
 * max_norm (> 0; 0: none), AdamW at lr. The collective's error.
 */
int areal_par_fsdp_optim_step(areal_par_fsdp *f, const areal_adamw_cfg *cfg, double lr,
                              double max_norm, double *norm, areal_error *err);

/* The memory counters (see above). */
areal_par_fsdp_mem areal_par_fsdp_memory(const areal_par_fsdp *f);

/*
 * The rank's flat ranges, for a sharded checkpoint: *n floats each of
 * params, grads and AdamW's state (borrowed, valid until the next call
 * that changes them), the range of unit u being [unit_off[u], +unit_len),
 * the unit's padded flat split as d * unit_len.
 */
typedef struct areal_par_fsdp_view {
    float *params, *grads;
    areal_adamw *adam;
    size_t n;
    int n_units;
    const size_t *unit_off, *unit_len; /* [n_units] */
    int dp, dp_rank;
} areal_par_fsdp_view;
areal_par_fsdp_view areal_par_fsdp_state(areal_par_fsdp *f);

/*
 * The forward only over mbs[0..n_mb) (no gradients): each layer's unit
 * gathered for its forward and freed after it, one micro-batch at a time,
 * the logits [T, V] of micro-batch i handed to fn with dlogits NULL (its
 * *loss a discarded scratch), as areal_par_pipe_forward does. Every dp rank
 * calls it alike (the gathers pair up). AREAL_EINVAL for n_mb < 1, a
 * model's, fn's or a collective's error.
 */
int areal_par_fsdp_forward(areal_par_fsdp *f, const areal_batch *mbs, int n_mb,
                           areal_par_loss_fn fn, void *ctx, areal_error *err);

#endif
