/*
 * test_httpd.c - the operator's HTTP endpoints over real loopback sockets:
 * status codes, a large /metrics body written in chunks, readiness flipping,
 * unknown paths, a port already in use, and stop/start cycles.
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(serves_the_three_endpoints),
        cmocka_unit_test(restarts_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
