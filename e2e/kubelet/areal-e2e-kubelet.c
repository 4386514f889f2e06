/*
 * areal-e2e-kubelet.c - the e2e suite's node simulator (see areal/simkubelet.h).
 *
 *   areal-e2e-kubelet --kubeconfig FILE --state-dir DIR --nodes-file FILE
 *                     [--stopped-file FILE] [--pod-cidr CIDR]
 *                     [--image REPOSITORY=DIR]... [--cluster-domain D]
 *
 * Runs until SIGTERM or SIGINT, then kills and reaps every pod process it
 * started and exits 0; exits 1 when the pod watch fails for good, 2 on bad
 * usage. e2e/cluster starts it with the cluster and stops it on `down`.
 * Rejected: a flag per node (the node set changes while it runs: e2e/cluster
 * keeps the list in a file that the simulator re-reads).
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/kube/client.h"
#include "areal/kube/config.h"
#include "areal/escape.h"
#include "areal/log.h"
#include "areal/simkubelet.h"
#include "areal/version.h"

static const char usage_text[] =
    "usage: areal-e2e-kubelet --kubeconfig FILE --state-dir DIR --nodes-file FILE\n"
    "                         [--stopped-file FILE] [--pod-cidr CIDR]\n"
    "                         [--image REPOSITORY=DIR]... [--entrypoint REPOSITORY=PROGRAM]...\n"
    "                         [--schedule-default] [--cluster-domain D]\n"
    "The e2e suite's node simulator: runs the pods bound to the nodes named in\n"
    "--nodes-file as local processes until SIGTERM (e2e/README.md).\n"
    "  --kubeconfig FILE       the API server\n"
    "  --state-dir DIR         where pod directories and logs go\n"
    "  --nodes-file FILE       the simulated nodes, one name a line (re-read)\n"
    "  --stopped-file FILE     nodes whose pods are stopped\n"
    "  --pod-cidr CIDR         pod IPs on loopback\n"
    "  --image REPOSITORY=DIR  what an image runs\n"
    "  --entrypoint REPOSITORY=PROGRAM  the image's ENTRYPOINT (a container\n"
    "                          without command runs it with its args)\n"
    "  --schedule-default      bind pods that name default-scheduler (no\n"
    "                          kube-scheduler runs), round robin over live nodes\n"
    "Pods get KUBERNETES_SERVICE_HOST/PORT of the --kubeconfig server and their\n"
    "service account's token, CA and namespace in /var/run/secrets.\n"
    "  --cluster-domain D      for pods' host names\n"
    "  --help, --version\n" AREAL_EXIT_HELP;

/* One error line quoting `arg`, then a pointer to --help. Returns 2. */
static int usage(const char *why, const char *arg) {
    areal_print_line(stderr, "areal-e2e-kubelet: %s '%s'; see areal-e2e-kubelet --help", why, arg);
    return AREAL_EXIT_USAGE;
}

