/*
 * moe_dispatch.h - the seam through which expert parallelism with token
 * dispatch runs a MoE layer's experts: the model routes its own tokens and
 * hands the (token, expert) slots to a dispatcher, which moves them to the
 * ranks holding their experts, has those ranks run them
 * (areal_moe_experts_fwd / _bwd below), and brings the outputs back.
 *
 * The model component stays below the comm runtime: the dispatcher is the
 * trainer's (worker/parallel's areal_par_ep_*), bound with
 * areal_model_set_moe_dispatch; the model only knows the slot layout. Slots
 * are the T*K (token, choice) pairs sorted by expert (stable: token order
 * within an expert), expert e's at [off[e], off[e+1]); slot s is token
 * slot_tok[s]. The dispatcher must leave y (forward) and dxg (backward)
 * complete for every slot on every rank that called it, so the combine with
 * the router weights and the router's backward stay the model's and equal
 * one process. Rejected: the model calling all-to-all itself (a model->comm
 * dependency), and a dispatcher that returns the combined [T, H] sum (the
 * router's backward needs each slot's output).
 */
#ifndef AREAL_MODEL_MOE_DISPATCH_H
#define AREAL_MODEL_MOE_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"

typedef struct areal_model areal_model;

typedef struct areal_moe_dispatch {
    /*
     * Layer `layer`'s routed experts on T tokens: xg [T*K, H] the slots'
     * inputs, off [E+1], slot_tok [T*K]; writes y [T*K, H], every slot's
     * expert output. *saved (owned by the dispatcher, freed by saved_free
     * when the activations are freed) keeps what bwd needs. 0 or an error.
     */
    int (*fwd)(void *ctx, const areal_model *m, int layer, int T, const int32_t *slot_tok,
               const int32_t *off, const float *xg, float *y, void **saved, areal_error *err);
    /* From dy [T*K, H] (d of each slot's output): dxg [T*K, H] written, expert grads added. */
    int (*bwd)(void *ctx, const areal_model *m, int layer, void *saved, const float *dy, float *dxg,
               areal_error *err);
    void (*saved_free)(void *saved); /* NULL-safe */
} areal_moe_dispatch;

/* Binds dispatcher d (static or outliving the model, with ctx borrowed); NULL unbinds. */
void areal_model_set_moe_dispatch(areal_model *m, const areal_moe_dispatch *d, void *ctx);

/* This shard's experts [*e0, *e0 + *ne) and each one's local intermediate size (I / etp). */
void areal_moe_local(const areal_model *m, int *e0, int *ne, int *inter);

/*
 * The forward of this shard's experts of layer `layer` on rows x [R, H]
 * grouped by local expert (counts[j] rows of local expert j, j < ne):
 * g, u, h [R, inter] saved for the backward, y [R, H] written (with etp > 1
 * the slice's partial sum, which the caller sums over the etp group).
 */
void areal_moe_experts_fwd(const areal_model *m, int layer, const float *x, const int *counts,
                           float *g, float *u, float *h, float *y);

/*
 * Its backward: from dy [R, H], dx [R, H] written (partial over etp), the
 * experts' gradients in m->grads added. AREAL_ENOMEM.
 */
int areal_moe_experts_bwd(const areal_model *m, int layer, const float *x, const int *counts,
                          const float *g, const float *u, const float *h, const float *dy,
                          float *dx, areal_error *err);

/*
 * The load of layer `layer`'s experts in forward a of m: counts[e] (num_experts
 * entries) = the (token, expert) pairs its router sent to expert e, over a's
 * tokens (under dispatch, this rank's tokens). AREAL_EINVAL when the layer is
 * not a MoE layer of m's stage or a holds no forward.
 */
typedef struct areal_acts areal_acts;
int areal_acts_moe_load(const areal_model *m, const areal_acts *a, int layer, int64_t *counts,
                        areal_error *err);

#endif
