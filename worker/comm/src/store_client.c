/*
 * store_client.c - the rendezvous store's client; see areal/comm/store.h.
 *
 * One request, one response, under a mutex. A blocking get/wait gives the
 * server the caller's timeout and waits for the answer a little longer (the
 * server answers TIMEOUT itself), so a lost server still ends the call.
 */
#include "areal/comm/store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "areal/comm/store_proto.h"

/* Extra time granted to the server to answer a request whose own timeout passed. */
#define ANSWER_SLACK_MS 2000

struct areal_store {
    pthread_mutex_t mu;
    int fd;
    int timeout_ms;
    char where[AREAL_HOST_MAX + 32];
    areal_error broken; /* code != 0 once the connection is unusable */
    uint8_t *buf;       /* AREAL_STORE_FRAME_MAX bytes, requests and responses */
};

int areal_store_connect(const char *host, int port, int connect_timeout_ms, int timeout_ms,
                        areal_store **out, areal_error *err) {
    if (timeout_ms <= 0 || connect_timeout_ms < 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "store timeouts must be positive");
    areal_store *s = calloc(1, sizeof *s);
    uint8_t *buf = malloc(AREAL_STORE_FRAME_MAX);
    if (s == NULL || buf == NULL) {
        free(s);
        free(buf);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for a store client");
    }
    snprintf(s->where, sizeof s->where, "the store at %s:%d", host ? host : "", port);
    int rc = areal_net_connect(host, port, areal_now_ms() + connect_timeout_ms, true, "the store",
                               &s->fd, err);
    if (rc != AREAL_OK) {
        free(s);
        free(buf);
        return rc;
    }
    pthread_mutex_init(&s->mu, NULL);
    s->timeout_ms = timeout_ms;
    s->buf = buf;
    areal_error_clear(&s->broken);
    *out = s;
    return AREAL_OK;
}

void areal_store_close(areal_store *s) {
    if (s == NULL)
        return;
    close(s->fd);
    pthread_mutex_destroy(&s->mu);
    free(s->buf);
    free(s);
}

static int fail(areal_store *s, int code, areal_error *err) {
    if (err != NULL && err != &s->broken)
        *err = s->broken;
    return code;
}

/*
 * Sends r and reads the answer into *resp (pointing into s->buf) before
 * the deadline. Holds s->mu.
 */
static int roundtrip(areal_store *s, const areal_store_req *r, int wait_ms, areal_store_resp *resp,
                     areal_error *err) {
    if (s->broken.code != AREAL_OK)
        return fail(s, s->broken.code, err);
    if (r->key_len == 0 || r->key_len > AREAL_STORE_KEY_MAX)
        return areal_error_set(err, AREAL_EINVAL, -1, "store key length %u is outside 1..%u",
                               r->key_len, AREAL_STORE_KEY_MAX);
    if (r->val_len > AREAL_STORE_VAL_MAX || r->val2_len > AREAL_STORE_VAL_MAX)
        return areal_error_set(err, AREAL_ERANGE, -1, "store value is larger than %u bytes",
                               AREAL_STORE_VAL_MAX);
    size_t n = areal_store_encode_req(r, s->buf, AREAL_STORE_FRAME_MAX);
    if (n == 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "store request could not be encoded");
    int64_t deadline = areal_now_ms() + wait_ms + s->timeout_ms;
    int rc = areal_net_send_all(s->fd, s->buf, n, deadline, s->where, &s->broken);
    if (rc == AREAL_OK)
        rc =
            areal_net_recv_all(s->fd, s->buf, AREAL_STORE_RESP_HDR, deadline, s->where, &s->broken);
    size_t used = 0;
    if (rc == AREAL_OK) {
        uint32_t vlen = areal_get_u32(s->buf + 8);
        if (vlen > AREAL_STORE_VAL_MAX)
            rc = areal_error_set(&s->broken, AREAL_EIO, -1, "%s sent a malformed response",
                                 s->where);
        else
            rc = areal_net_recv_all(s->fd, s->buf + AREAL_STORE_RESP_HDR, vlen, deadline, s->where,
                                    &s->broken);
    }
    if (rc == AREAL_OK) {
        areal_error de;
        int d = areal_store_decode_resp(s->buf, AREAL_STORE_FRAME_MAX, resp, &used, &de);
        if (d != 1)
            rc = areal_error_set(&s->broken, AREAL_EIO, -1, "%s sent a malformed response: %s",
                                 s->where, de.msg);
    }
    if (rc != AREAL_OK) {
        s->broken.code = AREAL_EIO;
        return fail(s, AREAL_EIO, err);
    }
    return AREAL_OK;
}

static int status_error(areal_store *s, const areal_store_resp *r, const char *op, const char *key,
                        int timeout_ms, areal_error *err) {
    switch (r->status) {
    case AREAL_STORE_OK:
        return AREAL_OK;
    case AREAL_STORE_TIMEOUT:
        return areal_error_set(err, AREAL_EIO, -1,
                               "%s of key '%s' at %s timed out after %d ms: no rank set it", op,
                               key, s->where, timeout_ms);
    case AREAL_STORE_FULL:
        return areal_error_set(err, AREAL_ERANGE, -1, "%s of key '%s': %s is full", op, key,
                               s->where);
    case AREAL_STORE_BADREQ:
        return areal_error_set(err, AREAL_EINVAL, -1, "%s of key '%s' rejected by %s: %.*s", op,
                               key, s->where, (int)(r->val_len > 300 ? 300 : r->val_len),
                               (const char *)r->val);
    default:
        return areal_error_set(err, AREAL_EIO, -1, "%s of key '%s': not found", op, key);
    }
}

