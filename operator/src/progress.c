/*
 * progress.c - the trainer's /status read into the job's status.progress
 * (see areal/operator/progress.h): parsing, the status.progress object, and a
 * bounded HTTP GET.
 *
 * Why a small GET of our own: the operator's only HTTP client is lib/kube's
 * (libcurl, TLS, the API server's auth); a trainer pod serves plain HTTP on
 * its pod IP with Connection: close, so a socket, a deadline and a status
 * line are all it takes. Rejected: libcurl here too (its closure would become
 * the operator's), and HTTP keep-alive (one request per trainer per period).
 */
#include "areal/operator/progress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BODY_MAX (256 * 1024)

static const char *const phases[] = {
    "starting", "waiting_for_servers", "training", "checkpointing", "done", "failed"};

/* A JSON number into *out (integers too); false for null/absent; -1 for another type. */
static int number(const json_t *o, const char *key, double *out) {
    const json_t *v = json_object_get(o, key);
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        return -1;
    *out = json_number_value(v);
    return 1;
}

static int integer(const json_t *o, const char *key, long long *out) {
    const json_t *v = json_object_get(o, key);
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_integer(v))
        return -1;
    *out = (long long)json_integer_value(v);
    return 1;
}

int progress_parse(const char *body, size_t len, trainer_status *st, areal_error *err) {
    memset(st, 0, sizeof *st);
    json_error_t je;
    json_t *o = json_loadb(body, len, 0, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "trainer /status: not a JSON object (%s); the contract is one "
                               "object with phase, step, policy_version, ...",
                               je.text[0] ? je.text : "an array or a scalar");
    }
    int rc = AREAL_OK;
    const char *phase = json_string_value(json_object_get(o, "phase"));
    bool known = false;
    for (size_t i = 0; phase && i < sizeof phases / sizeof phases[0]; i++)
        known = known || strcmp(phase, phases[i]) == 0;
    if (!known) {
        rc = areal_error_set(err, AREAL_EINVAL, -1,
                             "trainer /status: phase %s%s%s is not one of starting, "
                             "waiting_for_servers, training, checkpointing, done, failed",
                             phase ? "'" : "", phase ? phase : "is missing or not a string",
                             phase ? "'" : "");
        json_decref(o);
        return rc;
    }
    snprintf(st->phase, sizeof st->phase, "%s", phase);
    struct {
        const char *key;
        long long *out;
        bool *has;
    } ints[] = {{"step", &st->step, &st->has_step},
                {"total_steps", &st->total_steps, &st->has_total},
                {"policy_version", &st->policy_version, &st->has_version}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0] && rc == AREAL_OK; i++) {
        int r = integer(o, ints[i].key, ints[i].out);
        if (r < 0)
            rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "trainer /status: %s must be a whole number or null", ints[i].key);
        *ints[i].has = r > 0;
    }
    const json_t *stale = json_object_get(o, "staleness");
    struct {
        const json_t *obj;
        const char *key, *name;
        double *out;
        bool *has;
    } nums[] = {
        {o, "reward_mean", "reward_mean", &st->reward_mean, &st->has_reward},
        {stale, "max", "staleness.max", &st->staleness_max, &st->has_staleness},
        {o, "samples_per_second", "samples_per_second", &st->samples_per_second, &st->has_sps},
        {o, "last_weight_sync_seconds", "last_weight_sync_seconds", &st->last_weight_sync_seconds,
         &st->has_sync},
    };
    if (rc == AREAL_OK && stale != NULL && !json_is_null(stale) && !json_is_object(stale))
        rc = areal_error_set(err, AREAL_EINVAL, -1,
                             "trainer /status: staleness must be an object {max, mean, bound}");
    for (size_t i = 0; i < sizeof nums / sizeof nums[0] && rc == AREAL_OK; i++) {
        int r = number(nums[i].obj, nums[i].key, nums[i].out);
        if (r < 0)
            rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "trainer /status: %s must be a number or null", nums[i].name);
        *nums[i].has = r > 0;
    }
    long long servers = 0;
    int r = rc == AREAL_OK ? integer(o, "servers", &servers) : 0;
    if (r < 0 || servers < 0 || servers > 1 << 20)
        rc = areal_error_set(err, AREAL_EINVAL, -1,
                             "trainer /status: servers must be a whole number >= 0 or null");
    st->has_servers = r > 0;
    st->servers = (int)servers;
    const char *flags[] = {"waiting_for_samples", "running_ahead"};
    bool *fout[] = {&st->waiting_for_samples, &st->running_ahead};
    for (int i = 0; i < 2 && rc == AREAL_OK; i++) {
        const json_t *v = json_object_get(o, flags[i]);
        if (v != NULL && !json_is_null(v) && !json_is_boolean(v))
            rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "trainer /status: %s must be true, false or null", flags[i]);
        *fout[i] = json_is_true(v);
    }
    json_decref(o);
    if (rc != AREAL_OK)
        memset(st, 0, sizeof *st);
    return rc;
}

