/*
 * test_rollout_wsync.c - update_weights_from_distributed with a C
 * trainer-side sender (areal/train/wsync.h) and two servers: buckets
 * smaller than one tensor (one tensor each) and larger than all (one
 * bucket), greedy outputs then equal the new weights' reference and
 * weight_version moves; a bucket with wrong shapes and a sender that dies
 * mid-bucket leave the old version serving and say why. Then a third server
 * pulls the weights that exist only in the first one's memory
 * (update_weights_from_peer over GET /get_weights_safetensors): its greedy
 * outputs and version become the peer's; a peer that dies mid-transfer (a
 * fake one that sends half the body and hangs up) or cannot be reached
 * leaves it on its old weights with the reason.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

#include "areal/model/safetensors.h"

#include "areal/train/wsync.h"
#include "rollout_http_util.h"

static char dir[128], dir_new[128];

static int setup(void **state) {
    (void)state;
    rt_setup_dirs(dir, dir_new, sizeof dir);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    rt_teardown_dirs(dir, dir_new);
    return 0;
}

typedef struct weights {
    areal_model m;
    areal_wsync_tensor *t;
    size_t n;
} weights;

static void weights_load(weights *w, const char *d) {
    areal_error e;
    if (areal_model_load(&w->m, d, NULL, &e) != 0)
        fail_msg("%s", e.msg);
    w->n = w->m.n_specs;
    w->t = calloc(w->n, sizeof *w->t);
    for (size_t i = 0; i < w->n; i++)
        w->t[i] = (areal_wsync_tensor){.name = w->m.specs[i].name,
                                       .dtype = AREAL_DT_F32,
                                       .ndim = w->m.specs[i].ndim,
                                       .shape = w->m.specs[i].shape,
                                       .data = w->m.params + w->m.offset[i]};
}

static void weights_free(weights *w) {
    free(w->t);
    areal_model_free(&w->m);
}

/* One bucket to both servers; returns how many answered 200 success. */
static int bucket(areal_wsync *ws, const int ports[2], const areal_wsync_tensor *t, size_t n,
                  bool send, char msgs[2][512]) {
    char *json = NULL;
    areal_error e;
    assert_int_equal(areal_wsync_bucket_json(t, n, "update_weight_group", true, NULL, &json, &e),
                     0);
    rt_async p[2];
    for (int i = 0; i < 2; i++)
        rt_async_start(&p[i], ports[i], "/update_weights_from_distributed", json);
    if (send)
        assert_int_equal(areal_wsync_send(ws, t, n, &e), 0);
    else
        areal_wsync_close(ws); /* the sender dies with the bucket announced */
    int ok = 0;
    for (int i = 0; i < 2; i++) {
        rt_async_wait(&p[i]);
        ok += p[i].r.code == 200 && json_is_true(json_object_get(p[i].r.json, "success"));
        if (msgs)
            snprintf(msgs[i], 512, "%s", p[i].r.body);
        rt_free(&p[i].r);
    }
    free(json);
    return ok;
}

/* Sends every tensor in buckets of at most limit bytes (a tensor larger goes alone). */
static void update(areal_wsync *ws, const int ports[2], const weights *w, size_t limit) {
    size_t first = 0, bytes = 0, buckets = 0;
    for (size_t i = 0; i <= w->n; i++) {
        size_t b = i < w->n ? (size_t)w->m.specs[i].shape[0] *
                                  (size_t)(w->m.specs[i].ndim > 1 ? w->m.specs[i].shape[1] : 1) * 4
                            : 0;
        if (i == w->n || (i > first && bytes + b > limit)) {
            assert_int_equal(bucket(ws, ports, w->t + first, i - first, true, NULL), 2);
            buckets++;
            first = i;
            bytes = 0;
        }
        bytes += b;
    }
    if (limit < 64)
        assert_int_equal(buckets, w->n);
    if (limit >= ((size_t)1 << 30))
        assert_int_equal(buckets, 1);
}

