/*
 * version.h - the one version of the project's programs, and the exit-status
 * convention that every program's --help states.
 *
 * The version comes from the VERSION file at the top of the tree (the
 * Makefile passes it to version.c alone, so a new version rebuilds one
 * object). `PROG --version` prints "PROG VERSION" as one line on stdout.
 */
#ifndef AREAL_VERSION_H
#define AREAL_VERSION_H

#include <stdio.h>

/* The exit codes of every program and subcommand. */
enum { AREAL_EXIT_OK = 0, AREAL_EXIT_FAILURE = 1, AREAL_EXIT_USAGE = 2 };

/* The closing lines of every --help text. */
#define AREAL_EXIT_HELP                                                                            \
    "exit status: 0 success, 1 a failure while running, 2 bad input or usage\n"                    \
    "(an error is one line on stderr; control bytes of the input are escaped)\n"

/* The version string, e.g. "0.1.0"; never NULL. */
const char *areal_version(void);

/* Prints "PROG VERSION\n" to `out` and returns AREAL_EXIT_OK. */
int areal_print_version(FILE *out, const char *prog);

#endif
