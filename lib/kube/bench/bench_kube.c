/*
 * bench_kube.c - `make bench` figures of the Kubernetes client:
 *   1. watch framing + event decoding of 20,000 pod events (~0.5 KB each), fed in
 *      1,400-byte chunks (one TCP segment) and in 7-byte chunks (worst case), and
 *      framing alone (decoding, i.e. jansson, is most of the cost);
 *   2. sequential GETs over loopback plain HTTP against a minimal keep-alive
 *      responder in this file: one client reusing its connection, versus a new
 *      client (new connection) per request as the official C client does.
 * Each figure is the median of 5 runs on this machine, wall clock. Plain HTTP
 * hides the TLS handshake, so figure 2 understates the gain of reuse.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "areal/kube/client.h"
#include "areal/kube/ratelimit.h"
#include "areal/kube/watch.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median5(double *v) {
    qsort(v, 5, sizeof *v, cmp_double);
    return v[2];
}

static int count_event(void *ud, const char *line, size_t len) {
    kube_event ev;
    if (kube_event_decode(line, len, &ev, NULL) != KUBE_OK)
        return -1;
    (*(long *)ud)++;
    kube_event_clear(&ev);
    return 0;
}

static int count_line(void *ud, const char *line, size_t len) {
    (void)line;
    (void)len;
    (*(long *)ud)++;
    return 0;
}

static void bench_framer(void) {
    const int n = 20000;
    size_t cap = (size_t)n * 640, len = 0;
    char *s = malloc(cap);
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(
            s + len, cap - len,
            "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\","
            "\"metadata\":"
            "{\"name\":\"trainer-%d\",\"namespace\":\"default\",\"uid\":\"6f1c2a9e-%08d\","
            "\"resourceVersion\":\"%d\",\"labels\":{\"areal.io/job\":\"demo\",\"areal.io/role\":"
            "\"trainer\"},\"ownerReferences\":[{\"apiVersion\":\"areal.io/v1alpha1\",\"kind\":"
            "\"AReaLJob\",\"name\":\"demo\",\"uid\":\"u\",\"controller\":true}]},\"spec\":{"
            "\"nodeName\":\"node-%d\",\"schedulerName\":\"areal-operator\",\"containers\":[{"
            "\"name\":\"worker\",\"image\":\"areal/worker:latest\",\"resources\":{\"limits\":{"
            "\"nvidia.com/gpu\":\"8\"}}}]},\"status\":{\"phase\":\"Running\",\"podIP\":"
            "\"10.0.%d.%d\"}}}\n",
            i, i, 1000 + i, i % 512, (i / 256) % 256, i % 256);
    const size_t chunks[3] = {1400, 7, 1400};
    for (int c = 0; c < 3; c++) {
        kube_line_fn fn = c < 2 ? count_event : count_line;
        double t[5];
        for (int r = 0; r < 5; r++) {
            kube_framer *f = kube_framer_new(1 << 20);
            long events = 0;
            double t0 = kube_now();
            for (size_t off = 0; off < len; off += chunks[c]) {
                size_t k = len - off < chunks[c] ? len - off : chunks[c];
                if (kube_framer_feed(f, s + off, k, fn, &events, NULL) != 0)
                    break;
            }
            t[r] = kube_now() - t0;
            kube_framer_free(f);
            if (events != n) {
                printf("framer: decoded %ld of %d events\n", events, n);
                exit(1);
            }
        }
        double m = median5(t);
        printf("watch %s, %4zu-byte chunks: %d events (%.1f MB) in %.1f ms = %.0f "
               "events/s, %.0f MB/s\n",
               c < 2 ? "framing+decode" : "framing only  ", chunks[c], n, (double)len / 1e6,
               m * 1e3, n / m, (double)len / 1e6 / m);
    }
    free(s);
}

/* ---- a minimal keep-alive responder -------------------------------------- */

typedef struct srv {
    int lfd, port;
    atomic_int stop;
    pthread_t th;
} srv;

static void *serve_conn(void *arg) {
    int fd = (int)(intptr_t)arg;
    char buf[8192];
    size_t have = 0;
    static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               "Content-Length: 2\r\n\r\n{}";
    for (;;) {
        ssize_t r = recv(fd, buf + have, sizeof buf - 1 - have, 0);
        if (r <= 0)
            break;
        have += (size_t)r;
        buf[have] = '\0';
        char *end;
        while ((end = strstr(buf, "\r\n\r\n")) != NULL) {
            if (send(fd, resp, sizeof resp - 1, MSG_NOSIGNAL) < 0)
                goto out;
            size_t used = (size_t)(end - buf) + 4;
            memmove(buf, buf + used, have - used);
            have -= used;
            buf[have] = '\0';
        }
        if (have >= sizeof buf - 1)
            break;
    }
out:
    close(fd);
    return NULL;
}

static void *accept_loop(void *arg) {
    srv *s = arg;
    while (!atomic_load(&s->stop)) {
        struct pollfd p = {s->lfd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_t t;
        if (pthread_create(&t, NULL, serve_conn, (void *)(intptr_t)fd) == 0)
            pthread_detach(t);
        else
            close(fd);
    }
    return NULL;
}

static int srv_start(srv *s) {
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(s->lfd, 128) != 0 || getsockname(s->lfd, (struct sockaddr *)&sa, &sl) != 0)
        return -1;
    s->port = ntohs(sa.sin_port);
    atomic_init(&s->stop, 0);
    return pthread_create(&s->th, NULL, accept_loop, s);
}

static void bench_requests(void) {
    srv s;
    if (srv_start(&s) != 0) {
        printf("requests: cannot start the loopback responder\n");
        exit(1);
    }
    kube_config cfg;
    kube_config_init(&cfg);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s.port);
    cfg.server = url;
    cfg.allow_insecure = 1;
    cfg.qps = 0;
    kube_resource pods = {NULL, "v1", "pods", "default"};
    const int reuse_n = 2000, fresh_n = 300;
    double reuse[5], fresh[5];
    for (int r = 0; r < 5; r++) {
        kube_client *c = kube_client_new(&cfg, NULL);
        double t0 = kube_now();
        for (int i = 0; i < reuse_n; i++)
            if (kube_get(c, &pods, "p", NULL, NULL) != KUBE_OK)
                exit(1);
        reuse[r] = (kube_now() - t0) / reuse_n;
        kube_client_free(c);
        t0 = kube_now();
        for (int i = 0; i < fresh_n; i++) {
            c = kube_client_new(&cfg, NULL);
            if (kube_get(c, &pods, "p", NULL, NULL) != KUBE_OK)
                exit(1);
            kube_client_free(c);
        }
        fresh[r] = (kube_now() - t0) / fresh_n;
    }
    double a = median5(reuse), b = median5(fresh);
    printf("GET over loopback http, reused connection: %.1f us/request (%.0f requests/s)\n",
           a * 1e6, 1 / a);
    printf("GET over loopback http, new client+connection each: %.1f us/request (%.1fx slower)\n",
           b * 1e6, b / a);
    cfg.server = NULL;
    kube_config_free(&cfg);
    atomic_store(&s.stop, 1);
    pthread_join(s.th, NULL);
    close(s.lfd);
}

int main(void) {
    bench_framer();
    bench_requests();
    return 0;
}
