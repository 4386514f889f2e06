/*
 * trainer.c - one actor training step in AReaL's order (see trainer.h).
 *
 * Conventions. The batch is packed in rollout convention (areal.md §4.1):
 * loss_mask[t] = 1 on response tokens, logprobs[t] = behaviour logprob of
 * token t. Every per-token quantity the loss reads is in training
 * convention: position t predicts token t+1 (targets[t] = tokens[t+1], -1
 * at a sequence's last position), which is what areal_token_logprobs gives
 * and what areal_rl_compute_advantages returns.
 *
 * Micro-batches are cut per minibatch by first-fit decreasing; each runs its
 * own forward (activations are never held for more than one micro-batch),
 * and gradients accumulate in the model's buffer until the minibatch's
 * optimizer step. The data-parallel reductions (the token count of the
 * minibatch, the gradient) are all-reduces over t->dp.
 *
 * The reference policy (kl_ctl > 0) is a plain areal_model loaded from
 * ref.path or the initial directory. Its gradient buffer is allocated by the model core
 * (calloc, never written: the reference runs no backward, so those pages
 * are never touched) and it has no optimizer state. Rejected: keeping a
 * parameter snapshot inside the policy model (the model core has one
 * parameter buffer per model, and a forward needs a whole model).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/heads.h"
#include "areal/rl/advantage.h"
#include "areal/rl/loss.h"
#include "areal/rl/pack.h"
#include "areal/train/backend.h"
#include "areal/train/train_optim.h"
#include "areal/train/trainer.h"
#include "areal/train/trainer_par.h"

/* The comm runtime reduces fp32/bf16/fp16/int32/int64 only, so the float64 sums travel as
 * their bit patterns (int64) through an all-gather and every rank adds them up in rank
 * order: the same sum, bit for bit, everywhere. Rejected: reducing in fp32 (the batch
 * statistics of AReaL's normalisation are float64). */
