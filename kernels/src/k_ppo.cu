/*
 * k_ppo.cu - the decoupled PPO loss fused with the vocabulary log-softmax
 * (areal/kernels/ppo.h).
 *
 * One block per row: the online softmax (k_softmax.cuh) gives logZ from one
 * read; thread 0 turns the target's log-probability into the token's loss and
 * d loss / d logprob (a handful of flops, so no second kernel and no [rows]
 * round trip through memory); the block then writes the row's dlogits from a
 * second read. Rejected: logprob kernel + PPO kernel + logprob backward (three
 * launches and two extra [rows] buffers per chunk for the same reads of the
 * row), and keeping the row in shared memory between the passes (151k bf16 is
 * 300 KB, over the 227 KB an SM has; the second read hits L2 for a chunk row).
 */
#include "areal/kernels/ppo.h"

#include "k_softmax.cuh"

namespace {

/* the token's surrogate pg and d pg / d r, as areal_ppo_actor_loss's surrogate() */
__device__ float surrogate(float A, float r, const areal_k_ppo_cfg &c, float *g) {
    float cr = fminf(fmaxf(r, c.clip_lo), c.clip_hi);
    float l1 = -A * r, l2 = -A * cr;
    float dclamp = (r >= c.clip_lo && r <= c.clip_hi) ? 1.0f : 0.0f;
    float pg, gr;
    if (l1 > l2) {
        pg = l1;
        gr = -A;
    } else if (l1 < l2) {
        pg = l2;
        gr = -A * dclamp;
    } else { /* a tie: torch's max splits the gradient evenly */
        pg = l1;
        gr = 0.5f * (-A) + 0.5f * (-A * dclamp);
    }
    if (c.c_clip > 1.0f) {
        float sgn = A > 0.0f ? 1.0f : (A < 0.0f ? -1.0f : 0.0f);
        float l3 = sgn * c.c_clip * A;
        if (l3 < pg) {
            pg = l3;
            gr = 0.0f;
        } else if (l3 == pg) {
            gr *= 0.5f;
        }
    }
    *g = gr;
    return pg;
}

__global__ void ppo_lp(uint16_t *dlogits, float *logprob, float *tok_loss, const uint16_t *logits,
                       size_t ld, const int32_t *target, const float *prox, const float *adv,
                       const float *w, size_t rows, int V, areal_k_ppo_cfg c) {
    __shared__ float s_dlp, s_lz;
    const float inv_t = 1.0f / c.temp;
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const uint16_t *row = logits + r * ld;
        ksoft::online o = ksoft::row_softmax(row, V, inv_t);
        const int tg = target[r];
        if (threadIdx.x == 0) {
            float lz = o.m + logf(o.s);
            float lp = kutil::ld(row, tg) * inv_t - lz;
            float wt = w[r], loss = 0.0f, dlp = 0.0f;
            if (wt != 0.0f) { /* outside the loss: no ratio (it could overflow) and no gradient */
                float ratio = expf(lp - prox[r]), g;
                float pg = surrogate(adv[r], ratio, c, &g);
                loss = c.coef * wt * pg;
                dlp = c.coef * wt * g * ratio;
            }
            logprob[r] = lp;
            if (tok_loss != NULL)
                tok_loss[r] = loss;
            s_dlp = dlp;
            s_lz = lz;
        }
        __syncthreads();
        const float dlp = s_dlp, lz = s_lz;
        uint16_t *drow = dlogits + r * ld;
        for (int i = threadIdx.x; i < V; i += blockDim.x) {
            float p = __expf(kutil::ld(row, i) * inv_t - lz);
            kutil::st(drow, i, dlp * ((i == tg ? 1.0f : 0.0f) - p) * inv_t);
        }
        __syncthreads(); /* s_dlp / s_lz are rewritten for the next row */
    }
}

} // namespace

extern "C" int areal_k_ppo_logprob(uint16_t *dlogits, float *logprob, float *tok_loss,
                                   const uint16_t *logits, size_t ld, const int32_t *target,
                                   const float *prox, const float *adv, const float *w, size_t rows,
                                   int V, areal_k_ppo_cfg cfg, void *stream, areal_error *err) {
    if (rows == 0)
        return AREAL_OK;
    if (dlogits == NULL || logprob == NULL || logits == NULL || target == NULL || prox == NULL ||
        adv == NULL || w == NULL || V < 1 || ld < (size_t)V)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "areal_k_ppo_logprob: NULL buffer or bad shape (V %d, ld %zu; need "
                               "V >= 1, ld >= V)",
                               V, ld);
    if (!(cfg.temp > 0.0f) || !(cfg.clip_lo >= 0.0f && cfg.clip_lo <= 1.0f) ||
        !(cfg.clip_hi >= 1.0f) || !(cfg.c_clip == 0.0f || cfg.c_clip > 1.0f) || !isfinite(cfg.coef))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "areal_k_ppo_logprob: temp %g must be > 0, clip_lo %g in [0, 1], "
                               "clip_hi %g >= 1, c_clip %g 0 (none) or > 1, coef %g finite",
                               (double)cfg.temp, (double)cfg.clip_lo, (double)cfg.clip_hi,
                               (double)cfg.c_clip, (double)cfg.coef);
    unsigned blocks = (unsigned)(rows < 8192 ? rows : 8192);
    ppo_lp<<<blocks, kutil::kThreads, 0, (cudaStream_t)stream>>>(
        dlogits, logprob, tok_loss, logits, ld, target, prox, adv, w, rows, V, cfg);
    return kutil::launched("areal_k_ppo_logprob", err);
}
