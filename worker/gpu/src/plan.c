/*
 * plan.c - which models the GPU model runs, and the activation plans of a
 * training step and of a decode step (areal/gpumodel/plan.h).
 *
 * A plan is built by appending named regions to one growing list: each
 * region starts at the next 256-byte boundary, and a size of zero gives
 * AREAL_GPU_NONE (the layer has no such buffer). What each layer keeps is
 * what worker/gpu/src/train_fwd.c saves for train_bwd.c, in bf16 for
 * activations and fp32 for statistics; the backward's scratch is shared by
 * all layers, sized for the widest.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/gpumodel/plan.h"

int areal_gpu_check_model(const areal_model *m, areal_error *err) {
    const areal_model_config *c = &m->cfg;
    if (!areal_model_shard_is_whole(c, &m->shard))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU model: the model holds a shard (tp %d, pp %d, ep %d); the GPU "
                               "model runs the whole model only",
                               m->shard.tp, m->shard.pp, m->shard.ep);
    if (c->head_dim < 2 || c->head_dim > 256 || c->head_dim % 2 != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU model: head_dim %d: the attention kernels need an even "
                               "head_dim of at most 256",
                               c->head_dim);
    if (c->num_experts > 0 && (c->num_experts > 1024 || c->num_experts_per_tok > 32 ||
                               c->num_experts_per_tok > c->num_experts))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU model: num_experts %d / num_experts_per_tok %d: the routing "
                               "kernels take at most 1024 experts and 32 choices",
                               c->num_experts, c->num_experts_per_tok);
    if (c->num_experts > 0 && c->shared_expert_intermediate_size > 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU model: shared_expert_intermediate_size %d: the shared expert "
                               "(Qwen2-MoE) has no GPU path yet; run this model on the CPU",
                               c->shared_expert_intermediate_size);
    return AREAL_OK;
}

typedef struct builder {
    areal_gpu_region *r;
    size_t n, cap, bytes;
    int oom;
} builder;

/* the next region of `bytes` (0: none); name is printf-formatted with `idx` when >= 0 */
static size_t take(builder *b, const char *name, int idx, size_t bytes) {
    if (bytes == 0)
        return AREAL_GPU_NONE;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        areal_gpu_region *r = realloc(b->r, cap * sizeof *r);
        if (r == NULL) {
            b->oom = 1;
            return AREAL_GPU_NONE;
        }
        b->r = r;
        b->cap = cap;
    }
    size_t off = (b->bytes + AREAL_GPU_ALIGN - 1) / AREAL_GPU_ALIGN * AREAL_GPU_ALIGN;
    areal_gpu_region *g = &b->r[b->n++];
    if (idx >= 0)
        snprintf(g->name, sizeof g->name, "L%d.%s", idx, name);
    else
        snprintf(g->name, sizeof g->name, "%s", name);
    g->off = off;
    g->bytes = bytes;
    b->bytes = off + bytes;
    return off;
}

static bool is_moe(const areal_model_config *c, int l) {
    return c->num_experts > 0 && c->moe_layer[l];
}

#define BF 2u /* bytes of bf16 */
#define F4 4u /* bytes of fp32 / int32 */

void areal_gpu_plan_free(areal_gpu_plan *p) {
    free(p->layers);
    free(p->regions);
    memset(p, 0, sizeof *p);
}

