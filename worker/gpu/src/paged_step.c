/*
 * paged_step.c - areal_model_step_paged's contract on the GPU decode step
 * (areal/gpumodel/paged.h): the plan's sub-steps, greedy sampling on the
 * device (its tokens are ignored: the engine samples from the logits), and
 * the logits of the wanted rows copied into their slots.
 */
#include <stdlib.h>
#include <string.h>

#include "areal/gpumodel/model.h"
#include "areal/gpumodel/paged.h"

int areal_gpu_step_paged(struct areal_gpu_model *g, const areal_gpu_kv_cfg *kv,
                         const int32_t *tokens, const int32_t *cu, const areal_paged_seq *seqs,
                         int n_seqs, const int32_t *out_rows, int n_out, float *logits,
                         areal_error *err) {
    if (n_out > 0 && logits == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "GPU paged step: NULL logits");
    areal_gpu_paged_plan p;
    int rc = areal_gpu_paged_plan_make(tokens, cu, seqs, n_seqs, out_rows, n_out, kv, &p, err);
    if (rc != AREAL_OK)
        return rc;
    size_t V = (size_t)areal_gpu_model_vocab(g), B = (size_t)kv->max_batch;
    int32_t *next = malloc(sizeof(int32_t) * B);
    float *lp = malloc(sizeof(float) * B), *buf = NULL;
    if (n_out > 0)
        buf = malloc(sizeof(float) * B * V);
    if (next == NULL || lp == NULL || (n_out > 0 && buf == NULL))
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a step's logits");
    areal_k_sample_cfg greedy = {0.0f, 0, 1.0f};
    for (int j = 0; rc == AREAL_OK && j < p.n_sub; j++) {
        int a = p.sub_off[j], n = p.sub_off[j + 1] - a;
        bool want = false;
        for (int i = a; i < a + n; i++)
            want = want || p.slot[i] >= 0;
        rc = areal_gpu_decode_step(g, n, p.tok + a, p.pos + a, p.table + (size_t)a * kv->max_blocks,
                                   greedy, NULL, next, lp, want ? buf : NULL, err);
        for (int i = a; rc == AREAL_OK && want && i < a + n; i++)
            if (p.slot[i] >= 0)
                memcpy(logits + (size_t)p.slot[i] * V, buf + (size_t)(i - a) * V,
                       sizeof(float) * V);
    }
    free(next);
    free(lp);
    free(buf);
    areal_gpu_paged_plan_free(&p);
    return rc;
}
