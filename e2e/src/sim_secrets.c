/*
 * sim_secrets.c - the service-account volume a kubelet projects into a pod
 * (see areal/simkubelet.h).
 *
 * What: for a pod that does not turn automountServiceAccountToken off, a
 * bound token from the TokenRequest API
 * (serviceaccounts/<sa>/token, bound to the pod's name and uid, so it dies
 * with the pod, 3607 s as the kubelet asks), the cluster's CA from the
 * kube-root-ca.crt ConfigMap of the pod's namespace (what the
 * root-ca-certificate-publisher writes and the kubelet's projected volume
 * reads), and the namespace, written as token, ca.crt and namespace into
 * <pod dir>/secrets/kubernetes.io/serviceaccount. The runner bind-mounts
 * <pod dir>/secrets over /var/run/secrets in the pod's mount namespace, so the
 * program reads them where a container does
 * (/var/run/secrets/kubernetes.io/serviceaccount), and lib/kube's in-cluster
 * config finds them without knowing about tests.
 * Rejected: the simulator's own admin credentials in the pod (the API
 * server's RBAC would then check nothing), and token rotation (a pod of the
 * suite lives minutes, the token an hour; a kubelet rewrites it at 80%).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "areal/simkubelet.h"

static const char *str_at(const json_t *o, const char *a, const char *b) {
    return json_string_value(json_object_get(json_object_get(o, a), b));
}

static int write_file(const char *dir, const char *name, const char *text, areal_error *err) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return areal_error_set(err, AREAL_EIO, -1, "cannot write %s: %s", path, strerror(errno));
    size_t len = strlen(text);
    ssize_t w = write(fd, text, len);
    close(fd);
    if (w != (ssize_t)len)
        return areal_error_set(err, AREAL_EIO, -1, "cannot write %s", path);
    return AREAL_OK;
}

int sim_project_service_account(kube_client *c, const json_t *pod, const char *pod_dir,
                                bool *projected, areal_error *err) {
    *projected = false;
    const json_t *spec = json_object_get(pod, "spec");
    if (json_is_false(json_object_get(spec, "automountServiceAccountToken")))
        return AREAL_OK;
    const char *ns = str_at(pod, "metadata", "namespace");
    const char *name = str_at(pod, "metadata", "name");
    const char *uid = str_at(pod, "metadata", "uid");
    const char *sa = json_string_value(json_object_get(spec, "serviceAccountName"));
    if (sa == NULL || sa[0] == '\0')
        sa = "default";
    if (ns == NULL || name == NULL || uid == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "the pod has no namespace, name or uid");

    json_t *req =
        json_pack("{s:s,s:s,s:{s:I,s:{s:s,s:s,s:s,s:s}}}", "apiVersion", "authentication.k8s.io/v1",
                  "kind", "TokenRequest", "spec", "expirationSeconds", (json_int_t)3607,
                  "boundObjectRef", "kind", "Pod", "apiVersion", "v1", "name", name, "uid", uid);
    if (req == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    kube_resource sas = {NULL, "v1", "serviceaccounts", ns};
    kube_error ke;
    char *path = kube_resource_path(&sas, sa, "token", &ke);
    json_t *resp = NULL;
    int rc = path ? kube_request(c, "POST", path, req, NULL, &resp, &ke) : KUBE_ENOMEM;
    free(path);
    json_decref(req);
    if (rc != KUBE_OK)
        return areal_error_set(err, AREAL_EIO, -1,
                               "TokenRequest for service account %s/%s (pod %s): %s", ns, sa, name,
                               ke.msg);
    const char *token = str_at(resp, "status", "token");
    json_t *cm = NULL;
    kube_resource cms = {NULL, "v1", "configmaps", ns};
    if (token == NULL) {
        rc =
            areal_error_set(err, AREAL_EIO, -1, "TokenRequest for %s/%s returned no token", ns, sa);
    } else if (kube_get(c, &cms, "kube-root-ca.crt", &cm, &ke) != KUBE_OK) {
        rc = areal_error_set(err, AREAL_EIO, -1,
                             "ConfigMap %s/kube-root-ca.crt (the CA of the projected volume): %s",
                             ns, ke.msg);
    }
    const char *ca = cm ? str_at(cm, "data", "ca.crt") : NULL;
    if (rc == AREAL_OK && ca == NULL)
        rc = areal_error_set(err, AREAL_EIO, -1, "ConfigMap %s/kube-root-ca.crt has no ca.crt", ns);
    char dir[1200];
    if (rc == AREAL_OK) {
        const char *parts[] = {"secrets", "secrets/kubernetes.io",
                               "secrets/kubernetes.io/serviceaccount"};
        for (size_t i = 0; i < 3 && rc == AREAL_OK; i++) {
            snprintf(dir, sizeof dir, "%s/%s", pod_dir, parts[i]);
            if (mkdir(dir, 0755) != 0 && errno != EEXIST)
                rc = areal_error_set(err, AREAL_EIO, -1, "cannot create %s: %s", dir,
                                     strerror(errno));
        }
    }
    if (rc == AREAL_OK)
        rc = write_file(dir, "ca.crt", ca, err);
    if (rc == AREAL_OK)
        rc = write_file(dir, "namespace", ns, err);
    if (rc == AREAL_OK)
        rc = write_file(dir, "token", token, err);
    json_decref(cm);
    json_decref(resp);
    if (rc == AREAL_OK)
        *projected = true;
    return rc;
}
