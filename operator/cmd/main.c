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
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "areal/escape.h"
#include "areal/kube/client.h"
#include "areal/kube/config.h"
#include "areal/log.h"
#include "areal/operator/controller.h"
#include "areal/operator/httpd.h"
#include "areal/operator/lease.h"
#include "areal/operator/progress.h"
#include "areal/operator/progress_targets.h"
#include "areal/http/metrics.h"
#include "areal/version.h"

typedef struct options {
    const char *kubeconfig, *context, *ns, *scheduler, *image, *metrics_addr;
    const char *lease_ns, *lease_name, *identity;
    double qps;
    int burst, workers;
    int progress_port; /* the trainers' /status port; 0: no progress polling */
    double progress_s; /* between progress rounds */
    char metrics_host[128];
    int metrics_port;
    bool leader_elect;
} options;

typedef struct app {
    options opt;
    controller *ctl;
    kube_client *kc;
    leader_elector *le;
    metrics_registry *metrics;
    progress_poller *progress;
    pthread_t ctl_thread;
    atomic_bool ctl_started, lost;
} app;

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: areal-operator [--kubeconfig PATH] [--context NAME] [--namespace NS]\n"
        "                      [--qps N] [--burst N] [--workers N] [--scheduler-name NAME]\n"
        "                      [--default-image IMAGE] [--metrics-address HOST:PORT]\n"
        "                      [--leader-elect] [--lease-namespace NS] [--lease-name NAME]\n"
        "                      [--id IDENTITY] [--progress-port N] [--progress-interval S]\n"
        "Reconciles AReaLJobs: gang-plans, creates and binds their pods (README.md).\n"
        "  --kubeconfig PATH      else $KUBECONFIG, else the in-cluster service account\n"
        "  --context NAME         a context of the kubeconfig\n"
        "  --namespace NS         watch the AReaLJobs of one namespace (default all)\n"
        "  --qps N, --burst N     client-side rate limits (default 100, 300)\n"
        "  --workers N            reconcile workers, 1 to 16 (default 2)\n"
        "  --scheduler-name NAME  the scheduler the pods name (default areal-operator)\n"
        "  --default-image IMAGE  the worker image (default areal-worker:latest)\n"
        "  --metrics-address HOST:PORT  /metrics, /healthz, /readyz (default 0.0.0.0:8080)\n"
        "  --leader-elect         hold a Lease before reconciling (--lease-namespace,\n"
        "                         --lease-name, --id)\n"
        "  --progress-port N      the trainers' GET /status port for status.progress\n"
        "                         (default 8090, the trainer's; 0: no progress)\n"
        "  --progress-interval S  seconds between progress reads (default 5)\n"
        "  --help, --version\n"
        "Logs are JSON lines on stderr (AREAL_LOG_FORMAT=text for a terminal).\n" AREAL_EXIT_HELP);
}

