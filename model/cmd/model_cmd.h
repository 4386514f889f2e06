/*
 * model_cmd.h - shared pieces of the `areal-model` program (score and
 * generate on the CPU model): options, the JSONL request reader and the
 * two commands. Internal to model/cmd/.
 */
#ifndef AREAL_MODEL_CMD_H
#define AREAL_MODEL_CMD_H

#include <stdint.h>
#include <stdio.h>

#include "areal/model/generate.h"
#include "areal/model/tokenizer.h"

#define MC_MAX_STOP 64

typedef struct mc_opts {
    const char *model, *input;
    int threads;
    float temperature, top_p;
    int top_k, max_new_tokens;
    uint64_t seed;
    int32_t stop[MC_MAX_STOP];
    int n_stop;
} mc_opts;

/* One request line: token ids (from "input_ids", or "text" through the tokenizer). */
typedef struct mc_request {
    int32_t *ids;
    int n;
} mc_request;

/*
 * Reads the JSONL file `path` ("-": stdin): each non-empty line an object
 * with "input_ids" (array of ints) or "text" (needs tok). *reqs is a new
 * array of *n (free with mc_requests_free). Returns 0, or 1 after printing
 * the line number and what is wrong to stderr.
 */
int mc_read_requests(const char *path, const areal_tokenizer *tok, mc_request **reqs, int *n);
void mc_requests_free(mc_request *reqs, int n);

/* The commands: print one JSON line per request to out; return the exit code. */
int mc_score(areal_model *m, const mc_opts *o, const mc_request *reqs, int n, FILE *out);
int mc_generate(areal_model *m, const areal_tokenizer *tok, const mc_opts *o,
                const mc_request *reqs, int n, FILE *out);

#endif