static int dp_sum(void *ctx, double *vals, int n, areal_error *err) {
    areal_pg *g = ctx;
    int R = areal_pg_size(g);
    double *all = malloc((size_t)R * (size_t)n * sizeof *all);
    if (all == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a DP sum");
    int rc = areal_pg_all_gather(g, vals, all, (size_t)n, AREAL_DT_I64, err);
    for (int i = 0; rc == AREAL_OK && i < n; i++) {
        double sum = 0;
        for (int r = 0; r < R; r++)
            sum += all[(size_t)r * (size_t)n + (size_t)i];
        vals[i] = sum;
    }
    free(all);
    return rc;
}

/* The reference policy's directory: ref.path, except that a ref.path equal to actor.path
 * (AReaL's examples write ${actor.path}) is the initial model wherever --model put it (a pod
 * mounts it elsewhere than the hub name actor.path may hold). */
static const char *ref_dir(const char *model_dir, const areal_rl_config *cfg) {
    if (cfg->ref_path == NULL ||
        (cfg->actor.path != NULL && strcmp(cfg->ref_path, cfg->actor.path) == 0))
        return model_dir;
    return cfg->ref_path;
}

static int load_ref(areal_trainer *t, const char *model_dir, const areal_rl_config *cfg,
                    areal_pool *pool, areal_error *err) {
    const char *dir = ref_dir(model_dir, cfg);
    t->ref = calloc(1, sizeof *t->ref);
    if (t->ref == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the reference policy");
    int rc = areal_model_load(t->ref, dir, pool, err);
    if (rc == AREAL_OK && t->ref->cfg.vocab_size != t->model.cfg.vocab_size) {
        rc = areal_error_set(err, AREAL_EINVAL, -1,
                             "ref.path %s: vocabulary of %d tokens, the policy's has %d (the "
                             "reference must share the policy's tokenizer)",
                             dir, t->ref->cfg.vocab_size, t->model.cfg.vocab_size);
        areal_model_free(t->ref);
    }
    if (rc != AREAL_OK) {
        free(t->ref);
        t->ref = NULL;
    }
    return rc;
}

/* AdamW and the schedule over n parameters, from cfg->actor.optimizer. */
static int make_optim(areal_trainer *t, const areal_rl_config *cfg, long total_steps, size_t n,
                      areal_error *err) {
    const areal_optimizer_config *o = &cfg->actor.optimizer;
    areal_train_optim_cfg oc = {
        o->lr,
        o->beta1,
        o->beta2,
        o->eps,
        o->weight_decay,
        o->lr_scheduler,
        o->warmup_steps_proportion,
        o->min_lr_ratio,
        total_steps * (cfg->actor.ppo_n_minibatches > 0 ? cfg->actor.ppo_n_minibatches : 1)};
    return areal_train_optim_create(&oc, n, &t->opt, err);
}

int areal_trainer_init(areal_trainer *t, const char *model_dir, const areal_rl_config *cfg,
                       long total_steps, areal_pool *pool, areal_pg *dp, areal_error *err) {
    memset(t, 0, sizeof *t);
    int rc = areal_model_load(&t->model, model_dir, pool, err);
    if (rc != AREAL_OK)
        return rc;
    const areal_optimizer_config *o = &cfg->actor.optimizer;
    rc = make_optim(t, cfg, total_steps, t->model.n_params, err);
    if (rc != AREAL_OK) {
        areal_model_free(&t->model);
        return rc;
    }
    if (cfg->actor.kl_ctl > 0) {
        rc = load_ref(t, model_dir, cfg, pool, err);
        if (rc != AREAL_OK) {
            areal_train_optim_free(t->opt);
            areal_model_free(&t->model);
            memset(t, 0, sizeof *t);
            return rc;
        }
    }
    t->grad_clip = o->gradient_clipping;
    t->actor = cfg->actor;
    t->group_size = cfg->gconfig.n_samples > 0 ? cfg->gconfig.n_samples : 1;
    t->dp = dp;
    t->ops = &areal_train_cpu_ops;
    return AREAL_OK;
}

int areal_trainer_init_par(areal_trainer *t, const char *model_dir, const areal_rl_config *cfg,
                           long total_steps, areal_pool *pool, const areal_train_layout *l,
                           areal_error *err) {
    memset(t, 0, sizeof *t);
    /* the interleaved schedule runs a multiple of p micro-batches (Megatron refuses others):
     * a stated count must be one; the default minimum (1) is rounded up at the cut */
    long vpp = cfg->actor.vpp;
    int np = l->s.pp;
    if (vpp > 1 && cfg->actor.n_mbs > 1 && cfg->actor.n_mbs % np != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "actor.mb_spec.n_mbs is %d: the interleaved pipeline "
                               "(actor.megatron.virtual_pipeline_parallel_size %ld) runs a "
                               "multiple of p = %d micro-batches; set it to a multiple of %d",
                               cfg->actor.n_mbs, vpp, np, np);
    if (vpp > 64)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "actor.megatron.virtual_pipeline_parallel_size is %ld: at most 64 "
                               "chunks per rank",
                               vpp);
    areal_train_layout lv = *l;
    lv.vpp = vpp > 1 ? (int)vpp : 0;
    const areal_optimizer_config *o = &cfg->actor.optimizer;
    areal_adamw_cfg ac = {o->lr, o->beta1, o->beta2, o->eps, o->weight_decay};
    int rc = areal_train_par_create(&lv, model_dir, &ac, pool, &t->par, err);
    if (rc != AREAL_OK)
        return rc; /* before any use of the world (a refused layout may have none) */
    bool root = areal_comm_rank(l->comm) == 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", model_dir);
    /* Rank 0 holds a whole copy of the parameters only where an xccl update sends it whole
     * (the gathered path: no shard-direct plan, or its catch-up and fallback); elsewhere, and
     * on every other rank, the config alone. Disk updates stream the gathered tensors into
     * the file (areal_train_dp_hf_save), checkpoints are per rank (trainer_par_ckpt.h). No
     * whole gradients (the shard trains) and no whole moments: the optimizer here is only the
     * schedule. And no per-step gather where nothing reads the copy (defer_gather). */
    bool xccl = strcmp(cfg->rollout.weight_update_mode, "xccl") == 0;
    if (rc == AREAL_OK)
        rc = root && xccl ? areal_model_load(&t->model, model_dir, pool, err)
                          : areal_model_config_load(path, &t->model.cfg, err);
    if (rc == AREAL_OK)
        t->defer_gather = !xccl || areal_train_par_sharded(t->par);
    if (rc == AREAL_OK && t->model.grads != NULL) {
        free(t->model.grads);
        t->model.grads = NULL;
    }
    if (rc == AREAL_OK)
        rc = make_optim(t, cfg, total_steps, 0, err);
    if (rc == AREAL_OK && cfg->actor.kl_ctl > 0)
        rc = load_ref(t, model_dir, cfg, pool, err);
    if (rc != AREAL_OK) {
        areal_trainer_free(t);
        return rc;
    }
    t->grad_clip = o->gradient_clipping;
    t->actor = cfg->actor;
    t->group_size = cfg->gconfig.n_samples > 0 ? cfg->gconfig.n_samples : 1;
    t->dp = areal_train_par_data_pg(t->par);
    t->ops = &areal_train_cpu_ops;
    return AREAL_OK;
}

void areal_trainer_free(areal_trainer *t) {
    if (t->ops != NULL && t->ops->release != NULL)
        t->ops->release(t);
    free(t->dlogits);
    areal_train_par_free(t->par);
    if (t->ref != NULL)
        areal_model_free(t->ref);
    free(t->ref);
    areal_train_optim_free(t->opt);
    areal_model_free(&t->model);
    memset(t, 0, sizeof *t);
}

/* The packed batch of a step. */
typedef struct packed {
    int n_seqs, T;
    int32_t *tokens, *targets, *versions;
    int64_t *cu;
    uint8_t *mask, *no_eos;
    float *logp_behav, *rewards;
    float *prox, *adv, *mask_f, *old; /* training convention */
    float *ref, *kl;                  /* training convention; NULL without a reference */
} packed;

static void packed_free(packed *p) {
    free(p->tokens);
    free(p->targets);
    free(p->versions);
    free(p->cu);
    free(p->mask);
    free(p->no_eos);
    free(p->logp_behav);
    free(p->rewards);
    free(p->prox);
    free(p->adv);
    free(p->mask_f);
    free(p->old);
    free(p->ref);
    free(p->kl);
}

static int pack_groups(const areal_group *g, int n, bool with_ref, packed *p, areal_error *err) {
    memset(p, 0, sizeof *p);
    for (int k = 0; k < n; k++)
        for (int i = 0; i < g[k].G; i++) {
            if (g[k].s[i].n <= g[k].s[i].n_prompt || g[k].s[i].n_prompt < 1)
                return areal_error_set(err, AREAL_EINVAL, -1,
                                       "group %d sample %d has no response tokens", k, i);
            p->T += g[k].s[i].n;
            p->n_seqs++;
        }
    size_t T = (size_t)p->T, S = (size_t)p->n_seqs;
    p->tokens = malloc(T * sizeof *p->tokens);
    p->targets = malloc(T * sizeof *p->targets);
    p->versions = malloc(T * sizeof *p->versions);
    p->cu = malloc((S + 1) * sizeof *p->cu);
    p->mask = malloc(T);
    p->no_eos = malloc(S);
    p->logp_behav = malloc(T * sizeof(float));
    p->rewards = malloc(S * sizeof(float));
    p->prox = malloc(T * sizeof(float));
    p->adv = malloc(T * sizeof(float));
    p->mask_f = malloc(T * sizeof(float));
    p->old = malloc(T * sizeof(float));
    if (with_ref) {
        p->ref = malloc(T * sizeof(float));
        p->kl = malloc(T * sizeof(float));
    }
    if (!p->tokens || !p->targets || !p->versions || !p->cu || !p->mask || !p->no_eos ||
        !p->logp_behav || !p->rewards || !p->prox || !p->adv || !p->mask_f || !p->old ||
        (with_ref && (!p->ref || !p->kl)))
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a batch of %zu tokens", T);
    int at = 0, s = 0;
    p->cu[0] = 0;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < g[k].G; i++, s++) {
            const areal_traj *tr = &g[k].s[i];
            for (int j = 0; j < tr->n; j++) {
                p->tokens[at + j] = tr->tokens[j];
                p->targets[at + j] = j + 1 < tr->n ? tr->tokens[j + 1] : -1;
                p->versions[at + j] = tr->versions[j];
                p->mask[at + j] = j >= tr->n_prompt;
                p->logp_behav[at + j] = j >= tr->n_prompt ? tr->logprobs[j] : 0.0f;
            }
            at += tr->n;
            p->cu[s + 1] = at;
            p->no_eos[s] = tr->no_eos;
            p->rewards[s] = tr->reward;
        }
    return AREAL_OK;
}

