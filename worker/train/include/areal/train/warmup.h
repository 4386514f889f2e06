/*
 * warmup.h - the supervised warm-up of the tiny model on the synthetic task
 * and its held-out accuracy.
 *
 * RL from a random init gets no reward signal at all (no sample is ever
 * right), so the demo first trains briefly with cross-entropy on the answer
 * tokens (prompt positions are not trained), deliberately stopping early so
 * that RL starts from a policy that is sometimes right: measured on the
 * default task (two-digit addition) 300 steps of 32 problems give ~29 %
 * held-out accuracy, 1000 steps ~86 %.
 *
 * Accuracy is exact match under greedy decoding: the answer's digits then
 * the end-of-text token, nothing else.
 */
#ifndef AREAL_TRAIN_WARMUP_H
#define AREAL_TRAIN_WARMUP_H

#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/model/model.h"
#include "areal/model/tokenizer.h"
#include "areal/train/synth.h"

typedef struct areal_warmup_cfg {
    int steps;     /* optimizer steps */
    int batch;     /* problems per step, 1..1024 */
    double lr;     /* AdamW, constant; weight decay 0.01, clip 1.0 */
    uint64_t seed; /* which problems each step draws */
} areal_warmup_cfg;

/* The problem's prompt ids and answer ids (digits then eos), into caller arrays. */
typedef struct areal_synth_tokens {
    int32_t prompt[24];
    int n_prompt;
    int32_t answer[24];
    int n_answer;
} areal_synth_tokens;

/* Encodes an item with tok; eos ends the answer. Returns 0 or AREAL_EINVAL (too long). */
int areal_synth_encode(const areal_tokenizer *tok, int32_t eos, const areal_synth_item *it,
                       areal_synth_tokens *out, areal_error *err);

/*
 * Trains m on cfg->steps batches drawn from train[0..n). *final_loss
 * (nullable) receives the last step's mean cross-entropy. Returns 0,
 * AREAL_EINVAL or AREAL_ENOMEM.
 */
int areal_warmup_run(areal_model *m, const areal_tokenizer *tok, const areal_synth_item *train,
                     size_t n, const areal_warmup_cfg *cfg, double *final_loss, areal_error *err);

/*
 * Greedy exact-match accuracy of m on items[0..n) (batched generation).
 * Returns 0 and *acc in [0, 1], or AREAL_EINVAL / AREAL_ENOMEM.
 */
int areal_synth_accuracy(areal_model *m, const areal_tokenizer *tok, const areal_synth_item *items,
                         size_t n, double *acc, areal_error *err);

#endif
