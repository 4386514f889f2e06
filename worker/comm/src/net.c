/*
 * net.c - TCP with deadlines; see areal/comm/net.h.
 *
 * Connect is non-blocking connect(2) + poll for writability + SO_ERROR, once
 * per resolved address, so an unroutable address costs at most the deadline.
 * Rejected: blocking connect (the kernel's SYN retry timeout is minutes).
 */
#include "areal/comm/net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int64_t areal_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t areal_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int remaining_ms(int64_t deadline_ms) {
    int64_t left = deadline_ms - areal_now_ms();
    if (left < 0)
        return 0;
    return left > 1000000000 ? 1000000000 : (int)left;
}

static void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int fl = fcntl(fd, F_GETFL, 0);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

void areal_put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint32_t areal_get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

void areal_put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t areal_get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int resolve(const char *host, int port, bool passive, struct addrinfo **res,
                   areal_error *err) {
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    const char *h = (host == NULL || host[0] == '\0') ? NULL : host;
    int rc = getaddrinfo(h, ps, &hints, res);
    if (rc != 0)
        return areal_error_set(err, AREAL_EIO, -1,
                               "cannot resolve %s:%d: %s; check the host name (MASTER_ADDR or the "
                               "peer's published address)",
                               h ? h : "*", port, gai_strerror(rc));
    return AREAL_OK;
}

int areal_net_listen(const char *host, int port, int *fd, int *port_out, areal_error *err) {
    if (port < 0 || port > 65535)
        return areal_error_set(err, AREAL_EINVAL, -1, "port %d is out of range 0..65535", port);
    struct addrinfo *res = NULL;
    int rc = resolve(host, port, true, &res, err);
    if (rc != AREAL_OK)
        return rc;
    int saved = 0, s = -1;
    for (struct addrinfo *a = res; a != NULL; a = a->ai_next) {
        s = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (s < 0) {
            saved = errno;
            continue;
        }
        int one = 1;
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(s, a->ai_addr, a->ai_addrlen) == 0 && listen(s, 4096) == 0)
            break;
        saved = errno;
        close(s);
        s = -1;
    }
    freeaddrinfo(res);
    const char *h = (host == NULL || host[0] == '\0') ? "*" : host;
    if (s < 0) {
        if (saved == EADDRINUSE)
            return areal_error_set(err, AREAL_EIO, -1,
                                   "cannot listen on %s:%d: port already in use (another store, "
                                   "job or program holds it); choose another MASTER_PORT",
                                   h, port);
        return areal_error_set(err, AREAL_EIO, -1, "cannot listen on %s:%d: %s", h, port,
                               strerror(saved));
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int bound = port;
    if (getsockname(s, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET)
            bound = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6)
            bound = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    int fl = fcntl(s, F_GETFL, 0);
    fcntl(s, F_SETFL, fl | O_NONBLOCK);
    *fd = s;
    if (port_out != NULL)
        *port_out = bound;
    return AREAL_OK;
}

/* One non-blocking connect attempt; returns 0, or an errno value. */
static int try_connect(const struct addrinfo *a, int64_t deadline_ms, int *fd) {
    int s = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (s < 0)
        return errno;
    if (connect(s, a->ai_addr, a->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            close(s);
            return e;
        }
        struct pollfd p = {.fd = s, .events = POLLOUT};
        int n;
        do
            n = poll(&p, 1, remaining_ms(deadline_ms));
        while (n < 0 && errno == EINTR);
        if (n == 0) {
            close(s);
            return ETIMEDOUT;
        }
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (n < 0 || getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
            close(s);
            return soerr != 0 ? soerr : errno;
        }
    }
    tune(s);
    *fd = s;
    return 0;
}

int areal_net_connect(const char *host, int port, int64_t deadline_ms, bool retry, const char *what,
                      int *fd, areal_error *err) {
    if (host == NULL || host[0] == '\0' || port <= 0 || port > 65535)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s address %s:%d is invalid: need a host name and a port 1..65535",
                               what, host ? host : "", port);
    /* A name that does not resolve yet is retried like a refused connection:
     * in a cluster a peer's DNS record appears only once its pod has an IP. */
    struct addrinfo *res = NULL;
    int last = ETIMEDOUT, delay = 20;
    int64_t start = areal_now_ms();
    for (;;) {
        int rc = res == NULL ? resolve(host, port, false, &res, err) : AREAL_OK;
        for (struct addrinfo *a = res; a != NULL; a = a->ai_next) {
            last = try_connect(a, deadline_ms, fd);
            if (last == 0) {
                freeaddrinfo(res);
                return AREAL_OK;
            }
        }
        int left = remaining_ms(deadline_ms);
        if (!retry || left == 0) {
            if (rc != AREAL_OK)
                return rc;
            break;
        }
        int nap = delay < left ? delay : left;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)nap * 1000000L};
        nanosleep(&ts, NULL);
        delay = delay * 2 > 200 ? 200 : delay * 2;
    }
    freeaddrinfo(res);
    return areal_error_set(err, AREAL_EIO, -1,
                           "cannot reach %s at %s:%d after %lld ms: %s; check that it is running "
                           "and that the address and port are right",
                           what, host, port, (long long)(areal_now_ms() - start), strerror(last));
}