/* Sequences sel[0..n) as one model batch (tokens copied into caller buffers). */
typedef struct mb {
    int n, T;
    int *sel;
    int32_t *tok, *tgt, *cu32;
    int64_t *cu64;
    float *prox, *old, *adv, *mask, *logp, *dlogp;
} mb;

static void mb_gather(const packed *p, mb *m) {
    m->T = 0;
    m->cu32[0] = 0;
    m->cu64[0] = 0;
    for (int i = 0; i < m->n; i++) {
        int s = m->sel[i];
        int64_t a = p->cu[s], b = p->cu[s + 1];
        for (int64_t t = a; t < b; t++, m->T++) {
            m->tok[m->T] = p->tokens[t];
            m->tgt[m->T] = p->targets[t];
            m->prox[m->T] = p->prox[t];
            m->old[m->T] = p->old[t];
            m->adv[m->T] = p->adv[t];
            m->mask[m->T] = p->mask_f[t];
        }
        m->cu32[i + 1] = m->T;
        m->cu64[i + 1] = m->T;
    }
}

static const areal_train_backend_ops *ops_of(const areal_trainer *t);

/* logp [T] of the micro-batch's targets under model's weights; keeps acts when keep != NULL. */
static int forward_logp(areal_trainer *t, areal_model *model, mb *m, float *logp, areal_acts *keep,
                        areal_error *err) {
    areal_batch b = {m->tok, m->cu32, m->T, m->n};
    if (model == &t->model && keep == NULL) /* the policy: its backend's (the GPU's or below) */
        return ops_of(t)->logprobs(t, &b, m->tgt, logp, err);
    areal_acts a;
    int rc = areal_model_forward(model, &b, &a, err);
    if (rc != AREAL_OK)
        return rc;
    areal_token_logprobs(model->pool, a.logits, a.T, a.V, m->tgt, (float)t->actor.temperature, logp,
                         NULL);
    if (keep)
        *keep = a;
    else
        areal_acts_free(&a);
    return AREAL_OK;
}

