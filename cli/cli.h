/*
 * cli.h - arealctl's subcommands and their shared pieces.
 *
 * Exit codes of every subcommand: 0 success, 1 an internal failure (out of
 * memory), 2 bad input - a usage error, an allocation string that does not
 * parse, a layout the cluster cannot hold, a malformed cluster file. Every
 * error is exactly one "arealctl: ..." line on stderr (areal_print_line
 * escapes the control bytes of the input it quotes).
 */
#ifndef AREAL_CLI_H
#define AREAL_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "areal/cluster.h"
#include "areal/placement.h"

enum { CLI_OK = 0, CLI_FAILURE = 1, CLI_BAD_INPUT = 2 };

/* Prints one "arealctl: ..." line on stderr and returns CLI_BAD_INPUT. */
int cli_bad_input(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints one "arealctl: ..." line on stderr and returns CLI_FAILURE. */
int cli_failure(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* `arealctl plan ...`; argv[0] is "plan". */
int cmd_plan(int argc, char **argv);

/* `arealctl run ...`; argv[0] is "run"; `self` is arealctl's own path (argv[0]). */
int cmd_run(int argc, char **argv, const char *self);

/*
 * `arealctl run JOB.yaml [--resume] [--job-dir DIR] [--timeout S]`: the
 * AReaLJob manifest run as local processes (run_job.c). timeout 0: none.
 */
int cmd_run_job(const char *path, bool resume, const char *job_dir, long timeout, const char *self);

/*
 * The embedded default inventory used when no --cluster is given: two leaf
 * switches of four nodes with `gpus` GPUs each in one zone, two GPUs in use.
 */
int default_cluster(areal_cluster *c, int gpus, areal_error *err);

/* What plan_print_* show about one rank; role < 0 = no rank section. */
typedef struct plan_view {
    const char *job_name;
    const char *alloc_text;
    const areal_alloc *alloc;
    const areal_cluster *cluster;
    const areal_plan *plan;
    int rank_role;
    int rank;
} plan_view;

/* `plan --model`: the memory plan's inputs (plan_mem.c). */
typedef struct plan_mem_args {
    const char *model;   /* config.json or a model directory; NULL: no memory table */
    long long gpu_bytes; /* --gpu-memory, 0: no check */
    long mb_tokens, seq_len, n_mb;
} plan_mem_args;

/*
 * Prints the MEMORY table of the training roles; CLI_BAD_INPUT (one line on
 * stderr) when the model cannot be read or split so, or a role does not fit
 * gpu_bytes (naming the dimension to grow).
 */
int plan_memory(FILE *out, const areal_plan *plan, const plan_mem_args *a);

/* Human-readable tables. */
void plan_print_text(FILE *out, const plan_view *v);

/* The JSON document (see README "arealctl plan --json"); CLI_OK or CLI_FAILURE. */
int plan_print_json(FILE *out, const plan_view *v);

#endif
