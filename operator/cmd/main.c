/*
 * main.c - areal-operator: flags, the API client, the HTTP endpoints, leader
 * election and the controller; stops cleanly on SIGTERM/SIGINT.
 *
 * Signals are blocked in every thread and taken by sigwait in main, so no
 * library code ever runs in a signal handler.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "areal/kube/client.h"
#include "areal/kube/config.h"
#include "areal/operator/controller.h"
#include "areal/operator/httpd.h"
#include "areal/operator/lease.h"
#include "areal/http/metrics.h"

typedef struct options {
    const char *kubeconfig, *context, *ns, *scheduler, *image, *metrics_addr;
    const char *lease_ns, *lease_name, *identity;
    double qps;
    int burst, workers;
    bool leader_elect;
} options;

typedef struct app {
    options opt;
    controller *ctl;
    leader_elector *le;
    metrics_registry *metrics;
    pthread_t ctl_thread;
    atomic_bool ctl_started, lost;
} app;

static void usage(FILE *out) {
    fprintf(out,
            "usage: areal-operator [--kubeconfig PATH] [--context NAME] [--namespace NS]\n"
            "                      [--qps N] [--burst N] [--workers N] [--scheduler-name NAME]\n"
            "                      [--default-image IMAGE] [--metrics-address HOST:PORT]\n"
            "                      [--leader-elect] [--lease-namespace NS] [--lease-name NAME]\n"
            "                      [--id IDENTITY]\n"
            "Without --kubeconfig it uses $KUBECONFIG, else the in-cluster service account.\n");
}

static int parse(int argc, char **argv, options *o) {
    static const struct option opts[] = {
        {"kubeconfig", required_argument, NULL, 'k'},
        {"context", required_argument, NULL, 'c'},
        {"namespace", required_argument, NULL, 'n'},
        {"qps", required_argument, NULL, 'q'},
        {"burst", required_argument, NULL, 'b'},
        {"workers", required_argument, NULL, 'w'},
        {"scheduler-name", required_argument, NULL, 's'},
        {"default-image", required_argument, NULL, 'i'},
        {"metrics-address", required_argument, NULL, 'm'},
        {"leader-elect", no_argument, NULL, 'L'},
        {"lease-namespace", required_argument, NULL, 'N'},
        {"lease-name", required_argument, NULL, 'E'},
        {"id", required_argument, NULL, 'I'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (options){.scheduler = "areal-operator",
                   .image = "areal-worker:latest",
                   .metrics_addr = "0.0.0.0:8080",
                   .lease_name = "areal-operator",
                   /* a 128-pod gang is ~260 writes at once (creates, binds, status):
                    * the burst lets one gang through without waiting on the rate */
                   .qps = 100,
                   .burst = 300,
                   .workers = 2};
    opterr = 0;
    for (;;) {
        int c = getopt_long(argc, argv, "", opts, NULL);
        if (c == -1)
            break;
        char *end = NULL;
        switch (c) {
        case 'k':
            o->kubeconfig = optarg;
            break;
        case 'c':
            o->context = optarg;
            break;
        case 'n':
            o->ns = optarg;
            break;
        case 'q':
            o->qps = strtod(optarg, &end);
            if (end == optarg || *end || o->qps <= 0)
                return fprintf(stderr, "areal-operator: --qps '%s': expected a positive number\n",
                               optarg),
                       2;
            break;
        case 'b':
            o->burst = (int)strtol(optarg, &end, 10);
            if (end == optarg || *end || o->burst <= 0)
                return fprintf(stderr,
                               "areal-operator: --burst '%s': expected a positive whole number\n",
                               optarg),
                       2;
            break;
        case 'w':
            o->workers = (int)strtol(optarg, &end, 10);
            if (end == optarg || *end || o->workers <= 0 || o->workers > 16)
                return fprintf(stderr, "areal-operator: --workers '%s': expected 1 to 16\n",
                               optarg),
                       2;
            break;
        case 's':
            o->scheduler = optarg;
            break;
        case 'i':
            o->image = optarg;
            break;
        case 'm':
            o->metrics_addr = optarg;
            break;
        case 'L':
            o->leader_elect = true;
            break;
        case 'N':
            o->lease_ns = optarg;
            break;
        case 'E':
            o->lease_name = optarg;
            break;
        case 'I':
            o->identity = optarg;
            break;
        case 'h':
            usage(stdout);
            return -1;
        default:
            fprintf(stderr, "areal-operator: unknown or incomplete option '%s'; see --help\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    return 0;
}

static char *render_metrics(void *ud, size_t *len) {
    return metrics_render(((app *)ud)->metrics, len);
}

static bool is_ready(void *ud) {
    app *a = ud;
    return atomic_load(&a->ctl_started) && controller_synced(a->ctl);
}

static void *run_controller(void *arg) {
    controller_run(((app *)arg)->ctl);
    return NULL;
}

static void on_started(void *ud) {
    app *a = ud;
    fprintf(stderr, "{\"level\":\"info\",\"msg\":\"leading: starting the controller\"}\n");
    if (pthread_create(&a->ctl_thread, NULL, run_controller, a) == 0)
        atomic_store(&a->ctl_started, true);
}

static void on_lost(void *ud) {
    app *a = ud;
    fprintf(stderr, "{\"level\":\"error\",\"msg\":\"lost the leader lease; stopping\"}\n");
    atomic_store(&a->lost, true);
    kill(getpid(), SIGTERM); /* main's sigwait stops everything */
}

int main(int argc, char **argv) {
    app a = {0};
    int rc = parse(argc, argv, &a.opt);
    if (rc != 0)
        return rc < 0 ? 0 : rc;

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* every thread inherits the mask */
    signal(SIGPIPE, SIG_IGN);

    kube_config cfg;
    kube_config_init(&cfg);
    kube_error kerr;
    const char *path = a.opt.kubeconfig ? a.opt.kubeconfig : getenv("KUBECONFIG");
    rc = path ? kube_config_load_kubeconfig(&cfg, path, a.opt.context, &kerr)
              : kube_config_in_cluster(&cfg, NULL, &kerr);
    if (rc != KUBE_OK) {
        fprintf(stderr, "areal-operator: %s\n", kerr.msg);
        kube_config_free(&cfg);
        return 2;
    }
    cfg.qps = a.opt.qps;
    cfg.burst = a.opt.burst;
    kube_client *kc = kube_client_new(&cfg, &kerr);
    const char *lease_ns = a.opt.lease_ns ? a.opt.lease_ns : (cfg.ns ? cfg.ns : "default");
    char lease_ns_buf[64];
    snprintf(lease_ns_buf, sizeof lease_ns_buf, "%s", lease_ns);
    kube_config_free(&cfg);
    if (kc == NULL) {
        fprintf(stderr, "areal-operator: %s\n", kerr.msg);
        return 2;
    }
    a.metrics = metrics_registry_new();
    controller_config ccfg = {
        .ns = a.opt.ns,
        .workers = a.opt.workers,
        .desired = {.scheduler_name = a.opt.scheduler, .default_image = a.opt.image}};
    areal_error err;
    if (controller_new(kc, &ccfg, a.metrics, &a.ctl, &err) != AREAL_OK) {
        fprintf(stderr, "areal-operator: %s\n", err.msg);
        return 1;
    }
    char host[128] = "0.0.0.0";
    int port = 8080;
    const char *colon = strrchr(a.opt.metrics_addr, ':');
    if (colon != NULL) {
        snprintf(host, sizeof host, "%.*s", (int)(colon - a.opt.metrics_addr), a.opt.metrics_addr);
        port = atoi(colon + 1);
    }
    httpd_handlers h = {.metrics = render_metrics, .ready = is_ready, .ud = &a};
    operator_httpd *httpd = NULL;
    if (httpd_start(host, port, &h, &httpd, &err) != AREAL_OK) {
        fprintf(stderr, "areal-operator: --metrics-address: %s\n", err.msg);
        return 2;
    }
    if (a.opt.leader_elect) {
        char ident[128];
        if (a.opt.identity == NULL) {
            char hostname[64] = "operator";
            gethostname(hostname, sizeof hostname - 1);
            snprintf(ident, sizeof ident, "%s-%ld", hostname, (long)getpid());
        } else {
            snprintf(ident, sizeof ident, "%s", a.opt.identity);
        }
        lease_config lc = {.ns = lease_ns_buf, .name = a.opt.lease_name, .identity = ident};
        if (leader_elector_start(kc, &lc, on_started, on_lost, &a, &a.le, &err) != AREAL_OK) {
            fprintf(stderr, "areal-operator: %s\n", err.msg);
            return 2;
        }
    } else {
        on_started(&a);
    }
    fprintf(stderr,
            "{\"level\":\"info\",\"msg\":\"areal-operator running\",\"metrics\":\"%s:%d\"}\n", host,
            httpd_port(httpd));
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "{\"level\":\"info\",\"msg\":\"signal %d: stopping\"}\n", sig);
    controller_stop(a.ctl);
    if (atomic_load(&a.ctl_started))
        pthread_join(a.ctl_thread, NULL);
    leader_elector_stop(a.le);
    httpd_stop(httpd);
    controller_free(a.ctl);
    metrics_registry_free(a.metrics);
    kube_client_free(kc);
    return atomic_load(&a.lost) ? 1 : 0;
}
