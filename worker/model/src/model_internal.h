/*
 * model_internal.h - the saved activations of a forward pass (internal to
 * model_fwd.c, model_bwd.c and moe.c).
 *
 * Every buffer a backward reads is named here and saved explicitly by the
 * forward, layer by layer (the llm.c discipline): nothing is recomputed in
 * the backward except cheap element-wise products. One arena allocation holds
 * them all; the pointers below point into it.
 */
#ifndef AREAL_MODEL_INTERNAL_H
#define AREAL_MODEL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "areal/model/model.h"

/* The mixture-of-experts block of one layer; TK = T * num_experts_per_tok slots. */
typedef struct moe_acts {
    float *probs;                   /* [T, E] router softmax */
    int32_t *topk;                  /* [T, K] chosen experts */
    float *topk_w;                  /* [T, K] their (renormalised) weights */
    int32_t *slot_tok;              /* [TK] token of each slot, slots grouped by expert */
    int32_t *slot_of;               /* [T, K] slot of (t, k) */
    int32_t *off;                   /* [E + 1] first slot of each expert */
    float *xg;                      /* [TK, H] gathered inputs */
    float *g, *u, *h;               /* [TK, I] */
    float *y;                       /* [TK, H] expert outputs */
    float *sg, *su, *sh, *sy, *sgl; /* shared expert [T, Is] x3, [T, H], gate logit [T] */
    void *disp;                     /* the token dispatcher's saved state (moe_dispatch.h) */
    void (*disp_free)(void *);      /* and its free, called by areal_acts_free */
} moe_acts;

typedef struct layer_acts {
    float *res;         /* [R, H] input residual: the R rows kept (T; sequence parallel: ours) */
    float *ln1, *rstd1; /* [T, H], [R] */
    float *q, *k, *v;   /* [T, Q], [T, KV] x2: projections (bias added), before norm/rope */
    float *rstd_q, *rstd_k; /* [T * nh], [T * nkv] (qk-norm only) */
    float *qr, *kr;         /* after qk-norm and rope */
    float *att;             /* attention probabilities (k_attn_offsets) */
    float *ao;              /* [T, Q] attention output */
    float *mid;             /* [R, H] residual after attention */
    float *ln2, *rstd2;     /* [T, H], [R] */
    float *g, *u, *h;       /* [T, I] dense MLP */
    moe_acts moe;
    void *cp;                /* the context-parallel attention's saved state (cp_attn.h) */
    void (*cp_free)(void *); /* and its free, called by areal_acts_free */
} layer_acts;

struct areal_acts_priv {
    int T, n_seqs;
    int32_t *tokens, *cu, *pos; /* copies; pos = position in its sequence */
    int32_t *gidx;              /* context parallelism: batch index per token (NULL: none) */
    size_t *att_off;
    size_t att_total;
    layer_acts *layers;
    int n_layers;        /* entries of layers */
    float *res_out;      /* [T, H] after the last layer */
    float *lnf, *rstdf;  /* final norm */
    float *wide;         /* sequence parallel: [T, H] scratch of the row-parallel products */
    void *arena;         /* areal_arena_alloc's block of arena_bytes */
    size_t arena_floats; /* the floats used (areal_acts_floats) */
    size_t arena_bytes;
};

/*
 * Large per-step buffers (arena.c): a block of at least bytes (*got: its real
 * size, to pass back) or NULL when out of memory; uninitialised, perhaps a
 * previous step's. areal_arena_free keeps the block for a later request (a
 * few, of 4 MiB or more) or frees it; areal_arena_trim frees the kept ones.
 */
void *areal_arena_alloc(size_t bytes, size_t *got);
void areal_arena_free(void *p, size_t got);
void areal_arena_trim(void);

/* Bytes needed for the MoE activations of T tokens (0 for a dense model). */
size_t moe_acts_floats(const areal_model_config *c, int T);
/* Points a->... into base (moe_acts_floats(c, T) floats, int32 slots included). */
void moe_acts_bind(moe_acts *a, const areal_model_config *c, int T, float *base);

/* out [T, H] = the MoE block on x [T, H] (out overwritten); fills a. */
void moe_fwd(const areal_model *m, const areal_layer_w *w, moe_acts *a, const float *x, float *out,
             int T);
/*
 * As moe_fwd for layer l of a shard: the routed experts' sum (this shard's
 * experts) goes through the reduction hook (AREAL_REDUCE_MOE_OUT) before the
 * shared expert is added. Returns 0 or the hook's error.
 */
int moe_fwd_reduced(const areal_model *m, int l, const areal_layer_w *w, moe_acts *a,
                    const float *x, float *out, int T, areal_error *err);
/*
 * dx [T, H] (zeroed by the caller) += ..., parameter grads += ..., from dout
 * [T, H], for layer l; the routed part of dx goes through the reduction hook
 * (AREAL_REDUCE_MOE_GRAD) before the shared expert's is added. Returns 0,
 * AREAL_ENOMEM or the hook's error.
 */
int moe_bwd(const areal_model *m, int l, const areal_layer_w *w, const areal_layer_w *gw,
            const moe_acts *a, const float *x, const float *dout, float *dx, int T,
            areal_error *err);

/* ---- infer_pack.c: the packed inference twins of the linear weights
 * (areal_model_infer_pack). A twin is used only where its shape is the one
 * the call multiplies (infer_twin), so a shard whose shapes differ from what
 * was packed falls back to the row-major weights: same numbers, slower. */
typedef struct areal_twin {
    const float *p; /* NULL: none */
    int n_out, n_in;
} areal_twin;
typedef struct areal_layer_pw {
    areal_twin wq, wk, wv, wo, gate, up, down;
} areal_layer_pw;
/* Layer l's twins (all empty when the model has no pack). */
const areal_layer_pw *infer_pack_layer(const areal_model *m, int l);
/* The LM head's twin (empty when none). */
const areal_twin *infer_pack_lm_head(const areal_model *m);
/* t's packed weights when t holds [n_out, n_in], else NULL. */
const float *infer_twin(const areal_twin *t, int n_out, int n_in);

#endif
