/*
 * gmodel.c - the GPU model's life cycle (areal/gpumodel/model.h): device
 * allocations from the weight layout and the training plan, weight upload
 * from a CPU model, the benchmarks' random weights, and the download the
 * tests compare against the CPU model.
 */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "areal/kernels/cast.h"
#include "areal/kernels/embed.h"
#include "ginternal.h"

int gpu_cuda(int e, const char *what, areal_error *err) {
    if (e == cudaSuccess)
        return AREAL_OK;
    return areal_error_set(err, e == cudaErrorMemoryAllocation ? AREAL_ENOMEM : AREAL_EIO, -1,
                           "GPU model: %s: %s (%s)", what, cudaGetErrorString((cudaError_t)e),
                           cudaGetErrorName((cudaError_t)e));
}

static int dev_alloc(void **p, size_t bytes, const char *what, areal_error *err) {
    *p = NULL;
    int rc = gpu_cuda(cudaMalloc(p, bytes ? bytes : 1), what, err);
    if (rc != AREAL_OK) {
        *p = NULL;
        return areal_error_set(err, rc, -1, "GPU model: no device memory for %s (%zu bytes)", what,
                               bytes);
    }
    return gpu_cuda(cudaMemset(*p, 0, bytes ? bytes : 1), what, err);
}

void areal_gpu_model_free(areal_gpu_model *g) {
    if (g == NULL)
        return;
    if (g->stream != NULL)
        cudaStreamSynchronize((cudaStream_t)g->stream);
    cudaFree(g->master);
    cudaFree(g->grads);
    cudaFree(g->m1);
    cudaFree(g->m2);
    cudaFree(g->w16);
    cudaFree(g->inv_freq);
    cudaFree(g->arena);
    gpu_decode_graphs_free(g);
    gpu_dp_free(g);
    cudaFree(g->darena);
    areal_k_gemm_destroy(g->gemm);
    if (g->stream != NULL)
        cudaStreamDestroy((cudaStream_t)g->stream);
    areal_gpu_wlayout_free(&g->wl);
    areal_gpu_plan_free(&g->plan);
    areal_gpu_dplan_free(&g->dplan);
    free(g->host_off);
    free(g->dhost_off);
    free(g);
}

int areal_gpu_model_create(const areal_model *m, int max_tokens, int max_seqs, int chunk,
                           areal_gpu_model **out, areal_error *err) {
    *out = NULL;
    areal_gpu_model *g = calloc(1, sizeof *g);
    if (g == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a GPU model");
    const areal_model_config *c = &m->cfg;
    g->cfg = *c;
    g->shard = m->shard;
    g->H = c->hidden_size, g->hd = c->head_dim, g->nh = c->num_heads, g->nkv = c->num_kv_heads;
    g->Q = g->nh * g->hd, g->KV = g->nkv * g->hd, g->I = c->intermediate_size;
    g->Ie = c->moe_intermediate_size, g->E = c->num_experts, g->K = c->num_experts_per_tok;
    g->V = c->vocab_size, g->L = c->num_layers;
    g->attn_scale = m->attn_scale, g->eps = (float)c->rms_norm_eps;
    int rc = areal_gpu_wlayout_make(m, &g->wl, err);
    if (rc == AREAL_OK)
        rc = areal_gpu_plan_make(m, max_tokens, max_seqs, chunk > 0 ? chunk : 4096, &g->plan, err);
    if (rc == AREAL_OK && g->E > 0) {
        g->host_off = calloc((size_t)g->L * (size_t)(g->E + 1), sizeof(int32_t));
        if (g->host_off == NULL)
            rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the expert offsets");
    }
    cudaStream_t st = NULL;
    /* a blocking stream: it orders itself after the synchronous cudaMemset/cudaMemcpy calls
     * (legacy default stream) of create, upload and decode_init; rejected: a non-blocking
     * stream, which would need an explicit synchronisation after each of them */
    if (rc == AREAL_OK &&
        (rc = gpu_cuda(cudaStreamCreate(&st), "cudaStreamCreate", err)) == AREAL_OK)
        g->stream = st;
    if (rc == AREAL_OK)
        rc = areal_k_gemm_create(0, &g->gemm, err);
    size_t n = g->wl.n_elems;
    if (rc == AREAL_OK)
        rc = dev_alloc((void **)&g->master, n * sizeof(float), "the master weights", err);
    if (rc == AREAL_OK)
        rc = dev_alloc((void **)&g->grads, n * sizeof(float), "the gradients", err);
    if (rc == AREAL_OK)
        rc = dev_alloc((void **)&g->m1, n * sizeof(float), "AdamW's first moments", err);
    if (rc == AREAL_OK)
        rc = dev_alloc((void **)&g->m2, n * sizeof(float), "AdamW's second moments", err);
    if (rc == AREAL_OK)
        rc = dev_alloc((void **)&g->w16, n * sizeof(uint16_t), "the bf16 weights", err);
    size_t nf = (size_t)g->hd / 2;
    if (rc == AREAL_OK)
        rc = dev_alloc((void **)&g->inv_freq, nf * sizeof(float), "the rotary frequencies", err);
    if (rc == AREAL_OK)
        rc = gpu_cuda(
            cudaMemcpy(g->inv_freq, m->inv_freq, nf * sizeof(float), cudaMemcpyHostToDevice),
            "upload the rotary frequencies", err);
    if (rc == AREAL_OK)
        rc = dev_alloc((void **)&g->arena, g->plan.bytes, "the training activations", err);
    if (rc == AREAL_OK) { /* the ones row of the bias gradients' GEMM */
        uint16_t *ones = malloc(sizeof(uint16_t) * (size_t)g->plan.T);
        if (ones == NULL)
            rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the ones row");
        for (int t = 0; ones != NULL && t < g->plan.T; t++)
            ones[t] = 0x3f80; /* bf16 1.0 */
        if (ones != NULL)
            rc = gpu_cuda(cudaMemcpy(A16(g->arena, g->plan.ones), ones,
                                     sizeof(uint16_t) * (size_t)g->plan.T, cudaMemcpyHostToDevice),
                          "upload the ones row", err);
        free(ones);
    }
    if (rc == AREAL_OK)
        rc = gpu_cuda(cudaDeviceSynchronize(), "create", err);
    if (rc != AREAL_OK) {
        areal_gpu_model_free(g);
        return rc;
    }
    *out = g;
    return AREAL_OK;
}

/* zero gradients and moments, bf16 copy from the master, step 0 */
static int reset_state(areal_gpu_model *g, areal_error *err) {
    size_t n = g->wl.n_elems;
    cudaStream_t st = (cudaStream_t)g->stream;
    TRY(gpu_cuda(cudaMemsetAsync(g->grads, 0, n * sizeof(float), st), "zero gradients", err));
    TRY(gpu_cuda(cudaMemsetAsync(g->m1, 0, n * sizeof(float), st), "zero moments", err));
    TRY(gpu_cuda(cudaMemsetAsync(g->m2, 0, n * sizeof(float), st), "zero moments", err));
    TRY(areal_k_f32_to_bf16(g->master, g->w16, n, g->stream, err));
    g->step = 0;
    return gpu_cuda(cudaStreamSynchronize(st), "upload", err);
}

int areal_gpu_model_upload(areal_gpu_model *g, const areal_model *m, areal_error *err) {
    if (m->n_specs != g->wl.n_specs)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU upload: the model has %zu tensors, the GPU model %zu: upload "
                               "the model it was created from",
                               m->n_specs, g->wl.n_specs);
    float *host = malloc(sizeof(float) * g->wl.n_elems);
    if (host == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory to stage %zu weights",
                               g->wl.n_elems);
    areal_gpu_wlayout_pack(&g->wl, m->params, host);
    int rc =
        gpu_cuda(cudaMemcpy(g->master, host, sizeof(float) * g->wl.n_elems, cudaMemcpyHostToDevice),
                 "upload the weights", err);
    free(host);
    return rc != AREAL_OK ? rc : reset_state(g, err);
}

