/*
 * test_operator_cli.c - areal-operator's command line ($AREAL_BIN/
 * areal-operator as a child process): --help and --version, and one escaped
 * error line with exit 2 for bad flags; a kubeconfig that cannot be read is a
 * log record (JSON, or text with AREAL_LOG_FORMAT=text), all before any
 * connection is made.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

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
    /* past the flags every message is a log record: one JSON line, the path escaped */
    setenv("AREAL_LOG_FORMAT", "json", 1);
    const char *line = cli_expect_error(2, "{\"ts\":\"", "no/such\\tkubeconfig", bin,
                                        "--kubeconfig", "no/such\tkubeconfig", NULL);
    json_error_t je;
    json_t *j = json_loads(line, 0, &je);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "level")), "error");
    assert_string_equal(json_string_value(json_object_get(j, "component")), "operator");
    assert_non_null(strstr(json_string_value(json_object_get(j, "msg")), "no/such\tkubeconfig"));
    json_decref(j);
    setenv("AREAL_LOG_FORMAT", "text", 1);
    cli_expect_error(2, "20", " ERROR operator: ", bin, "--kubeconfig", "no/such\tkubeconfig",
                     NULL);
    unsetenv("AREAL_LOG_FORMAT");
}

int main(void) {
    cli_bin("areal-operator", bin, sizeof bin);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(help_and_version),
        cmocka_unit_test(bad_flags_are_one_escaped_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
