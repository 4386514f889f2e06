/*
 * plan.h - the host-side plans of the GPU model (plain C, no CUDA: tested on
 * the CPU by worker/gpu/tests/test_gpu_plan.c): which configurations the GPU
 * model runs, where each parameter lives in its device buffers, and the byte
 * offset of every activation and scratch buffer of a training step and of a
 * decode step inside one device allocation each.
 *
 * Weight layout: the device keeps the CPU model's flat parameter list
 * (areal_model's specs, in order) with each tensor's start rounded up to 128
 * elements (256 bytes of fp32, what cuBLASLt's fastest kernels and the
 * vectorised loads want), except that the tensors of one layer's experts stay
 * packed back to back, because the model addresses expert e at experts + e *
 * expert_stride. The same offsets index the fp32 master, the bf16 copy, the
 * fp32 gradients and both AdamW moments, so the optimizer and the gradient
 * norm are single passes over the padded buffers (the padding is zero and
 * stays zero). Rejected: the CPU layout unpadded (row offsets of odd length
 * would break the GEMMs' alignment) and one allocation per tensor (hundreds of
 * optimizer launches).
 *
 * Activation plans are a list of named regions, each 256-byte aligned, so a
 * test can prove they are disjoint and sized as the layers use them.
 */
#ifndef AREAL_GPUMODEL_PLAN_H
#define AREAL_GPUMODEL_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/model/model.h"

#define AREAL_GPU_NONE  ((size_t)-1) /* an absent tensor or buffer */
#define AREAL_GPU_ALIGN 256          /* bytes: every region and tensor starts at a multiple */

/*
 * AREAL_OK when the GPU model can run m: the whole model (no shard), head_dim
 * even and <= 256, experts <= 1024 with k <= 32, no shared expert (Qwen2-MoE's
 * shared expert and its sigmoid gate have no GPU kernels yet). Else
 * AREAL_EINVAL naming the field and what the GPU model supports.
 */
int areal_gpu_check_model(const areal_model *m, areal_error *err);

/* Element offsets of one layer's tensors in the device buffers (AREAL_GPU_NONE: absent). */
typedef struct areal_gpu_layer_off {
    size_t ln1, wq, wk, wv, bq, bk, bv, wo, bo, q_norm, k_norm, ln2;
    size_t gate, up, down, gate_b, up_b, down_b;
    size_t router, experts, expert_stride; /* expert e's gate at experts + e * expert_stride */
} areal_gpu_layer_off;

typedef struct areal_gpu_wlayout {
    size_t n_specs;
    size_t *dev_off;             /* [n_specs]: element offset of m->specs[i] on the device */
    size_t *numel;               /* [n_specs]: its elements */
    size_t *host_off;            /* [n_specs]: m->offset[i], its offset in the model's buffers */
    unsigned char *matrix;       /* [n_specs]: 1 for a 2-D tensor */
    size_t n_elems;              /* elements of each device buffer, padding included */
    areal_gpu_layer_off *layers; /* [num_layers] */
    size_t embed, norm, lm_head; /* lm_head == embed when tied */
} areal_gpu_wlayout;

/* The layout of m's parameters. Returns AREAL_OK, AREAL_ENOMEM, or AREAL_EINVAL (a view that
 * lies outside m->params: a model this code does not understand). *l is empty on failure. */
int areal_gpu_wlayout_make(const areal_model *m, areal_gpu_wlayout *l, areal_error *err);
void areal_gpu_wlayout_free(areal_gpu_wlayout *l);

/* dst (l->n_elems floats, device layout; padding zeroed) from src (m->n_params, model layout). */
void areal_gpu_wlayout_pack(const areal_gpu_wlayout *l, const float *src, float *dst);
/* dst (model layout) from src (device layout): the inverse of pack on the tensors. */
void areal_gpu_wlayout_unpack(const areal_gpu_wlayout *l, const float *src, float *dst);

/* One named buffer of a plan: bytes at off of the plan's allocation. */
typedef struct areal_gpu_region {
    char name[32];
    size_t off, bytes;
} areal_gpu_region;

