/*
 * child.h - test helper: run a program as a child process and capture its
 * exit status, stdout and stderr (what a user of a command-line tool sees).
 */
#ifndef AREAL_TEST_CHILD_H
#define AREAL_TEST_CHILD_H

#include <stdarg.h>
#include <stddef.h>

/*
 * Runs argv[0] with the NULL-terminated `argv`, waits for it, and copies up to
 * cap - 1 bytes of its stdout and stderr into `out` and `err` (NUL-terminated).
 * `*status` is the exit code, or 128 + the signal that ended it (127 when it
 * could not be started). Returns 0, or -1 when no child could be made.
 */
int child_run(const char *const *argv, int *status, char *out, size_t out_cap, char *err,
              size_t err_cap);

/*
 * child_run with argv = {bin, first, the rest of `ap` up to a NULL} (at most 30
 * arguments).
 */
int child_run_va(const char *bin, const char *first, va_list ap, int *status, char *out,
                 size_t out_cap, char *err, size_t err_cap);

#endif
