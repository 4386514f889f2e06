/*
 * test_http_tls.c - HTTPS of the shared HTTP server (areal/http/server.h with
 * areal/http/tls.h) over loopback with libcurl: a self-signed certificate
 * that a client verifying against it (peer and host name) accepts, the
 * Authorization header handed to the handler, keep-alive over TLS, a plain
 * HTTP request to the TLS port and TLS 1.1 refused, a chain's intermediates
 * served, and pairs that do not parse or match refused at start with a
 * message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "areal/http/server.h"
#include "areal/http/tls.h"

/* echoes the Authorization header */
static void h_auth(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)ud;
    char out[4200];
    int n = snprintf(out, sizeof out, "auth=[%s]", r->authorization);
    areal_http_respond(x, 200, "text/plain", NULL, out, (size_t)n);
}

typedef struct resp {
    char body[8192];
    size_t len;
    long code;
    CURLcode rc;
} resp;

static size_t on_data(char *p, size_t sz, size_t n, void *ud) {
    resp *r = ud;
    size_t k = sz * n;
    if (r->len + k >= sizeof r->body)
        k = sizeof r->body - r->len - 1;
    memcpy(r->body + r->len, p, k);
    r->len += k;
    r->body[r->len] = '\0';
    return sz * n;
}

/* GET url on `c` (reused for keep-alive); ca_pem NULL: no verification. */
static resp get(CURL *c, const char *url, const char *ca_pem, const char *auth) {
    resp r = {.len = 0};
    struct curl_slist *h = NULL;
    char line[4200];
    if (auth) {
        snprintf(line, sizeof line, "Authorization: %s", auth);
        h = curl_slist_append(h, line);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    if (ca_pem) {
        struct curl_blob blob = {
            .data = (void *)ca_pem, .len = strlen(ca_pem), .flags = CURL_BLOB_COPY};
        curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    } else {
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    r.rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.code);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(h);
    return r;
}

static areal_http_server *tls_server(const char *cert, const char *key, int *port) {
    areal_http_config cfg = {.tls_cert_pem = cert, .tls_key_pem = key};
    areal_http_server *s = areal_http_new(&cfg);
    assert_non_null(s);
    areal_error e;
    assert_int_equal(areal_http_route(s, "GET", "/auth", h_auth, NULL, &e), AREAL_OK);
    int rc = areal_http_start(s, &e);
    if (rc != AREAL_OK)
        fail_msg("start: %s", e.msg);
    *port = areal_http_port(s);
    return s;
}

static void self_signed_verified_by_name(void **state) {
    (void)state;
    const char *names[] = {"localhost", "127.0.0.1"};
    char *cert, *key;
    areal_error e;
    assert_int_equal(areal_http_tls_self_signed(names, 2, 365, &cert, &key, &e), AREAL_OK);
    assert_non_null(strstr(cert, "-----BEGIN CERTIFICATE-----"));
    assert_non_null(strstr(key, "PRIVATE KEY-----"));
    assert_int_equal(areal_http_tls_check(cert, key, NULL, &e), AREAL_OK);
    int port;
    areal_http_server *s = tls_server(cert, key, &port);
    char url[128];
    CURL *c = curl_easy_init();
    /* verified against the certificate itself: the IP SAN matches 127.0.0.1 */
    snprintf(url, sizeof url, "https://127.0.0.1:%d/auth", port);
    resp r = get(c, url, cert, "Bearer abc.def");
    assert_int_equal(r.rc, CURLE_OK);
    assert_int_equal(r.code, 200);
    assert_string_equal(r.body, "auth=[Bearer abc.def]");
    /* and the DNS SAN matches localhost (resolved to 127.0.0.1), on the same connection */
    struct curl_slist *res = NULL;
    char pin[64];
    snprintf(pin, sizeof pin, "localhost:%d:127.0.0.1", port);
    res = curl_slist_append(res, pin);
    curl_easy_setopt(c, CURLOPT_RESOLVE, res);
    snprintf(url, sizeof url, "https://localhost:%d/auth", port);
    r = get(c, url, cert, NULL);
    assert_int_equal(r.rc, CURLE_OK);
    assert_string_equal(r.body, "auth=[]");
    r = get(c, url, cert, "Bearer again"); /* keep-alive: the TLS connection is reused */
    assert_string_equal(r.body, "auth=[Bearer again]");
    long conns = -1;
    curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &conns);
    assert_int_equal(conns, 0);
    curl_easy_cleanup(c);
    curl_slist_free_all(res);
    /* a name that is not in the certificate fails verification */
    const char *other[] = {"elsewhere.example"};
    char *cert2, *key2;
    assert_int_equal(areal_http_tls_self_signed(other, 1, 1, &cert2, &key2, &e), AREAL_OK);
    c = curl_easy_init();
    snprintf(url, sizeof url, "https://127.0.0.1:%d/auth", port);
    r = get(c, url, cert2, NULL);
    assert_int_not_equal(r.rc, CURLE_OK); /* signed by another key, for another name */
    /* plain HTTP to the TLS port is no HTTP answer */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/auth", port);
    r = get(c, url, NULL, NULL);
    assert_true(r.rc != CURLE_OK || r.code != 200);
    curl_easy_cleanup(c);
    /* TLS 1.1 at most: refused (1.2 is the floor) */
    c = curl_easy_init();
    snprintf(url, sizeof url, "https://127.0.0.1:%d/auth", port);
    curl_easy_setopt(c, CURLOPT_SSLVERSION, CURL_SSLVERSION_TLSv1_0 | CURL_SSLVERSION_MAX_TLSv1_1);
    r = get(c, url, NULL, NULL);
    assert_int_not_equal(r.rc, CURLE_OK);
    curl_easy_cleanup(c);
    areal_http_stop(s);
    free(cert);
    free(key);
    free(cert2);
    free(key2);
}

