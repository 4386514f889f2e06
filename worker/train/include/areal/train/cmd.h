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

/*
 * Whether `train` argv (argv[0] = "train") runs in a job's pod that holds
 * several trainer ranks (AREAL_POD_RANKS > 1, WORLD_SIZE set) while this
 * process is none of them yet (RANK unset) and no flag says otherwise
 * (--rank/--world/--master and their --dp-* names, --help, --version): then
 * the caller starts one process per rank with RANK set (the pod launcher),
 * each running `train` as given (areal/train/pod_rank.h).
 */
bool areal_cmd_train_wants_ranks(int argc, char **argv);

/* Runs the command argv[0]. */
int areal_cmd_train_run(int argc, char **argv, FILE *out, FILE *err);

#endif