/* master[off .. off + n) = 1 (a norm's weight) */
static int ones_at(areal_gpu_model *g, size_t off, size_t n, const float *one, areal_error *err) {
    if (off == AREAL_GPU_NONE)
        return AREAL_OK;
    return gpu_cuda(cudaMemcpyAsync(g->master + off, one, n * sizeof(float), cudaMemcpyHostToDevice,
                                    (cudaStream_t)g->stream),
                    "set a norm's weight", err);
}

int areal_gpu_model_randomize(areal_gpu_model *g, uint64_t seed, float a, areal_error *err) {
    TRY(areal_k_fill_uniform(g->master, g->wl.n_elems, seed, a, g->stream, err));
    size_t w = (size_t)(g->H > g->hd ? g->H : g->hd);
    float *one = malloc(sizeof(float) * w);
    if (one == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a norm's weight");
    for (size_t i = 0; i < w; i++)
        one[i] = 1.0f;
    int rc = ones_at(g, g->wl.norm, (size_t)g->H, one, err);
    for (int l = 0; l < g->L && rc == AREAL_OK; l++) {
        const areal_gpu_layer_off *o = &g->wl.layers[l];
        rc = ones_at(g, o->ln1, (size_t)g->H, one, err);
        if (rc == AREAL_OK)
            rc = ones_at(g, o->ln2, (size_t)g->H, one, err);
        if (rc == AREAL_OK)
            rc = ones_at(g, o->q_norm, (size_t)g->hd, one, err);
        if (rc == AREAL_OK)
            rc = ones_at(g, o->k_norm, (size_t)g->hd, one, err);
    }
    /* the pageable copies above are complete when the sync in reset_state returns */
    if (rc == AREAL_OK)
        rc = reset_state(g, err);
    free(one);
    return rc;
}

int areal_gpu_model_download(areal_gpu_model *g, float *params, float *grads, areal_error *err) {
    TRY(gpu_cuda(cudaStreamSynchronize((cudaStream_t)g->stream), "synchronise", err));
    float *host = malloc(sizeof(float) * g->wl.n_elems);
    if (host == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory to stage %zu weights",
                               g->wl.n_elems);
    int rc = AREAL_OK;
    for (int i = 0; i < 2 && rc == AREAL_OK; i++) {
        float *dst = i == 0 ? params : grads;
        if (dst == NULL)
            continue;
        rc = gpu_cuda(cudaMemcpy(host, i == 0 ? g->master : g->grads, sizeof(float) * g->wl.n_elems,
                                 cudaMemcpyDeviceToHost),
                      "download", err);
        if (rc == AREAL_OK)
            areal_gpu_wlayout_unpack(&g->wl, host, dst);
    }
    free(host);
    return rc;
}

double areal_gpu_model_matmul_params(const areal_gpu_model *g) {
    double n = 0;
    for (size_t i = 0; i < g->wl.n_specs; i++)
        if (g->wl.matrix[i] && g->wl.dev_off[i] != g->wl.embed)
            n += (double)g->wl.numel[i];
    if (g->wl.lm_head == g->wl.embed) /* tied: the head's product still runs */
        n += (double)g->V * g->H;
    return n;
}

size_t areal_gpu_model_weight_bytes(const areal_gpu_model *g) {
    return g->wl.n_elems * sizeof(uint16_t);
}
