/*
 * train_step.c - one training step of the GPU model (areal/gpumodel/model.h):
 * the batch checked and uploaded, gradients zeroed, forward, the head's loss
 * rows and backward, the layers' backward, then the global gradient norm,
 * the clip factor and AdamW, all on the device (optim.h: the clip factor is
 * never read back before the update). The host reads the per-row
 * log-probabilities and the norm once, at the end.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "areal/kernels/optim.h"
#include "areal/kernels/vocab.h"
#include "ginternal.h"

/* the batch's rules (areal_batch_check's, plus the plan's limits); *max_len its longest */
static int check_batch(const areal_gpu_model *g, const areal_batch *b, const int32_t *targets,
                       int *max_len, areal_error *err) {
    const areal_gpu_plan *p = &g->plan;
    if (b->n_tokens < 1 || b->n_tokens > p->T || b->n_seqs < 1 || b->n_seqs > p->n_seqs)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU step: %d tokens in %d sequences; the model was planned for "
                               "1..%d tokens in 1..%d sequences (areal_gpu_model_create)",
                               b->n_tokens, b->n_seqs, p->T, p->n_seqs);
    if (b->tokens == NULL || b->cu_seqlens == NULL || targets == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU step: NULL tokens, cu_seqlens or targets");
    if (b->cu_seqlens[0] != 0 || b->cu_seqlens[b->n_seqs] != b->n_tokens)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU step: cu_seqlens must start at 0 and end at n_tokens %d",
                               b->n_tokens);
    *max_len = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        int len = b->cu_seqlens[s + 1] - b->cu_seqlens[s];
        if (len < 1)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "GPU step: cu_seqlens[%d..%d] is not increasing", s, s + 1);
        *max_len = len > *max_len ? len : *max_len;
    }
    for (int t = 0; t < b->n_tokens; t++)
        if (b->tokens[t] < 0 || b->tokens[t] >= g->V || targets[t] < -1 || targets[t] >= g->V)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "GPU step: tokens[%d] = %d / targets[%d] = %d: ids are in [0, "
                                   "%d) (targets may be -1: none)",
                                   t, b->tokens[t], t, targets[t], g->V);
    return AREAL_OK;
}

static int up(void *dst, const void *src, size_t bytes, void *st, areal_error *err) {
    return gpu_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)st),
                    "upload the batch", err);
}

