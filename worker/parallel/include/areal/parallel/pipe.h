/*
 * pipe.h - the pipeline schedule: one optimizer step's forward and backward
 * over m micro-batches on the stages of a pp group, in Megatron's 1F1B
 * order (stage s runs min(p - s - 1, m) warm-up forwards, then one forward
 * and one backward in turn, then the remaining backwards), so at most p - s
 * micro-batches' activations are alive on stage s.
 *
 * Stage s receives micro-batch i's hidden states [T_i, H] from stage s - 1,
 * sends its own to s + 1, and backward the other way. Where a forward's send
 * and a backward's receive go to the same neighbour back to back (the steady
 * state), the lower stage sends first and the higher receives first, so
 * blocking transfers larger than the transport's buffers cannot deadlock.
 * The last stage hands each micro-batch's logits to the caller's loss, which
 * writes dlogits. Parameter gradients accumulate in m->grads over the
 * micro-batches (zero them before); the tied embedding's copies are then
 * summed by areal_par_reduce_tied_embed.
 */
#ifndef AREAL_PARALLEL_PIPE_H
#define AREAL_PARALLEL_PIPE_H

#include "areal/comm/coll.h"
#include "areal/error.h"
#include "areal/model/model.h"

/*
 * The loss of micro-batch `mb` on the last stage: reads logits [T, V],
 * writes dlogits [T, V] (d loss / d logits) and adds the micro-batch's loss
 * (V: the shard's vocabulary columns, areal_model_shard_vocab; a
 * vocab-parallel shard's loss reduces over tp, areal/parallel/vocab.h)
 * to *loss. Returns AREAL_OK or an error code with err set.
 */
typedef int (*areal_par_loss_fn)(void *ctx, int mb, const float *logits, int T, int V,
                                 float *dlogits, double *loss, areal_error *err);

/*
 * Runs the 1F1B forward and backward of mbs[0..n_mb) on this rank's stage
 * (member index in pp; pp NULL: one stage, every micro-batch forward then
 * backward). *loss (nullable) gets the summed loss on every stage (summed
 * over pp, the last stage's value). AREAL_EINVAL for n_mb < 1; a model's or
 * a collective's error (the pipeline's peers then fail on their deadline or
 * on the broken group).
 */
int areal_par_pipe_1f1b(areal_model *m, areal_coll *pp, const areal_batch *mbs, int n_mb,
                        areal_par_loss_fn loss_fn, void *loss_ctx, double *loss, areal_error *err);

/*
 * The forward-only schedule (no backward, no gradients): every stage runs
 * mbs[0..n_mb) in order, receiving each micro-batch's hidden states from
 * stage s - 1 and sending its own to s + 1, keeping no activations beyond
 * the micro-batch it runs; the last stage hands each micro-batch's logits
 * [T, V] to fn with dlogits NULL (fn must not write them; its *loss
 * argument is a scratch the schedule discards). For the proximal-logprob
 * recompute of a GRPO step: the caller shares what fn computed from the
 * last stage. Rejected: running the 1F1B schedule with a zero gradient (a
 * backward's cost and activations kept for nothing). AREAL_EINVAL for
 * n_mb < 1 or a model that is not pp's stage; a model's, fn's or a
 * collective's error.
 */
int areal_par_pipe_forward(areal_model *m, areal_coll *pp, const areal_batch *mbs, int n_mb,
                           areal_par_loss_fn fn, void *ctx, areal_error *err);

#endif
