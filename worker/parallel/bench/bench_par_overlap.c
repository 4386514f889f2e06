/*
 * bench_par_overlap.c - `make bench`: the data-parallel step of the bench
 * model with its gradient reduction overlapped with the backward
 * (areal/parallel/overlap.h) against the same buckets launched after the
 * backward, at d2 and d4, plain DP and ZeRO-1, on forked ranks of the CPU
 * backend.
 *
 * The step: two micro-batches per rank through areal_par_pipe_1f1b (the
 * last one's backward armed), the mean token NLL over the global count, the
 * reduction, the norm, clipping, AdamW (ZeRO-1: on the pieces, parameters
 * all-gathered). Rank 0 prints the best step wall time over the timed steps
 * and the CPU seconds of all ranks (process CPU time, the comm worker
 * threads included, summed over the world) per step, with the overlap
 * counters: buckets launched from inside the backward and how many of them
 * had finished when the backward returned.
 *
 * The model is the parallel bench's (Qwen3 shape, hidden 128, 8 layers,
 * vocab 512, 8 sequences of 64 tokens per step); buckets of 256 Ki floats
 * (AREAL_BENCH_OVERLAP_BUCKET floats to change), so a layer's gradient is
 * about one bucket. Every rank runs one OpenBLAS thread: d4 oversubscribes
 * a 2-core machine, where the comm thread competes with the backward for a
 * core and the overlap can only hide what an idle core would have done; on
 * a shared machine read the CPU column beside the wall time.
 */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/parallel/overlap.h"
#include "bench_ranks.h"

#define BO_SEQS  8
#define BO_LEN   64
#define BO_T     (BO_SEQS * BO_LEN)
#define BO_STEPS 3
#define BO_MB    2

static const char BO_CFG[] =
    "{\"architectures\":[\"Qwen3ForCausalLM\"],\"attention_bias\":false,\"bos_token_id\":0,"
    "\"eos_token_id\":1,\"head_dim\":16,\"hidden_act\":\"silu\",\"hidden_size\":128,"
    "\"intermediate_size\":256,\"max_position_embeddings\":512,\"model_type\":\"qwen3\","
    "\"num_attention_heads\":8,\"num_hidden_layers\":8,\"num_key_value_heads\":8,"
    "\"rms_norm_eps\":1e-06,\"rope_scaling\":null,\"rope_theta\":10000.0,"
    "\"tie_word_embeddings\":false,\"torch_dtype\":\"float32\",\"vocab_size\":512}";

typedef struct bo_case {
    int dp, zero1, overlap;
    size_t bucket;
} bo_case;

typedef struct bo_loss {
    const int32_t *targets; /* [BO_T] */
    int tok0[BO_MB];
    long n_total;
} bo_loss;

static int bo_loss_fn(void *ctx, int mb, const float *logits, int T, int V, float *dlogits,
                      double *loss, areal_error *err) {
    bo_loss *L = ctx;
    const int32_t *tg = L->targets + L->tok0[mb];
    float *logp = malloc(sizeof(float) * (size_t)T), *dlogp = malloc(sizeof(float) * (size_t)T);
    if (logp == NULL || dlogp == NULL) {
        free(logp), free(dlogp);
        return areal_error_set(err, AREAL_ENOMEM, -1, "bench loss: out of memory");
    }
    areal_token_logprobs(NULL, logits, T, V, tg, 1.0f, logp, NULL);
    double sum = 0;
    for (int t = 0; t < T; t++) {
        sum += tg[t] >= 0 ? logp[t] : 0;
        dlogp[t] = tg[t] >= 0 ? (float)(-1.0 / (double)L->n_total) : 0.0f;
    }
    *loss += -sum / (double)L->n_total;
    areal_token_logprobs_backward(NULL, logits, T, V, tg, 1.0f, dlogp, NULL, dlogits);
    free(logp), free(dlogp);
    return AREAL_OK;
}