/* ---- the CPU backend (areal/train/backend.h): the CPU model, areal/rl's loss, train_optim */

static int cpu_logprobs(areal_trainer *t, const areal_batch *b, const int32_t *targets, float *logp,
                        areal_error *err) {
    areal_acts a;
    int rc = areal_model_forward(&t->model, b, &a, err);
    if (rc != AREAL_OK)
        return rc;
    areal_token_logprobs(t->model.pool, a.logits, a.T, a.V, targets, (float)t->actor.temperature,
                         logp, NULL);
    areal_acts_free(&a);
    return AREAL_OK;
}

static int cpu_zero_grad(areal_trainer *t, areal_error *err) {
    (void)err;
    areal_model_zero_grad(&t->model);
    return AREAL_OK;
}

static int cpu_accum(areal_trainer *t, const areal_train_mb *m, const areal_ppo_loss_opts *opts,
                     float *logp, float *dlogp, double *loss, areal_ppo_loss_stats *s1,
                     areal_error *err) {
    areal_acts a;
    int rc = areal_model_forward(&t->model, &m->b, &a, err);
    if (rc != AREAL_OK)
        return rc;
    float temp = (float)t->actor.temperature;
    int T = m->b.n_tokens;
    areal_token_logprobs(t->model.pool, a.logits, a.T, a.V, m->targets, temp, logp, NULL);
    rc = areal_ppo_actor_loss(logp, m->prox, m->old, m->adv, m->mask, T, m->cu64, m->b.n_seqs, opts,
                              loss, dlogp, s1, err);
    size_t need = (size_t)T * (size_t)a.V;
    if (rc == AREAL_OK && need > t->dlogits_n) {
        float *dl = realloc(t->dlogits, need * sizeof *dl);
        if (dl == NULL)
            rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for dlogits");
        else
            t->dlogits = dl, t->dlogits_n = need;
    }
    if (rc == AREAL_OK) {
        areal_token_logprobs_backward(t->model.pool, a.logits, a.T, a.V, m->targets, temp, dlogp,
                                      NULL, t->dlogits);
        rc = areal_model_backward(&t->model, &a, t->dlogits, err);
    }
    areal_acts_free(&a);
    return rc;
}

static int cpu_apply(areal_trainer *t, double *grad_norm, double *lr, areal_error *err) {
    if (t->dp != NULL && areal_pg_size(t->dp) > 1) {
        /* AReaL's engine scale multiplied by dp_size, so the average is the global mean */
        int rc = areal_pg_all_reduce(t->dp, t->model.grads, t->model.n_params, AREAL_DT_F32,
                                     AREAL_AVG, err);
        if (rc != AREAL_OK)
            return rc;
    }
    *grad_norm = areal_train_optim_clip(t->model.grads, t->model.n_params, t->grad_clip);
    *lr = areal_train_optim_step(t->opt, t->model.params, t->model.grads, t->model.pool);
    return AREAL_OK;
}

const areal_train_backend_ops areal_train_cpu_ops = {"cpu",     cpu_logprobs, cpu_zero_grad,
                                                     cpu_accum, cpu_apply,    NULL};

/* a trainer set up field by field (tests) has no ops: today's CPU step */
static const areal_train_backend_ops *ops_of(const areal_trainer *t) {
    return t->ops != NULL ? t->ops : &areal_train_cpu_ops;
}

static int mb_alloc(mb *m, int n_seqs, int T) {
    memset(m, 0, sizeof *m);
    m->sel = malloc((size_t)n_seqs * sizeof *m->sel);
    m->tok = malloc((size_t)T * sizeof *m->tok);
    m->tgt = malloc((size_t)T * sizeof *m->tgt);
    m->cu32 = malloc(((size_t)n_seqs + 1) * sizeof *m->cu32);
    m->cu64 = malloc(((size_t)n_seqs + 1) * sizeof *m->cu64);
    m->prox = malloc((size_t)T * sizeof(float));
    m->old = malloc((size_t)T * sizeof(float));
    m->adv = malloc((size_t)T * sizeof(float));
    m->mask = malloc((size_t)T * sizeof(float));
    m->logp = malloc((size_t)T * sizeof(float));
    m->dlogp = malloc((size_t)T * sizeof(float));
    return m->sel && m->tok && m->tgt && m->cu32 && m->cu64 && m->prox && m->old && m->adv &&
                   m->mask && m->logp && m->dlogp
               ? 0
               : -1;
}

