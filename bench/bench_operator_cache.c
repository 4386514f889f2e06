/*
 * bench_operator_cache.c - resident memory of the operator's informer caches
 * holding 10,000 pods and 4,000 nodes (issue goal: under 32 MB).
 *
 * How: the cluster is served by the fake API server of the operator's tests
 * (operator/tests/util/fake_api.h) in a forked child, so its memory is not
 * counted; the objects look like real API objects (managedFields, env,
 * conditions, node images and ~15 labels). The real controller lists and
 * watches them through the kube client (pages of 100) until its caches are
 * synced. Figures, from /proc/self/status after malloc_trim: the growth of
 * VmRSS over the process before the controller started (what the caches and
 * the controller keep), and the growth of VmHWM (the peak, during the lists:
 * one page's JSON plus the staging store). For comparison the same objects
 * are then kept whole as jansson trees, in a fresh process (this program
 * re-run with --json), the form the caches held before compact entries.
 */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../operator/tests/util/fake_api.h"
#include "areal/clock.h"
#include "areal/kube/client.h"
#include "areal/operator/cache.h"
#include "areal/operator/controller.h"

#define N_PODS  10000
#define N_NODES 4000

static void mem_kb(long *rss, long *hwm) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    *rss = *hwm = -1;
    while (f && fgets(line, sizeof line, f)) {
        sscanf(line, "VmRSS: %ld kB", rss);
        sscanf(line, "VmHWM: %ld kB", hwm);
    }
    if (f)
        fclose(f);
}

static kube_client *client_for(const char *url) {
    kube_config cfg;
    kube_config_init(&cfg);
    cfg.server = strdup(url);
    cfg.allow_insecure = 1;
    cfg.qps = 0;
    kube_client *kc = kube_client_new(&cfg, NULL);
    kube_config_free(&cfg);
    return kc;
}

static void *run_ctl(void *arg) {
    controller_run(arg);
    return NULL;
}

/* The controller's caches. 0 on success. */
static int compact(const char *url) {
    kube_client *kc = client_for(url);
    if (kc == NULL)
        return 1;
    malloc_trim(0);
    long rss0, hwm0;
    mem_kb(&rss0, &hwm0);
    controller_config cfg = {.workers = 2};
    controller *ctl;
    areal_error err;
    if (controller_new(kc, &cfg, NULL, &ctl, &err) != AREAL_OK) {
        fprintf(stderr, "controller_new: %s\n", err.msg);
        return 1;
    }
    double t0 = areal_mono_s();
    pthread_t th;
    pthread_create(&th, NULL, run_ctl, ctl);
    while (!controller_synced(ctl) && areal_mono_s() - t0 < 120) {
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    double synced = areal_mono_s() - t0;
    size_t pods, nodes;
    controller_cache_sizes(ctl, NULL, &pods, &nodes);
    malloc_trim(0);
    long rss1, hwm1;
    mem_kb(&rss1, &hwm1);
    controller_stop(ctl);
    pthread_join(th, NULL);
    controller_free(ctl);
    kube_client_free(kc);
    if (pods != N_PODS || nodes != N_NODES) {
        fprintf(stderr, "the caches hold %zu pods and %zu nodes, expected %d and %d\n", pods, nodes,
                N_PODS, N_NODES);
        return 1;
    }
    double rss = (double)(rss1 - rss0) / 1024.0, peak = (double)(hwm1 - rss0) / 1024.0;
    printf("operator caches with %zu pods and %zu nodes (listed in pages of 100 from a loopback "
           "API server in %.2f s): %.1f MB resident (VmRSS growth), peak %.1f MB during the lists "
           "(VmHWM growth); goal < 32 MB: %s\n",
           pods, nodes, synced, rss, peak, rss < 32.0 ? "met" : "NOT met");
    return 0;
}

static int keep_page(void *cache, const json_t *items) {
    return cache_replace_items(cache, items) == 0 ? KUBE_OK : KUBE_ENOMEM;
}

/* The same objects kept as whole jansson trees (the old form), for comparison. */
static int whole(const char *url) {
    kube_client *kc = client_for(url);
    if (kc == NULL)
        return 1;
    malloc_trim(0);
    long rss0, hwm0;
    mem_kb(&rss0, &hwm0);
    obj_cache *pods = cache_new(&cache_ops_json), *nodes = cache_new(&cache_ops_json);
    kube_list_opts lo = {.limit = 500};
    kube_resource rp = {NULL, "v1", "pods", NULL}, rn = {NULL, "v1", "nodes", NULL};
    kube_error e;
    cache_replace_begin(pods);
    cache_replace_begin(nodes);
    int rc = kube_list_pages(kc, &rp, &lo, keep_page, pods, NULL, 0, &e);
    if (rc == KUBE_OK)
        rc = kube_list_pages(kc, &rn, &lo, keep_page, nodes, NULL, 0, &e);
    cache_replace_end(pods, true);
    cache_replace_end(nodes, true);
    malloc_trim(0);
    long rss1, hwm1;
    mem_kb(&rss1, &hwm1);
    if (rc != KUBE_OK || cache_len(pods) != N_PODS || cache_len(nodes) != N_NODES) {
        fprintf(stderr, "listing for the comparison failed: %s\n", rc ? e.msg : "wrong counts");
        return 1;
    }
    printf("the same objects kept whole as jansson trees: %.1f MB resident (for comparison; "
           "the pruned jansson trees of the previous caches measured 81 MB)\n",
           (double)(rss1 - rss0) / 1024.0);
    cache_free(pods);
    cache_free(nodes);
    kube_client_free(kc);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--json") == 0)
        return whole(argv[2]);
    char url[128];
    pid_t server;
    if (fake_api_fork(N_PODS, N_NODES, url, sizeof url, &server) != 0) {
        fprintf(stderr, "cannot start the fake API server\n");
        return 1;
    }
    int rc = compact(url);
    if (rc == 0) {
        fflush(stdout);
        pid_t child = fork();
        if (child == 0) {
            execl("/proc/self/exe", argv[0], "--json", url, (char *)NULL);
            _exit(127);
        }
        int st = 1;
        if (child < 0 || waitpid(child, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            rc = 1;
    }
    kill(server, SIGTERM);
    waitpid(server, NULL, 0);
    return rc;
}
