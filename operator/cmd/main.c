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
#include "areal/operator/metrics_auth.h"
#include "areal/operator/progress.h"
#include "areal/operator/progress_targets.h"
#include "areal/http/metrics.h"
#include "areal/http/tls.h"
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
    bool metrics_secure;
    const char *cert_dir; /* tls.crt + tls.key; NULL: self-signed at start */
    char probe_host[128]; /* "" : the probes on the metrics address (plain only) */
    int probe_port;
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
        "                      [--metrics-secure] [--metrics-cert-dir DIR]\n"
        "                      [--health-probe-address HOST:PORT]\n"
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
        "  --metrics-address HOST:PORT  /metrics (and /healthz, /readyz unless\n"
        "                         --health-probe-address; default 0.0.0.0:8080)\n"
        "  --metrics-secure       /metrics over HTTPS, each scrape's bearer token checked\n"
        "                         by the API server (TokenReview, then SubjectAccessReview\n"
        "                         for get on the non-resource URL /metrics)\n"
        "  --metrics-cert-dir DIR the serving certificate DIR/tls.crt and key DIR/tls.key\n"
        "                         (a kubernetes.io/tls Secret mounted); default: a\n"
        "                         self-signed one made at start\n"
        "  --health-probe-address HOST:PORT  /healthz and /readyz, plain HTTP (default:\n"
        "                         on --metrics-address; with --metrics-secure, port 8081\n"
        "                         of the metrics host)\n"
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

/* "HOST:PORT" into host (cap bytes) and *port; false when malformed. */
static bool host_port(const char *arg, char *host, size_t cap, int *port) {
    const char *colon = strrchr(arg, ':');
    char *end = NULL;
    long p = colon ? strtol(colon + 1, &end, 10) : -1;
    if (colon == NULL || colon == arg || end == colon + 1 || *end || p < 0 || p > 65535 ||
        (size_t)(colon - arg) >= cap)
        return false;
    snprintf(host, cap, "%.*s", (int)(colon - arg), arg);
    *port = (int)p;
    return true;
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
        {"metrics-secure", no_argument, NULL, 'S'},
        {"metrics-cert-dir", required_argument, NULL, 'C'},
        {"health-probe-address", required_argument, NULL, 'H'},
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
        case 'm':
            o->metrics_addr = optarg;
            if (!host_port(optarg, o->metrics_host, sizeof o->metrics_host, &o->metrics_port))
                return bad_usage("--metrics-address '%s': expected HOST:PORT, e.g. 0.0.0.0:8080",
                                 optarg);
            break;
        case 'S':
            o->metrics_secure = true;
            break;
        case 'C':
            o->cert_dir = optarg;
            break;
        case 'H':
            if (!host_port(optarg, o->probe_host, sizeof o->probe_host, &o->probe_port))
                return bad_usage(
                    "--health-probe-address '%s': expected HOST:PORT, e.g. 0.0.0.0:8081", optarg);
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
    if (o->cert_dir != NULL && !o->metrics_secure)
        return bad_usage("--metrics-cert-dir needs --metrics-secure (plain HTTP has no "
                         "certificate)");
    if (o->metrics_secure && o->probe_host[0] == '\0') {
        snprintf(o->probe_host, sizeof o->probe_host, "%s", o->metrics_host);
        o->probe_port = 8081;
    }
    return 0;
}

/* The whole of file `path` (malloc'd text) or NULL with *why set. */
static char *read_text(const char *path, char *why, size_t why_len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(why, why_len, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, len = 0, n;
    char *buf = malloc(cap);
    bool big = false;
    while (buf != NULL && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 < cap)
            continue;
        char *grown = cap < (1u << 20) ? realloc(buf, cap * 2) : NULL;
        big = cap >= (1u << 20);
        if (grown == NULL) {
            free(buf);
            buf = NULL;
        }
        buf = grown;
        cap *= 2;
    }
    fclose(f);
    if (buf == NULL)
        snprintf(why, why_len,
                 big ? "%s is over 1 MiB: not a certificate or key" : "out of memory reading %s",
                 path);
    else
        buf[len] = '\0';
    return buf;
}

/*
 * The serving pair of --metrics-secure: DIR/tls.crt and DIR/tls.key when
 * --metrics-cert-dir is given (checked to belong together), else a
 * self-signed certificate for the names a client may use (the pod's host
 * name, the metrics address when it is not the wildcard, localhost).
 */