static void mb_free(mb *m) {
    free(m->sel);
    free(m->tok);
    free(m->tgt);
    free(m->cu32);
    free(m->cu64);
    free(m->prox);
    free(m->old);
    free(m->adv);
    free(m->mask);
    free(m->logp);
    free(m->dlogp);
}

/* Micro-batch assignment of the sequences sel[0..n) (indices into p). Under a layout the
 * data slices agree on the count (FSDP's per-layer gathers run once per micro-batch on every
 * dp rank): a slice with fewer cuts again with the most as its minimum, until all agree
 * (each round only raises the count, and it is bounded by the slice's sequences, equal
 * across slices: whole groups, areal_split_groups_dp). */
static int cut(const areal_trainer *t, const packed *p, const int *sel, int n, int *mb_of,
               int *n_mbs, areal_error *err) {
    int64_t *lens = malloc((size_t)n * sizeof *lens);
    if (lens == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory");
    for (int i = 0; i < n; i++)
        lens[i] = p->cu[sel[i] + 1] - p->cu[sel[i]];
    int least = t->actor.n_mbs > 0 ? (t->actor.n_mbs < n ? t->actor.n_mbs : n) : 1;
    int rc = areal_pack_ffd(lens, n, t->actor.max_tokens_per_mb, least, mb_of, n_mbs, err);
    /* the interleaved pipeline's multiple (1: none); the count only grows, bounded by n */
    int q = t->par != NULL ? areal_train_par_mb_multiple(t->par) : 1;
    for (;;) {
        bool agree = t->par == NULL || t->dp == NULL || areal_pg_size(t->dp) < 2;
        while (rc == AREAL_OK && !agree) {
            int32_t v[2] = {*n_mbs, -*n_mbs}; /* the most and minus the least */
            rc = areal_pg_all_reduce(t->dp, v, 2, AREAL_DT_I32, AREAL_MAX, err);
            agree = v[0] == -v[1];
            if (rc == AREAL_OK && !agree && *n_mbs < v[0])
                rc = areal_pack_ffd(lens, n, t->actor.max_tokens_per_mb, v[0] < n ? v[0] : n, mb_of,
                                    n_mbs, err);
        }
        if (rc != AREAL_OK || *n_mbs % q == 0)
            break;
        int want = (*n_mbs + q - 1) / q * q;
        if (want > n) {
            rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "actor.megatron.virtual_pipeline_parallel_size: the interleaved "
                                 "pipeline runs a multiple of p = %d micro-batches, but this "
                                 "minibatch has %d sequences cut into %d; give each PPO "
                                 "minibatch at least %d sequences (fewer "
                                 "actor.ppo_n_minibatches) or raise "
                                 "actor.mb_spec.max_tokens_per_mb",
                                 q, n, *n_mbs, want);
            break;
        }
        rc = areal_pack_ffd(lens, n, t->actor.max_tokens_per_mb, want, mb_of, n_mbs, err);
    }
    free(lens);
    return rc;
}

/* Scatters the micro-batch's logp back to the packed order of p into dst. */
static void scatter(const packed *p, const mb *m, float *dst) {
    for (int i = 0, at = 0; i < m->n; i++) {
        int64_t a = p->cu[m->sel[i]], b = p->cu[m->sel[i] + 1];
        memcpy(dst + a, m->logp + at, (size_t)(b - a) * sizeof(float));
        at += (int)(b - a);
    }
}

/* ---- a layout's step (trainer_par.h): every micro-batch of a minibatch at once, as the
 * pipeline schedules them */

static void mbs_free(mb *ms, int n) {
    for (int k = 0; ms != NULL && k < n; k++)
        mb_free(&ms[k]);
    free(ms);
}

/* The micro-batches mb_of[i] = k of sequences sel[0..ns), each gathered into its own buffers. */
static int mbs_make(const packed *p, const int *sel, int ns, const int *mb_of, int n_mbs, mb **out,
                    areal_error *err) {
    mb *ms = calloc((size_t)n_mbs, sizeof *ms);
    int rc = ms == NULL ? areal_error_set(err, AREAL_ENOMEM, -1, "no memory for micro-batches")
                        : AREAL_OK;
    for (int k = 0; rc == AREAL_OK && k < n_mbs; k++) {
        int n = 0, T = 0;
        for (int i = 0; i < ns; i++)
            if (mb_of[i] == k) {
                n++;
                T += (int)(p->cu[sel[i] + 1] - p->cu[sel[i]]);
            }
        if (mb_alloc(&ms[k], n > 0 ? n : 1, T > 0 ? T : 1) != 0) {
            rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for micro-batches");
            break;
        }
        for (int i = 0; i < ns; i++)
            if (mb_of[i] == k)
                ms[k].sel[ms[k].n++] = sel[i];
        mb_gather(p, &ms[k]);
    }
    if (rc != AREAL_OK) {
        mbs_free(ms, n_mbs);
        ms = NULL;
    }
    *out = ms;
    return rc;
}