int areal_net_accept(int lfd, int64_t deadline_ms, int *fd, areal_error *err) {
    for (;;) {
        int s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (s >= 0) {
            tune(s);
            *fd = s;
            return AREAL_OK;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
            return areal_error_set(err, AREAL_EIO, -1, "accept failed: %s", strerror(errno));
        int left = remaining_ms(deadline_ms);
        if (left == 0)
            return areal_error_set(err, AREAL_EIO, -1, "timed out waiting for a connection");
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        poll(&p, 1, left);
    }
}

static int wait_fd(int fd, short ev, int64_t deadline_ms) {
    int left = remaining_ms(deadline_ms);
    if (left == 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = ev};
    int n = poll(&p, 1, left);
    return n < 0 && errno == EINTR ? 1 : n;
}

int areal_net_send_all(int fd, const void *buf, size_t n, int64_t deadline_ms, const char *peer,
                       areal_error *err) {
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return areal_error_set(err, AREAL_EIO, -1, "sending to %s failed: %s", peer,
                                   strerror(errno));
        if (wait_fd(fd, POLLOUT, deadline_ms) == 0)
            return areal_error_set(err, AREAL_EIO, -1,
                                   "timed out sending to %s (the peer stopped reading)", peer);
    }
    return AREAL_OK;
}

int areal_net_recv_all(int fd, void *buf, size_t n, int64_t deadline_ms, const char *peer,
                       areal_error *err) {
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t k = recv(fd, p, n, 0);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k == 0)
            return areal_error_set(err, AREAL_EIO, -1, "%s closed the connection", peer);
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return areal_error_set(err, AREAL_EIO, -1, "receiving from %s failed: %s", peer,
                                   strerror(errno));
        if (wait_fd(fd, POLLIN, deadline_ms) == 0)
            return areal_error_set(err, AREAL_EIO, -1,
                                   "timed out waiting for %s (no answer before the deadline)",
                                   peer);
    }
    return AREAL_OK;
}

int areal_net_split_hostport(const char *s, char host[AREAL_HOST_MAX], int *port,
                             areal_error *err) {
    const char *colon = NULL, *hs = s, *he;
    if (s == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "missing host:port");
    if (s[0] == '[') {
        he = strchr(s, ']');
        if (he == NULL || he[1] != ':')
            return areal_error_set(err, AREAL_EINVAL, -1, "'%s' is not [host]:port", s);
        hs = s + 1;
        colon = he + 1;
    } else {
        colon = strrchr(s, ':');
        he = colon;
    }
    if (colon == NULL || he == hs || (size_t)(he - hs) >= AREAL_HOST_MAX)
        return areal_error_set(err, AREAL_EINVAL, -1, "'%s' is not host:port", s);
    char *end = NULL;
    long p = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end != '\0' || p <= 0 || p > 65535)
        return areal_error_set(err, AREAL_EINVAL, -1, "'%s' has no valid port (1..65535)", s);
    memcpy(host, hs, (size_t)(he - hs));
    host[he - hs] = '\0';
    *port = (int)p;
    return AREAL_OK;
}

/* Fills an abstract-namespace address for name; returns its length, or 0 when too long. */
static socklen_t unix_addr(const char *name, struct sockaddr_un *a) {
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 100 || n + 1 > sizeof a->sun_path)
        return 0;
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    memcpy(a->sun_path + 1, name, n); /* sun_path[0] = 0: abstract */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int areal_net_listen_unix(const char *name, int *fd, areal_error *err) {
    struct sockaddr_un a;
    socklen_t len = unix_addr(name, &a);
    if (len == 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "local socket name must have 1..100 bytes");
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return areal_error_set(err, AREAL_EIO, -1, "local socket: %s", strerror(errno));
    if (bind(s, (struct sockaddr *)&a, len) != 0 || listen(s, 4096) != 0) {
        int e = errno;
        close(s);
        return areal_error_set(err, AREAL_EIO, -1, "cannot listen on local socket @%s: %s", name,
                               strerror(e));
    }
    *fd = s;
    return AREAL_OK;
}

int areal_net_connect_unix(const char *name, int64_t deadline_ms, const char *what, int *fd,
                           areal_error *err) {
    struct sockaddr_un a;
    socklen_t len = unix_addr(name, &a);
    if (len == 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: local socket name must have 1..100 "
                               "bytes",
                               what);
    int last = 0, delay = 20;
    for (;;) {
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s < 0)
            return areal_error_set(err, AREAL_EIO, -1, "local socket: %s", strerror(errno));
        /* a Unix connect completes at once, or fails (EAGAIN: the backlog is full) */
        if (connect(s, (struct sockaddr *)&a, len) == 0) {
            *fd = s;
            return AREAL_OK;
        }
        last = errno;
        close(s);
        int left = remaining_ms(deadline_ms);
        if (left == 0 || (last != ECONNREFUSED && last != ENOENT && last != EAGAIN))
            break;
        int nap = delay < left ? delay : left;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)nap * 1000000L};
        nanosleep(&ts, NULL);
        delay = delay * 2 > 200 ? 200 : delay * 2;
    }
    return areal_error_set(err, AREAL_EIO, -1, "cannot reach %s at local socket @%s: %s", what,
                           name, strerror(last));
}
