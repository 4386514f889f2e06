/*
 * test_e2e_cli.c - the command lines of the e2e suite's two programs,
 * areal-e2e-nodes and areal-e2e-kubelet ($AREAL_BIN, as child processes):
 * --help and --version, one escaped error line with exit 2 for bad usage, and
 * exit 1 (one line) for an inventory that does not parse; and
 * areal-e2e-logcheck, which names every log line that is not a JSON record.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "child.h"
#include "cli_check.h"

static char nodes[512], kubelet[512], logcheck[512];

/* A new temporary file holding `text`; its path in path (cap >= 32). */
static void temp_file(char *path, const char *text) {
    strcpy(path, "/tmp/areal-e2e-cli-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static void help_and_version(void **state) {
    (void)state;
    cli_check_help_version(nodes, NULL, "areal-e2e-nodes");
    cli_check_help_version(kubelet, NULL, "areal-e2e-kubelet");
    cli_check_help_version(logcheck, NULL, "areal-e2e-logcheck");
}

/* areal-e2e-logcheck: records pass; each line that is not one is named. */
static void logcheck_names_bad_lines(void **state) {
    (void)state;
    char good[64], bad[64];
    temp_file(good, "{\"ts\":\"t\",\"level\":\"info\",\"msg\":\"pods \\\"x\\\" exists\"}\n"
                    "{\"level\":\"error\",\"component\":\"c\",\"msg\":\"\",\"job\":null}\n");
    temp_file(bad, "{\"level\":\"info\",\"msg\":\"ok\"}\n"
                   "{\"level\":\"info\",\"msg\":\"pods \"x\" exists\"}\n"
                   "{\"level\":\"info\",\"msg\":\"\xff\"}\n"
                   "{\"level\":\"loud\",\"msg\":\"m\"}\n"
                   "{\"msg\":\"m\"}\n"
                   "[1]\n"
                   "plain text\n");
    char out[4096], err[1024];
    int status;
    const char *ok_argv[] = {logcheck, good, NULL};
    assert_int_equal(child_run(ok_argv, &status, out, sizeof out, err, sizeof err), 0);
    assert_int_equal(status, 0);
    assert_string_equal(out, "");
    const char *bad_argv[] = {logcheck, good, bad, NULL};
    assert_int_equal(child_run(bad_argv, &status, out, sizeof out, err, sizeof err), 0);
    assert_int_equal(status, 1);
    int lines = 0;
    for (const char *c = out; *c; c++)
        lines += *c == '\n';
    if (lines != 6)
        fail_msg("expected 6 bad lines, got:\n%s", out);
    char want[128];
    for (int no = 2; no <= 7; no++) {
        snprintf(want, sizeof want, "%s:%d: ", bad, no);
        assert_non_null(strstr(out, want));
    }
    snprintf(want, sizeof want, "%s:1: ", bad);
    assert_null(strstr(out, want));
    assert_non_null(strstr(out, "\"level\" is not debug"));
    assert_non_null(strstr(out, "no string \"level\""));
    cli_expect_error(2, "areal-e2e-logcheck: ", "'/no/such\\nlog'", logcheck, "/no/such\nlog",
                     NULL);
    cli_expect_error(2, "areal-e2e-logcheck: ", "FILE", logcheck, NULL);
    unlink(good);
    unlink(bad);
}

static void nodes_errors(void **state) {
    (void)state;
    const char *p = "areal-e2e-nodes: ";
    cli_expect_error(2, p, "INVENTORY file is required", nodes, NULL);
    cli_expect_error(2, p, "not 'yaml\\n'", nodes, "--format", "yaml\n", "x.yaml", NULL);
    cli_expect_error(2, p, "'0'", nodes, "--gpus-per-node", "0", "x.yaml", NULL);
    cli_expect_error(2, p, "unknown option '--bogus'", nodes, "--bogus", "x.yaml", NULL);
    cli_expect_error(2, p, "unexpected 'b\\x01'", nodes, "a", "b\x01", NULL);
    char path[] = "/tmp/areal-e2e-cli-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *bad = "nodes:\n  - name: a\n    gpuz: 8\n";
    assert_int_equal(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
    close(fd);
    cli_expect_error(1, p, "gpuz", nodes, path, NULL);
    unlink(path);
}

static void kubelet_errors(void **state) {
    (void)state;
    const char *p = "areal-e2e-kubelet: ";
    cli_expect_error(2, p, "missing '--kubeconfig'", kubelet, NULL);
    cli_expect_error(2, p, "'--state-dir'", kubelet, "--kubeconfig", "k", NULL);
    cli_expect_error(2, p, "unknown or incomplete option '--node\\rs'", kubelet, "--node\rs", NULL);
    cli_expect_error(2, p, "unexpected argument 'extra'", kubelet, "--kubeconfig", "k",
                     "--state-dir", "s", "--nodes-file", "n", "extra", NULL);
    cli_expect_error(2, p, "--image", kubelet, "--image", "no-equals-sign", NULL);
}

int main(void) {
    cli_bin("areal-e2e-nodes", nodes, sizeof nodes);
    cli_bin("areal-e2e-kubelet", kubelet, sizeof kubelet);
    cli_bin("areal-e2e-logcheck", logcheck, sizeof logcheck);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(help_and_version),
        cmocka_unit_test(nodes_errors),
        cmocka_unit_test(kubelet_errors),
        cmocka_unit_test(logcheck_names_bad_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
