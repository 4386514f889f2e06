/*
 * decode.c - one decode step of the GPU model over the paged KV cache
 * (areal/gpumodel/model.h, areal/kernels/paged.h): embed the batch's tokens,
 * per layer norm, q/k/v, q/k norm, RoPE at each sequence's position, append
 * the new key/value row to its block, attend over the sequence's blocks,
 * o projection and residual, the MLP or MoE block, residual; final norm, the
 * LM head and the sampler. The activations of one step ping-pong between two
 * [B, H] buffers; nothing is kept but the caches. With graphs on
 * (decode_graph.c) the batch is padded to its bucket's size - padding rows
 * feed token 0 at position 0 through the plan's spare block, so they never
 * touch a caller's block - and the step's kernels replay from a graph.
 */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "areal/kernels/embed.h"
#include "areal/kernels/layers.h"
#include "areal/kernels/paged.h"
#include "areal/kernels/sample.h"
#include "ginternal.h"

int areal_gpu_decode_init(areal_gpu_model *g, const areal_gpu_kv_cfg *kv, areal_error *err) {
    if (g->stream != NULL)
        cudaStreamSynchronize((cudaStream_t)g->stream);
    gpu_decode_graphs_free(g); /* they hold the old arena's addresses */
    g->graphs = false;
    cudaFree(g->darena);
    g->darena = NULL;
    free(g->dhost_off);
    g->dhost_off = NULL;
    areal_gpu_dplan_free(&g->dplan);
    /* the plan reads only the config and shard of a model: a stand-in built from the copy */
    areal_model m;
    memset(&m, 0, sizeof m);
    m.cfg = g->cfg;
    m.shard = g->shard;
    TRY(areal_gpu_dplan_make(&m, kv, &g->dplan, err));
    if (g->E > 0 && (g->dhost_off = calloc((size_t)g->E + 1, sizeof(int32_t))) == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the expert offsets");
    int rc = gpu_cuda(cudaMalloc((void **)&g->darena, g->dplan.bytes), "the decode buffers", err);
    if (rc != AREAL_OK) {
        g->darena = NULL;
        return areal_error_set(err, rc, -1, "GPU decode: no device memory for %zu bytes",
                               g->dplan.bytes);
    }
    return gpu_cuda(cudaMemset(g->darena, 0, g->dplan.bytes), "zero the KV cache", err);
}

static int decode_layer(areal_gpu_model *g, int l, int B, const uint16_t *x, uint16_t *out,
                        areal_error *err) {
    const areal_gpu_dplan *p = &g->dplan;
    const areal_gpu_layer_off *o = &g->wl.layers[l];
    char *r = g->darena;
    void *st = g->stream;
    int H = g->H, Q = g->Q, KV = g->KV, hd = g->hd, nh = g->nh, nkv = g->nkv;
    uint16_t *ln = A16(r, p->ln), *q = A16(r, p->q), *k = A16(r, p->k), *v = A16(r, p->v);
    uint16_t *qn = A16(r, p->qn), *kn = A16(r, p->kn), *ao = A16(r, p->ao), *mid = A16(r, p->mid);
    const int32_t *pos = AI(r, p->pos);
    TRY(areal_k_rmsnorm_fwd(ln, NULL, x, W16(g, o->ln1), (size_t)B, H, g->eps, st, err));
    TRY(gpu_lin_fwd(g, q, ln, o->wq, o->bq, B, H, Q, 0.0f, err));
    TRY(gpu_lin_fwd(g, k, ln, o->wk, o->bk, B, H, KV, 0.0f, err));
    TRY(gpu_lin_fwd(g, v, ln, o->wv, o->bv, B, H, KV, 0.0f, err));
    if (g->cfg.qk_norm) {
        TRY(areal_k_rmsnorm_fwd(qn, NULL, q, W16(g, o->q_norm), (size_t)B * nh, hd, g->eps, st,
                                err));
        TRY(areal_k_rmsnorm_fwd(kn, NULL, k, W16(g, o->k_norm), (size_t)B * nkv, hd, g->eps, st,
                                err));
    } else {
        qn = q;
        kn = k;
    }
    TRY(areal_k_rope_fwd(qn, pos, g->inv_freq, B, nh, hd, st, err));
    TRY(areal_k_rope_fwd(kn, pos, g->inv_freq, B, nkv, hd, st, err));
    areal_k_paged_shape s = {B, nh, nkv, hd, p->kv.block_size, p->kv.max_blocks, g->attn_scale};
    uint16_t *kc = A16(r, p->kcache[l]), *vc = A16(r, p->vcache[l]);
    const int32_t *table = AI(r, p->table);
    TRY(areal_k_paged_append(kc, vc, kn, v, table, pos, s, st, err));
    TRY(areal_k_paged_decode(ao, qn, kc, vc, table, AI(r, p->n_keys), s, st, err));
    TRY(gpu_lin_fwd(g, mid, ao, o->wo, o->bo, B, Q, H, 0.0f, err));
    TRY(areal_k_add(mid, mid, x, (size_t)B * H, st, err));
    TRY(areal_k_rmsnorm_fwd(ln, NULL, mid, W16(g, o->ln2), (size_t)B, H, g->eps, st, err));
    if (gpu_is_moe(g, l)) {
        gpu_moe_bufs b = {A32(r, p->rlogits), A32(r, p->probs),  A32(r, p->topk_w),  AI(r, p->topk),
                          AI(r, p->off),      AI(r, p->slot_of), AI(r, p->slot_tok), A16(r, p->xs),
                          A16(r, p->g),       A16(r, p->u),      A16(r, p->h),       A16(r, p->ys),
                          g->dhost_off};
        TRY(gpu_moe_fwd(g, l, ln, out, B, &b, err));
    } else {
        TRY(gpu_mlp_fwd(g, l, ln, out, B, A16(r, p->g), A16(r, p->u), A16(r, p->h), err));
    }
    return areal_k_add(out, out, mid, (size_t)B * H, st, err);
}

static int up(void *dst, const void *src, size_t bytes, void *st, areal_error *err) {
    return gpu_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)st),
                    "upload the decode batch", err);
}

