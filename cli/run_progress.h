/*
 * run_progress.h - what `arealctl run JOB.yaml` shows of a training run: it
 * reads the trainer's progress lines (JSONL, one per step; see
 * worker/train/include/areal/train/train_loop.h), draws one progress bar on
 * a terminal (step/total, reward, held-out accuracy, tokens/s, ETA) or
 * prints a plain line every few steps otherwise, and at the end writes the
 * reward curve as an SVG picture (reward per step, accuracy at each
 * evaluation).
 */
#ifndef AREAL_CLI_RUN_PROGRESS_H
#define AREAL_CLI_RUN_PROGRESS_H

#include <stdbool.h>
#include <stdio.h>

typedef struct run_progress {
    long total_steps;
    bool tty;
    FILE *out;
    double t0;
    long step;
    double reward, acc, tokens_per_s;
    bool have_acc;
    double first_acc;
    bool have_first_acc;
    /* the curve */
    double *reward_at;  /* [total_steps + 1] */
    double *acc_at;     /* NAN where not evaluated */
    long n;             /* points filled: steps 0..n-1 */
    char partial[4096]; /* a line not yet ended */
    size_t n_partial;
} run_progress;

/* Returns 0 or -1 (out of memory). */
int run_progress_init(run_progress *p, long total_steps, FILE *out, bool tty);
void run_progress_free(run_progress *p);

/* Feeds bytes of the trainer's stdout (any split); complete lines are shown. */
void run_progress_feed(run_progress *p, const char *data, size_t n);

/* Ends the bar line (a newline on a terminal). */
void run_progress_end(run_progress *p);

/* Writes the SVG of the curve to path; 0 or -1. */
int run_progress_svg(const run_progress *p, const char *path, const char *title);

#endif