int areal_gpu_plan_make(const areal_model *m, int T, int n_seqs, int chunk, areal_gpu_plan *p,
                        areal_error *err) {
    memset(p, 0, sizeof *p);
    int rc = areal_gpu_check_model(m, err);
    if (rc != AREAL_OK)
        return rc;
    if (T < 1 || n_seqs < 1 || n_seqs > T || chunk < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU plan: tokens %d, sequences %d, chunk %d: need tokens >= 1, "
                               "1 <= sequences <= tokens and chunk >= 1",
                               T, n_seqs, chunk);
    const areal_model_config *c = &m->cfg;
    size_t t = (size_t)T, H = (size_t)c->hidden_size, hd = (size_t)c->head_dim;
    size_t nh = (size_t)c->num_heads, nkv = (size_t)c->num_kv_heads;
    size_t Q = nh * hd, KV = nkv * hd, I = (size_t)c->intermediate_size, V = (size_t)c->vocab_size;
    size_t E = (size_t)c->num_experts, K = (size_t)c->num_experts_per_tok;
    size_t Ie = (size_t)c->moe_intermediate_size, TK = t * K;
    int L = c->num_layers;
    p->T = T;
    p->n_seqs = n_seqs;
    p->chunk = chunk < T ? chunk : T;
    p->n_layers = L;
    p->layers = calloc(L > 0 ? (size_t)L : 1, sizeof *p->layers);
    if (p->layers == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the GPU plan");
    builder b = {0};
    bool any_moe = false, any_dense = false;
    for (int l = 0; l < L; l++) {
        areal_gpu_layer_plan *a = &p->layers[l];
        bool moe = is_moe(c, l), qkn = c->qk_norm;
        any_moe |= moe;
        any_dense |= !moe;
        a->res = take(&b, "res", l, t * H * BF);
        a->ln1 = take(&b, "ln1", l, t * H * BF);
        a->rstd1 = take(&b, "rstd1", l, t * F4);
        a->q = take(&b, "q", l, qkn ? t * Q * BF : 0); /* before the q/k norm (its backward) */
        a->k = take(&b, "k", l, qkn ? t * KV * BF : 0);
        a->rstd_q = take(&b, "rstd_q", l, qkn ? t * nh * F4 : 0);
        a->rstd_k = take(&b, "rstd_k", l, qkn ? t * nkv * F4 : 0);
        a->qr = take(&b, "qr", l, t * Q * BF);
        a->kr = take(&b, "kr", l, t * KV * BF);
        a->v = take(&b, "v", l, t * KV * BF);
        a->ao = take(&b, "ao", l, t * Q * BF);
        a->lse = take(&b, "lse", l, t * nh * F4);
        a->mid = take(&b, "mid", l, t * H * BF);
        a->ln2 = take(&b, "ln2", l, t * H * BF);
        a->rstd2 = take(&b, "rstd2", l, t * F4);
        size_t rows = moe ? TK : t, inner = moe ? Ie : I;
        a->g = take(&b, "g", l, rows * inner * BF);
        a->u = take(&b, "u", l, rows * inner * BF);
        a->h = take(&b, "h", l, rows * inner * BF);
        a->probs = take(&b, "probs", l, moe ? t * E * F4 : 0);
        a->topk = take(&b, "topk", l, moe ? TK * F4 : 0);
        a->topk_w = take(&b, "topk_w", l, moe ? TK * F4 : 0);
        a->off = take(&b, "off", l, moe ? (E + 1) * F4 : 0);
        a->slot_of = take(&b, "slot_of", l, moe ? TK * F4 : 0);
        a->slot_tok = take(&b, "slot_tok", l, moe ? TK * F4 : 0);
        a->xs = take(&b, "xs", l, moe ? TK * H * BF : 0);
        a->ys = take(&b, "ys", l, moe ? TK * H * BF : 0);
    }
    size_t C = (size_t)p->chunk;
    p->res_out = take(&b, "res_out", -1, t * H * BF);
    p->lnf = take(&b, "lnf", -1, t * H * BF);
    p->rstdf = take(&b, "rstdf", -1, t * F4);
    p->tokens = take(&b, "tokens", -1, t * F4);
    p->pos = take(&b, "pos", -1, t * F4);
    p->cu = take(&b, "cu", -1, ((size_t)n_seqs + 1) * F4);
    p->target = take(&b, "target", -1, t * F4);
    p->g_lp = take(&b, "g_lp", -1, t * F4);
    p->logprob = take(&b, "logprob", -1, t * F4);
    p->logz = take(&b, "logz", -1, t * F4);
    p->ones = take(&b, "ones", -1, t * BF);
    p->prox = take(&b, "prox", -1, t * F4);
    p->adv = take(&b, "adv", -1, t * F4);
    p->w = take(&b, "w", -1, t * F4);
    p->tok_loss = take(&b, "tok_loss", -1, t * F4);
    p->logits = take(&b, "logits", -1, C * V * BF);
    p->dlogits = take(&b, "dlogits", -1, C * V * BF);
    p->rlogits = take(&b, "rlogits", -1, any_moe ? t * E * F4 : 0);
    p->dres = take(&b, "dres", -1, t * H * BF);
    p->dtmp = take(&b, "dtmp", -1, t * H * BF);
    p->dln = take(&b, "dln", -1, t * H * BF);
    p->dao = take(&b, "dao", -1, t * Q * BF);
    p->dq = take(&b, "dq", -1, c->qk_norm ? t * Q * BF : 0);
    p->dqr = take(&b, "dqr", -1, t * Q * BF);
    p->dk = take(&b, "dk", -1, c->qk_norm ? t * KV * BF : 0);
    p->dkr = take(&b, "dkr", -1, t * KV * BF);
    p->dv = take(&b, "dv", -1, t * KV * BF);
    p->delta = take(&b, "delta", -1, t * nh * F4);
    size_t wide = any_dense ? t * I : 0;
    if (any_moe && TK * Ie > wide)
        wide = TK * Ie;
    p->dh = take(&b, "dh", -1, wide * BF);
    p->dg = take(&b, "dg", -1, wide * BF);
    p->du = take(&b, "du", -1, wide * BF);
    p->dys = take(&b, "dys", -1, any_moe ? TK * H * BF : 0);
    p->dxs = take(&b, "dxs", -1, any_moe ? TK * H * BF : 0);
    p->dw = take(&b, "dw", -1, any_moe ? TK * F4 : 0);
    p->dlog32 = take(&b, "dlog32", -1, any_moe ? t * E * F4 : 0);
    p->dlog16 = take(&b, "dlog16", -1, any_moe ? t * E * BF : 0);
    p->acc = take(&b, "acc", -1, sizeof(double));
    p->scale = take(&b, "scale", -1, F4);
    p->norm = take(&b, "norm", -1, F4);
    if (b.oom) {
        free(b.r);
        areal_gpu_plan_free(p);
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the GPU plan");
    }
    p->regions = b.r;
    p->n_regions = b.n;
    p->bytes = (b.bytes + AREAL_GPU_ALIGN - 1) / AREAL_GPU_ALIGN * AREAL_GPU_ALIGN;
    return AREAL_OK;
}

void areal_gpu_dplan_free(areal_gpu_dplan *p) {
    free(p->kcache);
    free(p->regions);
    memset(p, 0, sizeof *p);
}

int areal_gpu_dplan_make(const areal_model *m, const areal_gpu_kv_cfg *kv, areal_gpu_dplan *p,
                         areal_error *err) {
    memset(p, 0, sizeof *p);
    int rc = areal_gpu_check_model(m, err);
    if (rc != AREAL_OK)
        return rc;
    const char *bad = kv->max_batch < 1    ? "max_batch"
                      : kv->block_size < 1 ? "block_size"
                      : kv->n_blocks < 1   ? "n_blocks"
                      : kv->max_blocks < 1 ? "max_blocks"
                                           : NULL;
    if (bad != NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU decode plan: %s must be >= 1 (max_batch %d, block_size %d, "
                               "n_blocks %d, max_blocks %d)",
                               bad, kv->max_batch, kv->block_size, kv->n_blocks, kv->max_blocks);
    const areal_model_config *c = &m->cfg;
    size_t B = (size_t)kv->max_batch, H = (size_t)c->hidden_size, hd = (size_t)c->head_dim;
    size_t nh = (size_t)c->num_heads, nkv = (size_t)c->num_kv_heads;
    size_t Q = nh * hd, KV = nkv * hd, V = (size_t)c->vocab_size;
    size_t E = (size_t)c->num_experts, K = (size_t)c->num_experts_per_tok;
    size_t I = (size_t)c->intermediate_size, Ie = (size_t)c->moe_intermediate_size, BK = B * K;
    bool any_moe = false;
    for (int l = 0; l < c->num_layers; l++)
        any_moe |= is_moe(c, l);
    size_t inner = I * B;
    if (any_moe && BK * Ie > inner)
        inner = BK * Ie;
    p->kv = *kv;
    p->n_layers = c->num_layers;
    p->kcache = calloc(2 * (size_t)(c->num_layers > 0 ? c->num_layers : 1), sizeof(size_t));
    if (p->kcache == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the GPU decode plan");
    p->vcache = p->kcache + (c->num_layers > 0 ? c->num_layers : 1);
    builder b = {0};
    p->x = take(&b, "x", -1, B * H * BF);
    p->x2 = take(&b, "x2", -1, B * H * BF);
    p->ln = take(&b, "ln", -1, B * H * BF);
    p->q = take(&b, "q", -1, B * Q * BF);
    p->k = take(&b, "k", -1, B * KV * BF);
    p->v = take(&b, "v", -1, B * KV * BF);
    p->qn = take(&b, "qn", -1, B * Q * BF);
    p->kn = take(&b, "kn", -1, B * KV * BF);
    p->ao = take(&b, "ao", -1, B * Q * BF);
    p->mid = take(&b, "mid", -1, B * H * BF);
    p->g = take(&b, "g", -1, inner * BF);
    p->u = take(&b, "u", -1, inner * BF);
    p->h = take(&b, "h", -1, inner * BF);
    p->lnf = take(&b, "lnf", -1, B * H * BF);
    p->logits = take(&b, "logits", -1, B * V * BF);
    p->rlogits = take(&b, "rlogits", -1, any_moe ? B * E * F4 : 0);
    p->probs = take(&b, "probs", -1, any_moe ? B * E * F4 : 0);
    p->topk = take(&b, "topk", -1, any_moe ? BK * F4 : 0);
    p->topk_w = take(&b, "topk_w", -1, any_moe ? BK * F4 : 0);
    p->off = take(&b, "off", -1, any_moe ? (E + 1) * F4 : 0);
    p->slot_of = take(&b, "slot_of", -1, any_moe ? BK * F4 : 0);
    p->slot_tok = take(&b, "slot_tok", -1, any_moe ? BK * F4 : 0);
    p->xs = take(&b, "xs", -1, any_moe ? BK * H * BF : 0);
    p->ys = take(&b, "ys", -1, any_moe ? BK * H * BF : 0);
    p->tokens = take(&b, "tokens", -1, B * F4);
    p->pos = take(&b, "pos", -1, B * F4);
    p->n_keys = take(&b, "n_keys", -1, B * F4);
    p->table = take(&b, "table", -1, B * (size_t)kv->max_blocks * F4);
    p->unif = take(&b, "unif", -1, B * F4);
    p->next = take(&b, "next", -1, B * F4);
    p->logprob = take(&b, "logprob", -1, B * F4);
    /* one block more than the caller's: block n_blocks takes the appends of a CUDA graph's
     * padding rows (areal_gpu_decode_bucket), so they never write a caller's block */
    p->cache_bytes = ((size_t)kv->n_blocks + 1) * (size_t)kv->block_size * KV * BF;
    for (int l = 0; l < c->num_layers; l++) {
        p->kcache[l] = take(&b, "kcache", l, p->cache_bytes);
        p->vcache[l] = take(&b, "vcache", l, p->cache_bytes);
    }
    if (b.oom) {
        free(b.r);
        areal_gpu_dplan_free(p);
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the GPU decode plan");
    }
    p->regions = b.r;
    p->n_regions = b.n;
    p->bytes = (b.bytes + AREAL_GPU_ALIGN - 1) / AREAL_GPU_ALIGN * AREAL_GPU_ALIGN;
    return AREAL_OK;
}

int areal_gpu_decode_bucket(int B, int max_batch, int *index) {
    if (B < 1 || B > max_batch)
        return -1;
    int b = 1, i = 0;
    while (b < B && b < max_batch) {
        b *= 2;
        i++;
    }
    if (index != NULL)
        *index = i;
    return b < max_batch ? b : max_batch;
}

int areal_gpu_decode_n_buckets(int max_batch) {
    int i = 0;
    return areal_gpu_decode_bucket(max_batch, max_batch, &i) < 0 ? 0 : i + 1;
}
