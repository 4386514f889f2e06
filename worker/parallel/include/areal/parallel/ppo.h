/*
 * ppo.h - the GRPO step's loss on a pipeline's last stage: worker/rl's
 * decoupled PPO actor loss (areal/rl/loss.h) as an areal_par_loss_fn, with
 * AReaL's token-level aggregation across micro-batches and data-parallel
 * ranks.
 *
 * AReaL's engine scales micro-batch mb's loss (its valid tokens' sum over
 * n_valid_mb) by n_valid_mb / n_valid_global * dp_size and then averages the
 * gradients over dp. The gradients here are summed over dp
 * (areal_par_dp_reduce_grads, ZeRO-1's reduce-scatter: dp.h), so the scale
 * is taken with dp_size 1: the same sum(token losses) / n_valid_global,
 * without multiplying by dp only to divide by it again. The losses summed
 * over micro-batches and dp ranks are then that global token mean, which is
 * what one process reports on the whole batch as one micro-batch.
 * n_valid counts the loss mask before rejection sampling, as AReaL's does.
 */
#ifndef AREAL_PARALLEL_PPO_H
#define AREAL_PARALLEL_PPO_H

#include <stdint.h>

#include "areal/comm/coll.h"
#include "areal/error.h"
#include "areal/model/pool.h"
#include "areal/parallel/vocab.h"
#include "areal/rl/loss.h"

/* One micro-batch's GRPO data, all [T] in the training convention (borrowed). */
typedef struct areal_par_ppo_mb {
    const int32_t *targets;    /* token t + 1 of the sequence, < 0 at its last position */
    const float *prox;         /* pi_prox: logprobs recomputed before the step */
    const float *behav;        /* pi_behave: the rollout's ("old") logprobs */
    const float *adv;          /* advantages (GRPO: group-normalised rewards) */
    const float *mask;         /* loss mask (response tokens) */
    const int64_t *cu_seqlens; /* [n_seqs + 1] from 0 (sequence-level options read it) */
    int n_seqs;
} areal_par_ppo_mb;

/* The loss's context on one rank. */
typedef struct areal_par_ppo {
    const areal_par_ppo_mb *mbs; /* [n_mb] this rank's micro-batches, borrowed */
    int n_mb;
    areal_ppo_loss_opts opts; /* opts.scale is set per micro-batch */
    float temperature;        /* the logprobs' softmax temperature (actor.temperature) */
    long n_valid_global;      /* areal_par_ppo_count */
    areal_pool *pool;         /* nullable */
    areal_par_vocab vocab;    /* a vocab-parallel shard's split (tp NULL: whole rows; Vl unused) */
    areal_ppo_loss_stats stats; /* summed over the micro-batches this rank computed */
} areal_par_ppo;

/*
 * Sets up c over mbs[0..n_mb) (borrowed) with opts (its rejection config
 * borrowed too) and sums the loss mask's count over them and over `dp`
 * (NULL: one data rank) into c->n_valid_global. AREAL_EINVAL for n_mb < 1
 * or temperature <= 0; the collective's error.
 */
int areal_par_ppo_init(areal_par_ppo *c, const areal_par_ppo_mb *mbs, int n_mb,
                       const areal_ppo_loss_opts *opts, float temperature, areal_coll *dp,
                       areal_error *err);

/*
 * The areal_par_loss_fn of the GRPO step (ctx: an areal_par_ppo): logprobs
 * of micro-batch mb's targets from logits [T, V] (V: the rank's columns
 * when c->vocab.tp is set, areal/parallel/vocab.h), the decoupled PPO loss
 * scaled by n_valid_mb / n_valid_global added to *loss, its gradient chained
 * into dlogits [T, V]; c->stats accumulates. AREAL_EINVAL when mb is out of
 * range, or the loss's error (a non-finite input, bad options);
 * AREAL_ENOMEM.
 */
int areal_par_ppo_loss(void *ctx, int mb, const float *logits, int T, int V, float *dlogits,
                       double *loss, areal_error *err);

#endif