static areal_batch mb_batch(const mb *m) {
    return (areal_batch){m->tok, m->cu32, m->T, m->n};
}

/* The proximal logprobs of every sequence of p under the layout, into prox. */
static int par_recompute(areal_trainer *t, const packed *p, const int *all, int *mb_of, float *prox,
                         areal_error *err) {
    int n_mbs = 0;
    mb *ms = NULL;
    int rc = cut(t, p, all, p->n_seqs, mb_of, &n_mbs, err);
    if (rc == AREAL_OK)
        rc = mbs_make(p, all, p->n_seqs, mb_of, n_mbs, &ms, err);
    areal_batch *bs = rc == AREAL_OK ? calloc((size_t)n_mbs, sizeof *bs) : NULL;
    const int32_t **tg = rc == AREAL_OK ? calloc((size_t)n_mbs, sizeof *tg) : NULL;
    float **lp = rc == AREAL_OK ? calloc((size_t)n_mbs, sizeof *lp) : NULL;
    if (rc == AREAL_OK && (bs == NULL || tg == NULL || lp == NULL))
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for micro-batches");
    for (int k = 0; rc == AREAL_OK && k < n_mbs; k++)
        bs[k] = mb_batch(&ms[k]), tg[k] = ms[k].tgt, lp[k] = ms[k].logp;
    if (rc == AREAL_OK)
        rc = areal_par_step_logprobs(areal_train_par_step(t->par), bs, tg, n_mbs,
                                     (float)t->actor.temperature, lp, err);
    for (int k = 0; rc == AREAL_OK && k < n_mbs; k++)
        scatter(p, &ms[k], prox);
    free(bs), free(tg), free(lp);
    mbs_free(ms, n_mbs);
    return rc;
}

/* One minibatch's optimizer step under the layout: the loss statistics into ls, st's loss,
 * grad norm and learning rate. */
static int par_minibatch(areal_trainer *t, const packed *p, const int *sel, int ns,
                         const int *mb_of, int n_mbs, const areal_ppo_loss_opts *opts,
                         areal_step_stats *st, areal_ppo_loss_stats *ls, areal_error *err) {
    mb *ms = NULL;
    int rc = mbs_make(p, sel, ns, mb_of, n_mbs, &ms, err);
    areal_batch *bs = rc == AREAL_OK ? calloc((size_t)n_mbs, sizeof *bs) : NULL;
    areal_par_ppo_mb *pm = rc == AREAL_OK ? calloc((size_t)n_mbs, sizeof *pm) : NULL;
    if (rc == AREAL_OK && (bs == NULL || pm == NULL))
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for micro-batches");
    for (int k = 0; rc == AREAL_OK && k < n_mbs; k++) {
        bs[k] = mb_batch(&ms[k]);
        pm[k] = (areal_par_ppo_mb){ms[k].tgt,  ms[k].prox, ms[k].old, ms[k].adv,
                                   ms[k].mask, ms[k].cu64, ms[k].n};
    }
    areal_par_step *ps = areal_train_par_step(t->par);
    double lr = areal_train_optim_lr(t->opt, areal_par_step_adam(ps)->step);
    areal_par_step_out o;
    if (rc == AREAL_OK)
        rc = areal_par_step_grpo(ps, bs, pm, n_mbs, opts, (float)t->actor.temperature,
                                 areal_train_par_adamw(t->par), lr, t->grad_clip, &o, err);
    if (rc == AREAL_OK) {
        st->loss += o.loss;
        st->grad_norm = o.grad_norm;
        st->lr = lr;
        areal_ppo_loss_stats_add(ls, &o.stats);
    }
    free(bs), free(pm);
    mbs_free(ms, n_mbs);
    return rc;
}

/* No-grad logprobs of every sequence of p: the policy's into prox (nullable), the reference's
 * into ref (nullable), micro-batch by micro-batch (all = 0..n_seqs-1, mb_of scratch). */
