/*
 * cmd.h - the model commands of `areal-worker`: tokenize, score and generate
 * on the CPU model, as library functions so any program can offer them.
 *
 * Each takes the command's own argv (argv[0] is the command name, options
 * follow), writes results to `out` and one error line to `err`, and returns
 * the process exit code: 0 done, 1 a failure while running (out of memory),
 * 2 bad usage or bad input (unknown flag, missing model directory, a bad JSON
 * line, a token id outside the vocabulary). They never exit the process and
 * keep no state between calls, so two threads may run commands at once.
 * Rejected: one program per command (areal-model, areal-tokenize), which
 * duplicated the option handling of the worker and gave two entry points.
 */
#ifndef AREAL_MODEL_CMD_H
#define AREAL_MODEL_CMD_H

#include <stdbool.h>
#include <stdio.h>

/*
 * tokenize --model DIR (--text TEXT | --file PATH) [--chat ROLE
 * [--chat-template FILE]] [--decode]: prints the ids of TEXT under
 * DIR/tokenizer.json (DIR may also be the tokenizer.json file) as one JSON
 * array line; --chat ROLE wraps TEXT as one message of ROLE with the
 * assistant generation prompt, rendered by the model's chat template
 * (areal/model/chat.h; FILE overrides it; ChatML when there is none);
 * --decode reads TEXT as a JSON array of ids and prints the text (ids past
 * the tokenizer skipped, invalid UTF-8 replaced as Python does).
 */
int areal_cmd_tokenize(int argc, char **argv, FILE *out, FILE *err);

/*
 * score --model DIR --input FILE [--top N] [--temperature T] [--threads N]:
 * FILE ("-": stdin) is JSONL, {"input_ids": [...]} (or {"text": "..."} with
 * a tokenizer.json) per line; prints per line {"logprobs": [log p(ids[i] |
 * ids[..i)) for i >= 1], "entropy": [...], "top_ids": [...], "top_logits":
 * [...]}, the last two the N (default 5) largest raw logits at the final
 * position, largest first. A bad line prints {"error": ...} in its place,
 * every other line is scored, and the command exits 2.
 */
int areal_cmd_score(int argc, char **argv, FILE *out, FILE *err);

/*
 * generate --model DIR (--prompt TEXT [--chat [--chat-template FILE]
 *          [--no-thinking]] | --input FILE) [--max-new-tokens N] [--greedy |
 *          --temperature T --top-p P --top-k K --seed S] [--stop ID,...]
 *          [--sample-padding] [--threads N] [--json]:
 * --prompt is encoded with DIR/tokenizer.json (--chat wraps it as a user
 * message in the model's chat template) and the generated text is printed,
 * or with --json one line {"text", "ids", "logprobs", "finish_reason"}.
 * --input runs every JSONL request of FILE in one batch and always prints
 * JSON lines (a bad line prints {"error"} and the command exits 2 after all
 * the others). Sampling and stop ids default to DIR/generation_config.json
 * (greedy without it; stop at <|im_end|> and <|endoftext|> with --prompt).
 * Ids past the tokenizer (padding rows) are masked unless --sample-padding.
 */
int areal_cmd_generate(int argc, char **argv, FILE *out, FILE *err);

/* True when `name` is one of the commands above. */
bool areal_cmd_is_model(const char *name);

/* Runs the command argv[0] (one of the above); 2 with a usage line otherwise. */
int areal_cmd_run(int argc, char **argv, FILE *out, FILE *err);

#endif
