/*
 * par_test_util.h - the equivalence harness of the parallel tests (header
 * only: each test is one C file): one training step of a layout on forked
 * ranks against the same step in one process, computed by every rank itself.
 *
 * The step: one GRPO training step (par_test_grpo.h: worker/rl's decoupled
 * PPO loss on a GRPO batch, aggregated over the batch's valid tokens across
 * micro-batches and dp ranks, areal/parallel/ppo.h), or with `nll` the mean
 * next-token NLL of the batch; its
 * gradient, the global gradient norm, clipping to half the one-process norm
 * (so the clip path runs), one AdamW step. The one-process side is the model
 * core's whole model (itself checked against PyTorch by worker/model's
 * tests); the parallel side splits the batch's sequences over dp, each dp
 * rank's into micro-batches for the pipeline, and the model over tp / pp.
 * Each rank checks, against the reference computed in its own process:
 * the logits of its micro-batches (last stage), the loss, the grad norm and
 * every updated parameter it holds (the slice of the reference's tensor).
 *
 * Why each rank computes the reference: the parent process never touches
 * the model and runs the store in a child of its own (pt_ranks_run), so it
 * runs no thread that allocates (store, pool) when it forks the ranks
 * (OpenBLAS's idle workers are re-made after fork by its own atfork hook).
 *
 * Tolerances (relative to the reference's scale, tensor by tensor,
 * pt_rel_err): 1e-5 for logits, loss, grad norm, every gradient tensor and
 * every updated weight tensor, in fp32. The parallel sums (tp partials, dp
 * gradients, pp's tied copies) reassociate float additions; measured errors
 * are 1e-8 (loss, norm) to 2e-6 (gradients, weights). AdamW's eps is 1e-3
 * here rather than torch's 1e-8: the first Adam step moves each weight by
 * lr * g / (|g| + eps), whose slope in g is up to lr / eps, so near g = 0 it
 * amplifies the gradient's reassociation noise (~1e-7 of the tensor's
 * largest element) by lr / eps; with 1e-8 one element whose gradient is
 * 1e-10 +- 1e-10 moves by +-lr, a sign flip, not an error of the layout
 * (with eps 1e-4 the t4 weights were off by 1.1e-5).
 */
#ifndef PAR_TEST_UTIL_H
#define PAR_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "areal/comm/comm.h"
#include "areal/comm/role_groups.h"
#include "areal/model/heads.h"
#include "areal/model/model.h"
#include "areal/model/optim.h"
#include "areal/parallel/dp.h"
#include "areal/parallel/groups.h"
#include "areal/parallel/pipe.h"
#include "areal/parallel/reduce.h"
#include "areal/parallel/step.h"
#include "areal/parallel/vocab.h"
#include "../../comm/tests/ranks.h" /* rank_config, ranks_wait, exit codes */

#define PT_FIX       "worker/model/tests/fixtures/"
#define PT_TOL       1e-5
#define PT_GRAD_TOL  1e-5
#define PT_SEQS      8
#define PT_LR        1e-2
#define PT_MAX_MB    8
#define PT_RANKS_MAX 64 /* the seed's d4 t4 p2 c2 (make test-long) */

/* One layout under test. */
typedef struct pt_layout {
    const char *name;  /* for messages */
    int dp, tp, pp;    /* the strategy */
    int ep;            /* expert parallel (0: 1); its ranks hold the same tokens, see pt_rank */
    int n_mb;          /* micro-batches per dp rank */
    int zero1;         /* ZeRO-1 over dp instead of a plain all-reduce */
    const char *model; /* a fixture directory under PT_FIX, or NULL: the synthetic model */
    int skip_partial;  /* the harness's own check: leave out the partial gradients' sum */
    int nll;           /* the mean-token-NLL step instead of GRPO's (par_test_grpo.h) */
    int vocab;         /* vocab-parallel embedding, lm_head and loss over tp */
    int sp;            /* sequence parallel over tp */
    const char *synth; /* the synthetic model's config.json (NULL: PT_SYNTH) */
    int overlap; /* the dp gradient sum overlapped with the backward (areal_par_step_overlap) */
} pt_layout;

