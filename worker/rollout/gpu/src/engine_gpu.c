/*
 * engine_gpu.c - the rollout engine's GPU step (eng_backend, engine_internal.h;
 * areal/rollout/backend.h): the scheduler's planned step - the same batch,
 * chunks, block tables and wanted rows it hands the CPU model - through
 * areal_gpu_step_paged over the GPU model's paged cache. The block ids are
 * the engine's (kv_blocks.c), so the prefix cache's sharing, preemption and
 * flushes need nothing here: a block id names the same rows in both caches.
 *
 * Weights: uploaded at attach and again at the first step after each swap
 * (e->epoch moves with every swap, on this same scheduler thread), so the
 * swap path (serve_cmd, under the engine's mutex) never waits for a copy to
 * the device. A failed upload fails that step like any step error (its
 * requests abort) and is retried at the next. The host cache e->kv stays
 * allocated (the CPU backend's; a GPU engine never touches it: its pages are
 * never written). Rejected: a device cache sized from its own budget (the
 * engine's block manager has one geometry; the GPU's blocks are bf16, so
 * the same count takes half the bytes).
 */
#include <stdlib.h>

#include "areal/gpumodel/model.h"
#include "areal/gpumodel/paged.h"
#include "areal/rollout/backend.h"
#include "engine_internal.h"

typedef struct gpu_eng {
    areal_gpu_model *g;
    areal_gpu_kv_cfg kv;
    uint64_t epoch; /* the weights' epoch on the device */
} gpu_eng;

static int gpu_step(areal_engine *e, int nb, int n_out, areal_error *err) {
    gpu_eng *s = e->be_state;
    if (s->epoch != e->epoch) {
        int rc = areal_gpu_model_upload(s->g, e->model, err);
        if (rc != AREAL_OK)
            return rc;
        s->epoch = e->epoch;
    }
    return areal_gpu_step_paged(s->g, &s->kv, e->step_tok, e->cu, e->pseq, nb, e->out_rows, n_out,
                                e->logits, err);
}

static void gpu_release(areal_engine *e) {
    gpu_eng *s = e->be_state;
    if (s != NULL) {
        areal_gpu_model_free(s->g);
        free(s);
    }
    e->be_state = NULL;
    e->be = &eng_cpu_backend;
}

static const eng_backend gpu_backend = {"gpu", gpu_step, gpu_release};

int eng_gpu_attach(areal_engine *e, areal_error *err) {
    if (e->tp != NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "tensor_parallel %d has no GPU step yet (the GPU model runs whole "
                               "models)",
                               e->cfg.tensor_parallel);
    int rc = areal_gpu_check_model(e->model, err);
    if (rc != AREAL_OK)
        return rc;
    gpu_eng *s = calloc(1, sizeof *s);
    if (s == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the GPU engine");
    long ctx = e->model->cfg.max_position_embeddings;
    s->kv = (areal_gpu_kv_cfg){e->cfg.max_running, e->cfg.block_tokens, e->blocks.n,
                               areal_rollout_gpu_max_blocks(ctx, e->cfg.block_tokens, e->blocks.n)};
    s->epoch = e->epoch;
    /* the smallest training plan (one token): this model only decodes */
    rc = areal_gpu_model_create(e->model, 1, 1, 0, &s->g, err);
    if (rc == AREAL_OK)
        rc = areal_gpu_model_upload(s->g, e->model, err);
    if (rc == AREAL_OK)
        rc = areal_gpu_decode_init(s->g, &s->kv, err);
    if (rc == AREAL_OK) { /* graphs need a dense model: MoE layers read expert counts on the host */
        areal_error gerr;
        (void)areal_gpu_decode_graphs(s->g, true, &gerr);
    }
    if (rc != AREAL_OK) {
        areal_gpu_model_free(s->g);
        free(s);
        return rc;
    }
    e->be_state = s;
    e->be = &gpu_backend;
    return AREAL_OK;
}
