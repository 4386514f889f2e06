/*
 * pack.h - how a training batch is cut: micro-batches of packed sequences
 * bounded by mb_spec.max_tokens_per_mb (AReaL's ffd_allocate,
 * areal/utils/seqpack.py), and the split of a batch over data-parallel ranks
 * that keeps every GRPO group (G consecutive sequences) on one rank, as
 * AReaL's controller dispatches groups atomically.
 */
#ifndef AREAL_RL_PACK_H
#define AREAL_RL_PACK_H

#include <stdint.h>

#include "areal/error.h"

/*
 * AReaL's first-fit-decreasing: sequences by decreasing length (ties by
 * index); a new micro-batch while there are fewer than min_mbs or the
 * least-loaded one cannot take the sequence, else into the micro-batch with
 * the fewest sequences among those it fits in. mb_of[i] receives the
 * micro-batch of sequence i (0-based, numbered in creation order);
 * *n_mbs the count. max_tokens <= 0 means unbounded (then min_mbs
 * micro-batches, balanced by the same rule). Returns AREAL_OK, or
 * AREAL_EINVAL naming a sequence longer than max_tokens or min_mbs > n.
 */
int areal_pack_ffd(const int64_t *lens, int n, int64_t max_tokens, int min_mbs, int *mb_of,
                   int *n_mbs, areal_error *err);

/*
 * Splits n_seqs sequences (groups of group_size consecutive ones) over
 * dp_size ranks: every rank gets the same number of groups (n_seqs /
 * group_size must be a multiple of dp_size), and groups go largest (in
 * tokens) first to the rank with the fewest tokens so far (ties: lowest
 * rank). rank_of[i] receives the rank of sequence i. Returns AREAL_OK or
 * AREAL_EINVAL (sizes that do not divide, with the numbers and the fix).
 */
int areal_split_groups_dp(const int64_t *lens, int n_seqs, int group_size, int dp_size,
                          int *rank_of, areal_error *err);

#endif