/* One "areal-operator: ..." error line (control bytes escaped); returns 2. */
__attribute__((format(printf, 1, 2))) static int bad_usage(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    areal_print_line(stderr, "areal-operator: %s", msg);
    return AREAL_EXIT_USAGE;
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
        {"progress-port", required_argument, NULL, 'P'},
        {"progress-interval", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
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
                   .workers = 2,
                   .progress_port = 8090,
                   .progress_s = 5,
                   .metrics_host = "0.0.0.0",
                   .metrics_port = 8080};
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
                return bad_usage("--qps '%s': expected a positive number", optarg);
            break;
        case 'b':
            o->burst = (int)strtol(optarg, &end, 10);
            if (end == optarg || *end || o->burst <= 0)
                return bad_usage("--burst '%s': expected a positive whole number", optarg);
            break;
        case 'w':
            o->workers = (int)strtol(optarg, &end, 10);
            if (end == optarg || *end || o->workers <= 0 || o->workers > 16)
                return bad_usage("--workers '%s': expected 1 to 16", optarg);
            break;
        case 's':
            o->scheduler = optarg;
            break;
        case 'i':
            o->image = optarg;
            break;
        case 'm': {
            o->metrics_addr = optarg;
            const char *colon = strrchr(optarg, ':');
            long port = colon ? strtol(colon + 1, &end, 10) : -1;
            if (colon == NULL || end == colon + 1 || *end || port < 0 || port > 65535 ||
                (size_t)(colon - optarg) >= sizeof o->metrics_host)
                return bad_usage("--metrics-address '%s': expected HOST:PORT, e.g. 0.0.0.0:8080",
                                 optarg);
            snprintf(o->metrics_host, sizeof o->metrics_host, "%.*s", (int)(colon - optarg),
                     optarg);
            o->metrics_port = (int)port;
            break;
        }
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
        case 'P':
            o->progress_port = (int)strtol(optarg, &end, 10);
            if (end == optarg || *end || o->progress_port < 0 || o->progress_port > 65535)
                return bad_usage("--progress-port '%s': expected 0 (off) to 65535", optarg);
            break;
        case 'T':
            o->progress_s = strtod(optarg, &end);
            if (end == optarg || *end || !(o->progress_s >= 0.1 && o->progress_s <= 3600))
                return bad_usage("--progress-interval '%s': expected 0.1 to 3600 seconds", optarg);
            break;
        case 'h':
            usage(stdout);
            return -1;
        case 'V':
            areal_print_version(stdout, "areal-operator");
            return -1;
        default:
            return bad_usage("unknown or incomplete option '%s'; see areal-operator --help",
                             argv[optind - 1]);
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
    areal_log(AREAL_LOG_INFO, "operator", NULL, "leading: starting the controller");
    if (pthread_create(&a->ctl_thread, NULL, run_controller, a) == 0)
        atomic_store(&a->ctl_started, true);
    /* only the leader writes progress, as it writes everything else */
    if (a->opt.progress_port > 0) {
        progress_config pc = {.port = a->opt.progress_port,
                              .interval_ms = (int)(a->opt.progress_s * 1000)};
        areal_error err;
        if (progress_poller_start(a->kc, &pc, progress_targets_of_controller, a->ctl, a->metrics,
                                  &a->progress, &err) != AREAL_OK)
            areal_log(AREAL_LOG_ERROR, "operator", NULL, "no progress polling: %s", err.msg);
    }
}

static void on_lost(void *ud) {
    app *a = ud;
    areal_log(AREAL_LOG_ERROR, "operator", NULL, "lost the leader lease; stopping");
    atomic_store(&a->lost, true);
    kill(getpid(), SIGTERM); /* main's sigwait stops everything */
}

int main(int argc, char **argv) {
    app a = {0};
    int rc = parse(argc, argv, &a.opt);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    areal_log_setup();

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
        areal_log(AREAL_LOG_ERROR, "operator", NULL, "%s", kerr.msg);
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
        areal_log(AREAL_LOG_ERROR, "operator", NULL, "%s", kerr.msg);
        return 2;
    }
    a.kc = kc;
    a.metrics = metrics_registry_new();
    controller_config ccfg = {
        .ns = a.opt.ns,
        .workers = a.opt.workers,
        .desired = {.scheduler_name = a.opt.scheduler, .default_image = a.opt.image}};
    areal_error err;
    if (controller_new(kc, &ccfg, a.metrics, &a.ctl, &err) != AREAL_OK) {
        areal_log(AREAL_LOG_ERROR, "operator", NULL, "%s", err.msg);
        return 1;
    }
    const char *host = a.opt.metrics_host;
    int port = a.opt.metrics_port;
    httpd_handlers h = {.metrics = render_metrics, .ready = is_ready, .ud = &a};
    operator_httpd *httpd = NULL;
    if (httpd_start(host, port, &h, &httpd, &err) != AREAL_OK) {
        areal_log(AREAL_LOG_ERROR, "operator", NULL, "--metrics-address: %s", err.msg);
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
            areal_log(AREAL_LOG_ERROR, "operator", NULL, "%s", err.msg);
            return 2;
        }
    } else {
        on_started(&a);
    }
    char metrics[160];
    snprintf(metrics, sizeof metrics, "%s:%d", host, httpd_port(httpd));
    areal_log(AREAL_LOG_INFO, "operator",
              AREAL_FIELDS({"metrics", metrics}, {"version", areal_version()}),
              "areal-operator running");
    int sig = 0;
    sigwait(&sigs, &sig);
    areal_log(AREAL_LOG_INFO, "operator", NULL, "signal %d: stopping", sig);
    progress_poller_stop(a.progress);
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
