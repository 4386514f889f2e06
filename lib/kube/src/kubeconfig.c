/*
 * kubeconfig.c - kube_config_load_kubeconfig: a kubeconfig file -> kube_config.
 *
 * How: the YAML is read into JSON by the layout library's reader (the one YAML
 * decoder of the project), then walked: the context (named, or current-context)
 * names a cluster and a user in the `clusters` and `users` lists. Inline data
 * is base64-decoded into memory; file names are resolved against the
 * kubeconfig's own directory. Only the first file is read (no KUBECONFIG
 * merging of several files); callers pick the path (flag, $KUBECONFIG,
 * ~/.kube/config).
 * Rejected: exec and auth-provider users (they run external programs; refused
 * with a message), and writing inline certificates to temporary files.
 */
#include "areal/kube/config.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "areal/yaml_json.h"

#define KUBECONFIG_MAX ((size_t)4 << 20)

/* The entry of list `list` (e.g. "clusters") whose "name" is `name`, then its member `inner`. */
static json_t *named(json_t *root, const char *list, const char *name, const char *inner) {
    json_t *arr = json_object_get(root, list);
    size_t i;
    json_t *it;
    json_array_foreach(arr, i, it) {
        const char *n = json_string_value(json_object_get(it, "name"));
        if (n != NULL && strcmp(n, name) == 0)
            return json_object_get(it, inner);
    }
    return NULL;
}

/* A copy of `file`, joined to `dir` when relative. */
static char *resolve(const char *dir, const char *file) {
    if (file[0] == '/' || dir[0] == '\0')
        return strdup(file);
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p != NULL)
        snprintf(p, n, "%s/%s", dir, file);
    return p;
}

/* Copies string member `key` of `obj` into *dst (resolved against `dir` when dir != NULL). */
static int take_str(json_t *obj, const char *key, const char *dir, char **dst, const char *where,
                    kube_error *err) {
    json_t *v = json_object_get(obj, key);
    if (v == NULL || json_is_null(v))
        return KUBE_OK;
    if (!json_is_string(v))
        return kube_error_set(err, KUBE_EINVAL, "kubeconfig %s.%s must be a string", where, key);
    free(*dst);
    *dst = dir ? resolve(dir, json_string_value(v)) : strdup(json_string_value(v));
    if (*dst == NULL)
        return kube_error_set(err, KUBE_ENOMEM, "out of memory reading kubeconfig %s.%s", where,
                              key);
    return KUBE_OK;
}

static int take_b64(json_t *obj, const char *key, char **dst, size_t *len, const char *where,
                    kube_error *err) {
    json_t *v = json_object_get(obj, key);
    if (v == NULL || json_is_null(v))
        return KUBE_OK;
    char field[128];
    snprintf(field, sizeof field, "kubeconfig %s.%s", where, key);
    if (!json_is_string(v))
        return kube_error_set(err, KUBE_EINVAL, "%s must be a base64 string", field);
    free(*dst);
    *dst = NULL;
    return kube_base64_decode(json_string_value(v), field, dst, len, err);
}

