/* cli_check.c - see cli_check.h. */
#include "cli_check.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "child.h"

static char out_buf[1 << 16], err_buf[1 << 14];

void cli_bin(const char *name, char *out, unsigned cap) {
    const char *dir = getenv("AREAL_BIN") ? getenv("AREAL_BIN") : "build/rel";
    snprintf(out, cap, "%s/%s", dir, name);
}

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void read_version(char *out, size_t cap) {
    FILE *f = fopen("VERSION", "r");
    assert_non_null(f); /* the tests run from the top of the tree */
    assert_non_null(fgets(out, (int)cap, f));
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
}

static int run(const char *bin, const char *sub, const char *flag, int *status) {
    const char *argv[4] = {bin, sub ? sub : flag, sub ? flag : NULL, NULL};
    return child_run(argv, status, out_buf, sizeof out_buf, err_buf, sizeof err_buf);
}

void cli_check_help_version(const char *bin, const char *sub, const char *prog) {
    int status;
    assert_int_equal(run(bin, sub, "--help", &status), 0);
    if (status != 0 || strncmp(out_buf, "usage: ", 7) != 0 || err_buf[0] != '\0' ||
        strstr(out_buf, "exit status: 0 success, 1 ") == NULL ||
        strstr(out_buf, "2 bad input or usage") == NULL)
        fail_msg("%s %s --help: exit %d, stdout:\n%s\nstderr:\n%s", bin, sub ? sub : "", status,
                 out_buf, err_buf);
    if (sub != NULL && strstr(out_buf, sub) == NULL)
        fail_msg("%s %s --help does not name the subcommand:\n%s", bin, sub, out_buf);
    assert_int_equal(run(bin, sub, "--version", &status), 0);
    char version[64], want[128];
    read_version(version, sizeof version);
    snprintf(want, sizeof want, "%s %s\n", prog, version);
    if (status != 0 || strcmp(out_buf, want) != 0 || err_buf[0] != '\0')
        fail_msg("%s %s --version: exit %d, stdout '%s' (want '%s'), stderr '%s'", bin,
                 sub ? sub : "", status, out_buf, want, err_buf);
}

const char *cli_expect_error(int code, const char *prefix, const char *needle, const char *bin,
                             ...) {
    const char *argv[32] = {bin};
    int n = 1;
    va_list ap;
    va_start(ap, bin);
    const char *a;
    while (n < 31 && (a = va_arg(ap, const char *)) != NULL)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    int status;
    assert_int_equal(child_run(argv, &status, out_buf, sizeof out_buf, err_buf, sizeof err_buf), 0);
    if (status != code || lines(err_buf) != 1 || strncmp(err_buf, prefix, strlen(prefix)) != 0 ||
        strstr(err_buf, needle) == NULL)
        fail_msg("%s %s: expected exit %d and one line '%s...%s'; got exit %d, stderr:\n%s", bin,
                 argv[1] ? argv[1] : "", code, prefix, needle, status, err_buf);
    return err_buf;
}
