/*
 * bench_parallel.c - `make bench` figures of worker/parallel's layouts on
 * forked ranks of the CPU backend (issue 15, "Bench"):
 *   1. step time, tokens/s and CPU time per token of one training step of the
 *      bench model for 1, 2, 4 and 8 ranks in each of DP (plain and ZeRO-1),
 *      TP, PP (1F1B and interleaved, vpp 2), CP and EP, against one process;
 *   2. the bytes each rank sent per step per group kind, read from the comm
 *      runtime's counters (areal_coll_bytes_of), against the layout's
 *      analytic volume, computed by each rank from its own shard and batch
 *      (formulas beside analytic_*), and the ratio measured / analytic;
 *   3. the pipeline bubble: each rank's idle share of the step on a virtual
 *      clock that replays the schedule with the ranks' measured CPU times
 *      (timed_coll.h: a core per rank, which 2 shared cores cannot give),
 *      and the share of the wall-clock step spent in the pp group's
 *      transfers, against (p - 1) / (m + p - 1) for 1F1B and
 *      areal_par_vpp_bubble's simulation for the interleaved schedule, with
 *      the stages' measured balance (the slowest stage sets the pace).
 *
 * The step is the one the parallel tests prove equal to one process
 * (tests/par_test_util.h, ep_test_util.h, test_par_cp.c, test_par_vpp.c):
 * the pipeline's forward and backward over micro-batches, the loss summed
 * over the data group, partial gradients summed over tp, the gradient
 * reduction of the layout (all-reduce in buckets, ZeRO-1's reduce-scatter
 * and all-gather, the dp-cp sum, the expert / dense split), the global
 * norm, clipping and AdamW. It is composed here, as in the tests, because no
 * library function composed it when this was written (areal/parallel/step.h
 * landed on main just after): step() below should call it for dp, ZeRO-1,
 * tp and pp; cp, ep and the interleaved pipeline stay composed here until
 * step.h covers them. The loss is the
 * mean token NLL, not GRPO's: the loss is a negligible share of the step,
 * and the NLL needs no reference model.
 *
 * Sizes: the default model (Qwen3 shape, hidden 128, 8 layers, 8 heads, vocab
 * 512; a Qwen3-MoE twin with 8 experts of top-2 for EP) on 8 packed sequences
 * of 64 tokens keeps the whole run near a minute on 2 shared cores;
 * AREAL_BENCH_PAR_SCALE=2 (or 4) multiplies hidden size and sequence length,
 * AREAL_BENCH_PAR_STEPS the timed steps (default 2, after one warm-up),
 * AREAL_BENCH_PAR_REPEAT the runs of every configuration (default 2; the
 * table prints the best and the spread), AREAL_BENCH_PAR_MAX the largest
 * rank count (default 8), AREAL_BENCH_PAR_SHM=1 runs the ranks as one pod
 * (shared memory between them) instead of one pod each (TCP on loopback,
 * what the tests' harness does and the default). --smoke: the 1- and 2-rank configurations of the
 * smallest model, one step, for a test. Every rank runs one OpenBLAS thread,
 * so 8 ranks oversubscribe 2 cores: the CPU time per token (all ranks'
 * CPU seconds over the step's tokens) is the figure the machine's load
 * distorts least.
 */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/clock.h"
#include "areal/parallel/cp.h"
#include "areal/parallel/ep.h"
#include "areal/parallel/vpp.h"
#include "../tests/par_test_util.h"
#include "bench_ranks.h"
#include "timed_coll.h"

enum { K_DP, K_Z1, K_TP, K_PP, K_VPP, K_CP, K_EP, K_COUNT };
static const char *const KIND_NAME[K_COUNT] = {"dp",      "dp-zero1", "tp", "pp-1f1b",
                                               "pp-vpp2", "cp",       "ep"};
#define VPP       2
#define MAX_SEQS  8
#define MAX_REP   8
#define MAX_STEPS 20

/* The bench's sizes (see the file comment). */
typedef struct sizes {
    int hidden, layers, heads, vocab, seqs, seq_len, steps;
} sizes;

/* One rank's figures, written into memory shared with the parent. */
typedef struct rank_out {
    int done;
    double wall, cpu, pp_wait;                /* seconds over the timed steps */
    double vend[MAX_STEPS], vbusy[MAX_STEPS]; /* each timed step's virtual pipeline clock */
    uint64_t extra;                           /* the virtual clock's own bytes (pp group) */
    double loss;
    uint64_t sent[AREAL_GROUP_KIND_COUNT];   /* bytes over the timed steps */
    double analytic[AREAL_GROUP_KIND_COUNT]; /* bytes per step */
} rank_out;