static int fill(kube_config *cfg, json_t *root, const char *path, const char *context,
                const char *dir, kube_error *err) {
    if (!json_is_object(root))
        return kube_error_set(err, KUBE_EINVAL, "kubeconfig %s is not a mapping", path);
    const char *ctx_name = context;
    if (ctx_name == NULL)
        ctx_name = json_string_value(json_object_get(root, "current-context"));
    if (ctx_name == NULL || ctx_name[0] == '\0')
        return kube_error_set(err, KUBE_EINVAL,
                              "kubeconfig %s has no current-context; name a context "
                              "(kubectl config use-context NAME)",
                              path);
    json_t *ctx = named(root, "contexts", ctx_name, "context");
    if (!json_is_object(ctx))
        return kube_error_set(err, KUBE_EINVAL, "kubeconfig %s has no context named '%s'", path,
                              ctx_name);
    const char *cluster_name = json_string_value(json_object_get(ctx, "cluster"));
    const char *user_name = json_string_value(json_object_get(ctx, "user"));
    if (cluster_name == NULL)
        return kube_error_set(err, KUBE_EINVAL, "kubeconfig context '%s' names no cluster",
                              ctx_name);
    json_t *cluster = named(root, "clusters", cluster_name, "cluster");
    if (!json_is_object(cluster))
        return kube_error_set(err, KUBE_EINVAL, "kubeconfig %s has no cluster named '%s'", path,
                              cluster_name);
    int rc;
    if ((rc = take_str(ctx, "namespace", NULL, &cfg->ns, "context", err)) != 0 ||
        (rc = take_str(cluster, "server", NULL, &cfg->server, "cluster", err)) != 0 ||
        (rc = take_b64(cluster, "certificate-authority-data", &cfg->ca_pem, &cfg->ca_len, "cluster",
                       err)) != 0 ||
        (rc = take_str(cluster, "certificate-authority", dir, &cfg->ca_file, "cluster", err)) != 0)
        return rc;
    if (cfg->server == NULL || cfg->server[0] == '\0')
        return kube_error_set(err, KUBE_EINVAL, "kubeconfig cluster '%s' has no server",
                              cluster_name);
    size_t sl = strlen(cfg->server);
    while (sl > 0 && cfg->server[sl - 1] == '/')
        cfg->server[--sl] = '\0';
    if (json_is_true(json_object_get(cluster, "insecure-skip-tls-verify"))) {
        if (!cfg->allow_insecure)
            return kube_error_set(err, KUBE_EINVAL,
                                  "kubeconfig cluster '%s' sets insecure-skip-tls-verify; this "
                                  "client always verifies TLS - add certificate-authority-data",
                                  cluster_name);
        cfg->insecure_skip_verify = 1;
    }
    if (user_name == NULL)
        return KUBE_OK; /* anonymous */
    json_t *user = named(root, "users", user_name, "user");
    if (!json_is_object(user))
        return kube_error_set(err, KUBE_EINVAL, "kubeconfig %s has no user named '%s'", path,
                              user_name);
    if (json_object_get(user, "exec") || json_object_get(user, "auth-provider"))
        return kube_error_set(err, KUBE_EINVAL,
                              "kubeconfig user '%s' uses an exec or auth-provider plugin, which "
                              "this client does not run; use a token, tokenFile or client "
                              "certificate",
                              user_name);
    if ((rc = take_b64(user, "client-certificate-data", &cfg->cert_pem, &cfg->cert_len, "user",
                       err)) != 0 ||
        (rc = take_str(user, "client-certificate", dir, &cfg->cert_file, "user", err)) != 0 ||
        (rc = take_b64(user, "client-key-data", &cfg->key_pem, &cfg->key_len, "user", err)) != 0 ||
        (rc = take_str(user, "client-key", dir, &cfg->key_file, "user", err)) != 0 ||
        (rc = take_str(user, "token", NULL, &cfg->token, "user", err)) != 0 ||
        (rc = take_str(user, "tokenFile", dir, &cfg->token_file, "user", err)) != 0)
        return rc;
    int has_cert = cfg->cert_pem || cfg->cert_file, has_key = cfg->key_pem || cfg->key_file;
    if (has_cert != has_key)
        return kube_error_set(
            err, KUBE_EINVAL, "kubeconfig user '%s' has a client %s without its %s; give both",
            user_name, has_cert ? "certificate" : "key", has_cert ? "key" : "certificate");
    return KUBE_OK;
}

int kube_config_load_kubeconfig(kube_config *cfg, const char *path, const char *context,
                                kube_error *err) {
    char *text = NULL;
    size_t len = 0;
    kube_config_free(cfg);
    int rc = kube_read_file(path, KUBECONFIG_MAX, &text, &len, err);
    if (rc != KUBE_OK)
        return rc;
    areal_error yerr;
    areal_error_clear(&yerr);
    json_t *root = areal_yaml_to_json(text, len, path, &yerr);
    free(text);
    if (root == NULL)
        return kube_error_set(err, KUBE_EINVAL, "kubeconfig %s: %s", path, yerr.msg);
    char *dir = strdup(path);
    if (dir == NULL) {
        json_decref(root);
        return kube_error_set(err, KUBE_ENOMEM, "out of memory reading %s", path);
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        dir[0] = '\0';
    rc = fill(cfg, root, path, context, dir, err);
    free(dir);
    json_decref(root);
    if (rc != KUBE_OK)
        kube_config_free(cfg);
    return rc;
}