int main(int argc, char **argv) {
    /* before any thread exists: the loop waits for these with sigtimedwait */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    sim_kubelet_opts o;
    memset(&o, 0, sizeof o);
    const char *kubeconfig = NULL;
    areal_error err;
    areal_error_clear(&err);
    static const struct option longs[] = {
        {"kubeconfig", required_argument, NULL, 'k'},
        {"state-dir", required_argument, NULL, 's'},
        {"nodes-file", required_argument, NULL, 'n'},
        {"stopped-file", required_argument, NULL, 'x'},
        {"pod-cidr", required_argument, NULL, 'c'},
        {"image", required_argument, NULL, 'i'},
        {"cluster-domain", required_argument, NULL, 'd'},
        {"entrypoint", required_argument, NULL, 'e'},
        {"schedule-default", no_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    opterr = 0; /* one message of our own instead of getopt's */
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (ch) {
        case 'k':
            kubeconfig = optarg;
            break;
        case 's':
            o.state_dir = optarg;
            break;
        case 'n':
            o.nodes_file = optarg;
            break;
        case 'x':
            o.stopped_file = optarg;
            break;
        case 'c':
            o.pod_cidr = optarg;
            break;
        case 'd':
            o.cluster_domain = optarg;
            break;
        case 'i':
            if (sim_image_add(&o.images, optarg, &err) != AREAL_OK) {
                areal_print_line(stderr, "areal-e2e-kubelet: --image: %s", err.msg);
                return AREAL_EXIT_USAGE;
            }
            break;
        case 'e':
            if (sim_image_set_entrypoint(&o.images, optarg, &err) != AREAL_OK) {
                areal_print_line(stderr, "areal-e2e-kubelet: --entrypoint: %s", err.msg);
                return AREAL_EXIT_USAGE;
            }
            break;
        case 'S':
            o.schedule_default = true;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return AREAL_EXIT_OK;
        case 'V':
            return areal_print_version(stdout, "areal-e2e-kubelet");
        default:
            return usage("unknown or incomplete option", argv[optind - 1]);
        }
    }
    if (optind != argc)
        return usage("unexpected argument", argv[optind]);
    if (kubeconfig == NULL || o.state_dir == NULL || o.nodes_file == NULL)
        return usage("--kubeconfig, --state-dir and --nodes-file are required; missing",
                     kubeconfig == NULL    ? "--kubeconfig"
                     : o.state_dir == NULL ? "--state-dir"
                                           : "--nodes-file");

    areal_log_setup();
    kube_config cfg;
    kube_config_init(&cfg);
    kube_error kerr;
    if (kube_config_load_kubeconfig(&cfg, kubeconfig, NULL, &kerr) != KUBE_OK) {
        areal_log(AREAL_LOG_ERROR, "kubelet", NULL, "%s", kerr.msg);
        kube_config_free(&cfg);
        return 1;
    }
    /* The kubernetes Service of a real cluster routes to the API server; here
     * the pods share the host's network, so its variables name the
     * kubeconfig's server itself (https://HOST:PORT). */
    static char svc[4][300];
    const char *service_env[5] = {NULL};
    const char *srv = cfg.server ? cfg.server : "";
    if (strncmp(srv, "https://", 8) == 0) {
        const char *h = srv + 8, *colon = strrchr(h, ':');
        size_t hl = colon ? (size_t)(colon - h) : strcspn(h, "/");
        const char *port = colon ? colon + 1 : "443";
        int pl = (int)strcspn(port, "/");
        snprintf(svc[0], sizeof svc[0], "KUBERNETES_SERVICE_HOST=%.*s", (int)hl, h);
        snprintf(svc[1], sizeof svc[1], "KUBERNETES_SERVICE_PORT=%.*s", pl, port);
        snprintf(svc[2], sizeof svc[2], "KUBERNETES_SERVICE_PORT_HTTPS=%.*s", pl, port);
        snprintf(svc[3], sizeof svc[3], "KUBERNETES_PORT=tcp://%.*s:%.*s", (int)hl, h, pl, port);
        for (int i = 0; i < 4; i++)
            service_env[i] = svc[i];
        o.service_env = service_env;
    }
    /* a kubelet's bursts (a gang of pods starting at once) must not queue, and
     * a failed call is tried again on the next tick rather than inside it */
    cfg.qps = 200;
    cfg.burst = 400;
    cfg.max_retries = 1;
    cfg.timeout_ms = 5000;
    cfg.connect_timeout_ms = 2000;
    kube_client *c = kube_client_new(&cfg, &kerr);
    kube_config_free(&cfg);
    if (c == NULL) {
        areal_log(AREAL_LOG_ERROR, "kubelet", NULL, "%s", kerr.msg);
        return 1;
    }
    int rc = sim_kubelet_run(c, &o, &err);
    if (rc != AREAL_OK)
        areal_log(AREAL_LOG_ERROR, "kubelet", NULL, "%s", err.msg);
    kube_client_free(c);
    return rc == AREAL_OK ? 0 : 1;
}
