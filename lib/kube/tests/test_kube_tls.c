/* test_kube_tls.c - TLS is verified: a CA, a server and a client certificate made at test
 * time with the openssl CLI, served by `openssl s_server -WWW` on 127.0.0.1 (it answers
 * GET /FILE with ./FILE over HTTP/1.0), which also demands the client certificate. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <curl/curl.h>

#include "areal/kube/client.h"
#include "areal/kube/ratelimit.h"

typedef struct fx {
    char dir[64];
    int port;
    pid_t server;
} fx;

static char *path_in(const fx *f, const char *name) {
    static _Thread_local char buf[8][256];
    static _Thread_local int next;
    char *p = buf[next++ % 8];
    snprintf(p, 256, "%s/%s", f->dir, name);
    return p;
}

static int sh(const fx *f, const char *cmd) {
    char full[2048];
    snprintf(full, sizeof full, "cd '%s' && { %s ; } >/dev/null 2>&1", f->dir, cmd);
    return system(full);
}

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0)
        return -1;
    close(fd);
    return ntohs(sa.sin_port);
}

static int can_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

#define EC "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"

static int setup(void **state) {
    if (system("command -v openssl >/dev/null 2>&1") != 0) {
        print_message("openssl CLI missing (scripts/install-deps.sh kube installs it)\n");
        return -1;
    }
    fx *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/kube-tls-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    int rc = sh(f, "printf 'subjectAltName=IP:127.0.0.1\\n' > srv.ext && "
                   "printf 'extendedKeyUsage=clientAuth\\n' > cli.ext && "
                   "openssl req -x509 " EC " -keyout ca.key -out ca.crt -subj /CN=test-ca -days 1"
                   " && openssl req -x509 " EC
                   " -keyout other.key -out other.crt -subj /CN=other-ca -days 1"
                   " && openssl req " EC " -keyout srv.key -out srv.csr -subj /CN=apiserver"
                   " && openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial"
                   " -out srv.crt -days 1 -extfile srv.ext"
                   " && openssl req " EC " -keyout cli.key -out cli.csr -subj /CN=areal-operator"
                   " && openssl x509 -req -in cli.csr -CA ca.crt -CAkey ca.key -CAcreateserial"
                   " -out cli.crt -days 1 -extfile cli.ext"
                   " && printf '{\"kind\":\"Pod\",\"metadata\":{\"name\":\"tls\"}}' > pod.json");
    assert_int_equal(rc, 0);
    f->port = free_port();
    assert_true(f->port > 0);
    f->server = fork();
    assert_true(f->server >= 0);
    if (f->server == 0) {
        char accept[32];
        snprintf(accept, sizeof accept, "127.0.0.1:%d", f->port);
        if (chdir(f->dir) != 0)
            _exit(127);
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execlp("openssl", "openssl", "s_server", "-accept", accept, "-cert", "srv.crt", "-key",
               "srv.key", "-CAfile", "ca.crt", "-Verify", "1", "-WWW", "-quiet", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 250 && !can_connect(f->port); i++)
        kube_sleep_ms(20);
    assert_true(can_connect(f->port));
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    kill(f->server, SIGTERM);
    waitpid(f->server, NULL, 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static void read_into(const fx *f, const char *name, char **data, size_t *len) {
    assert_int_equal(kube_read_file(path_in(f, name), 1 << 20, data, len, NULL), KUBE_OK);
}

static void base_config(const fx *f, kube_config *cfg, const char *host) {
    kube_config_init(cfg);
    char url[64];
    snprintf(url, sizeof url, "https://%s:%d", host, f->port);
    cfg->server = strdup(url);
    cfg->max_retries = 0;
    cfg->timeout_ms = 5000;
}

static int get_pod(kube_config *cfg, kube_error *e, json_t **out) {
    kube_client *c = kube_client_new(cfg, e);
    assert_non_null(c);
    int rc = kube_request(c, "GET", "/pod.json", NULL, NULL, out, e);
    kube_client_free(c);
    return rc;
}

static void verified_with_inline_ca_and_client_certificate(void **state) {
    fx *f = *state;
    kube_config cfg;
    base_config(f, &cfg, "127.0.0.1");
    read_into(f, "ca.crt", &cfg.ca_pem, &cfg.ca_len);
    read_into(f, "cli.crt", &cfg.cert_pem, &cfg.cert_len);
    read_into(f, "cli.key", &cfg.key_pem, &cfg.key_len);
    json_t *o = NULL;
    kube_error e;
    int rc = get_pod(&cfg, &e, &o);
    if (rc != KUBE_OK)
        fail_msg("%s", e.msg);
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "metadata"), "name")),
                        "tls");
    json_decref(o);
    kube_config_free(&cfg);
}

static void verified_with_ca_and_certificate_files(void **state) {
    fx *f = *state;
    kube_config cfg;
    base_config(f, &cfg, "127.0.0.1");
    cfg.ca_file = strdup(path_in(f, "ca.crt"));
    cfg.cert_file = strdup(path_in(f, "cli.crt"));
    cfg.key_file = strdup(path_in(f, "cli.key"));
    kube_error e;
    json_t *o = NULL;
    int rc = get_pod(&cfg, &e, &o);
    if (rc != KUBE_OK)
        fail_msg("%s", e.msg);
    json_decref(o);
    kube_config_free(&cfg);
}

static void a_server_signed_by_another_ca_is_refused(void **state) {
    fx *f = *state;
    kube_config cfg;
    base_config(f, &cfg, "127.0.0.1");
    read_into(f, "other.crt", &cfg.ca_pem, &cfg.ca_len);
    cfg.cert_file = strdup(path_in(f, "cli.crt"));
    cfg.key_file = strdup(path_in(f, "cli.key"));
    kube_error e;
    json_t *o = NULL;
    assert_int_equal(get_pod(&cfg, &e, &o), KUBE_ETRANSPORT);
    assert_int_equal(e.curl_code, CURLE_PEER_FAILED_VERIFICATION);
    assert_int_equal(e.http_status, 0);
    kube_config_free(&cfg);
}

static void a_name_the_certificate_does_not_cover_is_refused(void **state) {
    fx *f = *state;
    kube_config cfg;
    base_config(f, &cfg, "localhost"); /* the certificate names only IP 127.0.0.1 */
    read_into(f, "ca.crt", &cfg.ca_pem, &cfg.ca_len);
    cfg.cert_file = strdup(path_in(f, "cli.crt"));
    cfg.key_file = strdup(path_in(f, "cli.key"));
    kube_error e;
    json_t *o = NULL;
    assert_int_equal(get_pod(&cfg, &e, &o), KUBE_ETRANSPORT);
    assert_true(e.curl_code == CURLE_PEER_FAILED_VERIFICATION ||
                e.curl_code == CURLE_COULDNT_CONNECT); /* ::1 first on some hosts */
    kube_config_free(&cfg);
}

static void without_a_client_certificate_the_server_refuses(void **state) {
    fx *f = *state;
    kube_config cfg;
    base_config(f, &cfg, "127.0.0.1");
    read_into(f, "ca.crt", &cfg.ca_pem, &cfg.ca_len);
    kube_error e;
    json_t *o = NULL;
    assert_int_equal(get_pod(&cfg, &e, &o), KUBE_ETRANSPORT);
    assert_null(o);
    kube_config_free(&cfg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(verified_with_inline_ca_and_client_certificate),
        cmocka_unit_test(verified_with_ca_and_certificate_files),
        cmocka_unit_test(a_server_signed_by_another_ca_is_refused),
        cmocka_unit_test(a_name_the_certificate_does_not_cover_is_refused),
        cmocka_unit_test(without_a_client_certificate_the_server_refuses),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
