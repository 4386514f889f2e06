/*
 * dataset.h - RL prompt datasets: JSONL files with GSM8K's fields
 * ({"question": ..., "answer": "... #### 42"}), the prompt built from a
 * template, and a loader that walks the dataset in a deterministic order by
 * seed and epoch, with a position (epoch, index) small enough to store in a
 * checkpoint and restore exactly.
 *
 * Bad lines (not JSON, not an object, a missing or non-string field, an answer
 * without a usable gold value) are skipped, counted and listed with their
 * 1-based line numbers, never fatal: a file with no good line is an error.
 * Chat templates belong to the tokenizer (model/), so the prompt here is the
 * user message text; AReaL's GSM8K recipe appends the \boxed{} instruction.
 */
#ifndef AREAL_RL_DATASET_H
#define AREAL_RL_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"

/* AReaL's GSM8K prompt (areal/dataset/gsm8k.py): the question, then this. */
#define AREAL_RL_GSM8K_TEMPLATE "{question}\nPlease put your final answer within \\boxed{}."

typedef struct areal_rl_sample {
    char *question; /* the question field */
    char *answer;   /* the whole answer field (reasoning + "#### N") */
    char *gold;     /* the gold answer: text after the last "####", trimmed */
    char *prompt;   /* the template with {question} replaced */
    long line;      /* 1-based line number in the file */
} areal_rl_sample;

/* At most this many bad line numbers are kept (the count is exact). */
#define AREAL_RL_BAD_LINES_MAX 64

typedef struct areal_rl_dataset {
    areal_rl_sample *items;
    size_t n;
    size_t n_bad;                           /* bad lines skipped */
    long bad_lines[AREAL_RL_BAD_LINES_MAX]; /* the first of them */
    char bad_first_reason[256];             /* why the first bad line was bad */
} areal_rl_dataset;

/*
 * Parses JSONL `text` (blank lines ignored). `prompt_template` contains
 * "{question}" (NULL: AREAL_RL_GSM8K_TEMPLATE). `source` names the input.
 * On success *out is a new dataset (free with areal_rl_dataset_free).
 * Returns AREAL_EINVAL when no line is good or the template lacks
 * {question}, AREAL_ENOMEM.
 */
int areal_rl_dataset_parse(const char *text, size_t len, const char *source,
                           const char *prompt_template, areal_rl_dataset **out, areal_error *err);

/* As areal_rl_dataset_parse on a file; AREAL_EIO when unreadable. */
int areal_rl_dataset_load(const char *path, const char *prompt_template, areal_rl_dataset **out,
                          areal_error *err);

/*
 * Writes one sentence about the skipped lines into buf ("3 bad lines skipped
 * in F: 4, 9, 12 (line 4: not JSON: ...)"), or "" when there were none.
 */
void areal_rl_dataset_report(const areal_rl_dataset *d, const char *source, char *buf, size_t cap);

void areal_rl_dataset_free(areal_rl_dataset *d);

/*
 * The GSM8K gold answer of an answer field: the text after the last "####",
 * trimmed, thousands separators removed ("1,234" -> "1234"). Without "####"
 * the whole field, trimmed. Returns the length written (< cap, NUL ended) or
 * -1 when empty or it does not fit.
 */
int areal_rl_gsm8k_gold(const char *answer, size_t len, char *out, size_t cap);

/*
 * The loader: batches of dataset indices, epoch after epoch. With shuffle,
 * epoch e is a Fisher-Yates permutation drawn from splitmix64(seed, e), the
 * same on every machine (not torch's RandomSampler stream: AReaL's exact
 * order is not reproducible outside torch). drop_last as AReaL: an epoch has
 * n / batch_size batches and the tail is skipped.
 */
typedef struct areal_rl_loader {
    size_t n;          /* dataset size */
    size_t batch_size; /* >= 1, <= n */
    uint64_t seed;
    bool shuffle;
    long epoch;   /* current epoch, from 0 */
    size_t index; /* next batch within the epoch, from 0 */
    size_t *perm; /* [n], the order of the current epoch */
} areal_rl_loader;

/* Initialises at (epoch 0, index 0). AREAL_EINVAL if batch_size is 0 or > n. */
int areal_rl_loader_init(areal_rl_loader *l, size_t n, size_t batch_size, uint64_t seed,
                         bool shuffle, areal_error *err);

/* Batches per epoch: n / batch_size. */
size_t areal_rl_loader_steps_per_epoch(const areal_rl_loader *l);

/*
 * Writes the next batch_size dataset indices into out and advances; when the
 * epoch is exhausted it first moves to the next one. *epoch_out / *index_out
 * (nullable) receive the batch's own position.
 */
void areal_rl_loader_next(areal_rl_loader *l, size_t *out, long *epoch_out, size_t *index_out);

/*
 * Moves to position (epoch, index): the batch that next() returns next.
 * AREAL_ERANGE when epoch < 0 or index > steps_per_epoch.
 */
int areal_rl_loader_seek(areal_rl_loader *l, long epoch, size_t index, areal_error *err);

void areal_rl_loader_free(areal_rl_loader *l);

#endif