static areal_wsync *join_both(const int ports[2]) {
    areal_wsync *ws = NULL;
    areal_error e;
    assert_int_equal(areal_wsync_listen("127.0.0.1", 0, &ws, &e), 0);
    rt_async p[2];
    char *body[2];
    for (int i = 0; i < 2; i++) {
        assert_true(asprintf(&body[i],
                             "{\"master_address\":\"127.0.0.1\",\"master_port\":%d,"
                             "\"rank_offset\":%d,\"world_size\":3,\"group_name\":"
                             "\"update_weight_group\",\"backend\":\"nccl\"}",
                             areal_wsync_port(ws), 1 + i) > 0);
        rt_async_start(&p[i], ports[i], "/init_weights_update_group", body[i]);
    }
    if (areal_wsync_join(ws, 3, "update_weight_group", 20000, &e) != 0)
        fail_msg("%s", e.msg);
    for (int i = 0; i < 2; i++) {
        rt_async_wait(&p[i]);
        if (p[i].r.code != 200)
            fail_msg("server %d: %s", i, p[i].r.body);
        rt_free(&p[i].r);
        free(body[i]);
    }
    return ws;
}

/* A fake peer: answers one request with the first `send` of `len` bytes of
 * body (announced whole by Content-Length), then hangs up. */
typedef struct fake_peer {
    int fd, port;
    const char *body;
    size_t len, send;
    pthread_t t;
} fake_peer;

static void *fake_main(void *arg) {
    fake_peer *f = arg;
    int c = accept(f->fd, NULL, NULL);
    if (c < 0)
        return NULL;
    char req[4096];
    size_t got = 0;
    while (got < sizeof req - 1) { /* the request head */
        ssize_t k = recv(c, req + got, sizeof req - 1 - got, 0);
        if (k <= 0)
            break;
        got += (size_t)k;
        req[got] = '\0';
        if (strstr(req, "\r\n\r\n"))
            break;
    }
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     f->len);
    ssize_t w = send(c, head, (size_t)n, MSG_NOSIGNAL);
    for (size_t off = 0; w >= 0 && off < f->send; off += (size_t)w)
        w = send(c, f->body + off, f->send - off, MSG_NOSIGNAL);
    close(c);
    return NULL;
}

static void fake_start(fake_peer *f, const char *body, size_t len, size_t send_bytes) {
    f->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(f->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->fd, 4), 0);
    assert_int_equal(getsockname(f->fd, (struct sockaddr *)&a, &al), 0);
    f->port = ntohs(a.sin_port);
    f->body = body;
    f->len = len;
    f->send = send_bytes;
    assert_int_equal(pthread_create(&f->t, NULL, fake_main, f), 0);
}

static void fake_wait(fake_peer *f) {
    pthread_join(f->t, NULL);
    close(f->fd);
}

/* GET /get_weights_safetensors of port: a valid safetensors file holding w's
 * parameters bit for bit, under `version`. Returns the body (caller frees). */
static rt_resp weights_are(int port, const weights *w, const char *version) {
    rt_resp r = rt_req(NULL, port, "/get_weights_safetensors", NULL);
    assert_int_equal(r.code, 200);
    areal_st_header h;
    areal_error e;
    if (areal_st_header_parse((const uint8_t *)r.body, r.len, "peer", &h, &e) != 0)
        fail_msg("%s", e.msg);
    assert_int_equal(h.n_tensors, w->n);
    bool found = false;
    for (size_t i = 0; i < h.n_meta; i++)
        if (strcmp(h.meta_keys[i], "weight_version") == 0) {
            assert_string_equal(h.meta_values[i], version);
            found = true;
        }
    assert_true(found);
    for (size_t i = 0; i < w->n; i++) {
        const areal_st_tensor *t = areal_st_header_find(&h, w->m.specs[i].name);
        assert_non_null(t);
        assert_int_equal(t->dtype, AREAL_DT_F32);
        assert_memory_equal(r.body + 8 + h.header_len + t->begin, w->t[i].data, t->end - t->begin);
    }
    areal_st_header_free(&h);
    return r;
}