static int serving_pair(const options *o, char **cert, char **key, areal_error *err) {
    *cert = *key = NULL;
    if (o->cert_dir != NULL) {
        char cpath[1100], kpath[1100], why[1200];
        snprintf(cpath, sizeof cpath, "%s/tls.crt", o->cert_dir);
        snprintf(kpath, sizeof kpath, "%s/tls.key", o->cert_dir);
        if ((*cert = read_text(cpath, why, sizeof why)) == NULL ||
            (*key = read_text(kpath, why, sizeof why)) == NULL) {
            free(*cert);
            *cert = NULL;
            return areal_error_set(err, AREAL_EIO, -1, "--metrics-cert-dir: %s", why);
        }
        char what[1200];
        snprintf(what, sizeof what, "--metrics-cert-dir %s (tls.crt, tls.key)", o->cert_dir);
        int rc = areal_http_tls_check(*cert, *key, what, err);
        if (rc != AREAL_OK) {
            free(*cert);
            free(*key);
            *cert = *key = NULL;
        }
        return rc;
    }
    char hostname[256] = "";
    gethostname(hostname, sizeof hostname - 1);
    const char *names[4];
    int n = 0;
    if (hostname[0] != '\0')
        names[n++] = hostname;
    if (strcmp(o->metrics_host, "0.0.0.0") != 0)
        names[n++] = o->metrics_host;
    names[n++] = "localhost";
    names[n++] = "127.0.0.1";
    return areal_http_tls_self_signed(names, n, 365, cert, key, err);
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

/* What main made before it serves, freed on an early exit (ASan's leak check
 * runs at every exit, so a refused flag must leave nothing behind either). */
static int early_exit(app *a, metrics_auth *auth, char *cert, char *key, int rc) {
    metrics_auth_free(auth);
    free(cert);
    free(key);
    controller_free(a->ctl);
    metrics_registry_free(a->metrics);
    kube_client_free(a->kc);
    return rc;
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

    /* the serving pair first: a bad --metrics-cert-dir is refused before any client exists */
    char *cert = NULL, *key = NULL;
    areal_error err;
    if (a.opt.metrics_secure && serving_pair(&a.opt, &cert, &key, &err) != AREAL_OK) {
        areal_log(AREAL_LOG_ERROR, "operator", NULL, "%s", err.msg);
        return 2;
    }
    kube_config cfg;
    kube_config_init(&cfg);
    kube_error kerr;
    const char *path = a.opt.kubeconfig ? a.opt.kubeconfig : getenv("KUBECONFIG");
    rc = path ? kube_config_load_kubeconfig(&cfg, path, a.opt.context, &kerr)
              : kube_config_in_cluster(&cfg, NULL, &kerr);
    if (rc != KUBE_OK) {
        areal_log(AREAL_LOG_ERROR, "operator", NULL, "%s", kerr.msg);
        kube_config_free(&cfg);
        return early_exit(&a, NULL, cert, key, 2);
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
        return early_exit(&a, NULL, cert, key, 2);
    }
    a.kc = kc;
    a.metrics = metrics_registry_new();
    controller_config ccfg = {
        .ns = a.opt.ns,
        .workers = a.opt.workers,
        .desired = {.scheduler_name = a.opt.scheduler, .default_image = a.opt.image}};
    if (controller_new(kc, &ccfg, a.metrics, &a.ctl, &err) != AREAL_OK) {
        areal_log(AREAL_LOG_ERROR, "operator", NULL, "%s", err.msg);
        return early_exit(&a, NULL, cert, key, 1);
    }
    const char *host = a.opt.metrics_host;
    httpd_handlers h = {.metrics = render_metrics, .ready = is_ready, .ud = &a};
    httpd_config hc = {.metrics_host = host,
                       .metrics_port = a.opt.metrics_port,
                       .probe_host = a.opt.probe_host[0] ? a.opt.probe_host : NULL,
                       .probe_port = a.opt.probe_port};
    metrics_auth *auth = NULL;
    if (a.opt.metrics_secure) {
        metrics_auth_config ac = {.review = metrics_auth_review_kube, .review_ud = kc};
        if ((auth = metrics_auth_new(&ac)) == NULL) {
            areal_log(AREAL_LOG_ERROR, "operator", NULL, "out of memory");
            return early_exit(&a, NULL, cert, key, 1);
        }
        hc.tls_cert_pem = cert;
        hc.tls_key_pem = key;
        hc.auth = auth;
    }
    operator_httpd *httpd = NULL;
    rc = httpd_start_with(&hc, &h, &httpd, &err);
    if (rc != AREAL_OK) {
        areal_log(AREAL_LOG_ERROR, "operator", NULL, "--metrics-address: %s", err.msg);
        return early_exit(&a, auth, cert, key, 2);
    }
    free(cert); /* the server keeps its own copy */
    free(key);
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
    /* "metrics" stays HOST:PORT, the form scripts and bench_e2e_bind parse
     * since the first release; the scheme is a field of its own rather than
     * a URL in that one (a URL there broke every reader of the port). */
    char metrics[200], probes[160];
    snprintf(metrics, sizeof metrics, "%s:%d", host, httpd_port(httpd));
    snprintf(probes, sizeof probes, "%s:%d", hc.probe_host ? hc.probe_host : host,
             httpd_probe_port(httpd));
    areal_log(AREAL_LOG_INFO, "operator",
              AREAL_FIELDS({"metrics", metrics}, {"metrics_scheme", auth ? "https" : "http"},
                           {"probes", probes}, {"version", areal_version()}),
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
    metrics_auth_free(auth);
    controller_free(a.ctl);
    metrics_registry_free(a.metrics);
    kube_client_free(kc);
    return atomic_load(&a.lost) ? 1 : 0;
}