/* ---- the synthetic model: Qwen3, 4 layers, 8 query and 4 key/value heads, tied */

static const char PT_SYNTH[] =
    "{\"architectures\":[\"Qwen3ForCausalLM\"],\"attention_bias\":false,\"bos_token_id\":0,"
    "\"eos_token_id\":95,\"head_dim\":8,\"hidden_act\":\"silu\",\"hidden_size\":32,"
    "\"intermediate_size\":64,\"max_position_embeddings\":256,\"model_type\":\"qwen3\","
    "\"num_attention_heads\":8,\"num_hidden_layers\":4,\"num_key_value_heads\":4,"
    "\"rms_norm_eps\":1e-06,\"rope_scaling\":null,\"rope_theta\":10000.0,"
    "\"tie_word_embeddings\":true,\"torch_dtype\":\"float32\",\"vocab_size\":96}";

/* A deterministic value in [-1, 1) of (tensor name, element), independent of any layout. */
static inline float pt_hash_unit(const char *name, size_t i) {
    uint64_t h = 1469598103934665603ull;
    for (const char *p = name; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    h ^= (uint64_t)i * 0x9E3779B97F4A7C15ull;
    h ^= h >> 33, h *= 0xff51afd7ed558ccdull, h ^= h >> 33, h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return (float)((double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* The whole HF tensor `t` of the synthetic model. */
static inline void pt_synth_tensor(const areal_tensor_spec *t, float *out) {
    size_t n = (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
    int norm = strstr(t->name, "norm") != NULL;
    for (size_t i = 0; i < n; i++)
        out[i] = norm ? 1.0f + 0.2f * pt_hash_unit(t->name, i) : 0.15f * pt_hash_unit(t->name, i);
}

/* Makes the model of L (the shard s, NULL for the whole model), parameters loaded or synthesised.
 */
static inline int pt_model(const pt_layout *L, const areal_model_shard *s, areal_model *m,
                           areal_error *err) {
    if (L->model != NULL) {
        char dir[256];
        snprintf(dir, sizeof dir, PT_FIX "%s", L->model);
        return s == NULL ? areal_model_load(m, dir, NULL, err)
                         : areal_model_load_shard(m, dir, s, NULL, err);
    }
    areal_model_config cfg;
    const char *js = L->synth != NULL ? L->synth : PT_SYNTH;
    int rc = areal_model_config_parse(js, strlen(js), "synthetic", &cfg, err);
    if (rc != AREAL_OK)
        return rc;
    rc = s == NULL ? areal_model_init(m, &cfg, NULL, err)
                   : areal_model_init_shard(m, &cfg, s, NULL, err);
    if (rc != AREAL_OK)
        return rc;
    areal_tensor_spec *whole = NULL;
    size_t nw = 0;
    rc = areal_model_expected_tensors(&cfg, &whole, &nw, err);
    float *buf = malloc(sizeof(float) * (size_t)cfg.vocab_size * 1024);
    for (size_t i = 0; rc == AREAL_OK && i < m->n_specs; i++) {
        const areal_tensor_spec *hf = NULL;
        for (size_t j = 0; j < nw; j++)
            if (strcmp(whole[j].name, m->specs[i].name) == 0)
                hf = &whole[j];
        if (hf == NULL || buf == NULL) {
            rc =
                areal_error_set(err, AREAL_EINVAL, -1, "synthetic: no tensor %s", m->specs[i].name);
            break;
        }
        pt_synth_tensor(hf, buf);
        areal_tensor_slice_copy(m->params + m->offset[i], buf, hf, &m->slices[i]);
    }
    free(buf);
    free(whole);
    if (rc != AREAL_OK)
        areal_model_free(m);
    return rc;
}

/* ---- the batch: PT_SEQS sequences of unequal lengths, next-token targets */

typedef struct pt_batch {
    int32_t tokens[256], targets[256], cu[PT_SEQS + 1];
    int T, n_targets;
    struct pt_grpo *grpo; /* the GRPO step's data, NULL for the NLL step */
} pt_batch;

static inline void pt_batch_make(pt_batch *b, int vocab) {
    static const int len[PT_SEQS] = {5, 9, 3, 7, 6, 4, 8, 5};
    b->T = 0, b->n_targets = 0, b->cu[0] = 0, b->grpo = NULL;
    for (int s = 0; s < PT_SEQS; s++) {
        for (int i = 0; i < len[s]; i++)
            b->tokens[b->T + i] = (int32_t)((s * 31 + i * 17 + 7) % vocab);
        for (int i = 0; i < len[s]; i++) {
            b->targets[b->T + i] = i + 1 < len[s] ? b->tokens[b->T + i + 1] : -1;
            b->n_targets += i + 1 < len[s];
        }
        b->T += len[s];
        b->cu[s + 1] = b->T;
    }
}

/* Micro-batch views of sequences [s0, s1) of b: their own rebased cu_seqlens. */
typedef struct pt_mb {
    areal_batch b;
    int32_t cu[PT_SEQS + 1];
    int tok0; /* first token in the whole batch */
} pt_mb;

static inline void pt_mb_make(pt_mb *mb, const pt_batch *b, int s0, int s1) {
    mb->tok0 = b->cu[s0];
    for (int s = s0; s <= s1; s++)
        mb->cu[s - s0] = b->cu[s] - mb->tok0;
    mb->b = (areal_batch){.tokens = b->tokens + mb->tok0,
                          .cu_seqlens = mb->cu,
                          .n_tokens = b->cu[s1] - mb->tok0,
                          .n_seqs = s1 - s0};
}

#include "par_test_grpo.h"

/* max |a - b| / max(max |b|, 1e-6): the error relative to the reference's scale (NaN: inf). */
static inline double pt_rel_err(const float *a, const float *b, size_t n) {
    double md = 0, ms = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= md))
            md = isnan(d) ? INFINITY : d;
        if (fabs((double)b[i]) > ms)
            ms = fabs((double)b[i]);
    }
    return md / ms;
}

/*
 * ---- the step's loss: GRPO's (L->ppo), or minus the summed logprob of the
 * targets over n_total targets
 */

typedef struct pt_loss {
    const pt_batch *b;
    const pt_mb *mbs;
    long n_total;
    const float *ref_logits; /* the one-process logits [T, V], checked per micro-batch */
    double logits_err;       /* the worst relative error seen */
    areal_par_ppo *ppo;      /* the GRPO step's loss, NULL for the NLL step */
    areal_par_vocab vocab;   /* the logits' columns (tp NULL: whole rows) */
    int V;                   /* the whole vocabulary */
} pt_loss;

/* Logits [T, Vl] of this rank against the reference's columns [v0, v0 + Vl) of its rows. */
static inline void pt_check_logits(pt_loss *L, int tok0, const float *logits, int T, int Vl) {
    if (L->ref_logits == NULL)
        return;
    float *want = malloc(sizeof(float) * (size_t)T * Vl);
    for (int t = 0; want != NULL && t < T; t++)
        memcpy(want + (size_t)t * Vl, L->ref_logits + (size_t)(tok0 + t) * L->V + L->vocab.v0,
               sizeof(float) * (size_t)Vl);
    double e = want == NULL ? INFINITY : pt_rel_err(logits, want, (size_t)T * Vl);
    if (e > L->logits_err)
        L->logits_err = e;
    free(want);
}

static inline int pt_loss_fn(void *ctx, int mb, const float *logits, int T, int V, float *dlogits,
                             double *loss, areal_error *err) {
    pt_loss *L = ctx;
    int tok0 = L->mbs == NULL ? 0 : L->mbs[mb].tok0;
    if (L->ppo != NULL) {
        pt_check_logits(L, tok0, logits, T, V);
        return areal_par_ppo_loss(L->ppo, mb, logits, T, V, dlogits, loss, err);
    }
    if (L->vocab.tp != NULL) { /* vocab-parallel: areal_par_vocab_cross_entropy's rows */
        const int32_t *tg = L->b->targets + tok0;
        double ce = 0;
        areal_par_vocab v = L->vocab;
        v.Vl = V;
        int rc = areal_par_vocab_cross_entropy(&v, logits, T, tg, &ce, dlogits, err);
        int n = 0;
        for (int t = 0; t < T; t++)
            n += tg[t] >= 0;
        /* the micro-batch's mean, rescaled to the global count */
        double k = n > 0 ? (double)n / (double)L->n_total : 0;
        *loss += ce * k;
        for (size_t i = 0; dlogits != NULL && i < (size_t)T * V; i++)
            dlogits[i] = (float)(dlogits[i] * k);
        pt_check_logits(L, tok0, logits, T, V);
        return rc;
    }
    const int32_t *tg = L->b->targets + tok0;
    float *logp = malloc(sizeof(float) * (size_t)T), *dlogp = malloc(sizeof(float) * (size_t)T);
    if (logp == NULL || dlogp == NULL) {
        free(logp), free(dlogp);
        return areal_error_set(err, AREAL_ENOMEM, -1, "test loss: out of memory");
    }
    areal_token_logprobs(NULL, logits, T, V, tg, 1.0f, logp, NULL);
    double sum = 0;
    for (int t = 0; t < T; t++) {
        sum += tg[t] >= 0 ? logp[t] : 0;
        dlogp[t] = tg[t] >= 0 ? (float)(-1.0 / (double)L->n_total) : 0.0f;
    }
    *loss += -sum / (double)L->n_total;
    areal_token_logprobs_backward(NULL, logits, T, V, tg, 1.0f, dlogp, NULL, dlogits);
    pt_check_logits(L, tok0, logits, T, V);
    free(logp), free(dlogp);
    return AREAL_OK;
}

/* ---- one rank of a layout */

#define PT_CHECK(what, cond)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s rank %d: %s: %s\n", L->name, rank, what, e.msg);                   \
            rc = RANK_COMM_FAIL;                                                                   \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

static const areal_adamw_cfg PT_ADAMW = {
    .lr = PT_LR, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-3, .weight_decay = 0.01};

/* The one-process step on the whole batch: logits kept, the model left updated. */
static inline int pt_reference(areal_model *ref, const pt_batch *b, float **logits, float **grads,
                               double *loss, double *norm, double *max_norm, areal_error *e) {
    areal_batch whole = {
        .tokens = b->tokens, .cu_seqlens = b->cu, .n_tokens = b->T, .n_seqs = PT_SEQS};
    areal_acts a;
    int V = ref->cfg.vocab_size, rc = areal_model_forward(ref, &whole, &a, e);
    if (rc != AREAL_OK)
        return rc;
    *logits = malloc(sizeof(float) * (size_t)b->T * V);
    float *dl = malloc(sizeof(float) * (size_t)b->T * V);
    pt_loss pl = {
        .b = b, .n_total = b->n_targets, .ppo = b->grpo != NULL ? &b->grpo->ref : NULL, .V = V};
    *loss = 0;
    if (*logits == NULL || dl == NULL)
        rc = areal_error_set(e, AREAL_ENOMEM, -1, "reference: out of memory");
    if (rc == AREAL_OK) {
        memcpy(*logits, a.logits, sizeof(float) * (size_t)b->T * V);
        rc = pt_loss_fn(&pl, 0, a.logits, b->T, V, dl, loss, e);
    }
    if (rc == AREAL_OK)
        rc = areal_model_backward(ref, &a, dl, e);
    areal_acts_free(&a);
    free(dl);
    areal_adamw st;
    if (rc == AREAL_OK)
        rc = areal_adamw_init(&st, ref->n_params, e);
    if (rc != AREAL_OK)
        return rc;
    *grads = malloc(sizeof(float) * ref->n_params);
    if (*grads == NULL) {
        areal_adamw_free(&st);
        return areal_error_set(e, AREAL_ENOMEM, -1, "reference: out of memory");
    }
    memcpy(*grads, ref->grads, sizeof(float) * ref->n_params);
    *norm = areal_clip_grad_norm(ref->grads, ref->n_params, 0);
    *max_norm = 0.5 * *norm;
    areal_clip_grad_norm(ref->grads, ref->n_params, *max_norm);
    areal_adamw_step(&st, &PT_ADAMW, PT_LR, ref->params, ref->grads, NULL);
    areal_adamw_free(&st);
    return AREAL_OK;
}

/*
 * The worst error, tensor by tensor, of m's buffer `mine` (params or grads)
 * against the slices of ref's `theirs`; *worst names the tensor.
 */
static inline double pt_tensors_err(const areal_model *m, const float *mine, const areal_model *ref,
                                    const float *theirs, const char **worst) {
    double we = 0;
    float *want = malloc(sizeof(float) * ref->n_params);
    for (size_t i = 0; want != NULL && i < m->n_specs; i++) {
        int j = areal_model_find(ref, m->specs[i].name);
        if (j < 0)
            return INFINITY;
        const areal_tensor_spec *t = &m->specs[i];
        size_t n = (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
        areal_tensor_slice_copy(want, theirs + ref->offset[j], &ref->specs[j], &m->slices[i]);
        double x = pt_rel_err(mine + m->offset[i], want, n);
        if (x > we || isnan(x))
            we = x, *worst = t->name;
    }
    free(want);
    return want == NULL ? INFINITY : we;
}

/*
 * The proximal-logprob recompute of the step (areal_par_step_logprobs, the
 * forward-only schedule) on this rank's micro-batches against the initial
 * model's logprobs of the GRPO batch: the worst relative error, every rank
 * (the last stage's values broadcast over pp).
 */
static inline double pt_check_recompute(areal_par_step *ps, const pt_batch *b, const pt_mb *mbs,
                                        const areal_batch *bs, int nmb, const pt_grpo *g,
                                        areal_error *e) {
    float lp[256];
    float *out[PT_MAX_MB];
    const int32_t *tg[PT_MAX_MB];
    for (int i = 0; i < nmb; i++)
        out[i] = lp + mbs[i].tok0, tg[i] = b->targets + mbs[i].tok0;
    if (areal_par_step_logprobs(ps, bs, tg, nmb, (float)g->cfg.actor.temperature, out, e) !=
        AREAL_OK)
        return INFINITY;
    double worst = 0;
    for (int i = 0; i < nmb; i++) {
        double x = pt_rel_err(out[i], g->cur + mbs[i].tok0, (size_t)bs[i].n_tokens);
        worst = x > worst || isnan(x) ? x : worst;
    }
    return worst;
}

/* The loss summed over the data group as a float and its remainder (the runtime sums no doubles).
 */
static inline int pt_sum_loss(areal_coll *data, double *loss, areal_error *e) {
    if (areal_par_size(data) < 2)
        return AREAL_OK;
    float lv[2] = {(float)*loss, 0};
    lv[1] = (float)(*loss - (double)lv[0]);
    int rc = areal_coll_all_reduce(data, lv, 2, AREAL_DT_F32, AREAL_SUM, e);
    *loss = (double)lv[0] + (double)lv[1];
    return rc;
}

static inline int pt_rank(areal_comm *c, void *arg) {
    const pt_layout *L = arg;
    int rank = areal_comm_rank(c), rc = 0;
    areal_error e = {0};
    areal_model ref = {0}, m = {0};
    areal_coll *gs[AREAL_GROUP_KIND_COUNT] = {0};
    float *ref_logits = NULL, *ref_grads = NULL;
    areal_par_step ps = {0};
    pt_grpo grpo = {0};
    pt_batch b;
    double ref_loss = 0, ref_norm = 0, max_norm = 0, loss = 0, norm = 0;
    PT_CHECK("reference model", pt_model(L, NULL, &ref, &e) == AREAL_OK);
    pt_batch_make(&b, ref.cfg.vocab_size);
    if (!L->nll) {
        PT_CHECK("grpo batch", pt_grpo_prepare(&grpo, &ref, &b, &e) == AREAL_OK);
        b.grpo = &grpo;
    }
    PT_CHECK("reference step", pt_reference(&ref, &b, &ref_logits, &ref_grads, &ref_loss, &ref_norm,
                                            &max_norm, &e) == AREAL_OK);

    areal_strategy s = areal_strategy_single();
    s.dp = L->dp, s.tp = L->tp, s.pp = L->pp, s.ep = L->ep > 1 ? L->ep : 1, s.edp = 0;
    areal_role_plan role;
    areal_coll_factory f = areal_comm_coll_factory(c);
    PT_CHECK("role", areal_comm_role_of_strategy(&s, &role, &e) == AREAL_OK);
    PT_CHECK("groups", areal_comm_role_groups(&role, &f, gs, &e) == AREAL_OK);
    areal_par_groups g = areal_par_groups_of(gs);
    areal_model_shard sh;
    PT_CHECK("shard", areal_par_shard_of(&ref.cfg, &g, &sh, &e) == AREAL_OK);
    sh.vocab_parallel = L->vocab != 0;
    sh.sequence_parallel = L->sp != 0;
    PT_CHECK("vocab shard", areal_model_shard_check(&ref.cfg, &sh, &e) == AREAL_OK);
    PT_CHECK("shard model", pt_model(L, &sh, &m, &e) == AREAL_OK);
    areal_par_bind(&m, &g); /* the step binds it too; the harness's own checks run before */

    /* this dp rank's sequences, in n_mb micro-batches */
    /*
     * The data split: over dp, except that the model's expert parallelism
     * replicates the dispatch (every ep rank routes the same tokens and the
     * routed sum is reduced over ep), so the ep ranks, carved out of dp, hold
     * one data shard together; layouts here take ep == dp.
     */
    areal_coll *data = L->ep > 1 ? NULL : g.dp;
    int D = areal_par_size(data), d = areal_par_rank(data);
    int s0 = d * PT_SEQS / D, s1 = (d + 1) * PT_SEQS / D, nmb = L->n_mb;
    pt_mb mbs[PT_MAX_MB];
    areal_batch bs[PT_MAX_MB];
    long local = 0, n_total = 0;
    for (int i = 0; i < nmb; i++) {
        pt_mb_make(&mbs[i], &b, s0 + i * (s1 - s0) / nmb, s0 + (i + 1) * (s1 - s0) / nmb);
        bs[i] = mbs[i].b;
        for (int t = 0; t < bs[i].n_tokens; t++)
            local += b.targets[mbs[i].tok0 + t] >= 0;
    }
    PT_CHECK("token count", areal_par_global_count(data, local, &n_total, &e) == AREAL_OK);
    pt_loss pl = {
        .b = &b, .mbs = mbs, .n_total = n_total, .ref_logits = ref_logits, .V = ref.cfg.vocab_size};
    pl.vocab.Vl = areal_model_shard_vocab(&ref.cfg, &sh, &pl.vocab.v0);
    pl.vocab.tp = pl.vocab.Vl != ref.cfg.vocab_size ? g.tp : NULL;
    PT_CHECK("vocab split", !L->vocab || pl.vocab.Vl * sh.tp == ref.cfg.vocab_size);
    if (b.grpo != NULL) {
        PT_CHECK("grpo loss", pt_grpo_layout(&grpo, &b, mbs, nmb, data, &e) == AREAL_OK);
        grpo.par.vocab = pl.vocab;
        pl.ppo = &grpo.par;
    }
    /* the step itself: areal/parallel/step.h, the trainer's */
    areal_par_optim kind = L->zero1 ? AREAL_PAR_ZERO1 : AREAL_PAR_ADAMW;
    PT_CHECK("step init", areal_par_step_init(&ps, kind, &g, data, &m, NULL, NULL, &e) == AREAL_OK);
    ps.bucket = 1000; /* small buckets, so several are in flight at once */
    if (L->overlap) {
        PT_CHECK("overlap", areal_par_step_overlap(&ps, &e) == AREAL_OK && ps.overlap != NULL);
    }
    double lpe = b.grpo != NULL ? pt_check_recompute(&ps, &b, mbs, bs, nmb, &grpo, &e) : 0;
    if (L->skip_partial) /* the harness's own check: the partial sums left out by hand */
        PT_CHECK("1f1b",
                 areal_par_pipe_1f1b(&m, g.pp, bs, nmb, pt_loss_fn, &pl, &loss, &e) == AREAL_OK &&
                     areal_par_reduce_tied_embed(&m, &g, &e) == AREAL_OK &&
                     areal_par_dp_reduce_grads(&m, data, 1000, &e) == AREAL_OK &&
                     pt_sum_loss(data, &loss, &e) == AREAL_OK);
    else
        PT_CHECK("step grads",
                 areal_par_step_grads(&ps, bs, nmb, pt_loss_fn, &pl, &loss, &e) == AREAL_OK);
    /* overlapped means some buckets were queued from inside the backward */
    if (L->overlap)
        PT_CHECK("buckets launched inside the backward", ps.overlap->stats.early > 0);
    const char *gworst = "-";
    double ge =
        0; /* the summed gradient (ZeRO-1 never holds it whole: its norm and update speak) */
    if (!L->zero1)
        ge = pt_tensors_err(&m, m.grads, &ref, ref_grads, &gworst);
    PT_CHECK("step apply",
             areal_par_step_apply(&ps, &PT_ADAMW, PT_LR, max_norm, &norm, &e) == AREAL_OK);
    if (L->zero1) {
        /* the optimizer really is sharded: AdamW's moments cover this rank's 1/dp range only */
        const areal_par_zero1 *z = &ps.z;
        size_t Dz = (size_t)areal_par_size(data);
        PT_CHECK("zero1 moments sharded", z->adam.n == z->hi - z->lo && z->shard * Dz == z->n_pad &&
                                              z->shard <= m.n_params / Dz + 1 &&
                                              (Dz == 1 || z->adam.n < m.n_params));
    }

    const char *worst = "-";
    double le = fabs(loss - ref_loss) / fabs(ref_loss), ne = fabs(norm - ref_norm) / ref_norm;
    double we = pt_tensors_err(&m, m.params, &ref, ref.params, &worst);
    int last = sh.pp_stage == sh.pp - 1;
    printf("%-8s rank %d (tp %d/%d pp %d/%d ep %d/%d dp %d/%d): loss %.6f (rel err %.1e), grad "
           "norm %.6f "
           "(%.1e), grads %.1e (%s), weights %.1e (%s)",
           L->name, rank, sh.tp_rank, sh.tp, sh.pp_stage, sh.pp, sh.ep_rank, sh.ep, d, D, loss, le,
           norm, ne, ge, gworst, we, worst);
    if (last)
        printf(", logits %.1e", pl.logits_err);
    printf(", recompute %.1e\n", lpe);
    /* the reference's batch must take every path of the loss (pt_grpo_prepare) */
    const areal_ppo_loss_stats *rs = &grpo.ref.stats;
    if (b.grpo != NULL && (rs->n_clipped == 0 || rs->n_dual_clipped == 0 || rs->n_filtered == 0 ||
                           rs->n_kept == rs->n_valid)) {
        fprintf(stderr,
                "%s rank %d: the GRPO batch took too few paths: %ld valid, %ld kept, %ld "
                "clipped, %ld dual-clipped\n",
                L->name, rank, rs->n_valid, rs->n_kept, rs->n_clipped, rs->n_dual_clipped);
        rc = RANK_WRONG;
    }
    if (n_total != b.n_targets || !(le <= PT_TOL) || !(ne <= PT_TOL) || !(we <= PT_TOL) ||
        !(ge <= PT_GRAD_TOL) || !(pl.logits_err <= PT_TOL) || !(lpe <= PT_TOL)) {
        fprintf(stderr, "%s rank %d: differs from one process (tolerance %g)\n", L->name, rank,
                PT_TOL);
        rc = RANK_WRONG;
    }
out:
    pt_grpo_free(&grpo);
    areal_par_step_free(&ps);
    areal_model_free(&m);
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(gs[k]);
    areal_model_free(&ref);
    free(ref_logits);
    free(ref_grads);
    return rc;
}

/*
 * Forks `world` ranks running fn and returns the worst exit code (signals:
 * 100 + signal). Unlike ranks.h's ranks_run, the store runs in a forked
 * process of its own, so this process has no thread when it forks the ranks:
 * a rank forked while the parent's store thread held the allocator's lock
 * (ASan's, under make test-san) inherits it locked and hangs in its first
 * large malloc (seen: the dp all-reduce's worker thread).
 */
static inline int pt_ranks_run(int world, int timeout_ms, rank_fn fn, void *arg) {
    int up[2], stop[2];
    if (world > PT_RANKS_MAX || pipe(up) != 0)
        return RANK_COMM_FAIL;
    if (pipe(stop) != 0) {
        close(up[0]), close(up[1]);
        return RANK_COMM_FAIL;
    }
    fflush(NULL);
    pid_t store = fork();
    if (store == 0) {
        close(up[0]), close(stop[1]);
        areal_store_server *srv = NULL;
        areal_error e;
        int port = 0;
        if (areal_store_server_start("127.0.0.1", 0, &srv, &port, &e) != AREAL_OK) {
            fprintf(stderr, "store: %s\n", e.msg);
            port = -1;
        }
        ssize_t w = write(up[1], &port, sizeof port);
        char ch;
        while (w == (ssize_t)sizeof port && read(stop[0], &ch, 1) > 0) {
        } /* until the parent closes its end */
        if (port > 0)
            areal_store_server_stop(srv);
        _exit(0);
    }
    close(up[1]), close(stop[0]);
    int port = -1;
    if (store < 0 || read(up[0], &port, sizeof port) != (ssize_t)sizeof port)
        port = -1;
    close(up[0]);
    pid_t pids[PT_RANKS_MAX];
    int started = 0;
    for (; port > 0 && started < world; started++) {
        pids[started] = fork();
        if (pids[started] == 0) {
            close(stop[1]);
            areal_comm_config cfg = rank_config(started, world, port, timeout_ms);
            areal_comm *c = NULL;
            areal_error e;
            if (areal_comm_init(&cfg, &c, &e) != AREAL_OK) {
                fprintf(stderr, "rank %d: init: %s\n", started, e.msg);
                _exit(RANK_COMM_FAIL);
            }
            int rc = fn(c, arg);
            areal_comm_destroy(c);
            fflush(NULL);
            _exit(rc);
        }
    }
    int worst = port > 0 ? ranks_wait(world, pids) : RANK_COMM_FAIL;
    close(stop[1]);
    if (store > 0)
        waitpid(store, NULL, 0);
    return worst;
}

/* Runs layout L on dp * tp * pp forked ranks; the worst exit code (0: every rank equal). */
static inline int pt_run(const pt_layout *L) {
    return pt_ranks_run(L->dp * L->tp * L->pp, 30000, pt_rank, (void *)L);
}

#endif
