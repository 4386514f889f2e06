/*
 * test_http_server.c - the shared HTTP server over loopback with libcurl:
 * routing (404 naming the endpoints, 405), bodies (echo, 413 past the limit,
 * a body shorter than its Content-Length), query strings, keep-alive (one
 * connection for many requests), answers from another thread, a chunked
 * stream written by a producer thread, the on-close hook when a client
 * drops a pending request, a slow client cut off by the header timeout,
 * 1,000 connections opened and dropped, and exchanges outliving the server.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "areal/http/server.h"

/* ---- handlers ------------------------------------------------------------ */

static void h_echo(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)ud;
    char head[256];
    int n =
        snprintf(head, sizeof head, "%s %s ?%s #%zu:", r->method, r->path, r->query, r->body_len);
    char *out = malloc((size_t)n + r->body_len + 1);
    memcpy(out, head, (size_t)n);
    memcpy(out + n, r->body, r->body_len);
    areal_http_respond(x, 200, "text/plain", NULL, out, (size_t)n + r->body_len);
    free(out);
}

static void h_busy(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    (void)ud;
    areal_http_header h[] = {{"Retry-After", "2"}, {NULL, NULL}};
    areal_http_respond(x, 503, NULL, h, "{}", 2);
}

/* answered later by a thread of its own */
static void *answer_later(void *arg) {
    areal_http_exchange *x = arg;
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
    areal_http_respond(x, 201, NULL, NULL, "{\"late\":true}", 13);
    return NULL;
}
static void h_later(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    (void)ud;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, answer_later, x), 0);
    pthread_detach(t);
}

/* a stream of N "data: i" events from a producer thread */
#define N_EVENTS 50
static void *stream_later(void *arg) {
    areal_http_exchange *x = arg;
    assert_int_equal(areal_http_stream_start(x, 200, "text/event-stream"), AREAL_OK);
    for (int i = 0; i < N_EVENTS; i++) {
        char line[64];
        int n = snprintf(line, sizeof line, "data: %d\n\n", i);
        assert_int_equal(areal_http_stream_write(x, line, (size_t)n), AREAL_OK);
        if (i % 10 == 0) {
            struct timespec ts = {0, 2 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    areal_http_stream_write(x, "data: [DONE]\n\n", 14);
    areal_http_stream_end(x);
    return NULL;
}
static void h_stream(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    (void)ud;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stream_later, x), 0);
    pthread_detach(t);
}

/* never answered until the client goes: then the hook fires, and the test finishes it */
static atomic_int hook_calls;
static areal_http_exchange *_Atomic parked;
static void on_gone(void *ud) {
    (void)ud;
    atomic_fetch_add(&hook_calls, 1);
}
static void h_park(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    (void)ud;
    areal_http_on_close(x, on_gone, NULL);
    atomic_store(&parked, x);
}

/* ---- client helpers --------------------------------------------------------- */

typedef struct resp {
    char *body;
    size_t len;
    long code;
    char retry_after[16];
} resp;

static size_t on_data(char *p, size_t sz, size_t n, void *ud) {
    resp *r = ud;
    r->body = realloc(r->body, r->len + sz * n + 1);
    memcpy(r->body + r->len, p, sz * n);
    r->len += sz * n;
    r->body[r->len] = '\0';
    return sz * n;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud) {
    resp *r = ud;
    if (strncasecmp(p, "Retry-After:", 12) == 0)
        sscanf(p + 12, " %15s", r->retry_after);
    return sz * n;
}

/* One request on handle c (reused for keep-alive); body NULL = GET. */
static resp request(CURL *c, int port, const char *method, const char *path, const char *body,
                    size_t len) {
    resp r = {0};
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    struct curl_slist *h = curl_slist_append(NULL, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body != NULL) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    } else {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    }
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.code);
    else
        r.code = -1;
    curl_slist_free_all(h);
    if (r.body == NULL)
        r.body = calloc(1, 1);
    return r;
}