int gpu_decode_enqueue(areal_gpu_model *g, int B, areal_k_sample_cfg samp, areal_error *err) {
    const areal_gpu_dplan *p = &g->dplan;
    char *r = g->darena;
    void *st = g->stream;
    uint16_t *x = A16(r, p->x), *x2 = A16(r, p->x2);
    TRY(areal_k_embed_fwd(x, W16(g, g->wl.embed), AI(r, p->tokens), B, g->H, st, err));
    for (int l = 0; l < g->L; l++) {
        TRY(decode_layer(g, l, B, x, x2, err));
        uint16_t *t = x;
        x = x2;
        x2 = t;
    }
    uint16_t *lnf = A16(r, p->lnf), *lg = A16(r, p->logits);
    TRY(areal_k_rmsnorm_fwd(lnf, NULL, x, W16(g, g->wl.norm), (size_t)B, g->H, g->eps, st, err));
    TRY(gpu_lin_fwd(g, lg, lnf, g->wl.lm_head, AREAL_GPU_NONE, B, g->H, g->V, 0.0f, err));
    return areal_k_sample(AI(r, p->next), A32(r, p->logprob), NULL, lg, (size_t)g->V,
                          A32(r, p->unif), (size_t)B, g->V, samp, st, err);
}

int areal_gpu_decode_step(areal_gpu_model *g, int B, const int32_t *tokens, const int32_t *pos,
                          const int32_t *table, areal_k_sample_cfg samp, const float *u,
                          int32_t *next, float *logprob, float *logits, areal_error *err) {
    const areal_gpu_dplan *p = &g->dplan;
    if (g->darena == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU decode: no KV cache (call areal_gpu_decode_init first)");
    if (B < 1 || B > p->kv.max_batch || tokens == NULL || pos == NULL || table == NULL ||
        next == NULL || logprob == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU decode: batch %d (1..%d) or a NULL array", B, p->kv.max_batch);
    int cap = p->kv.max_blocks * p->kv.block_size;
    for (int i = 0; i < B; i++) {
        if (tokens[i] < 0 || tokens[i] >= g->V || pos[i] < 0 || pos[i] >= cap)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "GPU decode: row %d: token %d (vocabulary %d), position %d "
                                   "(the table holds %d rows)",
                                   i, tokens[i], g->V, pos[i], cap);
        for (int j = 0; j <= pos[i] / p->kv.block_size; j++)
            if (table[(size_t)i * p->kv.max_blocks + j] < 0 ||
                table[(size_t)i * p->kv.max_blocks + j] >= p->kv.n_blocks)
                return areal_error_set(
                    err, AREAL_EINVAL, -1, "GPU decode: table[%d][%d] = %d is not a block (0..%d)",
                    i, j, table[(size_t)i * p->kv.max_blocks + j], p->kv.n_blocks - 1);
    }
    /* graphs: the batch padded to its bucket (Bp rows uploaded; the first B are the caller's) */
    int idx = -1, Bp = g->graphs ? areal_gpu_decode_bucket(B, p->kv.max_batch, &idx) : B;
    size_t mb = (size_t)p->kv.max_blocks;
    int32_t *ib = malloc(sizeof(int32_t) * (size_t)Bp * (3 + mb));
    float *uf = calloc((size_t)Bp, sizeof(float));
    if (ib == NULL || uf == NULL) {
        free(ib);
        free(uf);
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a decode batch");
    }
    int32_t *tk = ib, *ps = ib + Bp, *nk = ib + 2 * (size_t)Bp, *tb = ib + 3 * (size_t)Bp;
    for (int i = 0; i < Bp; i++) {
        bool real = i < B;
        tk[i] = real ? tokens[i] : 0;
        ps[i] = real ? pos[i] : 0;
        nk[i] = ps[i] + 1;
        uf[i] = real && u != NULL ? u[i] : 0.0f;
        for (size_t j = 0; j < mb; j++) /* padding rows: the plan's spare block n_blocks */
            tb[(size_t)i * mb + j] = real ? table[(size_t)i * mb + j] : p->kv.n_blocks;
    }
    char *r = g->darena;
    void *st = g->stream;
    size_t b4 = sizeof(int32_t) * (size_t)Bp;
    int rc = up(AI(r, p->tokens), tk, b4, st, err);
    if (rc == AREAL_OK)
        rc = up(AI(r, p->pos), ps, b4, st, err);
    if (rc == AREAL_OK)
        rc = up(AI(r, p->n_keys), nk, b4, st, err);
    if (rc == AREAL_OK)
        rc = up(AI(r, p->table), tb, b4 * mb, st, err);
    if (rc == AREAL_OK)
        rc = up(A32(r, p->unif), uf, sizeof(float) * (size_t)Bp, st, err);
    free(ib);
    free(uf);
    if (rc != AREAL_OK)
        return rc;
    if (g->graphs)
        TRY(gpu_decode_graph_launch(g, idx, Bp, samp, err));
    else
        TRY(gpu_decode_enqueue(g, B, samp, err));
    uint16_t *lg = A16(r, p->logits);
    b4 = sizeof(int32_t) * (size_t)B;
    cudaStream_t cs = (cudaStream_t)st;
    TRY(gpu_cuda(cudaMemcpyAsync(next, AI(r, p->next), b4, cudaMemcpyDeviceToHost, cs),
                 "download the tokens", err));
    TRY(gpu_cuda(cudaMemcpyAsync(logprob, A32(r, p->logprob), sizeof(float) * (size_t)B,
                                 cudaMemcpyDeviceToHost, cs),
                 "download the log-probabilities", err));
    TRY(gpu_cuda(cudaStreamSynchronize(cs), "the decode step", err));
    if (logits != NULL) {
        size_t n = (size_t)B * g->V;
        uint16_t *h = malloc(sizeof(uint16_t) * n);
        if (h == NULL)
            return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for %zu logits", n);
        rc = gpu_cuda(cudaMemcpy(h, lg, sizeof(uint16_t) * n, cudaMemcpyDeviceToHost),
                      "download the logits", err);
        for (size_t i = 0; rc == AREAL_OK && i < n; i++) {
            uint32_t w = (uint32_t)h[i] << 16;
            memcpy(&logits[i], &w, sizeof w);
        }
        free(h);
    }
    return rc;
}