/* the batch's device arrays: tokens, positions, cu, targets (none -> 0) and d loss / d logprob */
static int upload_batch(areal_gpu_model *g, const areal_batch *b, const int32_t *targets,
                        int *n_targets, areal_error *err) {
    const areal_gpu_plan *p = &g->plan;
    size_t T = (size_t)b->n_tokens;
    int32_t *ibuf = malloc(sizeof(int32_t) * 2 * T);
    float *glp = malloc(sizeof(float) * T);
    int rc = AREAL_OK;
    if (ibuf == NULL || glp == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a batch of %zu tokens", T);
    int n = 0;
    for (size_t t = 0; rc == AREAL_OK && t < T; t++)
        n += targets[t] >= 0;
    if (rc == AREAL_OK && n == 0)
        rc = areal_error_set(err, AREAL_EINVAL, -1,
                             "GPU step: no row has a target (every targets[t] is -1)");
    if (rc == AREAL_OK) {
        int32_t *pos = ibuf, *tgt = ibuf + T;
        for (int s = 0; s < b->n_seqs; s++)
            for (int t = b->cu_seqlens[s]; t < b->cu_seqlens[s + 1]; t++)
                pos[t] = t - b->cu_seqlens[s];
        for (size_t t = 0; t < T; t++) {
            tgt[t] = targets[t] >= 0 ? targets[t] : 0;
            glp[t] = targets[t] >= 0 ? -1.0f / (float)n : 0.0f; /* loss = -mean log p */
        }
        char *r = g->arena;
        void *st = g->stream;
        rc = up(AI(r, p->tokens), b->tokens, sizeof(int32_t) * T, st, err);
        if (rc == AREAL_OK)
            rc = up(AI(r, p->pos), pos, sizeof(int32_t) * T, st, err);
        if (rc == AREAL_OK)
            rc =
                up(AI(r, p->cu), b->cu_seqlens, sizeof(int32_t) * (size_t)(b->n_seqs + 1), st, err);
        if (rc == AREAL_OK)
            rc = up(AI(r, p->target), tgt, sizeof(int32_t) * T, st, err);
        if (rc == AREAL_OK)
            rc = up(A32(r, p->g_lp), glp, sizeof(float) * T, st, err);
    }
    /* pageable sources: cudaMemcpyAsync has staged them before returning */
    free(ibuf);
    free(glp);
    *n_targets = n;
    return rc;
}

/* the PPO batch's per-token terms: rows in the loss need a target and finite terms */
static int upload_ppo(areal_gpu_model *g, const areal_batch *b, const int32_t *targets,
                      const areal_gpu_ppo *ppo, int *n_rows, areal_error *err) {
    const areal_gpu_plan *p = &g->plan;
    int T = b->n_tokens, n = 0;
    if (ppo == NULL || ppo->prox == NULL || ppo->adv == NULL || ppo->w == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU PPO step: NULL terms (prox, adv and w are needed: "
                               "areal_ppo_token_terms)");
    if (ppo->k.c_clip != 0.0f && !(ppo->k.c_clip > 1.0f))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU PPO step: c_clip %g must be > 1 (dual clip) or 0 (none)",
                               (double)ppo->k.c_clip);
    for (int t = 0; t < T; t++) {
        if (ppo->w[t] == 0.0f)
            continue;
        if (targets[t] < 0 || !isfinite(ppo->w[t]) || !isfinite(ppo->prox[t]) ||
            !isfinite(ppo->adv[t]))
            return areal_error_set(err, AREAL_EINVAL, t,
                                   "GPU PPO step: row %d is in the loss (w %g) but has no target "
                                   "(%d) or a non-finite prox %g / adv %g",
                                   t, (double)ppo->w[t], targets[t], (double)ppo->prox[t],
                                   (double)ppo->adv[t]);
        n++;
    }
    char *r = g->arena;
    size_t bytes = sizeof(float) * (size_t)T;
    TRY(up(A32(r, p->prox), ppo->prox, bytes, g->stream, err));
    TRY(up(A32(r, p->adv), ppo->adv, bytes, g->stream, err));
    TRY(up(A32(r, p->w), ppo->w, bytes, g->stream, err));
    *n_rows = n;
    return AREAL_OK;
}

/* forward, head (its loss: ppo or the cross-entropy) and backward, adding into the gradients */
static int run_fwd_bwd(areal_gpu_model *g, const areal_batch *b, int max_len,
                       const areal_k_ppo_cfg *ppo, areal_error *err) {
    int T = b->n_tokens;
    g->T_run = T;
    TRY(gpu_train_fwd(g, T, b->n_seqs, max_len, err));
    TRY(gpu_head_fwd_bwd(g, T, ppo, err));
    return gpu_train_bwd(g, T, b->n_seqs, max_len, err);
}

static int zero_grads(areal_gpu_model *g, areal_error *err) {
    return gpu_cuda(
        cudaMemsetAsync(g->grads, 0, g->wl.n_elems * sizeof(float), (cudaStream_t)g->stream),
        "zero the gradients", err);
}

/* the DP reduction, the global norm, the clip factor and AdamW on the gradients */
static int run_apply(areal_gpu_model *g, const areal_gpu_step_cfg *cfg, areal_error *err) {
    const areal_gpu_plan *p = &g->plan;
    char *r = g->arena;
    cudaStream_t st = (cudaStream_t)g->stream;
    size_t n = g->wl.n_elems;
    TRY(gpu_dp_reduce(g, err)); /* on the DP group's stream, ordered by events */
    double *acc = (double *)AREAL_GPU_P(r, p->acc);
    float *scale = A32(r, p->scale), *norm = A32(r, p->norm);
    TRY(gpu_cuda(cudaMemsetAsync(acc, 0, sizeof(double), st), "zero the norm", err));
    TRY(areal_k_sumsq(g->grads, n, acc, st, err));
    TRY(areal_k_clip_scale(acc, cfg->max_norm, scale, norm, st, err));
    areal_k_adamw_cfg ac = cfg->adamw;
    ac.step = g->step + 1;
    TRY(areal_k_adamw(g->master, g->w16, g->grads, g->m1, g->m2, n, scale, ac, st, err));
    g->step++;
    return AREAL_OK;
}

/* zero the gradients, forward, head, backward, clip, AdamW */
static int run_step(areal_gpu_model *g, const areal_batch *b, int max_len,
                    const areal_k_ppo_cfg *ppo, const areal_gpu_step_cfg *cfg, areal_error *err) {
    TRY(zero_grads(g, err));
    TRY(run_fwd_bwd(g, b, max_len, ppo, err));
    return run_apply(g, cfg, err);
}

/* the step's fp32 [T] results at plan offsets `lp` and `loss` (NULL: skip) and the norm (NULL:
 * skip) */
static int download(areal_gpu_model *g, int T, float *lp, float *loss, float *gn,
                    areal_error *err) {
    const areal_gpu_plan *p = &g->plan;
    char *r = g->arena;
    cudaStream_t st = (cudaStream_t)g->stream;
    size_t bytes = sizeof(float) * (size_t)T;
    int rc = gpu_cuda(cudaMemcpyAsync(lp, A32(r, p->logprob), bytes, cudaMemcpyDeviceToHost, st),
                      "download the log-probabilities", err);
    if (rc == AREAL_OK && loss != NULL)
        rc = gpu_cuda(cudaMemcpyAsync(loss, A32(r, p->tok_loss), bytes, cudaMemcpyDeviceToHost, st),
                      "download the token losses", err);
    if (rc == AREAL_OK && gn != NULL)
        rc = gpu_cuda(cudaMemcpyAsync(gn, A32(r, p->norm), sizeof *gn, cudaMemcpyDeviceToHost, st),
                      "download the norm", err);
    if (rc == AREAL_OK)
        rc = gpu_cuda(cudaStreamSynchronize(st), "the training step", err);
    return rc;
}

int areal_gpu_train_step(areal_gpu_model *g, const areal_batch *b, const int32_t *targets,
                         const areal_gpu_step_cfg *cfg, areal_gpu_step_out *out, areal_error *err) {
    int max_len = 0, n_targets = 0;
    TRY(check_batch(g, b, targets, &max_len, err));
    TRY(upload_batch(g, b, targets, &n_targets, err));
    TRY(run_step(g, b, max_len, NULL, cfg, err));
    int T = b->n_tokens;
    float *lp = malloc(sizeof(float) * (size_t)T);
    if (lp == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for %d log-probabilities", T);
    float gn = 0;
    int rc = download(g, T, lp, NULL, &gn, err);
    if (rc == AREAL_OK) {
        double sum = 0;
        for (int t = 0; t < T; t++)
            if (targets[t] >= 0)
                sum += lp[t];
        out->loss = -sum / n_targets;
        out->grad_norm = gn;
        out->n_targets = n_targets;
    }
    free(lp);
    return rc;
}

int areal_gpu_train_step_ppo(areal_gpu_model *g, const areal_batch *b, const int32_t *targets,
                             const areal_gpu_ppo *ppo, const areal_gpu_step_cfg *cfg,
                             areal_gpu_step_out *out, float *logprob, areal_error *err) {
    int max_len = 0, n_targets = 0, n_rows = 0;
    TRY(check_batch(g, b, targets, &max_len, err));
    TRY(upload_ppo(g, b, targets, ppo, &n_rows, err));
    /* the cross-entropy's upload also sends tokens, positions, cu and targets (g_lp unused) */
    TRY(upload_batch(g, b, targets, &n_targets, err));
    TRY(run_step(g, b, max_len, &ppo->k, cfg, err));
    int T = b->n_tokens;
    float *buf = malloc(sizeof(float) * 2 * (size_t)T);
    if (buf == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for %d token losses", T);
    float gn = 0;
    int rc = download(g, T, buf, buf + T, &gn, err);
    if (rc == AREAL_OK) {
        double sum = 0;
        for (int t = 0; t < T; t++)
            sum += buf[T + t];
        out->loss = sum;
        out->grad_norm = gn;
        out->n_targets = n_rows;
        if (logprob != NULL)
            for (int t = 0; t < T; t++)
                logprob[t] = targets[t] >= 0 ? buf[t] : 0.0f;
    }
    free(buf);
    return rc;
}

/* ---- the same step in pieces, for a trainer that accumulates micro-batches
 * (areal/gpumodel/model.h) */

int areal_gpu_zero_grad(areal_gpu_model *g, areal_error *err) {
    return zero_grads(g, err);
}

int areal_gpu_accum_ppo(areal_gpu_model *g, const areal_batch *b, const int32_t *targets,
                        const areal_gpu_ppo *ppo, double *loss, float *logprob, areal_error *err) {
    int max_len = 0, n_targets = 0, n_rows = 0;
    TRY(check_batch(g, b, targets, &max_len, err));
    TRY(upload_ppo(g, b, targets, ppo, &n_rows, err));
    TRY(upload_batch(g, b, targets, &n_targets, err));
    TRY(run_fwd_bwd(g, b, max_len, &ppo->k, err));
    int T = b->n_tokens;
    float *buf = malloc(sizeof(float) * 2 * (size_t)T);
    if (buf == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for %d token losses", T);
    int rc = download(g, T, buf, buf + T, NULL, err);
    if (rc == AREAL_OK) {
        double sum = 0;
        for (int t = 0; t < T; t++)
            sum += buf[T + t];
        if (loss != NULL)
            *loss = sum;
        if (logprob != NULL)
            for (int t = 0; t < T; t++)
                logprob[t] = targets[t] >= 0 ? buf[t] : 0.0f;
    }
    free(buf);
    return rc;
}

int areal_gpu_apply(areal_gpu_model *g, const areal_gpu_step_cfg *cfg, double *grad_norm,
                    areal_error *err) {
    if (cfg == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "GPU apply: NULL step settings");
    TRY(run_apply(g, cfg, err));
    float gn = 0;
    const areal_gpu_plan *p = &g->plan;
    cudaStream_t st = (cudaStream_t)g->stream;
    int rc = gpu_cuda(
        cudaMemcpyAsync(&gn, A32(g->arena, p->norm), sizeof gn, cudaMemcpyDeviceToHost, st),
        "download the norm", err);
    if (rc == AREAL_OK)
        rc = gpu_cuda(cudaStreamSynchronize(st), "the optimizer step", err);
    if (rc == AREAL_OK && grad_norm != NULL)
        *grad_norm = gn;
    return rc;
}

int areal_gpu_logprobs(areal_gpu_model *g, const areal_batch *b, const int32_t *targets, float temp,
                       float *logprob, areal_error *err) {
    if (!(temp > 0.0f) || logprob == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU logprobs: temperature %g must be > 0 and logprob non-NULL",
                               (double)temp);
    int max_len = 0, n_targets = 0;
    TRY(check_batch(g, b, targets, &max_len, err));
    TRY(upload_batch(g, b, targets, &n_targets, err));
    int T = b->n_tokens;
    g->T_run = T;
    TRY(gpu_train_fwd(g, T, b->n_seqs, max_len, err));
    const areal_gpu_plan *p = &g->plan;
    char *r = g->arena;
    uint16_t *lnf = A16(r, p->lnf), *logits = A16(r, p->logits);
    for (int r0 = 0; r0 < T; r0 += p->chunk) { /* the LM head as the step's, without a backward */
        int C = T - r0 < p->chunk ? T - r0 : p->chunk;
        TRY(gpu_lin_fwd(g, logits, lnf + (size_t)r0 * g->H, g->wl.lm_head, AREAL_GPU_NONE, C, g->H,
                        g->V, 0.0f, err));
        TRY(areal_k_logprob_fwd(A32(r, p->logprob) + r0, NULL, A32(r, p->logz) + r0, logits,
                                (size_t)g->V, AI(r, p->target) + r0, (size_t)C, g->V, temp,
                                g->stream, err));
    }
    TRY(download(g, T, logprob, NULL, NULL, err));
    for (int t = 0; t < T; t++)
        if (targets[t] < 0)
            logprob[t] = 0.0f;
    return AREAL_OK;
}
