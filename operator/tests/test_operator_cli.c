/*
 * test_operator_cli.c - areal-operator's command line ($AREAL_BIN/
 * areal-operator as a child process): --help and --version, and one escaped
 * error line with exit 2 for bad flags and a kubeconfig that cannot be read,
 * all before any connection is made.
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
    cli_check_help_version(bin, NULL, "areal-operator");
}

static void bad_flags_are_one_escaped_line(void **state) {
    (void)state;
    const char *p = "areal-operator: ";
    cli_expect_error(2, p, "--qps 'fast'", bin, "--qps", "fast", NULL);
    cli_expect_error(2, p, "--burst '0'", bin, "--burst", "0", NULL);
    cli_expect_error(2, p, "--workers '17'", bin, "--workers", "17", NULL);
    cli_expect_error(2, p, "--metrics-address '127.0.0.1'", bin, "--metrics-address", "127.0.0.1",
                     NULL);
    cli_expect_error(2, p, "'127.0.0.1:99999'", bin, "--metrics-address", "127.0.0.1:99999", NULL);
    cli_expect_error(2, p, "unknown or incomplete option '--leader\\nelect'", bin,
                     "--leader\nelect", NULL);
    cli_expect_error(2, p, "'--kubeconfig'", bin, "--kubeconfig", NULL);
    cli_expect_error(2, p, "no/such\\tkubeconfig", bin, "--kubeconfig", "no/such\tkubeconfig",
                     NULL);
}

int main(void) {
    cli_bin("areal-operator", bin, sizeof bin);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(help_and_version),
        cmocka_unit_test(bad_flags_are_one_escaped_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
