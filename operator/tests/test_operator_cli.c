/*
 * test_operator_cli.c - areal-operator's command line ($AREAL_BIN/
 * areal-operator as a child process): --help and --version, and one escaped
 * error line with exit 2 for bad flags; a kubeconfig that cannot be read is a
 * log record (JSON, or text with AREAL_LOG_FORMAT=text), all before any
 * connection is made. The secure-metrics flags: --metrics-cert-dir without
 * --metrics-secure, a bad --health-probe-address, and a cert dir without the
 * files or with a key of another certificate, each refused with the file named.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* the same two lines the openssl CLI writes for `req -x509` pairs: made here by the
 * library under test would prove nothing about a mounted Secret, so use openssl(1) */
static int openssl_pair(const char *dir, const char *cn) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
             "-subj /CN=%s -keyout %s/tls.key -out %s/tls.crt >/dev/null 2>&1",
             cn, dir, dir);
    return system(cmd);
}

static void secure_metrics_flags(void **state) {
    (void)state;
    const char *p = "areal-operator: ";
    cli_expect_error(2, p, "--metrics-cert-dir needs --metrics-secure", bin, "--metrics-cert-dir",
                     "/x", NULL);
    cli_expect_error(2, p, "--health-probe-address ':8081'", bin, "--health-probe-address", ":8081",
                     NULL);
    /* past the flags (a kubeconfig that is never dialled): the files are read and checked */
    char dir[] = "/tmp/areal-opcli-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char kc[600], other[600], ca[600], text[2000];
    snprintf(ca, sizeof ca, "%s/ca", dir);
    mkdir(ca, 0700);
    if (openssl_pair(ca, "ca") != 0) { /* openssl(1) comes with the kube group; say so */
        print_message("openssl(1) is missing: the cert-dir cases are skipped\n");
        rmdir(ca);
        rmdir(dir);
        return;
    }
    snprintf(kc, sizeof kc, "%s/kubeconfig", dir);
    snprintf(text, sizeof text,
             "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
             "    server: https://127.0.0.1:1\n    certificate-authority: %s/tls.crt\n"
             "users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n"
             "  context:\n    cluster: c\n    user: u\ncurrent-context: x\n",
             ca);
    write_file(kc, text);
    setenv("AREAL_LOG_FORMAT", "text", 1);
    cli_expect_error(2, "20", "tls.crt", bin, "--kubeconfig", kc, "--metrics-secure",
                     "--metrics-address", "127.0.0.1:0", "--metrics-cert-dir", dir, NULL);
    assert_int_equal(openssl_pair(dir, "a"), 0);
    snprintf(other, sizeof other, "%s/b", dir);
    mkdir(other, 0700);
    assert_int_equal(openssl_pair(other, "b"), 0);
    char from[700], to[700];
    snprintf(from, sizeof from, "%s/tls.key", other);
    snprintf(to, sizeof to, "%s/tls.key", dir);
    assert_int_equal(rename(from, to), 0); /* the key of another certificate */
    cli_expect_error(2, "20", "does not belong to the certificate", bin, "--kubeconfig", kc,
                     "--metrics-secure", "--metrics-address", "127.0.0.1:0", "--metrics-cert-dir",
                     dir, NULL);
    snprintf(from, sizeof from, "%s/tls.crt", other);
    unlink(from);
    rmdir(other);
    for (int i = 0; i < 2; i++) {
        snprintf(from, sizeof from, "%s/%s", ca, i ? "tls.key" : "tls.crt");
        unlink(from);
    }
    rmdir(ca);
    unsetenv("AREAL_LOG_FORMAT");
    char path[700];
    const char *files[] = {"kubeconfig", "tls.crt", "tls.key"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

int main(void) {
    cli_bin("areal-operator", bin, sizeof bin);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(help_and_version),
        cmocka_unit_test(bad_flags_are_one_escaped_line),
        cmocka_unit_test(secure_metrics_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
