/*
 * cli_check.h - test helper: the conventions every program of the project
 * keeps (README "Command-line conventions"), checked on a real child process:
 * `--help` prints a usage on stdout that states the exit codes and exits 0;
 * `--version` prints one line "PROG VERSION" (VERSION as in the file at the
 * top of the tree) and exits 0; an error is exactly one line on stderr with
 * the expected exit code.
 */
#ifndef AREAL_TEST_CLI_CHECK_H
#define AREAL_TEST_CLI_CHECK_H

/* $AREAL_BIN/NAME (default build/rel/NAME) into out. */
void cli_bin(const char *name, char *out, unsigned cap);

/*
 * Runs `bin [sub] --help` and `bin [sub] --version` (sub may be NULL) and
 * fails the test unless both keep the conventions; `prog` is the name the
 * version line starts with.
 */
void cli_check_help_version(const char *bin, const char *sub, const char *prog);

/*
 * Runs bin with the NULL-terminated arguments; fails unless it exits `code`
 * with exactly one stderr line that starts with `prefix` and contains
 * `needle`. Returns that line (static storage, valid until the next call).
 */
const char *cli_expect_error(int code, const char *prefix, const char *needle, const char *bin,
                             ...);

#endif