static int recompute(areal_trainer *t, const packed *p, mb *m, const int *all, int *mb_of,
                     float *prox, float *ref, areal_error *err) {
    if (t->par != NULL && prox != NULL) { /* the layout's forward; the reference's below */
        int r = par_recompute(t, p, all, mb_of, prox, err);
        if (r != AREAL_OK || ref == NULL)
            return r;
        prox = NULL;
    }
    int n_mbs = 0;
    int rc = cut(t, p, all, p->n_seqs, mb_of, &n_mbs, err);
    for (int k = 0; rc == AREAL_OK && k < n_mbs; k++) {
        m->n = 0;
        for (int i = 0; i < p->n_seqs; i++)
            if (mb_of[i] == k)
                m->sel[m->n++] = i;
        mb_gather(p, m);
        if (prox != NULL && (rc = forward_logp(t, &t->model, m, m->logp, NULL, err)) == AREAL_OK)
            scatter(p, m, prox);
        if (rc == AREAL_OK && ref != NULL &&
            (rc = forward_logp(t, t->ref, m, m->logp, NULL, err)) == AREAL_OK)
            scatter(p, m, ref);
    }
    return rc;
}

/* The buffers of one batch: packed p, micro-batch scratch m, all[] = 0..n_seqs-1, mb_of[]. */
static int batch_setup(areal_trainer *t, const areal_group *g, int n, packed *p, mb *m, int **all,
                       int **mb_of, areal_error *err) {
    memset(m, 0, sizeof *m);
    *all = *mb_of = NULL;
    int rc = pack_groups(g, n, t->ref != NULL, p, err);
    if (rc == AREAL_OK && mb_alloc(m, p->n_seqs, p->T) != 0)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for micro-batches");
    *all = malloc((size_t)p->n_seqs * sizeof **all);
    *mb_of = malloc((size_t)p->n_seqs * sizeof **mb_of);
    if (rc == AREAL_OK && (*all == NULL || *mb_of == NULL))
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory");
    for (int i = 0; rc == AREAL_OK && i < p->n_seqs; i++)
        (*all)[i] = i;
    return rc;
}

int areal_trainer_ref_logprobs(areal_trainer *t, const areal_group *g, int n, float *out,
                               areal_error *err) {
    if (t->ref == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "no reference policy: actor.kl_ctl is 0 (set it > 0 for one)");
    packed p;
    mb m;
    int *all, *mb_of;
    int rc = batch_setup(t, g, n, &p, &m, &all, &mb_of, err);
    if (rc == AREAL_OK)
        rc = recompute(t, &p, &m, all, mb_of, NULL, p.ref, err);
    if (rc == AREAL_OK)
        memcpy(out, p.ref, (size_t)p.T * sizeof *out);
    free(all);
    free(mb_of);
    mb_free(&m);
    packed_free(&p);
    return rc;
}

