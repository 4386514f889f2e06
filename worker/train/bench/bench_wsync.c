/*
 * bench_wsync.c - `make bench`: seconds per weight update of the trainer's two
 * modes against real `areal-worker serve` processes (two of them), for models
 * of two sizes, beside the bytes moved and the measured loopback bandwidth:
 *   disk: the policy saved as HF safetensors (hf_save) + POST
 *         /update_weights_from_disk to both servers (what train_loop.c does);
 *   xccl: areal_xccl_update (one bucket of the whole model, and 16 MiB buckets).
 * Loopback: one TCP connection on 127.0.0.1, 512 MiB written and read.
 * The binary is $AREAL_BIN/areal-worker (default build/rel).
 * AREAL_BENCH_QUICK=1: the small model only, 3 updates each.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "areal/train/hf_save.h"
#include "areal/train/rollout_ctl.h"
#include "areal/train/tiny.h"
#include "areal/train/xccl.h"
#include "bench_serve.h"

/* ---- loopback bandwidth ------------------------------------------------------------ */

typedef struct sink {
    int fd;
    size_t got;
} sink;

static void *sink_main(void *arg) {
    sink *k = arg;
    char *buf = malloc(1 << 20);
    ssize_t r;
    while (buf && (r = read(k->fd, buf, 1 << 20)) > 0)
        k->got += (size_t)r;
    free(buf);
    return NULL;
}

static double loopback_gbs(void) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    socklen_t len = sizeof a;
    if (bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 1) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &len) != 0)
        return 0;
    int cs = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(cs, (struct sockaddr *)&a, sizeof a) != 0)
        return 0;
    sink k = {accept(ls, NULL, NULL), 0};
    pthread_t t;
    pthread_create(&t, NULL, sink_main, &k);
    size_t total = (size_t)512 << 20, chunk = 1 << 20, sent = 0;
    char *buf = calloc(1, chunk);
    double t0 = now_s();
    while (buf && sent < total) {
        ssize_t w = write(cs, buf, chunk);
        if (w <= 0)
            break;
        sent += (size_t)w;
    }
    close(cs);
    pthread_join(t, NULL);
    double dt = now_s() - t0;
    close(k.fd);
    close(ls);
    free(buf);
    return (double)k.got / dt / 1e9;
}

/* ---- one model size ---------------------------------------------------------------- */

static int no_prompt(void *ctx, areal_rollout_prompt *p) {
    (void)ctx;
    (void)p;
    return 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int one_size(const char *label, areal_tiny_cfg tc, int reps, double lo_gbs) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/areal-bench-wsync-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(dir) == NULL)
        return -1;
    char model[300];
    snprintf(model, sizeof model, "%s/model", dir);
    mkdir(model, 0755);
    areal_error e;
    areal_model m;
    srv s[2] = {{0}, {0}};
    areal_rollout_ctl *ctl = NULL;
    int rc = areal_tiny_create(model, &tc, &e);
    if (rc == 0)
        rc = areal_model_load(&m, model, NULL, &e);
    if (rc != 0) {
        fprintf(stderr, "bench_wsync: %s\n", e.msg);
        return -1;
    }
    if (serve(model, &s[0]) != 0 || serve(model, &s[1]) != 0) {
        fprintf(stderr, "bench_wsync: areal-worker serve did not start (AREAL_BIN?)\n");
        rc = -1;
    }
    const char *addrs[] = {s[0].addr, s[1].addr};
    areal_rollout_cfg rcfg;
    memset(&rcfg, 0, sizeof rcfg);
    rcfg.group_size = 1;
    rcfg.n_workers = 1;
    rcfg.sampling.max_new_tokens = 1;
    rcfg.batch_size = 1;
    rcfg.request_timeout_s = 600;
    areal_rollout_callbacks cb = {no_prompt, NULL, NULL, NULL, NULL};
    if (rc == 0)
        rc = areal_rollout_ctl_start(&rcfg, addrs, 2, &cb, &ctl, &e);
    double bytes = (double)m.n_params * 4;
    double t[16];
    if (rc == 0) {
        for (int r = 0; r < reps && rc == 0; r++) {
            char v[400], abs_dir[4096];
            snprintf(v, sizeof v, "%s/weight_update_v%d", dir, r + 1);
            double t0 = now_s();
            rc = areal_hf_save(&m, model, v, &e);
            if (rc == 0 && realpath(v, abs_dir) != NULL) {
                json_t *body =
                    json_pack("{s:s,s:b}", "model_path", abs_dir, "abort_all_requests", 1);
                rc = areal_rollout_ctl_broadcast(ctl, "/update_weights_from_disk", body, &e);
                json_decref(body);
            }
            t[r] = now_s() - t0;
        }
        if (rc == 0)
            printf("| %s | %.1f MB | disk (safetensors + /update_weights_from_disk) | - | %.3f s | "
                   "%.2f GB/s | %.2f GB/s |\n",
                   label, bytes / 1e6, median(t, reps), 2 * bytes / median(t, reps) / 1e9, lo_gbs);
    }
    size_t buckets[2] = {0, (size_t)16 << 20};
    for (int k = 0; k < 2 && rc == 0; k++) {
        areal_xccl_cfg xc = {
            .bucket_bytes = buckets[k], .timeout_ms = 120000, .http_timeout_s = 600};
        areal_xccl *x = NULL;
        rc = areal_xccl_open(&xc, ctl, &x, &e);
        areal_xccl_stats st = {0};
        for (int r = 0; r < reps && rc == 0; r++) {
            rc = areal_xccl_update(x, ctl, &m, 100 + r, true, &st, &e);
            t[r] = st.seconds;
        }
        if (rc == 0)
            printf("| %s | %.1f MB | xccl (%s buckets) | %d | %.3f s | %.2f GB/s | %.2f GB/s |\n",
                   label, bytes / 1e6, k == 0 ? "1 GiB" : "16 MiB", st.buckets, median(t, reps),
                   2 * bytes / median(t, reps) / 1e9, lo_gbs);
        areal_xccl_close(x);
    }
    if (rc != 0)
        fprintf(stderr, "bench_wsync: %s\n", e.msg);
    areal_rollout_ctl_stop(ctl);
    unserve(&s[0]);
    unserve(&s[1]);
    areal_model_free(&m);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_wsync: could not remove %s\n", dir);
    return rc;
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    bool quick = getenv("AREAL_BENCH_QUICK") && strcmp(getenv("AREAL_BENCH_QUICK"), "1") == 0;
    int reps = quick ? 3 : 5;
    double lo = loopback_gbs();
    printf("bench_wsync: weight update to 2 areal-worker serve processes on this machine "
           "(median of %d); loopback TCP %.2f GB/s\n\n",
           reps, lo);
    printf(
        "| model | bytes (f32) | mode | buckets | s / update | bytes x servers / s | loopback |\n");
    printf("| --- | ---: | --- | ---: | ---: | ---: | ---: |\n");
    areal_tiny_cfg small = areal_tiny_default();
    int rc = one_size("tiny demo (hidden 64, 2 layers)", small, reps, lo);
    if (rc == 0 && !quick) {
        areal_tiny_cfg mid = {512, 2048, 4, 8, 2, 1};
        rc = one_size("hidden 512, 4 layers", mid, reps, lo);
    }
    return rc == 0 ? 0 : 1;
}