typedef struct job {
    int kind, n;
    int pods; /* 0: each rank its own pod (TCP on loopback, as the tests); 1: one pod (shared
                 memory) */
    sizes z;
    char dense[1024], moe[1024]; /* the models' config.json */
    rank_out *out;               /* [n], shared */
} job;

/* ---- the batch and its loss: mean token NLL, targets in each micro-batch's own token order */

typedef struct bench_batch {
    int32_t *tokens, *targets, cu[MAX_SEQS + 1];
    int T;
} bench_batch;

static int batch_make(bench_batch *b, const sizes *z, int vocab) {
    b->T = z->seqs * z->seq_len;
    b->tokens = malloc(sizeof(int32_t) * (size_t)b->T);
    b->targets = malloc(sizeof(int32_t) * (size_t)b->T);
    if (b->tokens == NULL || b->targets == NULL)
        return AREAL_ENOMEM;
    uint64_t x = 12345;
    for (int t = 0; t < b->T; t++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        b->tokens[t] = (int32_t)((x >> 33) % (uint64_t)vocab);
    }
    for (int s = 0; s <= z->seqs; s++)
        b->cu[s] = s * z->seq_len;
    for (int t = 0; t < b->T; t++)
        b->targets[t] = (t + 1) % z->seq_len != 0 ? b->tokens[t + 1] : -1;
    return AREAL_OK;
}

typedef struct bench_loss {
    int32_t *tg[MAX_SEQS]; /* per micro-batch, in its (shard's) token order */
    long n_total;          /* targets over the data group */
} bench_loss;

