/*
 * incluster.c - kube_config_in_cluster: the pod's service account.
 *
 * How: the server is https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
 * (IPv6 addresses bracketed); the token stays a *file* (the kubelet rewrites
 * the projected token before it expires and the client re-reads it on change);
 * the CA is the mounted ca.crt. The token is read once here only to fail early
 * when the mount is missing.
 */
#include "areal/kube/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p != NULL)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

int kube_config_in_cluster(kube_config *cfg, const char *sa_dir, kube_error *err) {
    kube_config_free(cfg);
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (host == NULL || host[0] == '\0' || port == NULL || port[0] == '\0')
        return kube_error_set(err, KUBE_EINVAL,
                              "not running in a pod: KUBERNETES_SERVICE_HOST and "
                              "KUBERNETES_SERVICE_PORT must both be set (or use a kubeconfig)");
    if (sa_dir == NULL)
        sa_dir = SA_DIR;
    int v6 = strchr(host, ':') != NULL;
    size_t n = strlen(host) + strlen(port) + 16;
    cfg->server = malloc(n);
    cfg->token_file = join(sa_dir, "token");
    cfg->ca_file = join(sa_dir, "ca.crt");
    char *ns_file = join(sa_dir, "namespace");
    int rc = KUBE_OK;
    if (cfg->server == NULL || cfg->token_file == NULL || cfg->ca_file == NULL || ns_file == NULL) {
        rc = kube_error_set(err, KUBE_ENOMEM, "out of memory building the in-cluster config");
        goto out;
    }
    snprintf(cfg->server, n, v6 ? "https://[%s]:%s" : "https://%s:%s", host, port);
    char *text = NULL;
    if ((rc = kube_read_file(cfg->token_file, 1 << 16, &text, NULL, err)) != KUBE_OK)
        goto out;
    free(text);
    if ((rc = kube_read_file(cfg->ca_file, 1 << 20, &text, NULL, err)) != KUBE_OK)
        goto out;
    free(text);
    if (kube_read_file(ns_file, 256, &text, NULL, NULL) == KUBE_OK) {
        size_t l = strlen(text);
        while (l > 0 && (text[l - 1] == '\n' || text[l - 1] == ' '))
            text[--l] = '\0';
        cfg->ns = text;
    }
out:
    free(ns_file);
    if (rc != KUBE_OK)
        kube_config_free(cfg);
    return rc;
}
