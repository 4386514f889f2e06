/*
 * test_httpd.c - the operator's HTTP endpoints over real loopback sockets:
 * status codes, a large /metrics body written in chunks, readiness flipping,
 * unknown paths, a port already in use, and stop/start cycles; and the secure
 * metrics: HTTPS with a self-signed certificate, a token reviewed on the
 * review thread (401 without, 403 refused, 200 allowed, then cached), the
 * probes plain on their own port, and a stop while a review is in flight.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <pthread.h>
#include <time.h>

#include "areal/http/tls.h"
#include "areal/operator/httpd.h"

static atomic_bool ready_flag;
#define BIG (300 * 1024)

static char *big_metrics(void *ud, size_t *len) {
    (void)ud;
    char *b = malloc(BIG + 1);
    for (size_t i = 0; i < BIG; i++)
        b[i] = (char)('a' + i % 26);
    b[BIG - 1] = '\n';
    b[BIG] = '\0';
    *len = BIG;
    return b;
}

static bool is_ready(void *ud) {
    (void)ud;
    return atomic_load(&ready_flag);
}

/* GET `path`; returns the status code and fills body (malloc'd). */
static int http_get(int port, const char *path, char **body, size_t *body_len) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    char req[256];
    int n =
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    assert_int_equal(write(fd, req, (size_t)n), n);
    size_t cap = 1 << 20, len = 0;
    char *resp = malloc(cap);
    for (;;) {
        ssize_t got = read(fd, resp + len, cap - len - 1);
        if (got <= 0)
            break;
        len += (size_t)got;
    }
    close(fd);
    resp[len] = '\0';
    int code = -1;
    sscanf(resp, "HTTP/1.1 %d", &code);
    char *sep = strstr(resp, "\r\n\r\n");
    *body_len = sep ? len - (size_t)(sep + 4 - resp) : 0;
    *body = malloc(*body_len + 1);
    memcpy(*body, sep ? sep + 4 : "", *body_len);
    (*body)[*body_len] = '\0';
    free(resp);
    return code;
}

static void serves_the_three_endpoints(void **state) {
    (void)state;
    httpd_handlers h = {.metrics = big_metrics, .ready = is_ready};
    operator_httpd *s;
    areal_error e;
    assert_int_equal(httpd_start("127.0.0.1", 0, &h, &s, &e), AREAL_OK);
    int port = httpd_port(s);
    assert_true(port > 0);
    char *body;
    size_t len;
    assert_int_equal(http_get(port, "/healthz", &body, &len), 200);
    assert_string_equal(body, "ok\n");
    free(body);
    atomic_store(&ready_flag, false);
    assert_int_equal(http_get(port, "/readyz", &body, &len), 503);
    free(body);
    atomic_store(&ready_flag, true);
    assert_int_equal(http_get(port, "/readyz", &body, &len), 200);
    free(body);
    assert_int_equal(http_get(port, "/metrics", &body, &len), 200);
    assert_int_equal(len, BIG); /* every chunk arrived, in order */
    for (size_t i = 0; i + 1 < BIG; i += 4097)
        assert_int_equal(body[i], 'a' + i % 26);
    free(body);
    assert_int_equal(http_get(port, "/nope", &body, &len), 404);
    assert_non_null(strstr(body, "/metrics"));
    free(body);
    /* a second server on the same port cannot bind and says where */
    operator_httpd *other;
    assert_int_equal(httpd_start("127.0.0.1", port, &h, &other, &e), AREAL_EIO);
    assert_non_null(strstr(e.msg, "127.0.0.1"));
    assert_null(other);
    httpd_stop(s);
    httpd_stop(NULL);
}

static void restarts_cleanly(void **state) {
    (void)state;
    httpd_handlers h = {0};
    for (int i = 0; i < 3; i++) {
        operator_httpd *s;
        assert_int_equal(httpd_start("127.0.0.1", 0, &h, &s, NULL), AREAL_OK);
        char *body;
        size_t len;
        assert_int_equal(http_get(httpd_port(s), "/metrics", &body, &len), 500);
        free(body);
        httpd_stop(s);
    }
}

/* ---- secure metrics ------------------------------------------------------- */

static char *small_metrics(void *ud, size_t *len) {
    (void)ud;
    *len = strlen("areal_x 1\n");
    return strdup("areal_x 1\n");
}

static atomic_int n_reviews;
static atomic_int review_delay_ms;