static areal_http_server *start(int max_body, int header_timeout) {
    areal_http_config cfg = {.max_body = (size_t)max_body,
                             .header_timeout_s = header_timeout,
                             .idle_timeout_s = header_timeout};
    areal_http_server *s = areal_http_new(&cfg);
    assert_non_null(s);
    areal_error e;
    assert_int_equal(areal_http_route(s, "POST", "/echo", h_echo, NULL, &e), AREAL_OK);
    assert_int_equal(areal_http_route(s, "GET", "/echo", h_echo, NULL, &e), AREAL_OK);
    assert_int_equal(areal_http_route(s, "GET", "/busy", h_busy, NULL, &e), AREAL_OK);
    assert_int_equal(areal_http_route(s, "GET", "/later", h_later, NULL, &e), AREAL_OK);
    assert_int_equal(areal_http_route(s, "POST", "/stream", h_stream, NULL, &e), AREAL_OK);
    assert_int_equal(areal_http_route(s, "GET", "/park", h_park, NULL, &e), AREAL_OK);
    assert_int_equal(areal_http_route(s, "GET", "/echo", h_echo, NULL, &e), AREAL_EINVAL);
    assert_int_equal(areal_http_start(s, &e), AREAL_OK);
    assert_true(areal_http_port(s) > 0);
    return s;
}

static int raw_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* ---- tests ------------------------------------------------------------------ */

static void routes_bodies_and_errors(void **state) {
    (void)state;
    areal_http_server *s = start(1000, 0);
    int port = areal_http_port(s);
    CURL *c = curl_easy_init();
    resp r = request(c, port, "POST", "/echo?a=1&b=two", "hello", 5);
    assert_int_equal(r.code, 200);
    assert_string_equal(r.body, "POST /echo ?a=1&b=two #5:hello");
    free(r.body);
    r = request(c, port, "GET", "/echo", NULL, 0);
    assert_string_equal(r.body, "GET /echo ? #0:");
    free(r.body);
    /* a body of exactly the limit passes, one byte more is 413 with a JSON error */
    char *big = malloc(1001);
    memset(big, 'x', 1001);
    r = request(c, port, "POST", "/echo", big, 1000);
    assert_int_equal(r.code, 200);
    assert_int_equal(r.len, strlen("POST /echo ? #1000:") + 1000);
    free(r.body);
    r = request(c, port, "POST", "/echo", big, 1001);
    assert_int_equal(r.code, 413);
    assert_non_null(strstr(r.body, "\"error\""));
    assert_non_null(strstr(r.body, "1001 bytes exceeds the limit of 1000"));
    free(r.body);
    free(big);
    r = request(c, port, "GET", "/nowhere", NULL, 0);
    assert_int_equal(r.code, 404);
    assert_non_null(strstr(r.body, "POST /stream"));
    free(r.body);
    r = request(c, port, "DELETE", "/echo", NULL, 0);
    assert_int_equal(r.code, 405);
    assert_non_null(strstr(r.body, "DELETE is not allowed on /echo"));
    free(r.body);
    r = request(c, port, "GET", "/busy", NULL, 0);
    assert_int_equal(r.code, 503);
    assert_string_equal(r.retry_after, "2");
    free(r.body);
    curl_easy_cleanup(c);
    areal_http_stop(s);
}

static void keep_alive_and_late_answers(void **state) {
    (void)state;
    areal_http_server *s = start(0, 0);
    int port = areal_http_port(s);
    CURL *c = curl_easy_init();
    for (int i = 0; i < 20; i++) {
        resp r = request(c, port, i % 2 ? "GET" : "POST", i % 2 ? "/later" : "/echo",
                         i % 2 ? NULL : "x", 1);
        assert_int_equal(r.code, i % 2 ? 201 : 200);
        long connects = -1;
        curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &connects);
        assert_int_equal(connects, i == 0 ? 1 : 0); /* the same connection every time */
        free(r.body);
    }
    curl_easy_cleanup(c);
    areal_http_stop(s);
}

static void streams_chunks_from_another_thread(void **state) {
    (void)state;
    areal_http_server *s = start(0, 0);
    int port = areal_http_port(s);
    CURL *c = curl_easy_init();
    for (int round = 0; round < 2; round++) { /* the connection survives a stream */
        resp r = request(c, port, "POST", "/stream", "{}", 2);
        assert_int_equal(r.code, 200);
        char want[4096];
        size_t n = 0;
        for (int i = 0; i < N_EVENTS; i++)
            n += (size_t)snprintf(want + n, sizeof want - n, "data: %d\n\n", i);
        snprintf(want + n, sizeof want - n, "data: [DONE]\n\n");
        assert_string_equal(r.body, want);
        long connects = -1;
        curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &connects);
        assert_int_equal(connects, round == 0 ? 1 : 0);
        free(r.body);
    }
    curl_easy_cleanup(c);
    areal_http_stop(s);
}

