/* test_kube_config.c - kubeconfig and in-cluster loading, base64, and the client's refusal of
 * unverified TLS. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "areal/kube/client.h"
#include "areal/kube/config.h"

#define CA_PEM "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
/* base64 of CA_PEM and of "KEYDATA\n" */
#define CA_B64                                                                                     \
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmYWtlCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"
#define KEY_B64 "S0VZREFUQQo="

typedef struct tmp {
    char dir[64];
    char files[8][256];
    int n;
} tmp;

static const char *put(tmp *t, const char *name, const char *text) {
    char *p = t->files[t->n++];
    char dir[sizeof t->dir];
    memcpy(dir, t->dir, sizeof dir);
    snprintf(p, 256, "%s/%s", dir, name);
    char *slash = strrchr(p, '/');
    if (slash != p + strlen(t->dir)) { /* a subdirectory */
        *slash = '\0';
        mkdir(p, 0700);
        *slash = '/';
    }
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return p;
}

static int setup(void **state) {
    tmp *t = calloc(1, sizeof *t);
    snprintf(t->dir, sizeof t->dir, "/tmp/kube-config-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    *state = t;
    return 0;
}

static int teardown(void **state) {
    tmp *t = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
    assert_int_equal(system(cmd), 0);
    free(t);
    return 0;
}

static const char KUBECONFIG[] = "apiVersion: v1\n"
                                 "kind: Config\n"
                                 "current-context: dev\n"
                                 "clusters:\n"
                                 "- name: c1\n"
                                 "  cluster:\n"
                                 "    server: https://10.1.2.3:6443/\n"
                                 "    certificate-authority-data: " CA_B64 "\n"
                                 "- name: c2\n"
                                 "  cluster:\n"
                                 "    server: https://prod.example:443\n"
                                 "    certificate-authority: pki/ca.crt\n"
                                 "contexts:\n"
                                 "- name: dev\n"
                                 "  context: {cluster: c1, user: u1, namespace: team-a}\n"
                                 "- name: prod\n"
                                 "  context: {cluster: c2, user: u2}\n"
                                 "- name: lost\n"
                                 "  context: {cluster: nowhere, user: u1}\n"
                                 "users:\n"
                                 "- name: u1\n"
                                 "  user:\n"
                                 "    token: abc.def\n"
                                 "- name: u2\n"
                                 "  user:\n"
                                 "    client-certificate: pki/client.crt\n"
                                 "    client-key-data: " KEY_B64 "\n"
                                 "    tokenFile: /abs/token\n";

static void kubeconfig_current_context(void **state) {
    tmp *t = *state;
    const char *path = put(t, "config", KUBECONFIG);
    kube_config cfg;
    kube_config_init(&cfg);
    kube_error e;
    assert_int_equal(kube_config_load_kubeconfig(&cfg, path, NULL, &e), KUBE_OK);
    assert_string_equal(cfg.server, "https://10.1.2.3:6443");
    assert_string_equal(cfg.ns, "team-a");
    assert_string_equal(cfg.token, "abc.def");
    assert_int_equal(cfg.ca_len, strlen(CA_PEM));
    assert_memory_equal(cfg.ca_pem, CA_PEM, cfg.ca_len);
    assert_null(cfg.cert_file);
    assert_int_equal(cfg.insecure_skip_verify, 0);
    assert_int_equal(cfg.qps, 5.0); /* defaults kept */
    kube_config_free(&cfg);
    assert_null(cfg.server);
}

static void kubeconfig_named_context_resolves_files(void **state) {
    tmp *t = *state;
    const char *path = put(t, "config", KUBECONFIG);
    kube_config cfg;
    kube_config_init(&cfg);
    kube_error e;
    assert_int_equal(kube_config_load_kubeconfig(&cfg, path, "prod", &e), KUBE_OK);
    char want[300];
    snprintf(want, sizeof want, "%s/pki/ca.crt", t->dir);
    assert_string_equal(cfg.ca_file, want);
    snprintf(want, sizeof want, "%s/pki/client.crt", t->dir);
    assert_string_equal(cfg.cert_file, want);
    assert_string_equal(cfg.key_pem, "KEYDATA\n");
    assert_int_equal(cfg.key_len, 8);
    assert_string_equal(cfg.token_file, "/abs/token");
    assert_null(cfg.ns);
    assert_null(cfg.ca_pem);
    kube_config_free(&cfg);
}

static void expect_refused(tmp *t, const char *text, const char *context, int code,
                           const char *needle) {
    const char *path = put(t, "bad", text);
    kube_config cfg;
    kube_config_init(&cfg);
    kube_error e;
    kube_error_clear(&e);
    assert_int_equal(kube_config_load_kubeconfig(&cfg, path, context, &e), code);
    if (strstr(e.msg, needle) == NULL)
        fail_msg("message '%s' lacks '%s'", e.msg, needle);
    assert_null(cfg.server); /* freed on failure */
    t->n--;
}

static void kubeconfig_errors_name_the_field(void **state) {
    tmp *t = *state;
    expect_refused(t, KUBECONFIG, "staging", KUBE_EINVAL, "no context named 'staging'");
    expect_refused(t, KUBECONFIG, "lost", KUBE_EINVAL, "no cluster named 'nowhere'");
    expect_refused(t, "clusters: []\n", NULL, KUBE_EINVAL, "no current-context");
    expect_refused(t, "- a\n- b\n", NULL, KUBE_EINVAL, "not a mapping");
    expect_refused(t, "a: [\n", NULL, KUBE_EINVAL, "kubeconfig");
    expect_refused(t,
                   "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                   "clusters: [{name: c, cluster: {server: 'https://h', "
                   "insecure-skip-tls-verify: true}}]\n",
                   NULL, KUBE_EINVAL, "always verifies TLS");
    expect_refused(t,
                   "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                   "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                   "users: [{name: u, user: {exec: {command: aws}}}]\n",
                   NULL, KUBE_EINVAL, "exec or auth-provider");
    expect_refused(t,
                   "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                   "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                   "users: [{name: u, user: {client-certificate: a.pem}}]\n",
                   NULL, KUBE_EINVAL, "without its key");
    expect_refused(t,
                   "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
                   "clusters: [{name: c, cluster: {server: 'https://h', "
                   "certificate-authority-data: 'not*base64'}}]\n",
                   NULL, KUBE_EINVAL, "cluster.certificate-authority-data is not base64");
    expect_refused(t,
                   "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
                   "clusters: [{name: c, cluster: {certificate-authority: ca}}]\n",
                   NULL, KUBE_EINVAL, "has no server");
    kube_config cfg;
    kube_config_init(&cfg);
    kube_error e;
    char missing[300];
    snprintf(missing, sizeof missing, "%s/does-not-exist", t->dir);
    assert_int_equal(kube_config_load_kubeconfig(&cfg, missing, NULL, &e), KUBE_EIO);
    assert_non_null(strstr(e.msg, "does-not-exist"));
}

static void insecure_only_when_allowed(void **state) {
    tmp *t = *state;
    const char *path = put(t, "config",
                           "current-context: x\n"
                           "contexts: [{name: x, context: {cluster: c}}]\n"
                           "clusters: [{name: c, cluster: {server: 'https://h', "
                           "insecure-skip-tls-verify: true}}]\n");
    kube_config cfg;
    kube_config_init(&cfg);
    cfg.allow_insecure = 1;
    assert_int_equal(kube_config_load_kubeconfig(&cfg, path, NULL, NULL), KUBE_OK);
    assert_int_equal(cfg.insecure_skip_verify, 1);
    /* the client refuses it again unless allowed */
    cfg.allow_insecure = 0;
    kube_error e;
    assert_null(kube_client_new(&cfg, &e));
    assert_non_null(strstr(e.msg, "without TLS verification"));
    cfg.allow_insecure = 1;
    kube_client *c = kube_client_new(&cfg, &e);
    assert_non_null(c);
    kube_client_free(c);
    kube_config_free(&cfg);
    kube_config_init(&cfg);
    assert_null(kube_client_new(&cfg, &e)); /* no server */
    assert_non_null(strstr(e.msg, "no server"));
    cfg.server = strdup("http://127.0.0.1:1");
    assert_null(kube_client_new(&cfg, &e));
    free(cfg.server);
    cfg.server = strdup("ftp://h");
    assert_null(kube_client_new(&cfg, &e));
    assert_non_null(strstr(e.msg, "https://"));
    kube_config_free(&cfg);
}

static void in_cluster_reads_the_service_account(void **state) {
    tmp *t = *state;
    put(t, "sa/token", "tok\n");
    put(t, "sa/ca.crt", CA_PEM);
    put(t, "sa/namespace", "areal-system\n");
    char sa[128];
    snprintf(sa, sizeof sa, "%s/sa", t->dir);
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    kube_config cfg;
    kube_config_init(&cfg);
    kube_error e;
    assert_int_equal(kube_config_in_cluster(&cfg, sa, &e), KUBE_OK);
    assert_string_equal(cfg.server, "https://10.96.0.1:443");
    assert_string_equal(cfg.ns, "areal-system");
    char want[300];
    snprintf(want, sizeof want, "%s/token", sa);
    assert_string_equal(cfg.token_file, want);
    assert_null(cfg.token); /* kept as a file, re-read on rotation */
    snprintf(want, sizeof want, "%s/ca.crt", sa);
    assert_string_equal(cfg.ca_file, want);
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    assert_int_equal(kube_config_in_cluster(&cfg, sa, &e), KUBE_OK);
    assert_string_equal(cfg.server, "https://[fd00::1]:443");
    kube_config_free(&cfg);
    /* a missing token: named */
    char nosa[128];
    snprintf(nosa, sizeof nosa, "%s/nosa", t->dir);
    assert_int_equal(kube_config_in_cluster(&cfg, nosa, &e), KUBE_EIO);
    assert_non_null(strstr(e.msg, "nosa/token"));
    assert_null(cfg.server);
    unsetenv("KUBERNETES_SERVICE_HOST");
    assert_int_equal(kube_config_in_cluster(&cfg, sa, &e), KUBE_EINVAL);
    assert_non_null(strstr(e.msg, "KUBERNETES_SERVICE_HOST"));
    unsetenv("KUBERNETES_SERVICE_PORT");
}

static void base64_vectors(void **state) {
    (void)state;
    const char *in[] = {
        "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy", "Zm9v\nYmFy", "Zm9vYg"};
    const char *out[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar", "foobar", "foob"};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        char *d = NULL;
        size_t n = 0;
        assert_int_equal(kube_base64_decode(in[i], "x", &d, &n, NULL), KUBE_OK);
        assert_int_equal(n, strlen(out[i]));
        assert_string_equal(d, out[i]);
        free(d);
    }
    const char *bad[] = {"Zm9v!", "Zg==Zg", "Z", "Zm9vY"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *d = NULL;
        size_t n = 0;
        kube_error e;
        assert_int_equal(kube_base64_decode(bad[i], "field.x", &d, &n, &e), KUBE_EINVAL);
        assert_null(d);
        assert_non_null(strstr(e.msg, "field.x"));
    }
}

static void error_helpers(void **state) {
    (void)state;
    const int codes[] = {KUBE_OK,         KUBE_EINVAL,  KUBE_ENOMEM,    KUBE_EIO,
                         KUBE_ETRANSPORT, KUBE_EHTTP,   KUBE_ECONFLICT, KUBE_ENOTFOUND,
                         KUBE_EGONE,      KUBE_EDECODE, KUBE_ETOOBIG,   KUBE_ESTOPPED};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        assert_string_not_equal(kube_strerror(codes[i]), "unknown error");
    assert_string_equal(kube_strerror(-999), "unknown error");
    assert_int_equal(kube_code_for_status(409), KUBE_ECONFLICT);
    assert_int_equal(kube_code_for_status(410), KUBE_EGONE);
    assert_int_equal(kube_code_for_status(404), KUBE_ENOTFOUND);
    assert_int_equal(kube_code_for_status(500), KUBE_EHTTP);
    kube_error e;
    assert_int_equal(kube_error_set(&e, KUBE_EINVAL, "x=%d", 3), KUBE_EINVAL);
    assert_string_equal(e.msg, "x=3");
    assert_int_equal(e.http_status, 0);
    assert_int_equal(kube_error_set(NULL, KUBE_EIO, "ignored"), KUBE_EIO);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(kubeconfig_current_context),           T(kubeconfig_named_context_resolves_files),
        T(kubeconfig_errors_name_the_field),     T(insecure_only_when_allowed),
        T(in_cluster_reads_the_service_account), cmocka_unit_test(base64_vectors),
        cmocka_unit_test(error_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
