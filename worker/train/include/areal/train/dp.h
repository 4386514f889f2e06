/*
 * dp.h - data-parallel trainer ranks in the job loop (AReaL's FSDP data
 * parallelism, areal.md 4.1 / 4.3). Rank 0 of the `dp` group runs the job
 * loop (train_loop.h: rollout controller, evaluation, weight sync,
 * checkpoints, HTTP); every other rank runs areal_train_follow. Per step
 * rank 0 splits the batch over the ranks keeping each group whole (rl-core's
 * areal_split_groups_dp: equal group counts, balanced tokens) and sends each
 * follower its share over the group; every rank then runs the same
 * training step (trainer.h), whose token-level loss is normalised by the
 * valid tokens of all ranks and whose gradients are averaged over the group,
 * so the ranks' weights stay equal and equal a one-rank step on the whole
 * batch. At the start rank 0 broadcasts its weights, AdamW state, version
 * and step (a resumed checkpoint reaches every rank); at the end it sends
 * "stop".
 */
#ifndef AREAL_TRAIN_DP_H
#define AREAL_TRAIN_DP_H

#include "areal/comm/comm.h"
#include "areal/error.h"
#include "areal/train/train_loop.h"
#include "areal/train/trainer.h"

/*
 * Joins the trainer's data-parallel world: rank `rank` of `size`, the
 * rendezvous store at host:port (hosted by rank 0, which listens there),
 * every rank listening on bind_host (NULL: every address) and dialled at
 * advertise (NULL: this host's name). *comm and *dp are the caller's
 * (areal_pg_destroy, then areal_comm_destroy). Returns 0, or the comm
 * runtime's error naming the store or the missing rank.
 */
int areal_train_dp_join(int rank, int size, const char *host, int port, const char *bind_host,
                        const char *advertise, int timeout_ms, areal_comm **comm, areal_pg **dp,
                        areal_error *err);

/*
 * Rank 0: splits groups g[0..n) (G samples each) over dp, sends every other
 * rank its share (those groups are freed here) and compacts this rank's
 * share to g[0..*n_mine). Returns 0, AREAL_EINVAL (n not a multiple of the
 * group size, named), or the send's error.
 */
int areal_train_dp_scatter(areal_pg *dp, areal_group *g, int n, int G, int *n_mine,
                           areal_error *err);

/* Rank 0: tells every follower the job is over. Best effort; returns the first error. */
int areal_train_dp_stop(areal_pg *dp, areal_error *err);

/*
 * Every rank: rank 0's weights, AdamW moments, adam step, version and step to all. Under a
 * layout (t->par): version and step, and after a resume (rank 0's t->resume_dir, its form
 * t->resume_fmt) every rank loads its own part of that checkpoint (trainer_par_ckpt.h: the
 * sharded form from any layout, or the gathered one tensor by tensor), a failure on any
 * rank failing all of them; dp may then be NULL (a layout of one rank).
 */
int areal_train_dp_sync_state(areal_pg *dp, areal_trainer *t, areal_error *err);

/*
 * Rank 0 under a layout: tells the followers to join, then gathers the whole
 * state - parameters, AdamW moments (whole-model buffer order, n_params
 * floats each, nullable: gathered and dropped) and the AdamW step - tensor by
 * tensor. For tests and diagnostics only: checkpoints are per rank
 * (areal_train_dp_save_shards) and hold no whole copy. AREAL_EINVAL without a
 * layout; the send's or the gather's error.
 */
int areal_train_dp_gather_state(areal_pg *dp, areal_trainer *t, float *params, float *m, float *v,
                                long *adam_step, areal_error *err);

/*
 * Rank 0 under a layout: tells the followers to write their shards into dir
 * (an existing directory every rank sees, e.g. areal_ckpt_begin's shards/),
 * and writes its own (trainer_par_ckpt.h); returns once every shard and the
 * index exist. AREAL_EINVAL without a layout; the send's or the save's error.
 */
int areal_train_dp_save_shards(areal_pg *dp, areal_trainer *t, const char *dir, areal_error *err);

/*
 * Rank 0: the policy as a HF model directory dst (hf_save.h; model_dir's
 * small files). Under a layout the followers are told to join and the whole
 * tensors are gathered one at a time and streamed into the file
 * (areal_train_par_hf_save: bounded memory, no whole copy); otherwise rank
 * 0's whole model is written. Errors as areal_hf_save's, the send's or the
 * gather's.
 */
int areal_train_dp_hf_save(areal_pg *dp, areal_trainer *t, const char *model_dir, const char *dst,
                           areal_error *err);

/*
 * Rank 0 of a layout whose per-step gather is deferred (trainer.h's
 * defer_gather): when t->whole_stale, every rank joins the parameters' gather
 * (the followers told by a command) so rank 0's model is the whole policy
 * again - before an HF save, a checkpoint, a catch-up or the gathered
 * fallback. A no-op otherwise.
 */
int areal_train_dp_whole(areal_pg *dp, areal_trainer *t, areal_error *err);

/* Rank 0: tells every follower to take part in a shard-direct update (xccl_shard.h), msg
 * (n bytes, at most 4096) its message. */
int areal_train_dp_wsync_post(areal_pg *dp, const void *msg, size_t n, areal_error *err);

/*
 * Ranks > 0: the follower loop of job (model_dir, cfg, total_steps, threads,
 * layout are used) over dp until rank 0 says stop. Returns 0, or the first error of
 * the model, a step or the group (a rank 0 that died: the group's timeout).
 * *steps_done (nullable) receives the steps taken.
 */
int areal_train_follow(const areal_train_job *job, long total_steps, areal_pg *dp, long *steps_done,
                       areal_error *err);

/*
 * One training step on the batch g[0..n): with dp of two or more ranks,
 * scatter (above; under a layout over its data slices, every rank of a slice
 * getting that slice's share) then areal_trainer_step on this rank's share, *st holding
 * the whole batch's reward, length, staleness and sizes; without, just
 * areal_trainer_step. Every group of g is freed or kept for the caller to
 * free (free all n).
 */
int areal_train_dp_step(areal_trainer *t, areal_pg *dp, areal_group *g, int n, int G,
                        areal_step_stats *st, areal_error *err);

/*
 * Statistics of the whole batch g[0..n) at policy `version` into st
 * (reward_mean, resp_len_mean, staleness, max_staleness, n_seqs,
 * n_tokens): what rank 0 reports for a step of which it trained a share.
 */
void areal_train_batch_stats(const areal_group *g, int n, long version, areal_step_stats *st);

#endif