static void wait_for(atomic_int *v, int want) {
    for (int i = 0; i < 500 && atomic_load(v) != want; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(atomic_load(v), want);
}

static void dropped_client_runs_the_hook(void **state) {
    (void)state;
    areal_http_server *s = start(0, 0);
    int port = areal_http_port(s);
    atomic_store(&hook_calls, 0);
    atomic_store(&parked, NULL);
    int fd = raw_connect(port);
    const char *req = "GET /park HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    for (int i = 0; i < 500 && atomic_load(&parked) == NULL; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    areal_http_exchange *x = atomic_load(&parked);
    assert_non_null(x);
    assert_false(areal_http_client_gone(x));
    close(fd);
    wait_for(&hook_calls, 1);
    assert_true(areal_http_client_gone(x));
    assert_int_equal(areal_http_respond(x, 200, NULL, NULL, "{}", 2), AREAL_EIO);
    /* a parked exchange outlives the server; calls then fail cleanly */
    atomic_store(&parked, NULL);
    fd = raw_connect(port);
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    for (int i = 0; i < 500 && atomic_load(&parked) == NULL; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    x = atomic_load(&parked);
    assert_non_null(x);
    areal_http_stop(s);
    assert_int_equal(atomic_load(&hook_calls), 2); /* the stop closed it */
    assert_int_equal(areal_http_stream_start(x, 200, NULL), AREAL_EIO);
    areal_http_stream_end(x);
    close(fd);
}

static void slow_and_vanishing_clients(void **state) {
    (void)state;
    areal_http_server *s = start(0, 1);
    int port = areal_http_port(s);
    /* 1,000 connections opened and dropped, some mid-request */
    for (int i = 0; i < 1000; i++) {
        int fd = raw_connect(port);
        if (i % 3 == 1)
            assert_int_equal(write(fd, "GET /ec", 7), 7);
        if (i % 3 == 2)
            assert_int_equal(write(fd, "POST /echo HTTP/1.1\r\nContent-Length: 50\r\n\r\nab", 45),
                             45);
        close(fd);
    }
    /* a slow client that never finishes its headers is cut off by the timeout */
    int fd = raw_connect(port);
    assert_int_equal(write(fd, "GET /echo HTTP/1.1\r\nHo", 22), 22);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[256];
    time_t t0 = time(NULL);
    ssize_t got = read(fd, buf, sizeof buf);
    assert_true(got <= 0); /* closed, not answered */
    assert_true(time(NULL) - t0 <= 4);
    close(fd);
    /* and the server still answers */
    CURL *c = curl_easy_init();
    resp r = request(c, port, "GET", "/echo", NULL, 0);
    assert_int_equal(r.code, 200);
    free(r.body);
    curl_easy_cleanup(c);
    areal_http_stop(s);
}

static void bad_addresses_are_named(void **state) {
    (void)state;
    areal_http_server *a = start(0, 0);
    areal_http_config cfg = {.port = areal_http_port(a)};
    areal_http_server *b = areal_http_new(&cfg);
    areal_error e;
    assert_int_equal(areal_http_start(b, &e), AREAL_EIO);
    assert_non_null(strstr(e.msg, "127.0.0.1"));
    areal_http_stop(b);
    cfg = (areal_http_config){.host = "not-an-ip"};
    b = areal_http_new(&cfg);
    assert_int_equal(areal_http_start(b, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "not-an-ip"));
    areal_http_stop(b);
    areal_http_stop(a);
    areal_http_stop(NULL);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(routes_bodies_and_errors),
        cmocka_unit_test(keep_alive_and_late_answers),
        cmocka_unit_test(streams_chunks_from_another_thread),
        cmocka_unit_test(dropped_client_runs_the_hook),
        cmocka_unit_test(slow_and_vanishing_clients),
        cmocka_unit_test(bad_addresses_are_named),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
