/*
 * step_cp.h - private to step.c / step_cp.c: context parallelism inside the
 * step (see step.h). The step cuts each whole micro-batch into this rank's
 * shard for the length of one call, gathers the per-token data it needs to
 * the shard's tokens, and puts per-token results back in micro-batch order.
 */
#ifndef AREAL_PARALLEL_STEP_CP_H
#define AREAL_PARALLEL_STEP_CP_H

#include "areal/parallel/step.h"

/* Whether s runs context parallel (a cp group of 2+). */
int areal_par_step_cp_on(const areal_par_step *s);

/*
 * The shards of mbs[0..n_mb) into s->cp (the attention hook's list) and
 * *run, the batches the model runs (n_mb, owned; end frees both).
 * AREAL_EINVAL (a shard with no token: cp.h's message), AREAL_ENOMEM.
 */
int areal_par_step_cp_begin(areal_par_step *s, const areal_batch *mbs, int n_mb, areal_batch **run,
                            areal_error *err);
void areal_par_step_cp_end(areal_par_step *s, areal_batch *run);

/* The GRPO data of the whole micro-batches pm gathered to the shards' tokens (one sequence). */
typedef struct areal_par_step_cp_ppo {
    areal_par_ppo_mb *mbs; /* [n_mb] */
    void *buf;             /* owns mbs and their arrays */
} areal_par_step_cp_ppo;

/* AREAL_ENOMEM. During a call (after begin). */
int areal_par_step_cp_ppo_make(const areal_par_step *s, const areal_par_ppo_mb *pm, int n_mb,
                               areal_par_step_cp_ppo *out, areal_error *err);
void areal_par_step_cp_ppo_free(areal_par_step_cp_ppo *p);

/* Targets gathered to the shards' tokens and zeroed logprob buffers of their length. */
typedef struct areal_par_step_cp_lp {
    const int32_t **targets; /* [n_mb] */
    float **logp;            /* [n_mb] */
    void *buf;
} areal_par_step_cp_lp;

int areal_par_step_cp_lp_make(const areal_par_step *s, const int32_t *const *targets, int n_mb,
                              areal_par_step_cp_lp *out, areal_error *err);

/*
 * The shards' logprobs put back in micro-batch order into logp[i] (whole
 * micro-batch mbs[i]'s n_tokens): each cp rank writes its tokens into a
 * zeroed row and one all-reduce over cp completes it (exact: the shards are
 * disjoint). Frees lp. The collective's error.
 */
int areal_par_step_cp_lp_finish(const areal_par_step *s, const areal_batch *mbs, int n_mb,
                                areal_par_step_cp_lp *lp, float *const *logp, areal_error *err);

#endif
