/*
 * sim_volumes.c - the volumes a kubelet mounts into a pod's container, for
 * the kinds this system uses (see areal/simkubelet.h).
 *
 * What: for each volumeMount of the container, its volume's files on this
 * host: a configMap's keys written as files into <pod dir>/volumes/<name>/
 * (as the kubelet's atomic writer lays them out, without the ..data links),
 * a hostPath used as it is (type DirectoryOrCreate makes it), an emptyDir as
 * <pod dir>/volumes/<name>/; the runner bind-mounts each over its mountPath
 * in the pod's mount namespace. An emptyDir at /dev/shm is left out: the
 * host's /dev/shm stands in (pods of one node share it here, which only
 * matters for isolation, not for the NCCL shared-memory sizes it is for).
 * Rejected: copying files into a fake root (a pod would see none of the
 * host's programs and libraries) and chroot (the same).
 * Not done: subPath, items (every key is written), defaultMode, readOnly
 * (the mount is writable), secrets, projected volumes other than the
 * service account's (kube-api-access-*, which sim_secrets.c projects) and
 * other kinds (a pod naming one gets CreateContainerConfigError naming the
 * volume).
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "areal/simkubelet.h"

static const char *str_at(const json_t *o, const char *a, const char *b) {
    return json_string_value(json_object_get(json_object_get(o, a), b));
}

static int mkdir_p(const char *path, areal_error *err) {
    char buf[SIM_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return areal_error_set(err, AREAL_EIO, -1, "cannot create %s: %s", buf,
                                       strerror(errno));
            *p = c;
            if (c == '\0')
                return AREAL_OK;
        }
    }
}

static const json_t *volume_named(const json_t *pod, const char *name) {
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "volumes"), i, v) {
        const char *n = json_string_value(json_object_get(v, "name"));
        if (n && strcmp(n, name) == 0)
            return v;
    }
    return NULL;
}

/* The API server's ServiceAccount admission adds a projected volume
 * (kube-api-access-*: token, kube-root-ca.crt, namespace) mounted at
 * /var/run/secrets/kubernetes.io/serviceaccount. */
static bool has_token_source(const json_t *v) {
    size_t i;
    json_t *src;
    json_array_foreach(json_object_get(json_object_get(v, "projected"), "sources"), i, src) {
        if (json_object_get(src, "serviceAccountToken") != NULL)
            return true;
    }
    return false;
}

static int write_configmap(kube_client *c, const char *ns, const char *cm_name, const char *dir,
                           areal_error *err) {
    kube_resource res = {NULL, "v1", "configmaps", ns};
    json_t *cm = NULL;
    kube_error ke;
    if (kube_get(c, &res, cm_name, &cm, &ke) != KUBE_OK)
        return areal_error_set(err, AREAL_EIO, -1, "ConfigMap %s/%s: %s", ns, cm_name, ke.msg);
    int rc = mkdir_p(dir, err);
    const char *key;
    json_t *val;
    json_object_foreach(json_object_get(cm, "data"), key, val) {
        if (rc != AREAL_OK)
            break;
        if (strchr(key, '/') != NULL || strcmp(key, "..") == 0 || !json_is_string(val))
            continue; /* the API server refuses such keys anyway */
        char path[SIM_PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, key);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        const char *text = json_string_value(val);
        size_t len = strlen(text);
        if (fd < 0 || write(fd, text, len) != (ssize_t)len)
            rc = areal_error_set(err, AREAL_EIO, -1, "cannot write %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    json_decref(cm);
    return rc;
}

int sim_volumes_prepare(kube_client *c, const json_t *pod, const json_t *container,
                        const char *pod_dir, sim_mounts *m, areal_error *err) {
    m->n = 0;
    const char *ns = str_at(pod, "metadata", "namespace");
    size_t i;
    json_t *vm;
    json_array_foreach(json_object_get(container, "volumeMounts"), i, vm) {
        const char *name = json_string_value(json_object_get(vm, "name"));
        const char *at = json_string_value(json_object_get(vm, "mountPath"));
        if (name == NULL || at == NULL || at[0] != '/')
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "volumeMounts[%zu] needs a name and an absolute mountPath", i);
        const char *sub = json_string_value(json_object_get(vm, "subPath"));
        if (sub != NULL && sub[0] != '\0')
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "volume mount %s: subPath is not simulated", name);
        const json_t *v = volume_named(pod, name);
        if (v == NULL)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "volume mount %s names no volume of the pod", name);
        if (m->n == SIM_MOUNTS_MAX)
            return areal_error_set(err, AREAL_ERANGE, -1, "more than %d volume mounts",
                                   SIM_MOUNTS_MAX);
        char *src = m->src[m->n];
        int rc = AREAL_OK;
        if (json_object_get(v, "projected") != NULL && has_token_source(v)) {
            continue; /* kube-api-access-*: the service account, sim_secrets.c's */
        } else if (json_object_get(v, "configMap") != NULL) {
            const char *cm = str_at(v, "configMap", "name");
            snprintf(src, SIM_PATH_MAX, "%s/volumes/%s", pod_dir, name);
            rc = cm ? write_configmap(c, ns ? ns : "default", cm, src, err)
                    : areal_error_set(err, AREAL_EINVAL, -1, "volume %s: configMap.name", name);
        } else if (json_object_get(v, "hostPath") != NULL) {
            const char *hp = str_at(v, "hostPath", "path");
            const char *type = str_at(v, "hostPath", "type");
            struct stat st;
            if (hp == NULL || hp[0] != '/')
                rc = areal_error_set(err, AREAL_EINVAL, -1,
                                     "volume %s: hostPath.path must be absolute", name);
            else if (type && strcmp(type, "DirectoryOrCreate") == 0)
                rc = mkdir_p(hp, err);
            else if (stat(hp, &st) != 0)
                rc = areal_error_set(err, AREAL_EIO, -1, "volume %s: hostPath %s: %s", name, hp,
                                     strerror(errno));
            snprintf(src, SIM_PATH_MAX, "%s", hp ? hp : "");
        } else if (json_object_get(v, "emptyDir") != NULL) {
            if (strcmp(at, "/dev/shm") == 0)
                continue; /* the host's /dev/shm stands in */
            snprintf(src, SIM_PATH_MAX, "%s/volumes/%s", pod_dir, name);
            rc = mkdir_p(src, err);
        } else {
            rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "volume %s: only configMap, hostPath and emptyDir volumes are "
                                 "simulated",
                                 name);
        }
        if (rc != AREAL_OK)
            return rc;
        snprintf(m->dst[m->n], SIM_PATH_MAX, "%s", at);
        m->srcp[m->n] = m->src[m->n];
        m->dstp[m->n] = m->dst[m->n];
        m->n++;
    }
    return AREAL_OK;
}
