/*
 * test_e2e_cli.c - the command lines of the e2e suite's two programs,
 * areal-e2e-nodes and areal-e2e-kubelet ($AREAL_BIN, as child processes):
 * --help and --version, one escaped error line with exit 2 for bad usage, and
 * exit 1 (one line) for an inventory that does not parse.
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

#include "cli_check.h"

static char nodes[512], kubelet[512];

static void help_and_version(void **state) {
    (void)state;
    cli_check_help_version(nodes, NULL, "areal-e2e-nodes");
    cli_check_help_version(kubelet, NULL, "areal-e2e-kubelet");
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
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(help_and_version),
        cmocka_unit_test(nodes_errors),
        cmocka_unit_test(kubelet_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