static void bad_pairs_are_refused(void **state) {
    (void)state;
    const char *a[] = {"a.example"}, *b[] = {"b.example"};
    char *ca, *ka, *cb, *kb;
    areal_error e;
    assert_int_equal(areal_http_tls_self_signed(a, 1, 1, &ca, &ka, &e), AREAL_OK);
    assert_int_equal(areal_http_tls_self_signed(b, 1, 1, &cb, &kb, &e), AREAL_OK);
    assert_int_equal(areal_http_tls_check(ca, kb, "the files x", &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "the files x"));
    assert_non_null(strstr(e.msg, "does not belong"));
    assert_int_equal(areal_http_tls_check("junk", ka, NULL, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "no PEM certificate"));
    assert_int_equal(areal_http_tls_check(ca, "junk", NULL, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "private key"));
    /* the server refuses the mismatch before it listens */
    areal_http_config cfg = {.tls_cert_pem = ca, .tls_key_pem = kb};
    areal_http_server *s = areal_http_new(&cfg);
    assert_int_equal(areal_http_start(s, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "does not belong"));
    areal_http_stop(s);
    /* one of the two alone */
    cfg = (areal_http_config){.tls_cert_pem = ca};
    s = areal_http_new(&cfg);
    assert_int_equal(areal_http_start(s, &e), AREAL_EINVAL);
    areal_http_stop(s);
    /* bad names */
    const char *bad[] = {"a,b"};
    char *x, *y;
    assert_int_equal(areal_http_tls_self_signed(bad, 1, 1, &x, &y, &e), AREAL_EINVAL);
    assert_null(x);
    assert_int_equal(areal_http_tls_self_signed(a, 0, 1, &x, &y, &e), AREAL_EINVAL);
    free(ca);
    free(ka);
    free(cb);
    free(kb);
}

/* A chain: the leaf's intermediates follow it in the certificate PEM. The server
 * must still start and serve (the extra certificate is sent, the leaf used). */
static void chain_pem_is_served(void **state) {
    (void)state;
    const char *n1[] = {"127.0.0.1"}, *n2[] = {"intermediate.example"};
    char *c1, *k1, *c2, *k2;
    areal_error e;
    assert_int_equal(areal_http_tls_self_signed(n1, 1, 1, &c1, &k1, &e), AREAL_OK);
    assert_int_equal(areal_http_tls_self_signed(n2, 1, 1, &c2, &k2, &e), AREAL_OK);
    size_t l1 = strlen(c1), l2 = strlen(c2);
    char *chain = malloc(l1 + l2 + 1);
    memcpy(chain, c1, l1);
    memcpy(chain + l1, c2, l2 + 1);
    int port;
    areal_http_server *s = tls_server(chain, k1, &port);
    CURL *c = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "https://127.0.0.1:%d/auth", port);
    resp r = get(c, url, c1, "x");
    assert_int_equal(r.rc, CURLE_OK);
    assert_string_equal(r.body, "auth=[x]");
    curl_easy_cleanup(c);
    areal_http_stop(s);
    free(chain);
    free(c1);
    free(k1);
    free(c2);
    free(k2);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(self_signed_verified_by_name),
        cmocka_unit_test(bad_pairs_are_refused),
        cmocka_unit_test(chain_pem_is_served),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
