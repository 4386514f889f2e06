/*
 * pack.c - micro-batch packing (AReaL's _ffd_allocate, areal/utils/
 * seqpack.py) and the split of a batch over DP ranks by whole groups.
 * AReaL keeps its micro-batches in a list sorted by (load, id) and bisects;
 * here a linear scan over the micro-batches finds the same one (their
 * number is small), so the assignment is identical, ties included.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "areal/rl/pack.h"

typedef struct {
    int64_t len;
    int idx;
} item;

/* decreasing length, then increasing index: a stable argsort(-values) */
static int by_len_desc(const void *a, const void *b) {
    const item *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return x->idx - y->idx;
}

int areal_pack_ffd(const int64_t *lens, int n, int64_t max_tokens, int min_mbs, int *mb_of,
                   int *n_mbs, areal_error *err) {
    *n_mbs = 0;
    if (n < 1)
        return areal_error_set(err, AREAL_EINVAL, -1, "nothing to pack: %d sequences", n);
    if (min_mbs < 1)
        min_mbs = 1;
    if (n < min_mbs)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%d sequences cannot fill %d micro-batches (mb_spec.n_mbs); "
                               "lower n_mbs",
                               n, min_mbs);
    for (int i = 0; i < n; i++) {
        if (lens[i] < 0)
            return areal_error_set(err, AREAL_EINVAL, -1, "sequence %d has length %lld", i,
                                   (long long)lens[i]);
        if (max_tokens > 0 && lens[i] > max_tokens)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "sequence %d has %lld tokens, more than "
                                   "mb_spec.max_tokens_per_mb = %lld; raise max_tokens_per_mb "
                                   "or lower gconfig.max_new_tokens",
                                   i, (long long)lens[i], (long long)max_tokens);
    }
    item *it = malloc(sizeof(item) * (size_t)n);
    int64_t *load = malloc(sizeof(int64_t) * (size_t)n);
    int *count = malloc(sizeof(int) * (size_t)n);
    if (it == NULL || load == NULL || count == NULL) {
        free(it);
        free(load);
        free(count);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for packing");
    }
    for (int i = 0; i < n; i++)
        it[i] = (item){lens[i], i};
    qsort(it, (size_t)n, sizeof *it, by_len_desc);
    int g = 0;
    for (int k = 0; k < n; k++) {
        int64_t v = it[k].len;
        /* the least-loaded micro-batch (ties: lowest id), as group_values[0] */
        int least = -1;
        for (int j = 0; j < g; j++)
            if (least < 0 || load[j] < load[least])
                least = j;
        bool fits = least >= 0 && (max_tokens <= 0 || load[least] + v <= max_tokens);
        if (g < min_mbs || !fits) {
            load[g] = v;
            count[g] = 1;
            mb_of[it[k].idx] = g;
            g++;
            continue;
        }
        /* among those it fits in, the fewest sequences; ties: the first in
         * (load, id) order */
        int best = -1;
        for (int j = 0; j < g; j++) {
            if (max_tokens > 0 && load[j] + v > max_tokens)
                continue;
            if (best < 0 || count[j] < count[best] ||
                (count[j] == count[best] &&
                 (load[j] < load[best] || (load[j] == load[best] && j < best))))
                best = j;
        }
        load[best] += v;
        count[best]++;
        mb_of[it[k].idx] = best;
    }
    *n_mbs = g;
    free(it);
    free(load);
    free(count);
    return AREAL_OK;
}

int areal_split_groups_dp(const int64_t *lens, int n_seqs, int group_size, int dp_size,
                          int *rank_of, areal_error *err) {
    if (group_size < 1 || dp_size < 1)
        return areal_error_set(err, AREAL_EINVAL, -1, "group size %d and DP size %d must be >= 1",
                               group_size, dp_size);
    if (n_seqs < 1 || n_seqs % group_size != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%d sequences are not whole groups of %d (gconfig.n_samples)",
                               n_seqs, group_size);
    int n_groups = n_seqs / group_size;
    if (n_groups % dp_size != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%d groups do not split evenly over %d data-parallel ranks; make "
                               "train_dataset.batch_size a multiple of %d",
                               n_groups, dp_size, dp_size);
    int per_rank = n_groups / dp_size;
    item *it = malloc(sizeof(item) * (size_t)n_groups);
    int64_t *load = calloc((size_t)dp_size, sizeof(int64_t));
    int *count = calloc((size_t)dp_size, sizeof(int));
    if (it == NULL || load == NULL || count == NULL) {
        free(it);
        free(load);
        free(count);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for the DP split");
    }
    for (int gi = 0; gi < n_groups; gi++) {
        int64_t t = 0;
        for (int k = 0; k < group_size; k++)
            t += lens[gi * group_size + k];
        it[gi] = (item){t, gi};
    }
    qsort(it, (size_t)n_groups, sizeof *it, by_len_desc);
    for (int k = 0; k < n_groups; k++) {
        int best = -1;
        for (int r = 0; r < dp_size; r++) {
            if (count[r] >= per_rank)
                continue;
            if (best < 0 || load[r] < load[best])
                best = r;
        }
        load[best] += it[k].len;
        count[best]++;
        for (int j = 0; j < group_size; j++)
            rank_of[it[k].idx * group_size + j] = best;
    }
    free(it);
    free(load);
    free(count);
    return AREAL_OK;
}