/* tokens "ok-*" belong to a reader, "no-*" to an account without the role, others to no one */
static int fake_review(void *ud, const char *resource, const json_t *body, json_t **out,
                       areal_error *err) {
    (void)ud;
    (void)err;
    atomic_fetch_add(&n_reviews, 1);
    int delay = atomic_load(&review_delay_ms);
    if (delay > 0) {
        struct timespec ts = {delay / 1000, (delay % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    const json_t *spec = json_object_get(body, "spec");
    if (strcmp(resource, "tokenreviews") == 0) {
        const char *t = json_string_value(json_object_get(spec, "token"));
        bool known = strncmp(t, "ok-", 3) == 0 || strncmp(t, "no-", 3) == 0;
        *out = known ? json_pack("{s:{s:b,s:{s:s}}}", "status", "authenticated", 1, "user",
                                 "username", t[0] == 'o' ? "reader" : "stranger")
                     : json_pack("{s:{s:{}}}", "status", "user");
        return AREAL_OK;
    }
    const char *user = json_string_value(json_object_get(spec, "user"));
    *out = json_pack("{s:{s:b}}", "status", "allowed", strcmp(user, "reader") == 0);
    return AREAL_OK;
}

typedef struct resp {
    char body[4096];
    size_t len;
    long code;
    bool www_bearer;
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

static size_t on_header(char *p, size_t sz, size_t n, void *ud) {
    resp *r = ud;
    if (sz * n > 16 && strncasecmp(p, "WWW-Authenticate: Bearer", 24) == 0)
        r->www_bearer = true;
    return sz * n;
}

static resp curl_get(const char *url, const char *token) {
    resp r = {.len = 0};
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char line[256];
    if (token) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", token);
        h = curl_slist_append(h, line);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER,
                     0L); /* self-signed, as a scraper's insecureSkipVerify */
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.code);
    else
        r.code = -1;
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return r;
}

typedef struct secure {
    operator_httpd *s;
    metrics_auth *auth;
    char *cert, *key;
    char metrics_url[96], probe_url[96];
} secure;

static void secure_start(secure *z) {
    const char *names[] = {"127.0.0.1"};
    areal_error e;
    assert_int_equal(areal_http_tls_self_signed(names, 1, 1, &z->cert, &z->key, &e), AREAL_OK);
    metrics_auth_config ac = {.review = fake_review};
    z->auth = metrics_auth_new(&ac);
    httpd_config cfg = {.metrics_host = "127.0.0.1",
                        .probe_host = "127.0.0.1",
                        .tls_cert_pem = z->cert,
                        .tls_key_pem = z->key,
                        .auth = z->auth};
    httpd_handlers h = {.metrics = small_metrics, .ready = is_ready};
    if (httpd_start_with(&cfg, &h, &z->s, &e) != AREAL_OK)
        fail_msg("%s", e.msg);
    assert_int_not_equal(httpd_port(z->s), httpd_probe_port(z->s));
    snprintf(z->metrics_url, sizeof z->metrics_url, "https://127.0.0.1:%d/metrics",
             httpd_port(z->s));
    snprintf(z->probe_url, sizeof z->probe_url, "http://127.0.0.1:%d", httpd_probe_port(z->s));
}

static void secure_stop(secure *z) {
    httpd_stop(z->s);
    metrics_auth_free(z->auth);
    free(z->cert);
    free(z->key);
}

static void secure_metrics(void **state) {
    (void)state;
    atomic_store(&n_reviews, 0);
    atomic_store(&review_delay_ms, 0);
    atomic_store(&ready_flag, true);
    secure z;
    secure_start(&z);
    resp r = curl_get(z.metrics_url, NULL);
    assert_int_equal(r.code, 401);
    assert_true(r.www_bearer);
    assert_int_equal(atomic_load(&n_reviews), 0);
    r = curl_get(z.metrics_url, "forged");
    assert_int_equal(r.code, 401);
    assert_int_equal(atomic_load(&n_reviews), 1); /* a TokenReview, no SubjectAccessReview */
    r = curl_get(z.metrics_url, "no-1");
    assert_int_equal(r.code, 403);
    assert_non_null(strstr(r.body, "stranger"));
    r = curl_get(z.metrics_url, "ok-1");
    assert_int_equal(r.code, 200);
    assert_string_equal(r.body, "areal_x 1\n");
    int n = atomic_load(&n_reviews);
    assert_int_equal(n, 5);
    for (int i = 0; i < 3; i++) /* cached: answered on the service thread, no review */
        assert_int_equal(curl_get(z.metrics_url, "ok-1").code, 200);
    assert_int_equal(atomic_load(&n_reviews), n);
    /* the probes: plain, no token, on their port; not on the HTTPS one */
    char url[128];
    snprintf(url, sizeof url, "%s/healthz", z.probe_url);
    assert_int_equal(curl_get(url, NULL).code, 200);
    snprintf(url, sizeof url, "%s/readyz", z.probe_url);
    atomic_store(&ready_flag, false);
    assert_int_equal(curl_get(url, NULL).code, 503);
    snprintf(url, sizeof url, "%s/metrics", z.probe_url);
    assert_int_equal(curl_get(url, NULL).code, 404);
    snprintf(url, sizeof url, "https://127.0.0.1:%d/healthz", httpd_port(z.s));
    assert_int_equal(curl_get(url, "ok-1").code, 404);
    secure_stop(&z);
}

static void *slow_scrape(void *arg) {
    secure *z = arg;
    resp *r = malloc(sizeof *r);
    *r = curl_get(z->metrics_url, "ok-slow");
    return r;
}

/* A stop while a review is in flight: the stop waits for it, nothing leaks. */
static void stop_during_review(void **state) {
    (void)state;
    atomic_store(&n_reviews, 0);
    atomic_store(&review_delay_ms, 300);
    secure z;
    secure_start(&z);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, slow_scrape, &z), 0);
    while (atomic_load(&n_reviews) == 0) {
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    secure_stop(&z);
    resp *r;
    pthread_join(t, (void **)&r);
    assert_int_not_equal(r->code, 200); /* the server went before it could answer */
    free(r);
    atomic_store(&review_delay_ms, 0);
}

static void secure_needs_probe_address(void **state) {
    (void)state;
    metrics_auth_config ac = {.review = fake_review};
    metrics_auth *a = metrics_auth_new(&ac);
    httpd_config cfg = {.metrics_host = "127.0.0.1", .auth = a};
    httpd_handlers h = {0};
    operator_httpd *s;
    areal_error e;
    assert_int_equal(httpd_start_with(&cfg, &h, &s, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "probe address"));
    assert_null(s);
    metrics_auth_free(a);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(serves_the_three_endpoints),
        cmocka_unit_test(restarts_cleanly),
        cmocka_unit_test(secure_metrics),
        cmocka_unit_test(stop_during_review),
        cmocka_unit_test(secure_needs_probe_address),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