static int loss_fn(void *ctx, int mb, const float *logits, int T, int V, float *dlogits,
                   double *loss, areal_error *err) {
    bench_loss *L = ctx;
    const int32_t *tg = L->tg[mb];
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

/* ---- one rank */

typedef struct rank_ctx {
    const job *J;
    areal_coll *gs[AREAL_GROUP_KIND_COUNT];
    areal_par_groups g;
    areal_par_ep_groups eg;
    areal_par_ep disp;
    areal_model ch[VPP]; /* ch[0] the model (or chunk 0) */
    areal_model *chunks[VPP];
    areal_adamw st[VPP];
    areal_par_zero1 z;
    areal_par_cp cpx;
    areal_par_cp_shard csh[MAX_SEQS];
    areal_batch bs[MAX_SEQS];
    int32_t cu[MAX_SEQS][MAX_SEQS + 1]; /* the micro-batches' own cu_seqlens */
    int nmb;
    areal_coll *data; /* the group the loss and the token count sum over */
    bench_batch b;
    bench_loss bl;
    timed *tm; /* the pp group's stopwatch (owned by gs[AREAL_GROUP_PP]) */
} rank_ctx;

static size_t numel(const areal_tensor_spec *t) {
    return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}

static int kind_of(const rank_ctx *R, const areal_coll *c) {
    for (int k = 0; c != NULL && k < AREAL_GROUP_KIND_COUNT; k++)
        if (R->gs[k] == c)
            return k;
    return -1;
}

/* Adds a per-step volume of `bytes` to the kind of group c (when c has 2+ members). */
static void expect(const rank_ctx *R, rank_out *o, const areal_coll *c, double bytes) {
    int k = kind_of(R, c);
    if (k >= 0 && areal_par_size(c) > 1)
        o->analytic[k] += bytes;
}

/*
 * The analytic volume this rank sends per step (bytes), by the layouts'
 * algorithms: a ring all-reduce of N bytes on k members sends 2(k-1)/k N, a
 * ring reduce-scatter or all-gather of k blocks of B bytes (k-1) B.
 *   dp: the gradient all-reduce, 2(d-1)/d x parameter bytes.
 *   ZeRO-1: reduce-scatter + all-gather of the padded parameters,
 *     2 (d-1) x shard bytes.
 *   tp: per layer, two all-reduces of the [T, H] activations forward (after
 *     o_proj and down_proj) and two backward (the inputs' gradients of the
 *     column-parallel q/k/v and gate/up): 4 x 2(t-1)/t x T H 4 bytes.
 *   pp (1F1B and interleaved): each micro-batch's [T_mb, H] hidden states
 *     sent to the next (virtual) stage, its gradient back to the previous
 *     one; a rank sends for each of its stages that has a neighbour there.
 *   cp: per layer, K and V all-gathered ([maxT, kv x head_dim] per rank),
 *     their gradients reduce-scattered back: 4 (c-1) maxT KV 4 bytes; the
 *     gradient all-reduce over dp-cp 2(c-1)/c x parameter bytes.
 *   ep: per MoE layer, the routed rows [T k, H] leave the rank four times
 *     (dispatch and combine, forward and backward), (e-1)/e of them to
 *     other ranks under uniform routing: 4 (e-1)/e T k H 4 bytes; the
 *     dense (non-expert) gradients all-reduced over dp-cp.
 * Left out, so they show in the ratio: scalars (token count, loss, norm),
 * partial gradients of replicated tensors (norm weights), the MoE router's
 * and the counts' exchanges, cp's index gathers.
 */
static void analytic(const rank_ctx *R, rank_out *o) {
    const job *J = R->J;
    const areal_model *m = &R->ch[0];
    int H = m->cfg.hidden_size;
    double P = 0;
    for (int c = 0; c < (J->kind == K_VPP ? VPP : 1); c++)
        P += (double)R->ch[c].n_params * 4;
    long T = 0;
    for (int i = 0; i < R->nmb; i++)
        T += R->bs[i].n_tokens;
    switch (J->kind) {
    case K_DP: {
        double d = areal_par_size(R->g.dp);
        expect(R, o, R->g.dp, 2 * (d - 1) / d * P);
        break;
    }
    case K_Z1: {
        double d = areal_par_size(R->g.dp);
        expect(R, o, R->g.dp, 2 * (d - 1) * (double)R->z.shard * 4);
        break;
    }
    case K_TP: {
        double t = areal_par_size(R->g.tp);
        expect(R, o, R->g.tp, m->shard.n_layers * 4 * 2 * (t - 1) / t * (double)T * H * 4);
        break;
    }
    case K_PP:
    case K_VPP: {
        int p = areal_par_size(R->g.pp), r = areal_par_rank(R->g.pp);
        int v = J->kind == K_VPP ? VPP : 1, hops = 0;
        for (int c = 0; c < v; c++) {
            int s = c * p + r;
            hops += (s < p * v - 1) + (s > 0);
        }
        expect(R, o, R->g.pp, (double)hops * (double)T * H * 4);
        break;
    }
    case K_CP: {
        areal_coll *cpg = R->gs[AREAL_GROUP_CP], *dpcp = R->gs[AREAL_GROUP_DP_CP];
        double c = areal_par_size(cpg), kv = (double)m->cfg.num_kv_heads * m->cfg.head_dim;
        double maxT = 0; /* summed over micro-batches: each pads to its own maxT */
        for (int i = 0; i < R->nmb; i++) {
            int mt = 0;
            for (int j = 0; j < (int)c; j++) {
                areal_par_cp_shard s;
                areal_error e;
                areal_batch whole = {.tokens = R->b.tokens,
                                     .cu_seqlens = R->b.cu,
                                     .n_tokens = R->b.T,
                                     .n_seqs = J->z.seqs};
                if (areal_par_cp_shard_make(&whole, (int)c, j, &s, &e) == AREAL_OK) {
                    mt = s.b.n_tokens > mt ? s.b.n_tokens : mt;
                    areal_par_cp_shard_free(&s);
                }
            }
            maxT += mt;
        }
        expect(R, o, cpg, m->shard.n_layers * 4 * (c - 1) * maxT * kv * 4);
        expect(R, o, dpcp, 2 * (c - 1) / c * P);
        break;
    }
    case K_EP: {
        double e = areal_par_size(R->eg.ep), d = areal_par_size(R->eg.dp), dense = 0;
        for (size_t i = 0; i < m->n_specs; i++)
            if (strstr(m->specs[i].name, "mlp.experts.") == NULL)
                dense += (double)numel(&m->specs[i]) * 4;
        expect(R, o, R->eg.ep,
               m->shard.n_layers * 4 * (e - 1) / e * (double)T * m->cfg.num_experts_per_tok * H *
                   4);
        expect(R, o, R->eg.dp, 2 * (d - 1) / d * dense);
        break;
    }
    }
}

/* One training step of the layout (see the file comment). */
static int step(rank_ctx *R, double *loss, areal_error *e) {
    const job *J = R->J;
    int nc = J->kind == K_VPP ? VPP : 1, rc;
    for (int c = 0; c < nc; c++)
        areal_model_zero_grad(&R->ch[c]);
    *loss = 0;
    vt_begin(R->tm);
    rc = J->kind == K_VPP
             ? areal_par_pipe_interleaved(R->chunks, VPP, R->g.pp, R->bs, R->nmb, loss_fn, &R->bl,
                                          loss, e)
             : areal_par_pipe_1f1b(&R->ch[0], R->g.pp, R->bs, R->nmb, loss_fn, &R->bl, loss, e);
    vt_end(R->tm);
    float lv[2] = {(float)*loss, 0};
    lv[1] = (float)(*loss - (double)lv[0]);
    if (rc == AREAL_OK && areal_par_size(R->data) > 1)
        rc = areal_coll_all_reduce(R->data, lv, 2, AREAL_DT_F32, AREAL_SUM, e);
    *loss = (double)lv[0] + (double)lv[1];
    if (rc == AREAL_OK && J->kind != K_VPP)
        rc = areal_par_reduce_partial_grads(&R->ch[0], &R->g, e);
    double norm = 0, max_norm = 1.0;
    if (rc != AREAL_OK)
        return rc;
    switch (J->kind) {
    case K_Z1:
        return areal_par_zero1_step(&R->z, &R->ch[0], &R->g, &PT_ADAMW, PT_LR, max_norm, &norm,
                                    NULL, e);
    case K_EP:
        rc = areal_par_ep_reduce_grads(&R->ch[0], &R->eg, e);
        if (rc == AREAL_OK)
            rc = areal_par_ep_grad_norm(&R->ch[0], &R->eg, &norm, e);
        break;
    case K_VPP:
        rc = areal_par_vpp_grad_norm(R->chunks, VPP, &R->g, &norm, e);
        break;
    default: {
        areal_coll *red = J->kind == K_CP ? R->gs[AREAL_GROUP_DP_CP] : R->g.dp;
        rc = areal_par_dp_reduce_grads(&R->ch[0], red, 0, e);
        if (rc == AREAL_OK)
            rc = areal_par_grad_norm(&R->ch[0], R->ch[0].grads, 0, R->ch[0].n_params, &R->g, NULL,
                                     &norm, e);
    }
    }
    for (int c = 0; rc == AREAL_OK && c < nc; c++) {
        areal_par_clip(R->ch[c].grads, R->ch[c].n_params, norm, max_norm);
        areal_adamw_step(&R->st[c], &PT_ADAMW, PT_LR, R->ch[c].params, R->ch[c].grads, NULL);
    }
    return rc;
}

#define CK(what, call)                                                                             \
    do {                                                                                           \
        if ((call) != AREAL_OK) {                                                                  \
            fprintf(stderr, "%s n%d rank %d: %s: %s\n", KIND_NAME[J->kind], J->n, rank, what,      \
                    e.msg);                                                                        \
            rc = RANK_COMM_FAIL;                                                                   \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

/* Builds this rank's groups, model and micro-batches. */
static int setup(rank_ctx *R, areal_comm *c, areal_error *ep) {
    const job *J = R->J;
    int rank = areal_comm_rank(c), rc = 0;
    areal_error e = {0};
    pt_layout lay = {.name = KIND_NAME[J->kind], .synth = J->kind == K_EP ? J->moe : J->dense};
    areal_strategy s = areal_strategy_single();
    s.edp = 0;
    switch (J->kind) {
    case K_DP:
    case K_Z1:
        s.dp = J->n;
        break;
    case K_TP:
        s.tp = J->n;
        break;
    case K_PP:
    case K_VPP:
        s.pp = J->n;
        break;
    case K_CP:
        s.cp = J->n;
        break;
    case K_EP:
        s.dp = J->n, s.ep = J->n;
        break;
    }
    areal_role_plan role;
    areal_coll_factory f = areal_comm_coll_factory(c);
    CK("role", areal_comm_role_of_strategy(&s, &role, &e));
    CK("groups", areal_comm_role_groups(&role, &f, R->gs, &e));
    if (R->gs[AREAL_GROUP_PP] != NULL) {
        timed *t = calloc(1, sizeof *t);
        CK("timer", t == NULL ? areal_error_set(&e, AREAL_ENOMEM, -1, "out of memory") : AREAL_OK);
        t->in = R->gs[AREAL_GROUP_PP];
        R->gs[AREAL_GROUP_PP] = NULL;
        CK("timer", areal_coll_wrap(&timed_ops, t, -1, &R->gs[AREAL_GROUP_PP], &e));
        R->tm = t;
    }
    R->g = areal_par_groups_of(R->gs);
    R->eg = areal_par_ep_groups_of(R->gs);
    areal_model_config cfg;
    CK("config", areal_model_config_parse(lay.synth, strlen(lay.synth), "bench", &cfg, &e));
    CK("batch", batch_make(&R->b, &J->z, cfg.vocab_size));
    int p = areal_par_size(R->g.pp), r = areal_par_rank(R->g.pp);
    for (int k = 0; k < (J->kind == K_VPP ? VPP : 1); k++) {
        areal_model_shard sh;
        if (J->kind == K_VPP)
            CK("chunk shard", areal_model_shard_stage(&cfg, k * p + r, p * VPP, &sh, &e));
        else if (J->kind == K_EP)
            CK("shard", areal_par_ep_shard_of(&cfg, &R->eg, &sh, &e));
        else
            CK("shard", areal_par_shard_of(&cfg, &R->g, &sh, &e));
        CK("model", pt_model(&lay, &sh, &R->ch[k], &e));
        areal_par_bind(&R->ch[k], &R->g);
        R->chunks[k] = &R->ch[k];
        CK("adamw", areal_adamw_init(&R->st[k], R->ch[k].n_params, &e));
    }
    if (J->kind == K_EP) {
        CK("dispatcher", areal_par_ep_init(&R->disp, &R->eg, &e));
        areal_par_ep_bind(&R->ch[0], &R->disp);
    }
    /* the data: over dp (ep's ranks hold different tokens), micro-batches for the pipeline */
    R->data = J->kind == K_CP ? R->gs[AREAL_GROUP_DP_CP] : R->g.dp;
    int D = areal_par_size(R->g.dp), d = areal_par_rank(R->g.dp), ns = J->z.seqs;
    int s0 = d * ns / D, s1 = (d + 1) * ns / D;
    R->nmb = J->kind == K_PP || J->kind == K_VPP ? s1 - s0 : 1;
    long local = 0;
    for (int i = 0; i < R->nmb; i++) {
        int a = s0 + i * (s1 - s0) / R->nmb, z = s0 + (i + 1) * (s1 - s0) / R->nmb;
        int tok0 = R->b.cu[a];
        for (int q = a; q <= z; q++)
            R->cu[i][q - a] = R->b.cu[q] - tok0;
        R->bs[i] = (areal_batch){.tokens = R->b.tokens + tok0,
                                 .cu_seqlens = R->cu[i],
                                 .n_tokens = R->b.cu[z] - tok0,
                                 .n_seqs = z - a};
        const int32_t *gidx = NULL;
        if (J->kind == K_CP) {
            areal_coll *cpg = R->gs[AREAL_GROUP_CP];
            CK("cp shard", areal_par_cp_shard_make(&R->bs[i], areal_par_size(cpg),
                                                   areal_par_rank(cpg), &R->csh[i], &e));
            R->bs[i] = R->csh[i].b;
            gidx = R->csh[i].t.gidx;
        }
        R->bl.tg[i] = malloc(sizeof(int32_t) * ((size_t)R->bs[i].n_tokens + 1));
        CK("targets",
           R->bl.tg[i] == NULL ? areal_error_set(&e, AREAL_ENOMEM, -1, "out of memory") : 0);
        for (int t = 0; t < R->bs[i].n_tokens; t++) {
            R->bl.tg[i][t] = R->b.targets[tok0 + (gidx != NULL ? gidx[t] : t)];
            local += R->bl.tg[i][t] >= 0;
        }
    }
    if (J->kind == K_CP) {
        R->cpx = (areal_par_cp){.cp = R->gs[AREAL_GROUP_CP], .shards = R->csh, .n_shards = R->nmb};
        areal_par_cp_bind(&R->ch[0], &R->cpx);
    }
    CK("token count", areal_par_global_count(R->data, local, &R->bl.n_total, &e));
    if (J->kind == K_Z1)
        CK("zero1", areal_par_zero1_init(&R->z, &R->ch[0], R->g.dp, &e));
out:
    if (rc != 0)
        *ep = e;
    return rc;
}

static void sent_by_kind(const rank_ctx *R, uint64_t *out) {
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
        out[k] = 0;
        if (R->gs[k] == NULL)
            continue;
        areal_coll_bytes b;
        areal_coll_bytes_of(R->gs[k], &b);
        for (int i = 0; i < AREAL_COLL_KIND_COUNT; i++)
            out[k] += b.sent[i];
    }
}

static int bench_rank(areal_comm *c, void *arg) {
    const job *J = arg;
    int rank = areal_comm_rank(c), rc = 0;
    areal_error e = {0};
    rank_ctx *R = calloc(1, sizeof *R);
    areal_coll *world = NULL;
    if (R == NULL)
        return RANK_COMM_FAIL;
    R->J = J;
    rank_out *o = &J->out[rank];
    CK("setup", setup(R, c, &e));
    int ranks[PT_RANKS_MAX];
    for (int i = 0; i < J->n; i++)
        ranks[i] = i;
    areal_coll_factory f = areal_comm_coll_factory(c);
    CK("world", f.group(f.ctx, "bench-world", ranks, J->n, &world, &e));
    double loss = 0;
    CK("warm-up step", step(R, &loss, &e));
    CK("barrier", areal_coll_barrier(world, &e));
    uint64_t b0[AREAL_GROUP_KIND_COUNT], b1[AREAL_GROUP_KIND_COUNT];
    sent_by_kind(R, b0);
    timed *tp = R->tm;
    if (tp != NULL)
        tp->wait = 0, tp->extra = 0;
    double w0 = wall_s(), c0 = cpu_s();
    for (int i = 0; i < J->z.steps; i++) {
        CK("step", step(R, &loss, &e));
        if (tp != NULL)
            o->vend[i] = tp->v, o->vbusy[i] = tp->busy;
    }
    o->wall = wall_s() - w0, o->cpu = cpu_s() - c0;
    sent_by_kind(R, b1);
    o->pp_wait = tp != NULL ? tp->wait : 0;
    o->extra = tp != NULL ? tp->extra : 0;
    o->loss = loss;
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        o->sent[k] = b1[k] - b0[k];
    o->sent[AREAL_GROUP_PP] -= o->extra;
    analytic(R, o);
    o->done = 1;
out:
    areal_coll_destroy(world);
    for (int i = 0; i < MAX_SEQS; i++) {
        areal_par_cp_shard_free(&R->csh[i]);
        free(R->bl.tg[i]);
    }
    areal_par_zero1_free(&R->z);
    for (int k = 0; k < VPP; k++) {
        areal_adamw_free(&R->st[k]);
        areal_model_free(&R->ch[k]);
    }
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(R->gs[k]);
    free(R->b.tokens), free(R->b.targets);
    free(R);
    return rc;
}

/* ---- the parent: runs, tables */

/* What one configuration measured (the best of its repeats, and the spread). */
typedef struct result {
    int kind, n, ok, reps;
    double step, step_worst; /* seconds, max over ranks */
    double cpu_tok;          /* microseconds of CPU over all ranks per token */
    double wait;             /* mean over ranks of the pp wait share of the step */
    double vbubble;          /* the virtual clock's idle share (timed's comment), mean of steps */
    double balance;          /* mean over ranks of their busy time over the busiest rank's */
    double sent[AREAL_GROUP_KIND_COUNT], want[AREAL_GROUP_KIND_COUNT]; /* mean per rank */
    int tokens;
    double loss;
} result;

static int run_config(job *J, int reps, result *res) {
    memset(res, 0, sizeof *res);
    res->kind = J->kind, res->n = J->n, res->tokens = J->z.seqs * J->z.seq_len;
    size_t bytes = sizeof(rank_out) * (size_t)J->n;
    J->out = bench_shared_new(bytes);
    if (J->out == NULL)
        return -1;
    for (int rep = 0; rep < reps; rep++) {
        memset(J->out, 0, bytes);
        int rc = bench_ranks_run(J->n, J->pods, bench_rank, J);
        double wall = 0, cpu = 0, wait = 0;
        for (int r = 0; r < J->n; r++) {
            const rank_out *o = &J->out[r];
            rc |= !o->done;
            wall = o->wall > wall ? o->wall : wall;
            cpu += o->cpu;
        }
        if (rc != 0) {
            fprintf(stderr, "bench_parallel: %s on %d ranks failed (exit %d)\n", KIND_NAME[J->kind],
                    J->n, rc);
            bench_shared_free(J->out, bytes);
            return -1;
        }
        double st = wall / J->z.steps, vb = 0, bal = 0;
        for (int r = 0; r < J->n; r++)
            wait += J->out[r].pp_wait / J->z.steps / st / J->n;
        for (int i = 0; i < J->z.steps; i++) { /* idle share of the makespan, mean over ranks */
            double span = 0;
            for (int r = 0; r < J->n; r++)
                span = J->out[r].vend[i] > span ? J->out[r].vend[i] : span;
            double most = 0;
            for (int r = 0; r < J->n; r++)
                most = J->out[r].vbusy[i] > most ? J->out[r].vbusy[i] : most;
            for (int r = 0; span > 0 && r < J->n; r++) {
                vb += (1 - J->out[r].vbusy[i] / span) / J->n / J->z.steps;
                bal += J->out[r].vbusy[i] / most / J->n / J->z.steps;
            }
        }
        res->step_worst = st > res->step_worst ? st : res->step_worst;
        if (res->reps == 0 || st < res->step) {
            res->step = st;
            res->cpu_tok = cpu / J->z.steps / res->tokens * 1e6;
            res->wait = wait;
            res->vbubble = vb;
            res->balance = bal;
            res->loss = J->out[0].loss;
            for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
                res->sent[k] = res->want[k] = 0;
                for (int r = 0; r < J->n; r++) {
                    res->sent[k] += (double)J->out[r].sent[k] / J->z.steps / J->n;
                    res->want[k] += J->out[r].analytic[k] / J->n;
                }
            }
        }
        res->reps++;
    }
    res->ok = 1;
    bench_shared_free(J->out, bytes);
    return 0;
}

static int env_int(const char *name, int dflt, int lo, int hi) {
    const char *v = getenv(name);
    if (v == NULL || *v == 0)
        return dflt;
    int x = atoi(v);
    if (x < lo || x > hi) {
        fprintf(stderr, "bench_parallel: %s must be %d..%d (got %s)\n", name, lo, hi, v);
        exit(2);
    }
    return x;
}

static void model_json(char *buf, size_t n, const sizes *z, int moe) {
    int hd = z->hidden / z->heads;
    if (!moe)
        snprintf(buf, n,
                 "{\"architectures\":[\"Qwen3ForCausalLM\"],\"attention_bias\":false,"
                 "\"bos_token_id\":0,\"eos_token_id\":1,\"head_dim\":%d,\"hidden_act\":\"silu\","
                 "\"hidden_size\":%d,\"intermediate_size\":%d,\"max_position_embeddings\":%d,"
                 "\"model_type\":\"qwen3\",\"num_attention_heads\":%d,\"num_hidden_layers\":%d,"
                 "\"num_key_value_heads\":%d,\"rms_norm_eps\":1e-06,\"rope_scaling\":null,"
                 "\"rope_theta\":10000.0,\"tie_word_embeddings\":false,"
                 "\"torch_dtype\":\"float32\",\"vocab_size\":%d}",
                 hd, z->hidden, 2 * z->hidden, 4 * z->seq_len, z->heads, z->layers, z->heads,
                 z->vocab);
    else
        snprintf(buf, n,
                 "{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"bos_token_id\":0,"
                 "\"decoder_sparse_step\":1,\"eos_token_id\":1,\"head_dim\":%d,"
                 "\"hidden_act\":\"silu\",\"hidden_size\":%d,\"intermediate_size\":%d,"
                 "\"max_position_embeddings\":%d,\"mlp_only_layers\":[],"
                 "\"model_type\":\"qwen3_moe\",\"moe_intermediate_size\":%d,"
                 "\"norm_topk_prob\":true,\"num_attention_heads\":%d,\"num_experts\":8,"
                 "\"num_experts_per_tok\":2,\"num_hidden_layers\":%d,\"num_key_value_heads\":%d,"
                 "\"output_router_logits\":false,\"rms_norm_eps\":1e-06,\"rope_theta\":10000.0,"
                 "\"tie_word_embeddings\":false,\"torch_dtype\":\"float32\",\"vocab_size\":%d}",
                 hd, z->hidden, 2 * z->hidden, 4 * z->seq_len, z->hidden / 2, z->heads, z->layers,
                 z->heads, z->vocab);
}

static void print_speed(const result *rs, int nr) {
    printf("\n1. step time of the bench model (best of the repeats; worst in brackets), against "
           "one process\n");
    printf("%-9s %5s %17s %10s %13s %8s %8s %10s\n", "layout", "ranks", "step ms", "tokens/s",
           "cpu us/token", "x tok/s", "x cpu", "loss");
    for (int i = 0; i < nr; i++) {
        const result *r = &rs[i];
        const result *one = NULL; /* the one-process run of the same model */
        for (int j = 0; j < nr; j++)
            if (rs[j].n == 1 && (rs[j].kind == K_EP) == (r->kind == K_EP))
                one = &rs[j];
        double tps = r->tokens / r->step;
        char st[32];
        snprintf(st, sizeof st, "%.1f [%.1f]", r->step * 1e3, r->step_worst * 1e3);
        printf("%-9s %5d %17s %10.0f %13.2f %8.2f %8.2f %10.6f\n",
               r->n == 1 ? (r->kind == K_EP ? "1proc-moe" : "1proc") : KIND_NAME[r->kind], r->n, st,
               tps, r->cpu_tok, one != NULL ? tps / (one->tokens / one->step) : 0,
               one != NULL ? one->cpu_tok / r->cpu_tok : 0, r->loss);
    }
}

static void print_bytes(const result *rs, int nr) {
    printf("\n2. bytes sent per rank per step, by group kind: the comm runtime's counters "
           "against the layout's analytic volume\n");
    printf("%-9s %5s %-8s %14s %14s %8s\n", "layout", "ranks", "group", "measured B", "analytic B",
           "ratio");
    for (int i = 0; i < nr; i++)
        for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
            const result *r = &rs[i];
            if (r->n == 1 || (r->sent[k] == 0 && r->want[k] == 0))
                continue;
            char ratio[16] = "-";
            if (r->want[k] > 0)
                snprintf(ratio, sizeof ratio, "%.3f", r->sent[k] / r->want[k]);
            printf("%-9s %5d %-8s %14.0f %14.0f %8s\n", KIND_NAME[r->kind], r->n,
                   areal_group_kind_name((areal_group_kind)k), r->sent[k], r->want[k], ratio);
        }
}