/* Byte offsets of one layer's saved activations (AREAL_GPU_NONE: not used by this layer). */
typedef struct areal_gpu_layer_plan {
    size_t res, ln1, rstd1, q, k, rstd_q, rstd_k, qr, kr, v, ao, lse, mid, ln2, rstd2;
    size_t g, u, h; /* dense MLP [T, I] or the experts' [T*K, I] */
    size_t probs, topk, topk_w, off, slot_of, slot_tok, xs, ys; /* MoE */
} areal_gpu_layer_plan;

/*
 * A training step of up to T tokens in up to n_seqs sequences, the LM head
 * and its softmax run `chunk` rows at a time (the [chunk, V] logits are the
 * only vocabulary-wide buffers). All offsets are bytes into one allocation of
 * `bytes`.
 */
typedef struct areal_gpu_plan {
    int T, n_seqs, chunk, n_layers;
    areal_gpu_layer_plan *layers;
    size_t tokens, pos, cu, target, g_lp, logprob, logz, ones; /* int32 / fp32 / bf16 [T] */
    size_t prox, adv, w, tok_loss; /* fp32 [T]: the PPO loss's per-token terms and losses */
    size_t res_out, lnf, rstdf, logits, dlogits;
    size_t rlogits; /* fp32 [T, E] router logits (MoE) */
    size_t dres, dtmp, dln, dao, dq, dqr, dk, dkr, dv, delta;
    size_t dh, dg, du;                   /* [max(T*I, T*K*Ie)] bf16 */
    size_t dys, dxs, dw, dlog32, dlog16; /* MoE backward */
    size_t acc, scale, norm;             /* optimizer scalars */
    areal_gpu_region *regions;
    size_t n_regions, bytes;
} areal_gpu_plan;

/* The plan for m (checked with areal_gpu_check_model). T >= 1, 1 <= n_seqs <= T, chunk >= 1
 * (clamped to T). AREAL_EINVAL names the bad argument; AREAL_ENOMEM. *p empty on failure. */
int areal_gpu_plan_make(const areal_model *m, int T, int n_seqs, int chunk, areal_gpu_plan *p,
                        areal_error *err);
void areal_gpu_plan_free(areal_gpu_plan *p);

/* The paged KV cache of the decode step: n_blocks blocks of block_size rows, per layer,
 * max_blocks table entries per sequence, batches of up to max_batch sequences. */
typedef struct areal_gpu_kv_cfg {
    int max_batch, block_size, n_blocks, max_blocks;
} areal_gpu_kv_cfg;

/* Byte offsets of one decode step's buffers (B = max_batch rows), and of the caches. */
typedef struct areal_gpu_dplan {
    areal_gpu_kv_cfg kv;
    size_t x, x2, ln, q, k, v, qn, kn, ao, mid, g, u, h, lnf, logits;
    size_t rlogits, probs, topk, topk_w, off, slot_of, slot_tok, xs, ys; /* MoE, T = B */
    size_t tokens, pos, n_keys, table, unif, next, logprob;
    size_t *kcache, *vcache; /* [n_layers]: each layer's bf16 [n_blocks][block_size][nkv][hd] */
    size_t cache_bytes;      /* of one layer's key (or value) cache: n_blocks + 1 blocks (the
                                last one for graph padding rows) */
    int n_layers;
    areal_gpu_region *regions;
    size_t n_regions, bytes;
} areal_gpu_dplan;

/*
 * CUDA graphs of the decode step are captured per padded batch size: the
 * buckets are the powers of two below max_batch, then max_batch itself. The
 * bucket of a batch of B rows (1 <= B <= max_batch; else -1) and its index
 * (0 for 1, 1 for 2, ...; NULL: not wanted); how many buckets there are.
 * Rejected: one graph per batch size (up to 256 captures of a few ms each and
 * their memory) and one for max_batch only (batch 1 would pay 256 rows of
 * attention and sampling).
 */
int areal_gpu_decode_bucket(int B, int max_batch, int *index);
int areal_gpu_decode_n_buckets(int max_batch);

/* The decode plan for m and kv (every field >= 1; AREAL_EINVAL names the bad one). */
int areal_gpu_dplan_make(const areal_model *m, const areal_gpu_kv_cfg *kv, areal_gpu_dplan *p,
                         areal_error *err);
void areal_gpu_dplan_free(areal_gpu_dplan *p);

#endif
