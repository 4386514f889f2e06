/*
 * test_store.c - the rendezvous store: every operation, blocking waits and
 * their timeouts, an atomic counter under concurrent processes, clear errors
 * for a port in use, an unreachable store and a wrong address, and the frame
 * decoder's bounds (malformed frames are answered BADREQ and dropped).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "areal/comm/net.h"
#include "areal/comm/store.h"
#include "areal/comm/store_proto.h"

static areal_store_server *srv;
static int port;

static int setup(void **state) {
    (void)state;
    areal_error e;
    return areal_store_server_start("127.0.0.1", 0, &srv, &port, &e);
}

static int teardown(void **state) {
    (void)state;
    areal_store_server_stop(srv);
    return 0;
}

static areal_store *client(void) {
    areal_store *s = NULL;
    areal_error e;
    assert_int_equal(areal_store_connect("127.0.0.1", port, 2000, 2000, &s, &e), AREAL_OK);
    return s;
}

static void every_operation(void **state) {
    (void)state;
    areal_store *s = client();
    areal_error e;
    char buf[64];
    size_t n = 0;
    assert_int_equal(areal_store_set(s, "a", "hello", 5, &e), AREAL_OK);
    assert_int_equal(areal_store_get(s, "a", 0, buf, sizeof buf, &n, &e), AREAL_OK);
    assert_int_equal(n, 5);
    assert_memory_equal(buf, "hello", 5);
    assert_int_equal(areal_store_get(s, "a", 0, buf, 3, &n, &e), AREAL_ERANGE);
    assert_int_equal(n, 5);
    int exists = -1;
    assert_int_equal(areal_store_check(s, "a", &exists, &e), AREAL_OK);
    assert_int_equal(exists, 1);
    assert_int_equal(areal_store_check(s, "zz", &exists, &e), AREAL_OK);
    assert_int_equal(exists, 0);
    int64_t v = 0;
    assert_int_equal(areal_store_add(s, "ctr", 5, &v, &e), AREAL_OK);
    assert_int_equal(v, 5);
    assert_int_equal(areal_store_add(s, "ctr", -7, &v, &e), AREAL_OK);
    assert_int_equal(v, -2);
    assert_int_equal(areal_store_add(s, "a", 1, &v, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "counter"));
    /* compare-and-set: mismatch leaves the value, match replaces it, absent matches "" */
    assert_int_equal(areal_store_cas(s, "a", "nope", 4, "x", 1, buf, sizeof buf, &n, &e), AREAL_OK);
    assert_int_equal(n, 5);
    assert_memory_equal(buf, "hello", 5);
    assert_int_equal(areal_store_cas(s, "a", "hello", 5, "bye", 3, buf, sizeof buf, &n, &e),
                     AREAL_OK);
    assert_int_equal(n, 3);
    assert_memory_equal(buf, "bye", 3);
    assert_int_equal(areal_store_cas(s, "new", "", 0, "v1", 2, buf, sizeof buf, &n, &e), AREAL_OK);
    assert_memory_equal(buf, "v1", 2);
    int existed = -1;
    assert_int_equal(areal_store_delete(s, "a", &existed, &e), AREAL_OK);
    assert_int_equal(existed, 1);
    assert_int_equal(areal_store_delete(s, "a", &existed, &e), AREAL_OK);
    assert_int_equal(existed, 0);
    /* a get of a missing key times out with a message naming the key and the store */
    int64_t t0 = areal_now_ms();
    assert_int_equal(areal_store_get(s, "a", 200, buf, sizeof buf, &n, &e), AREAL_EIO);
    int64_t took = areal_now_ms() - t0;
    assert_true(took >= 190 && took < 1500);
    assert_non_null(strstr(e.msg, "'a'"));
    assert_non_null(strstr(e.msg, "timed out"));
    assert_int_equal(areal_store_wait(s, "new", 100, &e), AREAL_OK);
    /* the client is still usable after a timeout */
    assert_int_equal(areal_store_set(s, "", "x", 1, &e), AREAL_EINVAL);
    assert_int_equal(areal_store_set(s, "b", "", 0, &e), AREAL_OK);
    areal_store_close(s);
}

