/*
 * cmd_internal.h - pieces shared by the model commands (cmd_*.c): number
 * parsing, opening the model directory and its tokenizer, the JSONL request
 * reader and JSON output. Internal to model/src. Every helper that can fail
 * prints one line naming the command, the field and the fix to `err` and
 * returns the exit code (1 or 2) the command should give.
 */
#ifndef AREAL_MODEL_CMD_INTERNAL_H
#define AREAL_MODEL_CMD_INTERNAL_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "areal/model/chat.h"
#include "areal/model/model.h"
#include "areal/model/tokenizer.h"

#define CMD_PROG "areal-worker"

/* 0 when s is a whole number in [lo, hi] (*v set), else -1. */
int cmd_num(const char *s, double lo, double hi, double *v);

/* Exit code of a library failure: 1 for AREAL_ENOMEM, 2 (bad input) otherwise. */
int cmd_code(int rc);

/*
 * Loads DIR/tokenizer.json into *tok. When the file is absent: *tok NULL and
 * 0 unless `required` (then 2 naming the file). Returns 0, 1 or 2.
 */
int cmd_tokenizer(const char *cmd, const char *dir, int required, areal_tokenizer **tok, FILE *err);

/*
 * Creates a pool of `threads` (none for 1) and loads the model of `dir`.
 * Returns 0 (free with areal_model_free, then areal_pool_destroy), 1 or 2;
 * on failure nothing is left to free.
 */
int cmd_model(const char *cmd, const char *dir, int threads, areal_model *m, areal_pool **pool,
              FILE *err);

/*
 * The chat template for --chat: FILE (--chat-template) when given, else the
 * model directory's (chat.h), else plain ChatML when `dir` has none (or is a
 * tokenizer.json file). Returns 0, or 2 after printing why it cannot render.
 */
int cmd_chat_template(const char *cmd, const char *dir, const char *file, areal_chat_template *t,
                      FILE *err);

/* One request: token ids (owned), or the error that line got (owned; ids NULL). */
typedef struct cmd_request {
    int32_t *ids;
    int n;
    char *error;
} cmd_request;

/*
 * Reads the JSONL file `path` ("-": stdin): each non-empty line an object
 * with "input_ids" (array of ids in [0, vocab)) or "text" (needs tok). *reqs
 * is a new array of *n (free with cmd_requests_free). A bad line does not
 * stop the others: its request holds the message (also printed to err), so
 * the command prints {"error": ...} in its place and every other result.
 * Returns 0, 1 (out of memory) or 2 (unreadable file, no requests).
 */
int cmd_read_requests(const char *cmd, const char *path, const areal_tokenizer *tok, int vocab,
                      cmd_request **reqs, int *n, FILE *err);
void cmd_requests_free(cmd_request *reqs, int n);

/* cmd_read_requests from an open stream (not closed); `name` goes into messages. */
int cmd_read_requests_f(const char *cmd, FILE *f, const char *name, const areal_tokenizer *tok,
                        int vocab, cmd_request **reqs, int *n, FILE *err);

json_t *cmd_floats(const float *v, int n);
json_t *cmd_ints(const int32_t *v, int n);

/* A JSON string of n bytes; bytes that are not valid UTF-8 become U+FFFD. */
json_t *cmd_text(const char *s, size_t n);

/* Prints {"error": msg} for a request that failed. Returns 0 or 1. */
int cmd_print_error(FILE *out, const char *msg);

/* Prints o as one compact line and drops the reference. Returns 0 or 1 (out of memory). */
int cmd_print(FILE *out, json_t *o);

#endif