static areal_store_req req_of(areal_store_op op, const char *key) {
    areal_store_req r;
    memset(&r, 0, sizeof r);
    r.op = op;
    r.key = (const uint8_t *)key;
    r.key_len = key ? (uint32_t)strnlen(key, AREAL_STORE_KEY_MAX + 1) : 0;
    return r;
}

/* Copies the response value out as areal_store_get documents. */
static int copy_val(const areal_store_resp *r, void *buf, size_t cap, size_t *n, const char *key,
                    areal_error *err) {
    if (n != NULL)
        *n = r->val_len;
    if (r->val_len > cap)
        return areal_error_set(err, AREAL_ERANGE, -1,
                               "value of key '%s' has %u bytes, more than the %zu-byte buffer", key,
                               r->val_len, cap);
    if (r->val_len)
        memcpy(buf, r->val, r->val_len);
    return AREAL_OK;
}

int areal_store_set(areal_store *s, const char *key, const void *val, size_t n, areal_error *err) {
    if (n > AREAL_STORE_VAL_MAX)
        return areal_error_set(err, AREAL_ERANGE, -1, "value for '%s' exceeds %u bytes", key,
                               AREAL_STORE_VAL_MAX);
    areal_store_req r = req_of(AREAL_STORE_SET, key);
    r.val = val;
    r.val_len = (uint32_t)n;
    areal_store_resp resp;
    pthread_mutex_lock(&s->mu);
    int rc = roundtrip(s, &r, 0, &resp, err);
    if (rc == AREAL_OK)
        rc = status_error(s, &resp, "set", key, 0, err);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static int waitish(areal_store *s, areal_store_op op, const char *key, int timeout_ms, void *buf,
                   size_t cap, size_t *n, areal_error *err) {
    if (timeout_ms < 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "negative timeout for key '%s'", key);
    areal_store_req r = req_of(op, key);
    r.timeout_ms = (uint32_t)timeout_ms;
    areal_store_resp resp;
    pthread_mutex_lock(&s->mu);
    int rc = roundtrip(s, &r, timeout_ms + ANSWER_SLACK_MS, &resp, err);
    if (rc == AREAL_OK)
        rc = status_error(s, &resp, op == AREAL_STORE_GET ? "get" : "wait", key, timeout_ms, err);
    if (rc == AREAL_OK && op == AREAL_STORE_GET)
        rc = copy_val(&resp, buf, cap, n, key, err);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int areal_store_get(areal_store *s, const char *key, int timeout_ms, void *buf, size_t cap,
                    size_t *n, areal_error *err) {
    return waitish(s, AREAL_STORE_GET, key, timeout_ms, buf, cap, n, err);
}

int areal_store_wait(areal_store *s, const char *key, int timeout_ms, areal_error *err) {
    return waitish(s, AREAL_STORE_WAIT, key, timeout_ms, NULL, 0, NULL, err);
}

int areal_store_add(areal_store *s, const char *key, int64_t delta, int64_t *out,
                    areal_error *err) {
    uint8_t d[8];
    areal_put_u64(d, (uint64_t)delta);
    areal_store_req r = req_of(AREAL_STORE_ADD, key);
    r.val = d;
    r.val_len = 8;
    areal_store_resp resp;
    pthread_mutex_lock(&s->mu);
    int rc = roundtrip(s, &r, 0, &resp, err);
    if (rc == AREAL_OK)
        rc = status_error(s, &resp, "add", key, 0, err);
    if (rc == AREAL_OK && resp.val_len != 8)
        rc = areal_error_set(err, AREAL_EIO, -1, "add of key '%s': %s sent no counter", key,
                             s->where);
    if (rc == AREAL_OK && out != NULL)
        *out = (int64_t)areal_get_u64(resp.val);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int areal_store_cas(areal_store *s, const char *key, const void *expected, size_t en,
                    const void *desired, size_t dn, void *buf, size_t cap, size_t *n,
                    areal_error *err) {
    if (en > AREAL_STORE_VAL_MAX || dn > AREAL_STORE_VAL_MAX)
        return areal_error_set(err, AREAL_ERANGE, -1, "value for '%s' exceeds %u bytes", key,
                               AREAL_STORE_VAL_MAX);
    areal_store_req r = req_of(AREAL_STORE_CAS, key);
    r.val = expected;
    r.val_len = (uint32_t)en;
    r.val2 = desired;
    r.val2_len = (uint32_t)dn;
    areal_store_resp resp;
    pthread_mutex_lock(&s->mu);
    int rc = roundtrip(s, &r, 0, &resp, err);
    if (rc == AREAL_OK)
        rc = status_error(s, &resp, "compare-and-set", key, 0, err);
    if (rc == AREAL_OK)
        rc = copy_val(&resp, buf, cap, n, key, err);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static int simple(areal_store *s, areal_store_op op, const char *key, int *flag, areal_error *err) {
    areal_store_req r = req_of(op, key);
    areal_store_resp resp;
    pthread_mutex_lock(&s->mu);
    int rc = roundtrip(s, &r, 0, &resp, err);
    if (rc == AREAL_OK) {
        if (flag != NULL)
            *flag = resp.status == AREAL_STORE_OK;
        if (resp.status != AREAL_STORE_NOTFOUND)
            rc = status_error(s, &resp, op == AREAL_STORE_DEL ? "delete" : "check", key, 0, err);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int areal_store_delete(areal_store *s, const char *key, int *existed, areal_error *err) {
    return simple(s, AREAL_STORE_DEL, key, existed, err);
}

int areal_store_check(areal_store *s, const char *key, int *exists, areal_error *err) {
    return simple(s, AREAL_STORE_CHECK, key, exists, err);
}