json_t *progress_json(const trainer_status *st, const char *now) {
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    int bad = 0;
    bad |= json_object_set_new(o, "trainerPhase", json_string(st->phase));
    if (st->has_step)
        bad |= json_object_set_new(o, "step", json_integer(st->step));
    if (st->has_total)
        bad |= json_object_set_new(o, "totalSteps", json_integer(st->total_steps));
    if (st->has_version)
        bad |= json_object_set_new(o, "policyVersion", json_integer(st->policy_version));
    if (st->has_reward)
        bad |= json_object_set_new(o, "rewardMean", json_real(st->reward_mean));
    if (st->has_staleness)
        bad |= json_object_set_new(o, "staleness", json_real(st->staleness_max));
    if (st->has_sps)
        bad |= json_object_set_new(o, "samplesPerSecond", json_real(st->samples_per_second));
    if (st->has_sync)
        bad |= json_object_set_new(o, "lastWeightSyncSeconds",
                                   json_real(st->last_weight_sync_seconds));
    if (st->has_servers)
        bad |= json_object_set_new(o, "servers", json_integer(st->servers));
    if (now != NULL)
        bad |= json_object_set_new(o, "updateTime", json_string(now));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for `events` on fd until the deadline; 1 ready, 0 timeout, -1 error. */
static int wait_fd(int fd, short events, long long deadline) {
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd pfd = {fd, events, 0};
        int r = poll(&pfd, 1, (int)left);
        if (r > 0)
            return 1;
        if (r == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* True when buf holds the headers and a body of the Content-Length they give. */
static bool complete(const char *buf, size_t n) {
    const char *end = strstr(buf, "\r\n\r\n");
    if (end == NULL)
        return false;
    const char *cl = strcasestr(buf, "\r\ncontent-length:");
    if (cl == NULL || cl > end)
        return false;
    return n - (size_t)(end + 4 - buf) >= strtoull(cl + 17, NULL, 10);
}

int progress_http_get(const char *ip, int port, const char *path, int timeout_ms, char **body,
                      size_t *len, areal_error *err) {
    *body = NULL;
    *len = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (ip == NULL || inet_pton(AF_INET, ip, &sa.sin_addr) != 1 || port <= 0 || port > 65535)
        return areal_error_set(err, AREAL_EINVAL, -1, "trainer address '%s:%d' is not IPv4:port",
                               ip ? ip : "", port);
    long long deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 1000);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return areal_error_set(err, AREAL_EIO, -1, "socket: %s", strerror(errno));
    int rc = AREAL_OK;
    char *buf = NULL;
    size_t n = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS) {
        rc = areal_error_set(err, AREAL_EIO, -1, "GET http://%s:%d%s: connect: %s", ip, port, path,
                             strerror(errno));
        goto out;
    }
    int w = wait_fd(fd, POLLOUT, deadline);
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (w <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
        rc = areal_error_set(err, AREAL_EIO, -1, "GET http://%s:%d%s: connect: %s", ip, port, path,
                             w == 0 ? "timed out" : strerror(soerr ? soerr : errno));
        goto out;
    }
    char req[512];
    int rl = snprintf(req, sizeof req,
                      "GET %s HTTP/1.1\r\nHost: %s:%d\r\nAccept: application/json\r\n"
                      "Connection: close\r\n\r\n",
                      path, ip, port);
    for (int sent = 0; sent < rl;) {
        if (wait_fd(fd, POLLOUT, deadline) <= 0) {
            rc = areal_error_set(err, AREAL_EIO, -1, "GET http://%s:%d%s: send timed out", ip, port,
                                 path);
            goto out;
        }
        ssize_t s = send(fd, req + sent, (size_t)(rl - sent), MSG_NOSIGNAL);
        if (s < 0 && errno != EAGAIN && errno != EINTR) {
            rc = areal_error_set(err, AREAL_EIO, -1, "GET http://%s:%d%s: send: %s", ip, port, path,
                                 strerror(errno));
            goto out;
        }
        if (s > 0)
            sent += (int)s;
    }
    size_t cap = 4096;
    buf = malloc(cap + 1);
    if (buf == NULL) {
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
        goto out;
    }
    for (;;) {
        int r = wait_fd(fd, POLLIN, deadline);
        if (r <= 0) {
            rc = areal_error_set(err, AREAL_EIO, -1, "GET http://%s:%d%s: %s", ip, port, path,
                                 r == 0 ? "no complete answer in time" : strerror(errno));
            goto out;
        }
        if (n == cap) {
            if (cap >= BODY_MAX + 8192) {
                rc = areal_error_set(err, AREAL_EIO, -1, "GET http://%s:%d%s: answer over %d KiB",
                                     ip, port, path, BODY_MAX / 1024);
                goto out;
            }
            char *g = realloc(buf, cap * 2 + 1);
            if (g == NULL) {
                rc = areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
                goto out;
            }
            buf = g;
            cap *= 2;
        }
        ssize_t got = recv(fd, buf + n, cap - n, 0);
        if (got == 0)
            break;
        if (got < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            rc = areal_error_set(err, AREAL_EIO, -1, "GET http://%s:%d%s: recv: %s", ip, port, path,
                                 strerror(errno));
            goto out;
        }
        n += (size_t)got;
        buf[n] = '\0';
        if (complete(buf, n))
            break; /* a server that keeps the connection open despite "close" */
    }
    buf[n] = '\0';
    int status = 0;
    char *hdr_end = strstr(buf, "\r\n\r\n");
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1 || hdr_end == NULL) {
        rc = areal_error_set(err, AREAL_EIO, -1, "GET http://%s:%d%s: not an HTTP answer", ip, port,
                             path);
        goto out;
    }
    if (status != 200) {
        rc = areal_error_set(err, AREAL_EIO, -1, "GET http://%s:%d%s: HTTP %d", ip, port, path,
                             status);
        goto out;
    }
    *hdr_end = '\0';
    /* the server closes after the body; Content-Length (when given) must agree */
    const char *body_at = hdr_end + 4;
    size_t blen = n - (size_t)(body_at - buf);
    if (strcasestr(buf, "\r\ntransfer-encoding:") != NULL) {
        rc = areal_error_set(err, AREAL_EIO, -1,
                             "GET http://%s:%d%s: a chunked answer (expected Content-Length)", ip,
                             port, path);
        goto out;
    }
    char *cl = strcasestr(buf, "\r\ncontent-length:");
    unsigned long long want = cl ? strtoull(cl + 17, NULL, 10) : blen;
    if (want != blen) {
        rc = areal_error_set(err, AREAL_EIO, -1,
                             "GET http://%s:%d%s: body of %zu bytes, Content-Length says %llu", ip,
                             port, path, blen, want);
        goto out;
    }
    char *out_body = malloc(blen + 1);
    if (out_body == NULL) {
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
        goto out;
    }
    memcpy(out_body, body_at, blen);
    out_body[blen] = '\0';
    *body = out_body;
    *len = blen;
out:
    free(buf);
    close(fd);
    return rc;
}