static void peer_pull_takes_in_memory_weights(int port_a, const weights *fresh) {
    /* c starts on the old weights; a serves fresh ones that exist only in memory */
    areal_rollout_server *c = rt_server(dir, "0");
    int pc = areal_rollout_server_port(c);
    rt_resp body = weights_are(port_a, fresh, "3");
    /* the peer dies mid-transfer: half the body, then the connection drops */
    fake_peer f;
    fake_start(&f, body.body, body.len, body.len / 2);
    rt_resp r =
        rt_post(pc, "/update_weights_from_peer", "{\"url\":\"http://127.0.0.1:%d\"}", f.port);
    fake_wait(&f);
    assert_int_equal(r.code, 400);
    assert_false(json_is_true(json_object_get(r.json, "success")));
    assert_non_null(strstr(r.body, "broke after"));
    assert_non_null(strstr(r.body, "version 0 keeps serving"));
    rt_free(&r);
    rt_outputs_are(pc, dir, "0");
    /* a peer that is not there */
    r = rt_post(pc, "/update_weights_from_peer", "{\"url\":\"http://127.0.0.1:%d\"}", f.port);
    assert_int_equal(r.code, 400);
    assert_non_null(strstr(r.body, "version 0 keeps serving"));
    rt_free(&r);
    /* the real peer: its in-memory weights and its version */
    r = rt_post(pc, "/update_weights_from_peer", "{\"url\":\"http://127.0.0.1:%d\"}", port_a);
    if (r.code != 200)
        fail_msg("%s", r.body);
    assert_string_equal(json_string_value(json_object_get(r.json, "weight_version")), "3");
    rt_free(&r);
    rt_outputs_are(pc, dir_new, "3");
    rt_free(&body);
    areal_rollout_server_stop(c);
}

static void two_servers_take_buckets_of_any_size(void **state) {
    (void)state;
    areal_rollout_server *a = rt_server(dir, "0"), *b = rt_server(dir, "0");
    int ports[2] = {areal_rollout_server_port(a), areal_rollout_server_port(b)};
    areal_wsync *ws = join_both(ports);
    weights fresh, old;
    weights_load(&fresh, dir_new);
    weights_load(&old, dir);
    /* buckets smaller than one tensor: one tensor per bucket, the swap at the last */
    update(ws, ports, &fresh, 1);
    rt_outputs_are(ports[0], dir_new, "1");
    rt_outputs_are(ports[1], dir_new, "1");
    /* one bucket larger than all: back to the old weights */
    update(ws, ports, &old, (size_t)1 << 30);
    rt_outputs_are(ports[0], dir, "2");
    rt_outputs_are(ports[1], dir, "2");

    /* wrong shapes: received (the group stays in step) and refused; version 2 serves */
    areal_wsync_tensor bad = fresh.t[1];
    int64_t flat[2] = {1, bad.shape[0] * (bad.ndim > 1 ? bad.shape[1] : 1)};
    bad.shape = flat;
    bad.ndim = 2;
    char msgs[2][512];
    assert_int_equal(bucket(ws, ports, &bad, 1, true, msgs), 0);
    assert_non_null(strstr(msgs[0], fresh.t[1].name));
    assert_non_null(strstr(msgs[0], "version 2 keeps serving"));
    /* a half-sent update that then fails also leaves version 2 */
    assert_int_equal(bucket(ws, ports, fresh.t, 1, true, NULL), 2);
    rt_outputs_are(ports[0], dir, "2");
    /* the sender dies after announcing a bucket: the servers say so, version 2 serves */
    assert_int_equal(bucket(ws, ports, fresh.t + 1, 2, false, msgs), 0);
    assert_non_null(strstr(msgs[1], "receiving the bucket failed"));
    assert_non_null(strstr(msgs[1], "version 2 keeps serving"));
    rt_outputs_are(ports[0], dir, "2");
    rt_outputs_are(ports[1], dir, "2");
    /* a new group and a full update still work after the failures */
    ws = join_both(ports);
    update(ws, ports, &fresh, 4096);
    rt_outputs_are(ports[0], dir_new, "3");
    rt_outputs_are(ports[1], dir_new, "3");
    peer_pull_takes_in_memory_weights(ports[0], &fresh);
    areal_wsync_close(ws);
    weights_free(&fresh);
    weights_free(&old);
    areal_rollout_server_stop(a);
    areal_rollout_server_stop(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_servers_take_buckets_of_any_size),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
