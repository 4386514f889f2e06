/*
 * par_test_grpo.h - the GRPO batch of the parallel tests' step (included by
 * par_test_util.h after the batch types): worker/rl's decoupled PPO loss on
 * the harness's packed sequences, with AReaL's data as its trainer makes it.
 *
 * Each sequence is a 2-token prompt and a response (loss mask on the
 * response's targets); rewards in two GRPO groups of 4; advantages, rolled
 * mask and old (behaviour) logprobs from areal_rl_compute_advantages with
 * group mean/std normalisation; the proximal logprobs are the one-process
 * model's own (recompute_logprob) moved by a fixed +-0.4 (and every 7th
 * token by -1.3), as a later PPO minibatch of a step sees them after the
 * first update, so the importance ratio leaves the clip band on some tokens
 * and passes c_clip on others; the behaviour logprobs are
 * those minus a fixed offset up to 0.3, so token-level rejection sampling
 * (upper 1.25 on exp(prox - behav)) masks some tokens. Dual clip (c_clip 3)
 * and the asymmetric upper clip (0.28) are on, temperature 0.9. The same
 * data feeds both sides: the one-process reference (the whole batch as one
 * micro-batch) and every layout (its micro-batches' slices), and the test
 * checks the reference's statistics show every path taken.
 */
#ifndef PAR_TEST_GRPO_H
#define PAR_TEST_GRPO_H

#include "areal/parallel/ppo.h"
#include "areal/rl/advantage.h"
#include "areal/rl/config.h"

#define PT_PROMPT 2 /* prompt tokens of every sequence */
#define PT_GROUP  4 /* GRPO group size */

static const char PT_GRPO_CFG[] =
    "actor:\n"
    "  group_size: 4\n"
    "  eps_clip: 0.2\n"
    "  eps_clip_higher: 0.28\n"
    "  c_clip: 3.0\n"
    "  use_decoupled_loss: true\n"
    "  recompute_logprob: true\n"
    "  kl_ctl: 0.0\n"
    "  temperature: 0.9\n"
    "  adv_norm: {mean_level: group, std_level: group, group_size: 4}\n"
    "  rejection_sampling: {level: token, action: mask, metric: "
    "ratio, upper: 1.25}\n";

typedef struct pt_grpo {
    areal_rl_config cfg;
    areal_ppo_loss_opts opts;
    float prox[256], old[256], adv[256], mask[256];
    float cur[256]; /* the initial model's logprobs (the recompute's, before the offsets) */
    int64_t cu[PT_SEQS + 1];
    areal_par_ppo_mb whole;          /* the reference's one micro-batch */
    areal_par_ppo_mb mbs[PT_MAX_MB]; /* this rank's micro-batches */
    int64_t mb_cu[PT_MAX_MB][PT_SEQS + 1];
    areal_par_ppo ref, par; /* the reference's loss, the layout's */
} pt_grpo;

/* A fixed value in [-1, 1) of token t, for the logprobs' offsets. */
static inline float pt_grpo_unit(const char *what, int t) {
    return pt_hash_unit(what, (size_t)t);
}

/*
 * Makes the GRPO data of batch b from the one-process model ref (its
 * weights before the step): one forward for the recomputed logprobs, then
 * AReaL's advantages. *g must outlive both losses (opts borrow its config).
 */
static inline int pt_grpo_prepare(pt_grpo *g, areal_model *ref, const pt_batch *b, areal_error *e) {
    memset(g, 0, sizeof *g);
    int rc = areal_rl_config_parse(PT_GRPO_CFG, sizeof PT_GRPO_CFG - 1, "grpo test", &g->cfg, e);
    if (rc != AREAL_OK)
        return rc;
    float temp = (float)g->cfg.actor.temperature;
    areal_batch whole = {
        .tokens = b->tokens, .cu_seqlens = b->cu, .n_tokens = b->T, .n_seqs = PT_SEQS};
    areal_acts a;
    rc = areal_model_forward(ref, &whole, &a, e);
    if (rc != AREAL_OK)
        return rc;
    float *cur = g->cur, behav[256], rewards[PT_SEQS];
    uint8_t gen[256];
    areal_token_logprobs(NULL, a.logits, b->T, ref->cfg.vocab_size, b->targets, temp, cur, NULL);
    areal_acts_free(&a);
    for (int s = 0; s <= PT_SEQS; s++)
        g->cu[s] = b->cu[s];
    for (int s = 0; s < PT_SEQS; s++) {
        rewards[s] = (float)((s * 5 + 3) % 7 > 2); /* 1,0,1,1 / 0,0,1,1 */
        for (int t = b->cu[s]; t < b->cu[s + 1]; t++) {
            int pos = t - b->cu[s];
            /* every 7th token far below the policy: ratios above c_clip (dual clip) */
            float off = 0.4f * pt_grpo_unit("prox", t) - (t % 7 == 3 ? 1.3f : 0.0f);
            g->prox[t] = b->targets[t] >= 0 ? cur[t] + off : 0.0f;
            gen[t] = pos >= PT_PROMPT;
            /* rollout convention: token t's logprob, the recomputed one of position t - 1 */
            behav[t] = pos > 0 ? g->prox[t - 1] - 0.15f * (1.0f + pt_grpo_unit("behav", t)) : 0.0f;
        }
    }
    areal_rl_adv_input in = {PT_SEQS, g->cu, gen, behav, g->prox, NULL, rewards, NULL};
    areal_rl_adv_output out = {g->adv, g->mask, g->old, NULL, NULL, NULL};
    rc = areal_rl_compute_advantages(&g->cfg.actor, &in, &out, NULL, e);
    if (rc != AREAL_OK)
        return rc;
    g->opts = areal_ppo_loss_opts_from(&g->cfg.actor);
    g->whole = (areal_par_ppo_mb){b->targets, g->prox, g->old, g->adv, g->mask, g->cu, PT_SEQS};
    return areal_par_ppo_init(&g->ref, &g->whole, 1, &g->opts, temp, NULL, e);
}

/* The layout's loss over its micro-batches mbs[0..n) of b, the valid count summed over data. */
static inline int pt_grpo_layout(pt_grpo *g, const pt_batch *b, const pt_mb *mbs, int n,
                                 areal_coll *data, areal_error *e) {
    for (int i = 0; i < n; i++) {
        int t0 = mbs[i].tok0;
        for (int s = 0; s <= mbs[i].b.n_seqs; s++)
            g->mb_cu[i][s] = mbs[i].cu[s];
        g->mbs[i] = (areal_par_ppo_mb){b->targets + t0, g->prox + t0, g->old + t0,    g->adv + t0,
                                       g->mask + t0,    g->mb_cu[i],  mbs[i].b.n_seqs};
    }
    return areal_par_ppo_init(&g->par, g->mbs, n, &g->opts, (float)g->cfg.actor.temperature, data,
                              e);
}

static inline void pt_grpo_free(pt_grpo *g) {
    areal_rl_config_free(&g->cfg);
}

#endif
