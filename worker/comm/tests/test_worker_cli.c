/*
 * test_worker_cli.c - areal-worker's command line as a user meets it ($AREAL_BIN/
 * areal-worker as a child process): --help and --version, and one escaped
 * error line with exit 2 for bad usage. The model commands' own options are
 * tested in model/tests (test_cmd_tokenize.c, test_model_cmds.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cli_check.h"

static char bin[512];

static void help_and_version(void **state) {
    (void)state;
    cli_check_help_version(bin, NULL, "areal-worker");
    cli_check_help_version(bin, "serve", "areal-worker serve");
    cli_check_help_version(bin, "tiny", "areal-worker tiny");
    cli_check_help_version(bin, "train", "areal-worker train");
}

static void bad_usage_is_one_escaped_line(void **state) {
    (void)state;
    cli_expect_error(2, "areal-worker: ", "unknown argument '--selftset'", bin, "--selftset", NULL);
    cli_expect_error(2, "areal-worker: ", "'--x\\n\\x1b'", bin, "--x\n\x1b", NULL);
    cli_expect_error(2, "areal-worker: ", "--hold-ms", bin, "--hold-ms", "soon", NULL);
    cli_expect_error(2, "areal-worker: ", "missing after '--hold-ms'", bin, "--hold-ms", NULL);
    /* a model command that does not exist is an unknown argument, named */
    cli_expect_error(2, "areal-worker: ", "'tokenise'", bin, "tokenise", NULL);
    cli_expect_error(2, "areal-worker serve: ", "'1\\n2'", bin, "serve", "--port", "1\n2", NULL);
    cli_expect_error(2, "areal-worker tiny: ", "'--x\\n'", bin, "tiny", "--x\n", NULL);
    cli_expect_error(2, "areal-worker train: ", "'--x\\n'", bin, "train", "--x\n", NULL);
}

int main(void) {
    cli_bin("areal-worker", bin, sizeof bin);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(help_and_version),
        cmocka_unit_test(bad_usage_is_one_escaped_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