static void wait_is_woken_by_another_client(void **state) {
    (void)state;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        usleep(150000);
        areal_store *s2 = NULL;
        areal_error e2;
        int ok = areal_store_connect("127.0.0.1", port, 2000, 2000, &s2, &e2) == AREAL_OK &&
                 areal_store_set(s2, "late", "42", 2, &e2) == AREAL_OK;
        areal_store_close(s2);
        _exit(ok ? 0 : 1);
    }
    areal_store *s = client();
    areal_error e;
    char buf[8];
    size_t n = 0;
    int64_t t0 = areal_now_ms();
    assert_int_equal(areal_store_get(s, "late", 5000, buf, sizeof buf, &n, &e), AREAL_OK);
    assert_true(areal_now_ms() - t0 < 3000);
    assert_int_equal(n, 2);
    assert_memory_equal(buf, "42", 2);
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    areal_store_close(s);
}

static void add_is_atomic_across_processes(void **state) {
    (void)state;
    enum { PROCS = 6, ADDS = 50 };
    pid_t pids[PROCS];
    fflush(NULL);
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        if (pids[p] == 0) {
            areal_store *s = NULL;
            areal_error e;
            if (areal_store_connect("127.0.0.1", port, 2000, 2000, &s, &e) != AREAL_OK)
                _exit(1);
            for (int i = 0; i < ADDS; i++)
                if (areal_store_add(s, "shared", 1, NULL, &e) != AREAL_OK)
                    _exit(1);
            areal_store_close(s);
            _exit(0);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int st;
        waitpid(pids[p], &st, 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    areal_store *s = client();
    int64_t v = 0;
    areal_error e;
    assert_int_equal(areal_store_add(s, "shared", 0, &v, &e), AREAL_OK);
    assert_int_equal(v, PROCS * ADDS);
    areal_store_close(s);
}

static void port_in_use_names_host_and_port(void **state) {
    (void)state;
    areal_store_server *other = NULL;
    areal_error e;
    assert_int_equal(areal_store_server_start("127.0.0.1", port, &other, NULL, &e), AREAL_EIO);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", port);
    assert_non_null(strstr(e.msg, want));
    assert_non_null(strstr(e.msg, "in use"));
}

static void unreachable_store_fails_in_time(void **state) {
    (void)state;
    /* a port that was free a moment ago: nothing listens there */
    int fd, free_port;
    areal_error e;
    assert_int_equal(areal_net_listen("127.0.0.1", 0, &fd, &free_port, &e), AREAL_OK);
    close(fd);
    areal_store *s = NULL;
    int64_t t0 = areal_now_ms();
    assert_int_equal(areal_store_connect("127.0.0.1", free_port, 300, 1000, &s, &e), AREAL_EIO);
    int64_t took = areal_now_ms() - t0;
    assert_true(took >= 200 && took < 2000);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", free_port);
    assert_non_null(strstr(e.msg, want));
    assert_non_null(strstr(e.msg, "refused"));
    /* a name that does not resolve (yet) is retried until the deadline, then
     * fails naming it */
    t0 = areal_now_ms();
    assert_int_equal(areal_store_connect("no-such-host.invalid", 29500, 300, 1000, &s, &e),
                     AREAL_EIO);
    took = areal_now_ms() - t0;
    assert_true(took >= 200 && took < 3000);
    assert_non_null(strstr(e.msg, "no-such-host.invalid:29500"));
    assert_int_equal(areal_store_connect("127.0.0.1", 0, 100, 1000, &s, &e), AREAL_EINVAL);
}

static void store_that_dies_fails_the_call(void **state) {
    (void)state;
    areal_store_server *tmp = NULL;
    int p = 0;
    areal_error e;
    assert_int_equal(areal_store_server_start("127.0.0.1", 0, &tmp, &p, &e), AREAL_OK);
    areal_store *s = NULL;
    assert_int_equal(areal_store_connect("127.0.0.1", p, 1000, 1000, &s, &e), AREAL_OK);
    assert_int_equal(areal_store_set(s, "k", "v", 1, &e), AREAL_OK);
    areal_store_server_stop(tmp);
    char buf[4];
    size_t n;
    int64_t t0 = areal_now_ms();
    assert_int_equal(areal_store_get(s, "k2", 10000, buf, sizeof buf, &n, &e), AREAL_EIO);
    assert_true(areal_now_ms() - t0 < 2000);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", p);
    assert_non_null(strstr(e.msg, want));
    /* broken for good, same message */
    assert_int_equal(areal_store_set(s, "k", "v", 1, &e), AREAL_EIO);
    assert_non_null(strstr(e.msg, want));
    areal_store_close(s);
}

static void malformed_frames_are_rejected(void **state) {
    (void)state;
    uint8_t f[64];
    areal_store_req r;
    size_t used = 0;
    areal_error e;
    areal_store_req ok = {.op = AREAL_STORE_SET,
                          .key = (const uint8_t *)"k",
                          .key_len = 1,
                          .val = (const uint8_t *)"vv",
                          .val_len = 2};
    size_t n = areal_store_encode_req(&ok, f, sizeof f);
    assert_int_equal(n, AREAL_STORE_REQ_HDR + 3);
    /* every strict prefix needs more bytes; the whole frame decodes */
    for (size_t k = 0; k < n; k++)
        assert_int_equal(areal_store_decode_req(f, k, &r, &used, &e), 0);
    assert_int_equal(areal_store_decode_req(f, n, &r, &used, &e), 1);
    assert_int_equal(used, n);
    assert_memory_equal(r.val, "vv", 2);
    uint8_t bad[64];
    memcpy(bad, f, n);
    bad[4] = 99; /* op */
    assert_int_equal(areal_store_decode_req(bad, n, &r, &used, &e), AREAL_EINVAL);
    memcpy(bad, f, n);
    areal_put_u32(bad, 0xffffffffu); /* length */
    assert_int_equal(areal_store_decode_req(bad, 4, &r, &used, &e), AREAL_EINVAL);
    memcpy(bad, f, n);
    areal_put_u32(bad, (uint32_t)n); /* length one more than the fields */
    assert_int_equal(areal_store_decode_req(bad, n, &r, &used, &e), AREAL_EINVAL);
    memcpy(bad, f, n);
    bad[6] = 0; /* empty key */
    bad[7] = 0;
    areal_put_u32(bad, (uint32_t)(n - 5));
    assert_int_equal(areal_store_decode_req(bad, n - 1, &r, &used, &e), AREAL_EINVAL);
    memcpy(bad, f, n);
    areal_put_u32(bad + 8, 5); /* a timeout on a set */
    assert_int_equal(areal_store_decode_req(bad, n, &r, &used, &e), AREAL_EINVAL);
    /* a server answers garbage with BADREQ and closes; other clients are unaffected */
    int fd;
    assert_int_equal(
        areal_net_connect("127.0.0.1", port, areal_now_ms() + 1000, false, "store", &fd, &e),
        AREAL_OK);
    memcpy(bad, f, n);
    bad[4] = 77;
    assert_int_equal(areal_net_send_all(fd, bad, n, areal_now_ms() + 1000, "store", &e), AREAL_OK);
    uint8_t resp[512];
    assert_int_equal(
        areal_net_recv_all(fd, resp, AREAL_STORE_RESP_HDR, areal_now_ms() + 2000, "store", &e),
        AREAL_OK);
    assert_int_equal(resp[4], AREAL_STORE_BADREQ);
    uint32_t ml = areal_get_u32(resp + 8);
    assert_true(ml < sizeof resp - AREAL_STORE_RESP_HDR);
    assert_int_equal(
        areal_net_recv_all(fd, resp + AREAL_STORE_RESP_HDR, ml, areal_now_ms() + 2000, "store", &e),
        AREAL_OK);
    assert_int_equal(areal_net_recv_all(fd, resp, 1, areal_now_ms() + 2000, "store", &e),
                     AREAL_EIO);
    assert_non_null(strstr(e.msg, "closed"));
    close(fd);
    areal_store *s = client();
    assert_int_equal(areal_store_set(s, "after", "1", 1, &e), AREAL_OK);
    areal_store_close(s);
}

static void split_hostport(void **state) {
    (void)state;
    char h[AREAL_HOST_MAX];
    int p = 0;
    assert_int_equal(areal_net_split_hostport("trainer-0.job:29500", h, &p, NULL), AREAL_OK);
    assert_string_equal(h, "trainer-0.job");
    assert_int_equal(p, 29500);
    assert_int_equal(areal_net_split_hostport("[::1]:80", h, &p, NULL), AREAL_OK);
    assert_string_equal(h, "::1");
    assert_int_equal(areal_net_split_hostport("host", h, &p, NULL), AREAL_EINVAL);
    assert_int_equal(areal_net_split_hostport("host:0", h, &p, NULL), AREAL_EINVAL);
    assert_int_equal(areal_net_split_hostport(":80", h, &p, NULL), AREAL_EINVAL);
    assert_int_equal(areal_net_split_hostport("h:80x", h, &p, NULL), AREAL_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_operation),
        cmocka_unit_test(wait_is_woken_by_another_client),
        cmocka_unit_test(add_is_atomic_across_processes),
        cmocka_unit_test(port_in_use_names_host_and_port),
        cmocka_unit_test(unreachable_store_fails_in_time),
        cmocka_unit_test(store_that_dies_fails_the_call),
        cmocka_unit_test(malformed_frames_are_rejected),
        cmocka_unit_test(split_hostport),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
