/*
 * ginternal.h - the GPU model's state and the helpers its files share
 * (internal to worker/gpu/src).
 *
 * Device memory: five weight-sized buffers in the layout of plan.h (fp32
 * master, bf16 copy, fp32 gradients, two fp32 moments), one training arena
 * laid out by areal_gpu_plan, one decode arena by areal_gpu_dplan. Pointers
 * into the arenas come from their byte offsets (A32/A16/AI: fp32, bf16,
 * int32; NULL for AREAL_GPU_NONE).
 */
#ifndef AREAL_GPUMODEL_INTERNAL_H
#define AREAL_GPUMODEL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/gpumodel/model.h"
#include "areal/kernels/gemm.h"

struct areal_gpu_model {
    areal_model_config cfg;
    areal_model_shard shard; /* the whole model's (areal_gpu_check_model) */
    int H, hd, nh, nkv, Q, KV, I, Ie, E, K, V, L;
    float attn_scale, eps;
    areal_gpu_wlayout wl;
    float *master, *grads, *m1, *m2; /* device, wl.n_elems each */
    uint16_t *w16;
    float *inv_freq; /* device [hd / 2] */
    areal_k_gemm *gemm;
    void *stream; /* cudaStream_t */
    int step;     /* AdamW steps done */
    int T_run;    /* tokens of the step in flight (<= plan.T) */
    areal_gpu_plan plan;
    char *arena;
    int32_t *host_off; /* [L][E + 1] the MoE layers' expert offsets, copied per forward */
    areal_gpu_dplan dplan;
    char *darena;
    int32_t *dhost_off;        /* [E + 1] */
    bool graphs;               /* decode steps replay CUDA graphs (areal_gpu_decode_graphs) */
    int n_graphs;              /* areal_gpu_decode_n_buckets(max_batch) */
    void **gexec;              /* [n_graphs] cudaGraphExec_t, NULL until that bucket's capture */
    areal_k_sample_cfg *gsamp; /* [n_graphs] the sampler settings each graph holds */
    bool has_dp;               /* gradients reduced over dp (areal_gpu_model_set_dp) */
    areal_gpu_dp dp;
    void *ev_grads, *ev_reduced; /* cudaEvent_t: backward done (compute), reduction done (dp) */
};

#define AREAL_GPU_P(base, off) ((off) == AREAL_GPU_NONE ? NULL : (void *)((base) + (off)))
#define A32(base, off)         ((float *)AREAL_GPU_P(base, off))
#define A16(base, off)         ((uint16_t *)AREAL_GPU_P(base, off))
#define AI(base, off)          ((int32_t *)AREAL_GPU_P(base, off))
/* a weight's bf16 copy / gradient by element offset (NULL for AREAL_GPU_NONE) */
#define W16(g, off) ((off) == AREAL_GPU_NONE ? NULL : (const uint16_t *)(g)->w16 + (off))
#define G32(g, off) ((off) == AREAL_GPU_NONE ? NULL : (g)->grads + (off))

#define TRY(call)                                                                                  \
    do {                                                                                           \
        int try_rc_ = (call);                                                                      \
        if (try_rc_ != AREAL_OK)                                                                   \
            return try_rc_;                                                                        \
    } while (0)

static inline bool gpu_is_moe(const areal_gpu_model *g, int l) {
    return g->E > 0 && g->cfg.moe_layer[l];
}

/* AREAL_OK, or AREAL_EIO naming `what` and CUDA's reason (from a cudaError_t as int). */
int gpu_cuda(int cuda_error, const char *what, areal_error *err);

/* y[T, out] = x[T, in] W^T (+ b) (bf16, W at element offset w, b at b or NONE); beta as GEMM. */
int gpu_lin_fwd(areal_gpu_model *g, uint16_t *y, const uint16_t *x, size_t w, size_t b, int T,
                int in, int out, float beta, areal_error *err);
/* dx[T, in] = dy W (+ beta dx) when dx; dW += dy^T x; db += sum_t dy (needs the ones vector). */
int gpu_lin_bwd(areal_gpu_model *g, uint16_t *dx, float beta, const uint16_t *dy, const uint16_t *x,
                size_t w, size_t b, int T, int in, int out, const uint16_t *ones, areal_error *err);

/* The buffers of one MoE block forward (T tokens; the training plan's layer or the decode's). */
typedef struct gpu_moe_bufs {
    float *rlogits, *probs, *topk_w;
    int32_t *topk, *off, *slot_of, *slot_tok;
    uint16_t *xs, *g, *u, *h, *ys;
    int32_t *host_off; /* [E + 1] host */
} gpu_moe_bufs;

/* out[T, H] = the routed experts of layer l on x (out written). Waits for the expert counts. */
int gpu_moe_fwd(areal_gpu_model *g, int l, const uint16_t *x, uint16_t *out, int T,
                const gpu_moe_bufs *b, areal_error *err);
/* out[T, H] = the dense SwiGLU MLP of layer l on x; gate/up/h [T, I] kept in gb, ub, hb. */
int gpu_mlp_fwd(areal_gpu_model *g, int l, const uint16_t *x, uint16_t *out, int T, uint16_t *gb,
                uint16_t *ub, uint16_t *hb, areal_error *err);

/* The decode step's kernels on the batch of B rows uploaded to the decode arena: embed, layers,
 * final norm, LM head, sampler. No host synchronisation or allocation (so capturable) unless a
 * layer is MoE (its expert counts are read on the host). */
int gpu_decode_enqueue(areal_gpu_model *g, int B, areal_k_sample_cfg samp, areal_error *err);
/* Enqueues the decode of B rows on the model's stream through the graph of bucket idx (B is that
 * bucket's size), capturing it first when it is missing or holds other sampler settings. */
int gpu_decode_graph_launch(areal_gpu_model *g, int idx, int B, areal_k_sample_cfg samp,
                            areal_error *err);
/* Destroys every captured decode graph (the decode arena is about to change, or the model goes). */
void gpu_decode_graphs_free(areal_gpu_model *g);
/* The DP reduction of the gradients between the backward and the optimizer (no-op without dp). */
int gpu_dp_reduce(areal_gpu_model *g, areal_error *err);
/* Destroys the DP events. */
void gpu_dp_free(areal_gpu_model *g);
/* True when some layer is MoE (no graphs then). */
bool gpu_has_moe(const areal_gpu_model *g);

/* The training forward into the plan's arena (tokens, pos, cu uploaded by the caller). */
int gpu_train_fwd(areal_gpu_model *g, int T, int n_seqs, int max_len, areal_error *err);
/* The LM head, loss rows and their backward (chunked): leaves d(lnf) in the plan's dln. The
 * loss: ppo NULL, the cross-entropy of the plan's g_lp; else the fused PPO loss on the plan's
 * prox / adv / w, token losses into tok_loss. */
int gpu_head_fwd_bwd(areal_gpu_model *g, int T, const areal_k_ppo_cfg *ppo, areal_error *err);
/* The backward from d(lnf) in dln to every gradient (grads zeroed by the caller). */
int gpu_train_bwd(areal_gpu_model *g, int T, int n_seqs, int max_len, areal_error *err);

#endif
