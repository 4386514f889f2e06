/*
 * areal-e2e-nodes.c - prints the Kubernetes objects of an e2e scenario's nodes.
 *
 *   areal-e2e-nodes [--format nodes|tenants|ready-names] [--kubelet-version V]
 *                   [--gpus-per-node N] INVENTORY
 *
 * nodes: a List of Node objects; tenants: a List of Pods holding the capacity
 * the inventory marks as used; ready-names: the names of the nodes the
 * inventory says are Ready, one a line. e2e/cluster pipes the lists into
 * `kubectl create -f -`. Exit 0, 1 on a bad inventory (the e2e cluster's own
 * file: a failure of the run, not of its caller), 2 on bad usage.
 * Rejected: writing to the API server directly (kubectl already does that
 * well; this stays a pure function of the file, easy to test).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/cluster.h"
#include "areal/escape.h"
#include "areal/simnodes.h"
#include "areal/version.h"

static const char usage_text[] =
    "usage: areal-e2e-nodes [--format nodes|tenants|ready-names]\n"
    "                       [--kubelet-version V] [--gpus-per-node N] INVENTORY\n"
    "Prints the Kubernetes objects of an e2e scenario's nodes (e2e/README.md).\n"
    "  --format F           nodes: a List of Nodes (default); tenants: Pods holding\n"
    "                       the used capacity; ready-names: the Ready nodes' names\n"
    "  --kubelet-version V  the nodes' kubelet version\n"
    "  --gpus-per-node N    GPUs of nodes that state none (default 8)\n"
    "  --help, --version\n" AREAL_EXIT_HELP;

/* One error line quoting `arg`, then a pointer to --help. Returns 2. */
static int usage(const char *why, const char *arg) {
    areal_print_line(stderr, "areal-e2e-nodes: %s '%s'; see areal-e2e-nodes --help", why, arg);
    return AREAL_EXIT_USAGE;
}

int main(int argc, char **argv) {
    const char *format = "nodes", *path = NULL;
    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    areal_simnodes_opts opts = {.kubelet_version = NULL, .tenant_namespace = NULL, .now = now};
    int gpn = 8;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage_text, stdout);
            return AREAL_EXIT_OK;
        }
        if (strcmp(argv[i], "--version") == 0)
            return areal_print_version(stdout, "areal-e2e-nodes");
        if (strcmp(argv[i], "--format") == 0 && i + 1 < argc)
            format = argv[++i];
        else if (strcmp(argv[i], "--kubelet-version") == 0 && i + 1 < argc)
            opts.kubelet_version = argv[++i];
        else if (strcmp(argv[i], "--gpus-per-node") == 0 && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end != '\0' || v < 1 || v > 1024)
                return usage("--gpus-per-node wants 1..1024, not", argv[i]);
            gpn = (int)v;
        } else if (argv[i][0] == '-')
            return usage(i + 1 == argc ? "unknown option, or a value is missing after"
                                       : "unknown option",
                         argv[i]);
        else if (path)
            return usage("one INVENTORY only; unexpected", argv[i]);
        else
            path = argv[i];
    }
    if (!path)
        return usage("an INVENTORY file is required", "");
    if (strcmp(format, "nodes") != 0 && strcmp(format, "tenants") != 0 &&
        strcmp(format, "ready-names") != 0)
        return usage("--format is nodes, tenants or ready-names, not", format);

    areal_cluster c;
    areal_error err;
    areal_error_clear(&err);
    areal_cluster_init(&c);
    if (areal_cluster_load_file(path, gpn, &c, &err) != 0) {
        areal_print_line(stderr, "areal-e2e-nodes: %s", err.msg);
        return 1;
    }
    int rc = 0;
    if (strcmp(format, "ready-names") == 0) {
        for (int i = 0; i < c.n_nodes; i++)
            if (c.nodes[i].ready)
                printf("%s\n", c.nodes[i].name);
    } else {
        json_t *list = NULL;
        rc = strcmp(format, "nodes") == 0 ? areal_simnodes_nodes(&c, &opts, &list, &err)
                                          : areal_simnodes_tenant_pods(&c, &opts, &list, &err);
        if (rc == 0 && json_dumpf(list, stdout, JSON_INDENT(2)) != 0) {
            areal_error_set(&err, AREAL_EIO, -1, "cannot write to stdout");
            rc = AREAL_EIO;
        }
        if (rc == 0)
            putchar('\n');
        json_decref(list);
        if (rc != 0)
            areal_print_line(stderr, "areal-e2e-nodes: %s: %s", path, err.msg);
    }
    areal_cluster_free(&c);
    return rc == 0 ? 0 : 1;
}