static void print_bubble(const result *rs, int nr, int seqs) {
    printf(
        "\n3. pipeline bubble, mean over ranks: idle share of the virtual clock (a core per "
        "rank, measured CPU times), share of the wall step spent in pp transfers, against the "
        "schedule's; balance: mean stage busy time over the busiest stage's, and the analytic "
        "bubble at that balance, 1 - (1 - analytic) x balance (the slowest stage sets the pace)\n");
    printf("%-9s %5s %4s %10s %10s %10s %8s %10s\n", "schedule", "p", "m", "virtual", "wall wait",
           "analytic", "balance", "at balance");
    for (int i = 0; i < nr; i++) {
        const result *r = &rs[i];
        if ((r->kind != K_PP && r->kind != K_VPP) || r->n == 1)
            continue;
        double want = 0;
        areal_error e;
        if (r->kind == K_PP)
            want = (double)(r->n - 1) / (seqs + r->n - 1);
        else if (areal_par_vpp_bubble(r->n, VPP, seqs, &want, &e) != AREAL_OK)
            want = NAN;
        printf("%-9s %5d %4d %10.3f %10.3f %10.3f %8.3f %10.3f\n",
               r->kind == K_PP ? "1f1b" : "vpp2", r->n, seqs, r->vbubble, r->wait, want, r->balance,
               1 - (1 - want) * r->balance);
    }
}

