/*
 * bench_e2e_bind.c - create -> every pod bound, for a 128-pod AReaLJob against
 * the e2e control plane (a real kube-apiserver and etcd on loopback; issue
 * goal: under 2 s).
 *
 * How: `e2e/cluster up` with a state dir and ports of its own (not the e2e
 * suite's defaults, so both can run at once) and 18 simulated 8-GPU nodes;
 * areal-operator is started against it and waited for until /readyz says its
 * caches are synced. The bench lists the namespace's pods for a
 * resourceVersion, creates the job (sglang:d127+megatron:d2t4: 127 one-GPU
 * rollout pods and one 8-GPU trainer pod), and watches the pods from that
 * resourceVersion (a watch, not polling) until all 128 have spec.nodeName.
 * Printed: the time to the first pod, to the last create, to the last bind;
 * then, for where the time goes, the same 256 writes (minimal pods, 8 at a
 * time) from a bare client: the API server's floor on this machine.
 * Skipped, saying so, when the pinned control plane is not built (see
 * e2e/README.md; `make e2e` builds it once). `e2e/cluster down` runs at the
 * end whatever happened.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "areal/clock.h"
#include "areal/kube/client.h"
#include "areal/kube/config.h"
#include "areal/kube/watch.h"
#include "areal/keyset.h"

#define N_PODS     128
#define N_NODES    18
#define ALLOCATION "sglang:d127+megatron:d2t4"
#define NS         "bench-a"
#define JOB        "big"
#define STOP_DONE  (-100)

static int run(const char *cmd) {
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

/* The inventory of the simulated nodes, in the format of areal/cluster.h. */
static int write_inventory(const char *path) {
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "gpusPerNode: 8\nnodes:\n");
    for (int i = 0; i < N_NODES; i++)
        fprintf(f,
                "  - name: bench-node-%d\n    gpus: 8\n    cpu: \"64\"\n    memory: 512Gi\n"
                "    labels:\n      network.topology.nvidia.com/leaf: leaf-%d\n",
                i, i / 8);
    return fclose(f);
}

/* The operator's metrics port from its log line {"metrics":"HOST:PORT"}, or 0. */
static int metrics_port(const char *log) {
    FILE *f = fopen(log, "r");
    char line[1024];
    int port = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char *m = strstr(line, "\"metrics\":\"");
        const char *colon = m ? strchr(m + 11, ':') : NULL;
        if (colon)
            port = atoi(colon + 1);
    }
    if (f)
        fclose(f);
    return port;
}

static size_t discard(char *p, size_t s, size_t n, void *ud) {
    (void)p;
    (void)ud;
    return s * n;
}

/* True when GET url answers 200. */
static bool http_ok(const char *url) {
    CURL *h = curl_easy_init();
    if (h == NULL)
        return false;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 1000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    long code = 0;
    bool ok = curl_easy_perform(h) == CURLE_OK &&
              curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code == 200;
    curl_easy_cleanup(h);
    return ok;
}

typedef struct progress {
    double t0, first, created, bound;
    areal_keyset seen, bound_set;
} progress;

static int on_pod(void *ud, const kube_event *ev) {
    progress *p = ud;
    if (ev->type != KUBE_EVENT_ADDED && ev->type != KUBE_EVENT_MODIFIED)
        return KUBE_OK;
    const json_t *meta = json_object_get(ev->object, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    if (name == NULL)
        return KUBE_OK;
    double t = areal_mono_s() - p->t0;
    if (areal_keyset_add(&p->seen, name) == 1) {
        if (p->seen.len == 1)
            p->first = t;
        if (p->seen.len == N_PODS)
            p->created = t;
    }
    if (json_string_value(json_object_get(json_object_get(ev->object, "spec"), "nodeName")) &&
        areal_keyset_add(&p->bound_set, name) == 1 && p->bound_set.len == N_PODS) {
        p->bound = t;
        return STOP_DONE;
    }
    return KUBE_OK;
}

typedef struct watchdog {
    kube_watch *w;
    int seconds;
} watchdog;

static void *watchdog_main(void *arg) {
    watchdog *d = arg;
    sleep((unsigned)d->seconds);
    kube_watch_stop(d->w);
    return NULL;
}

/* ---- the API server's own floor: the same writes from a bare client ---- */

typedef struct floor_ctx {
    kube_client *kc;
    atomic_int next;
    int phase; /* 0 create, 1 bind */
    atomic_int errors;
} floor_ctx;

static void *floor_worker(void *arg) {
    floor_ctx *f = arg;
    kube_resource pods = {NULL, "v1", "pods", NS "-floor"};
    int i;
    while ((i = atomic_fetch_add(&f->next, 1)) < N_PODS) {
        char name[32], node[32];
        snprintf(name, sizeof name, "p-%d", i);
        snprintf(node, sizeof node, "bench-node-%d", i % N_NODES);
        kube_error e;
        int rc;
        if (f->phase == 0) {
            json_t *pod = json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:[{s:s,s:s}]}}", "apiVersion", "v1",
                                    "kind", "Pod", "metadata", "name", name, "spec",
                                    "schedulerName", "areal-operator", "containers", "name",
                                    "worker", "image", "areal/worker:latest");
            rc = kube_create(f->kc, &pods, pod, NULL, &e);
            json_decref(pod);
        } else {
            rc = kube_bind_pod(f->kc, NS "-floor", name, NULL, node, &e);
        }
        if (rc != KUBE_OK)
            atomic_fetch_add(&f->errors, 1);
    }
    return NULL;
}