static int bo_rank(areal_comm *c, void *arg) {
    const bo_case *K = arg;
    int rank = areal_comm_rank(c), rc = 0;
    areal_error e = {0};
    areal_coll *gs[AREAL_GROUP_KIND_COUNT] = {0};
    areal_model m = {0};
    areal_par_overlap o = {0};
    areal_adamw st = {0};
    pt_layout Lm = {.name = "bench", .dp = K->dp, .tp = 1, .pp = 1, .synth = BO_CFG};
    const pt_layout *L = &Lm; /* for PT_CHECK */
    areal_strategy s = areal_strategy_single();
    s.dp = K->dp, s.edp = 0;
    areal_role_plan role;
    areal_coll_factory f = areal_comm_coll_factory(c);
    PT_CHECK("role", areal_comm_role_of_strategy(&s, &role, &e) == AREAL_OK);
    PT_CHECK("groups", areal_comm_role_groups(&role, &f, gs, &e) == AREAL_OK);
    areal_par_groups g = areal_par_groups_of(gs);
    areal_model_shard sh;
    areal_model_config cfg;
    PT_CHECK("config",
             areal_model_config_parse(BO_CFG, strlen(BO_CFG), "bench", &cfg, &e) == AREAL_OK);
    PT_CHECK("shard", areal_par_shard_of(&cfg, &g, &sh, &e) == AREAL_OK);
    PT_CHECK("model", pt_model(L, &sh, &m, &e) == AREAL_OK);
    areal_par_bind(&m, &g);
    /* this rank's BO_SEQS / dp sequences, in BO_MB micro-batches */
    int32_t tokens[BO_T], targets[BO_T], cu[BO_MB][BO_SEQS + 1];
    for (int t = 0; t < BO_T; t++)
        tokens[t] = (int32_t)((t * 37 + 11) % cfg.vocab_size);
    for (int t = 0; t < BO_T; t++)
        targets[t] = (t + 1) % BO_LEN ? tokens[t + 1] : -1;
    int per = BO_SEQS / K->dp, d = areal_par_rank(g.dp);
    areal_batch bs[BO_MB];
    bo_loss bl = {.targets = targets, .n_total = (long)BO_SEQS * (BO_LEN - 1)};
    for (int i = 0; i < BO_MB; i++) {
        int s0 = d * per + i * per / BO_MB, s1 = d * per + (i + 1) * per / BO_MB;
        for (int k = 0; k <= s1 - s0; k++)
            cu[i][k] = k * BO_LEN;
        bl.tok0[i] = s0 * BO_LEN;
        bs[i] = (areal_batch){.tokens = tokens + s0 * BO_LEN,
                              .cu_seqlens = cu[i],
                              .n_tokens = (s1 - s0) * BO_LEN,
                              .n_seqs = s1 - s0};
    }
    PT_CHECK("overlap init",
             areal_par_overlap_init(&o, &m, g.dp, NULL, K->bucket, K->zero1, &e) == AREAL_OK);
    if (!K->overlap)
        areal_model_set_grad_ready(&m, NULL, NULL);
    if (!K->zero1)
        PT_CHECK("adamw", areal_adamw_init(&st, m.n_params, &e) == AREAL_OK);
    double best = INFINITY, cpu = 0;
    long early = 0, done = 0;
    for (int step = 0; step <= BO_STEPS; step++) {
        double w0 = wall_s(), c0 = cpu_s(), loss = 0, norm = 0;
        areal_model_zero_grad(&m);
        PT_CHECK("1f1b",
                 areal_par_pipe_1f1b(&m, NULL, bs, BO_MB, bo_loss_fn, &bl, &loss, &e) == AREAL_OK);
        if (K->zero1) {
            PT_CHECK("zero1 step", areal_par_overlap_zero1_step(&o, &g, &PT_ADAMW, PT_LR, 1.0,
                                                                &norm, NULL, &e) == AREAL_OK);
        } else {
            PT_CHECK("finish", areal_par_overlap_finish(&o, &e) == AREAL_OK);
            PT_CHECK("norm", areal_par_grad_norm(&m, m.grads, 0, m.n_params, &g, NULL, &norm, &e) ==
                                 AREAL_OK);
            areal_par_clip(m.grads, m.n_params, norm, 1.0);
            areal_adamw_step(&st, &PT_ADAMW, PT_LR, m.params, m.grads, NULL);
        }
        double w = wall_s() - w0, cs = cpu_s() - c0;
        if (step == 0)
            continue; /* warm-up */
        best = w < best ? w : best;
        cpu += cs;
        early += o.stats.early;
        done += o.stats.done_before_finish;
    }
    float v = (float)(cpu / BO_STEPS); /* the comm runtime sums fp32, not fp64 */
    PT_CHECK("cpu sum",
             areal_coll_all_reduce(g.dp, &v, 1, AREAL_DT_F32, AREAL_SUM, &e) == AREAL_OK);
    if (rank == 0) {
        printf("%-3s d%d  %-10s  %8.1f ms  %8.1f ms  %5zu  %6.1f  %6.1f\n", K->zero1 ? "z1" : "dp",
               K->dp, K->overlap ? "overlapped" : "after", 1e3 * best, 1e3 * (double)v, o.nb,
               (double)early / BO_STEPS, (double)done / BO_STEPS);
        fflush(stdout);
    }
out:
    areal_adamw_free(&st);
    areal_par_overlap_free(&o);
    areal_model_free(&m);
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(gs[k]);
    return rc;
}

int main(void) {
    const char *bk = getenv("AREAL_BENCH_OVERLAP_BUCKET");
    size_t bucket = bk != NULL ? (size_t)strtoull(bk, NULL, 10) : (size_t)256 << 10;
    printf("dp step with the gradient reduction overlapped with the backward vs after it\n"
           "(bench model: Qwen3 shape, hidden 128, 8 layers, vocab 512; %d x %d tokens per step, "
           "%d micro-batches per rank; buckets of %zu floats; best wall of %d steps, CPU of all "
           "ranks per step)\n",
           BO_SEQS, BO_LEN, BO_MB, bucket, BO_STEPS);
    printf("    dp  reduction   step wall   CPU/step   bkts   early  done-early\n");
    fflush(stdout);
    int worst = 0;
    for (int z = 0; z < 2; z++)
        for (int d = 2; d <= 4; d *= 2)
            for (int ov = 0; ov < 2; ov++) {
                bo_case K = {.dp = d, .zero1 = z, .overlap = ov, .bucket = bucket};
                int rc = bench_ranks_run(d, false, bo_rank, &K);
                if (rc != 0) {
                    fprintf(stderr, "bench_par_overlap: d%d %s failed (%d)\n", d,
                            ov ? "overlapped" : "after", rc);
                    worst = rc;
                }
            }
    return worst ? 1 : 0;
}
