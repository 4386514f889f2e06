/*
 * vocab.h - log-probabilities, entropy and cross-entropy of logits split by
 * vocabulary over a tp group (Megatron's vocab-parallel cross-entropy),
 * never gathering a full row: each rank holds columns [v0, v0 + Vl) of
 * every row.
 *
 * Per row, with z = logits / temperature: the maximum is all-reduced (MAX)
 * over tp, then in one all-reduce (SUM) of 3 floats a row: sum exp(z - m),
 * the target's z (only the rank that owns the target adds it) and
 * sum exp(z - m) * z (for the entropy); lse = m + log S, logp = z_y - lse,
 * entropy = lse - sum p z. The backward needs no gradient exchange: each
 * rank writes its own columns of
 *   d/dz_j = dlogp ([j == y] - p_j) - dentropy p_j (log p_j + entropy)
 * times 1/temperature, as heads.c does on a whole row; it recomputes the
 * row statistics (two more all-reduces, T floats and 3T floats) rather than
 * keep them between the calls, as heads.c recomputes its lse. Every tp rank must
 * call with the same rows in the same order (the collectives pair up).
 * The per-rank sums are in double, the cross-rank sum in fp32 (the comm
 * runtime carries no f64): a relative error of ~1e-7 in S.
 */
#ifndef AREAL_PARALLEL_VOCAB_H
#define AREAL_PARALLEL_VOCAB_H

#include <stdint.h>

#include "areal/comm/coll.h"
#include "areal/error.h"

/* The vocabulary split of one rank (tp NULL: whole rows, v0 0, Vl = V). */
typedef struct areal_par_vocab {
    areal_coll *tp; /* borrowed */
    int v0, Vl;     /* this rank's first column and its count */
} areal_par_vocab;

/*
 * logp[T] (target < 0: 0) and entropy[T] (nullable) of rows logits [T, Vl]
 * at `temperature` (> 0). AREAL_ENOMEM or the collective's error.
 */
int areal_par_vocab_logprobs(const areal_par_vocab *v, const float *logits, int T,
                             const int32_t *targets, float temperature, float *logp, float *entropy,
                             areal_error *err);

/* dlogits [T, Vl] of a loss in (logp, entropy); recomputes the row statistics (see above). */
int areal_par_vocab_logprobs_backward(const areal_par_vocab *v, const float *logits, int T,
                                      const int32_t *targets, float temperature, const float *dlogp,
                                      const float *dentropy, float *dlogits, areal_error *err);

/*
 * *loss = mean cross-entropy over the rows with targets >= 0 (temperature 1;
 * 0 when there are none; the count is local to these rows), its gradient
 * into dlogits [T, Vl] (nullable). AREAL_ENOMEM or the collective's error.
 */
int areal_par_vocab_cross_entropy(const areal_par_vocab *v, const float *logits, int T,
                                  const int32_t *targets, double *loss, float *dlogits,
                                  areal_error *err);

#endif