/* Creates then binds N_PODS minimal pods, 8 requests at a time (as the
 * operator does), and prints how long each phase takes. */
static void server_floor(kube_client *kc) {
    kube_resource nsres = {NULL, "v1", "namespaces", NULL};
    json_t *ns = json_pack("{s:{s:s}}", "metadata", "name", NS "-floor");
    kube_error e;
    int rc = kube_create(kc, &nsres, ns, NULL, &e);
    json_decref(ns);
    if (rc != KUBE_OK)
        return;
    double took[2];
    floor_ctx f = {.kc = kc};
    atomic_init(&f.errors, 0);
    for (f.phase = 0; f.phase < 2; f.phase++) {
        atomic_init(&f.next, 0);
        double t = areal_mono_s();
        pthread_t th[8];
        for (int k = 0; k < 8; k++)
            pthread_create(&th[k], NULL, floor_worker, &f);
        for (int k = 0; k < 8; k++)
            pthread_join(th[k], NULL);
        took[f.phase] = areal_mono_s() - t;
    }
    printf("  the API server's floor on this machine, same writes from a bare client (8 at a "
           "time, minimal pods): %d creates %.2f s + %d binds %.2f s = %.2f s%s\n",
           N_PODS, took[0], N_PODS, took[1], took[0] + took[1],
           atomic_load(&f.errors) ? " (some failed)" : "");
}

/* The measurement against a running cluster and operator; 0 on success. */
static int measure(const char *kubeconfig) {
    kube_config cfg;
    kube_config_init(&cfg);
    kube_error e;
    if (kube_config_load_kubeconfig(&cfg, kubeconfig, NULL, &e) != KUBE_OK) {
        fprintf(stderr, "bench: %s\n", e.msg);
        return 1;
    }
    cfg.qps = 0;
    kube_client *kc = kube_client_new(&cfg, &e);
    kube_config_free(&cfg);
    if (kc == NULL)
        return 1;
    int rc = 1;
    kube_resource nsres = {NULL, "v1", "namespaces", NULL};
    kube_resource pods = {NULL, "v1", "pods", NS};
    kube_resource jobs = {"areal.io", "v1alpha1", "arealjobs", NS};
    json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace", "metadata",
                           "name", NS);
    json_t *job = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s}}", "apiVersion", "areal.io/v1alpha1",
                            "kind", "AReaLJob", "metadata", "name", JOB, "namespace", NS, "spec",
                            "allocation", ALLOCATION, "image", "areal/worker:latest");
    json_t *list = NULL;
    kube_list_opts lo = {.label_selector = "areal.io/job=" JOB};
    kube_watch *w = kube_watch_new(kc, &e);
    progress p = {0};
    areal_keyset_init(&p.seen);
    areal_keyset_init(&p.bound_set);
    if (w == NULL || kube_create(kc, &nsres, ns, NULL, &e) != KUBE_OK ||
        kube_list(kc, &pods, &lo, &list, &e) != KUBE_OK) {
        fprintf(stderr, "bench: %s\n", e.msg);
        goto out;
    }
    char rv[KUBE_RV_MAX];
    snprintf(
        rv, sizeof rv, "%s",
        json_string_value(json_object_get(json_object_get(list, "metadata"), "resourceVersion")));
    p.t0 = areal_mono_s();
    if (kube_create(kc, &jobs, job, NULL, &e) != KUBE_OK) {
        fprintf(stderr, "bench: creating the job: %s\n", e.msg);
        goto out;
    }
    watchdog dog = {w, 120};
    pthread_t th;
    pthread_create(&th, NULL, watchdog_main, &dog);
    pthread_detach(th);
    kube_watch_opts wo = {.label_selector = "areal.io/job=" JOB, .timeout_seconds = 300};
    int wrc = kube_watch_run(w, &pods, &wo, rv, on_pod, &p, &e);
    if (wrc != STOP_DONE) {
        fprintf(stderr,
                "bench: the watch ended before every pod was bound (%zu created, %zu bound): "
                "%s\n",
                p.seen.len, p.bound_set.len,
                wrc == KUBE_ESTOPPED ? "timed out after 120 s" : e.msg);
        goto out;
    }
    printf("create -> all %d pods bound (%s on %d simulated nodes, real kube-apiserver): "
           "%.2f s (first pod %.2f s, all created %.2f s); goal < 2 s: %s\n",
           N_PODS, ALLOCATION, N_NODES, p.bound, p.first, p.created,
           p.bound < 2.0 ? "met" : "NOT met");
    server_floor(kc);
    rc = 0;
