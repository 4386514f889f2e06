/*
 * cmd.h - the trainer's commands of `areal-worker`, as library functions
 * (like the model core's areal/model/cmd.h): each takes its own argv
 * (argv[0] = the command name), writes to out / err, returns the exit code
 * (0 done, 1 failed while running, 2 bad usage or input) and never exits.
 *
 *   tiny  --out DIR [--warmup-steps N] [--seed S] [--max-operand M]
 *         creates the project's tiny model (tiny.h) in DIR, warmed up on the
 *         synthetic task's train split, and prints its held-out accuracy.
 *   train --model DIR --job-dir DIR --servers HOST:PORT[,...] [--steps N]
 *         [--batch B] [--group G] [--eta K] [--lr X] [--eval-every N]
 *         [--eval-n N (0: the whole held-out split)] [--ckpt-every N] [--seed S]
 *         [--max-operand M]
 *         [--resume] [--quiet]
 *         the trainer role (train_loop.h) against rollout servers; SIGTERM
 *         or SIGINT stops after the step in hand with a checkpoint. Progress
 *         lines (JSONL) go to out, log lines to err.
 */
#ifndef AREAL_TRAIN_CMD_H
#define AREAL_TRAIN_CMD_H

#include <stdbool.h>
#include <stdio.h>

/* Whether `name` is one of these commands. */
bool areal_cmd_is_train(const char *name);

/* Runs the command argv[0]. */
int areal_cmd_train_run(int argc, char **argv, FILE *out, FILE *err);

#endif
