/*
 * synth.h - the project's synthetic verifiable task: small integer
 * arithmetic ("37+45=" -> 82), every problem of a range enumerated, shuffled
 * by a seed and split into disjoint train and test sets, so held-out accuracy
 * measures generalisation and not recall.
 *
 * Problems are written as GSM8K-shaped JSONL ({"question": "37+45=",
 * "answer": "#### 82"}), so the trainer reads them with the same dataset
 * loader and scores them with the same math reward as GSM8K itself. The prompt
 * is the bare question: the tiny model has no chat training, and GSM8K's
 * "Please put your final answer within \boxed{}" suffix would only be noise.
 */
#ifndef AREAL_TRAIN_SYNTH_H
#define AREAL_TRAIN_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"

typedef struct areal_synth_cfg {
    int max_operand;      /* operands in [0, max_operand], 1..9999 */
    const char *ops;      /* any of "+-*"; "-" only where a >= b (answers stay >= 0) */
    double test_fraction; /* share of problems held out, (0, 1) */
    uint64_t seed;        /* shuffle */
} areal_synth_cfg;

typedef struct areal_synth_item {
    char question[32]; /* "37+45=" */
    long answer;
} areal_synth_item;

typedef struct areal_synth_split {
    areal_synth_item *train, *test; /* owned; one allocation behind both */
    size_t n_train, n_test;
} areal_synth_split;

/*
 * Enumerates and splits the problems of cfg. Returns 0, AREAL_EINVAL (naming
 * the bad field) or AREAL_ENOMEM; on failure *s is empty.
 */
int areal_synth_make(const areal_synth_cfg *cfg, areal_synth_split *s, areal_error *err);
void areal_synth_free(areal_synth_split *s);

/* Writes items as GSM8K JSONL at path. Returns 0 or AREAL_EIO. */
int areal_synth_write_jsonl(const char *path, const areal_synth_item *items, size_t n,
                            areal_error *err);

#endif