out:
    kube_watch_free(w);
    areal_keyset_free(&p.seen);
    areal_keyset_free(&p.bound_set);
    json_decref(list);
    json_decref(ns);
    json_decref(job);
    kube_client_free(kc);
    return rc;
}

int main(void) {
    if (access("e2e/cluster", X_OK) != 0) {
        printf("bench_e2e_bind: skipped: run it from the repository root (make bench)\n");
        return 0;
    }
    if (run("bash -c '. e2e/lib.sh; [ -x \"$E2E_BIN/kube-apiserver\" ]'") != 0) {
        printf("bench_e2e_bind: skipped: the e2e control plane is not built (make e2e builds it "
               "once; see e2e/README.md)\n");
        return 0;
    }
    char self[4096], bin[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = '\0';
    snprintf(bin, sizeof bin, "%s", self);
    for (int up = 0; up < 2; up++) /* build/rel/bench/NAME -> build/rel */
        if (strrchr(bin, '/'))
            *strrchr(bin, '/') = '\0';
    char state[256], inventory[300], kubeconfig[300], log[300], cmd[8192];
    snprintf(state, sizeof state, "/tmp/areal-e2e-bench-%d", (int)getuid());
    snprintf(inventory, sizeof inventory, "%s.nodes.yaml", state);
    snprintf(kubeconfig, sizeof kubeconfig, "%s/kubeconfig", state);
    snprintf(log, sizeof log, "%s.operator.log", state);
    setenv("AREAL_E2E_STATE", state, 1);
    setenv("AREAL_E2E_APISERVER_PORT", "16543", 1);
    setenv("AREAL_E2E_ETCD_PORT", "23890", 1);
    setenv("AREAL_E2E_ETCD_PEER_PORT", "23900", 1);
    snprintf(cmd, sizeof cmd, "%s/areal-e2e-nodes", bin);
    setenv("AREAL_E2E_NODES_BIN", cmd, 1);
    if (write_inventory(inventory) != 0)
        return 1;
    run("e2e/cluster down >/dev/null 2>&1"); /* a cluster left by an interrupted run */
    double t = areal_mono_s();
    snprintf(cmd, sizeof cmd, "e2e/cluster up %s >%s.up.log 2>&1", inventory, state);
    if (run(cmd) != 0) {
        fprintf(stderr, "bench_e2e_bind: e2e/cluster up failed; its output:\n");
        snprintf(cmd, sizeof cmd, "tail -n 30 %s.up.log >&2", state);
        run(cmd);
        run("e2e/cluster down >/dev/null 2>&1");
        return 1;
    }
    double up_s = areal_mono_s() - t;
    pid_t op = fork();
    if (op == 0) {
        FILE *out = freopen(log, "w", stderr);
        (void)out;
        snprintf(cmd, sizeof cmd, "%s/areal-operator", bin);
        execl(cmd, cmd, "--kubeconfig", kubeconfig, "--metrics-address", "127.0.0.1:0",
              (char *)NULL);
        _exit(127);
    }
    int rc = 1;
    double t_ready = areal_mono_s();
    bool ready = false;
    while (op > 0 && !ready && areal_mono_s() - t_ready < 60) {
        int port = metrics_port(log);
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%d/readyz", port);
        ready = port > 0 && http_ok(url);
        if (!ready)
            usleep(50 * 1000);
    }
    double ready_s = areal_mono_s() - t_ready;
    if (!ready)
        fprintf(stderr, "bench_e2e_bind: areal-operator did not become ready in 60 s\n");
    else
        rc = measure(kubeconfig);
    if (rc == 0) {
        printf("  (cluster up %.1f s; operator ready %.2f s after start; operator metrics:", up_s,
               ready_s);
        fflush(stdout);
        snprintf(cmd, sizeof cmd,
                 "curl -s http://127.0.0.1:%d/metrics | grep -E "
                 "'^areal_(reconciles_total|actions_total)' | tr '\\n' ' '; echo ')'",
                 metrics_port(log));
        run(cmd);
    }
    if (op > 0) {
        kill(op, SIGTERM);
        waitpid(op, NULL, 0);
    }
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "tail -n 20 %s >&2", log);
        run(cmd);
    }
    run("e2e/cluster down >/dev/null 2>&1");
    unlink(inventory);
    unlink(log);
    snprintf(cmd, sizeof cmd, "%s.up.log", state);
    unlink(cmd);
    return rc;
}