int main(int argc, char **argv) {
    int smoke = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--smoke") == 0) {
            smoke = 1;
        } else if (strcmp(argv[i], "--help") == 0) {
            printf("usage: bench_parallel [--smoke]\n"
                   "  env: AREAL_BENCH_PAR_SCALE (1..4), AREAL_BENCH_PAR_STEPS (1..%d),\n"
                   "       AREAL_BENCH_PAR_REPEAT (1..%d), AREAL_BENCH_PAR_MAX (1..8),\n"
                   "       AREAL_BENCH_PAR_SHM (0: TCP on loopback, 1: one pod, shared memory)\n",
                   MAX_STEPS, MAX_REP);
            return 0;
        } else {
            fprintf(stderr, "bench_parallel: unknown argument %s (try --help)\n", argv[i]);
            return 2;
        }
    }
    int scale = smoke ? 1 : env_int("AREAL_BENCH_PAR_SCALE", 1, 1, 4);
    sizes z = {.hidden = 128 * scale,
               .layers = 8,
               .heads = 8,
               .vocab = 512,
               .seqs = MAX_SEQS,
               .seq_len = 64 * scale,
               .steps = smoke ? 1 : env_int("AREAL_BENCH_PAR_STEPS", 2, 1, MAX_STEPS)};
    if (smoke)
        z.hidden = 32, z.seq_len = 16, z.vocab = 96;
    int reps = smoke ? 1 : env_int("AREAL_BENCH_PAR_REPEAT", 2, 1, MAX_REP);
    int maxn = smoke ? 2 : env_int("AREAL_BENCH_PAR_MAX", 8, 1, 8);
    static job J;
    J.z = z;
    J.pods = smoke ? 0 : env_int("AREAL_BENCH_PAR_SHM", 0, 0, 1);
    model_json(J.dense, sizeof J.dense, &z, 0);
    model_json(J.moe, sizeof J.moe, &z, 1);
    printf("bench_parallel: Qwen3 hidden %d, %d layers, %d heads, vocab %d (EP: Qwen3-MoE, 8 "
           "experts, top 2); %d sequences x %d tokens; %d timed step(s) after one warm-up, best "
           "of %d run(s); 1 OpenBLAS thread per rank; %s\n",
           z.hidden, z.layers, z.heads, z.vocab, z.seqs, z.seq_len, z.steps, reps,
           J.pods ? "one pod (shared memory)" : "a pod per rank (TCP on loopback)");
    fflush(stdout);
    result rs[64];
    int nr = 0, failed = 0;
    for (int moe = 0; moe < 2; moe++) { /* the one-process baselines */
        J.kind = moe ? K_EP : K_DP, J.n = 1;
        failed |= run_config(&J, reps, &rs[nr]) != 0;
        nr += rs[nr].ok;
    }
    for (int k = 0; k < K_COUNT; k++)
        for (int n = 2; n <= maxn; n *= 2) {
            if (k == K_VPP && n * VPP > z.layers)
                continue; /* a virtual stage needs a layer */
            J.kind = k, J.n = n;
            failed |= run_config(&J, reps, &rs[nr]) != 0;
            nr += rs[nr].ok;
        }
    print_speed(rs, nr);
    print_bytes(rs, nr);
    print_bubble(rs, nr, z.seqs);
    return failed ? 1 : 0;
}
