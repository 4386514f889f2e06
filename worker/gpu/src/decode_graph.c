/*
 * decode_graph.c - CUDA graphs of the GPU model's decode step
 * (areal_gpu_decode_graphs, areal/gpumodel/model.h).
 *
 * A decode step of a small model is a few hundred short kernels; their launch
 * cost, not HBM, bounds batch 1. A graph per padded batch size (the buckets
 * of areal_gpu_decode_bucket) is captured on first use and replayed after:
 * the step's kernels read their inputs from fixed buffers of the decode
 * arena (tokens, positions, key counts, block table, uniforms), which the
 * step uploads before the launch, so one capture serves every later step of
 * that bucket. The sampler's settings are kernel arguments, so a bucket is
 * recaptured when they change. Capture uses the thread-local mode: another
 * thread's CUDA calls never break it. MoE models keep the plain step (their
 * grouped GEMMs are sized by expert counts read on the host mid-step).
 * Rejected: cudaGraphExecUpdate on a settings change (a recapture costs the
 * same few ms and happens only when a request changes the settings), and
 * graphs over the training step (its cuBLASLt calls are 10-100x longer than a
 * launch: nothing to gain).
 */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "ginternal.h"

bool gpu_has_moe(const areal_gpu_model *g) {
    for (int l = 0; l < g->L; l++)
        if (gpu_is_moe(g, l))
            return true;
    return false;
}

void gpu_decode_graphs_free(areal_gpu_model *g) {
    for (int i = 0; g->gexec != NULL && i < g->n_graphs; i++)
        if (g->gexec[i] != NULL)
            cudaGraphExecDestroy((cudaGraphExec_t)g->gexec[i]);
    free(g->gexec);
    free(g->gsamp);
    g->gexec = NULL;
    g->gsamp = NULL;
    g->n_graphs = 0;
}

int areal_gpu_decode_graphs(areal_gpu_model *g, bool on, areal_error *err) {
    if (on && g->darena == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU decode graphs: no KV cache (call areal_gpu_decode_init first)");
    if (on && gpu_has_moe(g))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU decode graphs: the model has MoE layers, whose expert counts "
                               "are read on the host mid-step; decode it without graphs");
    TRY(gpu_cuda(cudaStreamSynchronize((cudaStream_t)g->stream), "synchronise", err));
    gpu_decode_graphs_free(g);
    g->graphs = on;
    if (!on)
        return AREAL_OK;
    int n = areal_gpu_decode_n_buckets(g->dplan.kv.max_batch);
    g->gexec = calloc((size_t)n, sizeof *g->gexec);
    g->gsamp = calloc((size_t)n, sizeof *g->gsamp);
    if (g->gexec == NULL || g->gsamp == NULL) {
        gpu_decode_graphs_free(g);
        g->graphs = false;
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for %d decode graphs", n);
    }
    g->n_graphs = n;
    return AREAL_OK;
}

static bool same_samp(areal_k_sample_cfg a, areal_k_sample_cfg b) {
    return a.temp == b.temp && a.top_k == b.top_k && a.top_p == b.top_p;
}

/* captures the decode of B rows into *exec */
static int capture(areal_gpu_model *g, int B, areal_k_sample_cfg samp, cudaGraphExec_t *exec,
                   areal_error *err) {
    cudaStream_t st = (cudaStream_t)g->stream;
    TRY(gpu_cuda(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal),
                 "begin the decode graph's capture", err));
    int rc = gpu_decode_enqueue(g, B, samp, err);
    cudaGraph_t graph = NULL;
    /* the capture is ended in every case: a stream left capturing refuses all later work */
    cudaError_t e = cudaStreamEndCapture(st, &graph);
    if (rc == AREAL_OK)
        rc = gpu_cuda(e, "end the decode graph's capture", err);
    if (rc == AREAL_OK)
        rc = gpu_cuda(cudaGraphInstantiate(exec, graph, 0), "instantiate the decode graph", err);
    if (graph != NULL)
        cudaGraphDestroy(graph);
    if (rc != AREAL_OK)
        cudaGetLastError(); /* clear the sticky launch error a failed capture leaves */
    return rc;
}

int gpu_decode_graph_launch(areal_gpu_model *g, int idx, int B, areal_k_sample_cfg samp,
                            areal_error *err) {
    if (idx < 0 || idx >= g->n_graphs)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "GPU decode graphs: bucket %d of %d (batch %d)", idx, g->n_graphs,
                               B);
    if (g->gexec[idx] != NULL && !same_samp(g->gsamp[idx], samp)) {
        cudaGraphExecDestroy((cudaGraphExec_t)g->gexec[idx]);
        g->gexec[idx] = NULL;
    }
    if (g->gexec[idx] == NULL) {
        cudaGraphExec_t exec = NULL;
        TRY(capture(g, B, samp, &exec, err));
        g->gexec[idx] = exec;
        g->gsamp[idx] = samp;
    }
    return gpu_cuda(cudaGraphLaunch((cudaGraphExec_t)g->gexec[idx], (cudaStream_t)g->stream),
                    "launch the decode graph", err);
}