int areal_trainer_step(areal_trainer *t, const areal_group *g, int n, areal_step_stats *stats,
                       areal_error *err) {
    areal_step_stats st;
    memset(&st, 0, sizeof st);
    packed p;
    mb m;
    int *all, *mb_of;
    int rc = batch_setup(t, g, n, &p, &m, &all, &mb_of, err);
    int n_mbs = 0;

    /* 1. proximal logprobs with the weights before this step (recompute_logprob), and the
     * reference policy's (kl_ctl > 0) on the same micro-batches */
    if (rc == AREAL_OK)
        rc = recompute(t, &p, &m, all, mb_of, p.prox, p.ref, err);

    /* 2. advantages */
    areal_rl_reducer red = {dp_sum, t->dp};
    bool multi = t->dp != NULL && areal_pg_size(t->dp) > 1;
    if (rc == AREAL_OK) {
        areal_rl_adv_input in = {p.n_seqs, p.cu,  p.mask,    p.logp_behav,
                                 p.prox,   p.ref, p.rewards, p.no_eos};
        areal_rl_adv_output out = {p.adv, p.mask_f, p.old, NULL, p.kl, NULL};
        rc = areal_rl_compute_advantages(&t->actor, &in, &out, multi ? &red : NULL, err);
    }
    /* With the decoupled loss, prox is the recomputed logprob and old the behaviour one;
     * without it AReaL uses one logprob for both (the recomputed one when asked). */
    if (rc == AREAL_OK && !t->actor.use_decoupled_loss)
        memcpy(p.prox, p.old, (size_t)p.T * sizeof(float));

    /* 3. statistics of the batch itself */
    long valid = 0;
    for (int i = 0; rc == AREAL_OK && i < p.n_seqs; i++) {
        st.reward_mean += p.rewards[i] / p.n_seqs;
        for (int64_t tk = p.cu[i]; tk < p.cu[i + 1]; tk++) {
            if (!p.mask[tk])
                continue;
            valid++;
            long stale = t->version - p.versions[tk];
            if (stale < 0)
                stale = 0;
            st.staleness[stale < AREAL_STALENESS_BUCKETS - 1 ? stale
                                                             : AREAL_STALENESS_BUCKETS - 1]++;
            if (stale > st.max_staleness)
                st.max_staleness = stale;
        }
    }
    long n_trained = 0;
    for (int64_t tk = 0; rc == AREAL_OK && p.kl != NULL && tk < p.T; tk++)
        if (p.mask_f[tk] != 0) {
            st.kl_reward_sum += p.kl[tk];
            n_trained++;
        }
    if (n_trained > 0)
        st.kl_mean = -st.kl_reward_sum / t->actor.kl_ctl / (double)n_trained;
    st.n_seqs = p.n_seqs;
    st.n_tokens = p.T;
    st.resp_len_mean = p.n_seqs ? (double)valid / p.n_seqs : 0;

    /* 4. minibatches: whole groups, in order, ppo_n_minibatches of them */
    int G = t->group_size, n_groups = p.n_seqs / (G > 0 ? G : 1);
    int n_minib = t->actor.ppo_n_minibatches > 0 ? t->actor.ppo_n_minibatches : 1;
    if (n_minib > n_groups)
        n_minib = n_groups > 0 ? n_groups : 1;
    areal_ppo_loss_opts opts = areal_ppo_loss_opts_from(&t->actor);
    areal_ppo_loss_stats ls;
    memset(&ls, 0, sizeof ls);
    ls.ratio_min = ls.behave_w_min = INFINITY;
    ls.ratio_max = ls.behave_w_max = -INFINITY;
    int dp_size = multi ? areal_pg_size(t->dp) : 1;
    for (int mbi = 0; rc == AREAL_OK && mbi < n_minib; mbi++) {
        int g0 = n_groups * mbi / n_minib, g1 = n_groups * (mbi + 1) / n_minib;
        int ns = (g1 - g0) * G;
        int *sel = all + g0 * G;
        rc = cut(t, &p, sel, ns, mb_of, &n_mbs, err);
        if (rc != AREAL_OK)
            break;
        st.n_mbs += n_mbs;
        if (t->par != NULL) { /* the layout's step (its data group's sums are its own) */
            rc = par_minibatch(t, &p, sel, ns, mb_of, n_mbs, &opts, &st, &ls, err);
            t->step += rc == AREAL_OK;
            continue;
        }
        double n_valid_global = 0;
        for (int i = 0; i < ns; i++)
            for (int64_t tk = p.cu[sel[i]]; tk < p.cu[sel[i] + 1]; tk++)
                n_valid_global += p.mask_f[tk] != 0;
        if (multi && (rc = dp_sum(t->dp, &n_valid_global, 1, err)) != AREAL_OK)
            break;
        rc = ops_of(t)->zero_grad(t, err);
        for (int k = 0; rc == AREAL_OK && k < n_mbs; k++) {
            m.n = 0;
            for (int i = 0; i < ns; i++)
                if (mb_of[i] == k)
                    m.sel[m.n++] = sel[i];
            mb_gather(&p, &m);
            long n_valid_mb = areal_ppo_count_valid(m.mask, m.T);
            opts.scale = areal_ppo_mb_scale(n_valid_mb, (long)n_valid_global, dp_size);
            areal_train_mb in = {
                {m.tok, m.cu32, m.T, m.n}, m.tgt, m.prox, m.old, m.adv, m.mask, m.cu64};
            double loss = 0;
            areal_ppo_loss_stats s1;
            rc = ops_of(t)->accum(t, &in, &opts, m.logp, m.dlogp, &loss, &s1, err);
            if (rc == AREAL_OK) {
                st.loss += loss;
                areal_ppo_loss_stats_add(&ls, &s1);
            }
        }
        if (rc == AREAL_OK)
            rc = ops_of(t)->apply(t, &st.grad_norm, &st.lr, err);
        if (rc != AREAL_OK)
            break;
        t->step++;
    }
    /* the seam to weight sync, HF saves and checkpoints: the whole policy on world rank 0 */
    if (rc == AREAL_OK && t->par != NULL && t->defer_gather)
        t->whole_stale = true; /* gathered only where whole tensors are needed (dp.h) */
    else if (rc == AREAL_OK && t->par != NULL)
        rc = areal_train_par_gather(t->par, AREAL_PAR_PARAMS,
                                    t->model.n_params > 0 ? t->model.params : NULL, err);
    if (rc == AREAL_OK) {
        t->version++;
        st.n_valid = ls.n_valid;
        st.clip_frac = ls.n_valid ? (double)ls.n_clipped / (double)ls.n_valid : 0;
        st.ratio_mean = ls.n_valid ? ls.ratio_sum / (double)ls.n_valid : 0;
        st.behave_w_mean = ls.n_behave ? ls.behave_w_sum / (double)ls.n_behave : 0;
        st.behave_w_max = ls.n_behave ? ls.behave_w_max : 0;
        if (stats)
            *stats = st;
    }
    if (t->model.grads != NULL)
        areal_model_zero_grad(&t->model);
    free(t->dlogits); /* as before the seam: the [T, V] scratch lives for one step */
    t->dlogits = NULL;
    t->dlogits_n = 0;
    free(all);
    free(mb_of);
    mb_free(&m);
    packed_free(&p);
    return rc;
}
