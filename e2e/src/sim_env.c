/*
 * sim_env.c - a container's argv and environment (see areal/simpod.h).
 *
 * What: what the kubelet resolves before it starts a container: the image's
 * PATH, HOSTNAME, the container's env list in order (later names win) with
 * $(NAME) references and downward-API fieldRefs, then command + args with
 * $(NAME) expanded from that environment.
 * How: NAME=value strings in a growable vector (the envp handed to execve);
 * lookups scan it (a pod has tens of variables). Expansion follows the
 * kubelet's rules: "$(NAME)" of a defined variable is replaced, of an
 * undefined one kept as written; "$$" is one "$".
 * Rejected: inheriting the simulator's own environment (a container sees only
 * what its spec and image give it; a test variable leaking into workers would
 * hide a missing one in the operator's pods).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/buf.h"
#include "areal/simpod.h"

#define SIM_EXPAND_MAX (1u << 20)

void sim_strv_free(sim_strv *s) {
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

/* Appends `str` (taken over). AREAL_ENOMEM frees it. */
static int strv_push(sim_strv *s, char *str, areal_error *err) {
    if (str == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory building a container");
    if (s->n + 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        char **v = realloc(s->v, cap * sizeof *v);
        if (v == NULL) {
            free(str);
            return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory building a container");
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = str;
    s->v[s->n] = NULL;
    return AREAL_OK;
}

/* The value of NAME (len bytes) in envp, or NULL. */
static const char *env_get(const sim_strv *envp, const char *name, size_t len) {
    for (size_t i = envp->n; i-- > 0;)
        if (strncmp(envp->v[i], name, len) == 0 && envp->v[i][len] == '=')
            return envp->v[i] + len + 1;
    return NULL;
}

/* Sets NAME=value, replacing an earlier NAME. */
static int env_set(sim_strv *envp, const char *name, const char *value, areal_error *err) {
    size_t nl = strlen(name), vl = strlen(value);
    char *kv = malloc(nl + vl + 2);
    if (kv != NULL) {
        memcpy(kv, name, nl);
        kv[nl] = '=';
        memcpy(kv + nl + 1, value, vl + 1);
    }
    for (size_t i = 0; kv != NULL && i < envp->n; i++)
        if (strncmp(envp->v[i], name, nl) == 0 && envp->v[i][nl] == '=') {
            free(envp->v[i]);
            envp->v[i] = kv;
            return AREAL_OK;
        }
    return strv_push(envp, kv, err);
}

/* A new string: `in` with $(NAME) references expanded from envp. */
static char *expand(const char *in, const sim_strv *envp) {
    areal_buf b; /* at most SIM_EXPAND_MAX bytes with the NUL, as before */
    areal_buf_init(&b, SIM_EXPAND_MAX - 1);
    areal_buf_append(&b, "", 0);
    for (size_t i = 0; in[i] != '\0';) {
        if (in[i] == '$' && in[i + 1] == '$') {
            areal_buf_append(&b, "$", 1);
            i += 2;
        } else if (in[i] == '$' && in[i + 1] == '(') {
            const char *close = strchr(in + i + 2, ')');
            if (close == NULL) {
                areal_buf_append(&b, in + i, strlen(in + i));
                break;
            }
            size_t nl = (size_t)(close - (in + i + 2));
            const char *v = env_get(envp, in + i + 2, nl);
            if (v != NULL)
                areal_buf_append(&b, v, strlen(v));
            else
                areal_buf_append(&b, in + i, nl + 3);
            i += nl + 3;
        } else {
            areal_buf_append(&b, in + i, 1);
            i++;
        }
    }
    if (b.err != AREAL_OK) {
        areal_buf_free(&b);
        return NULL;
    }
    return b.data; /* the caller frees it */
}

static const char *str_at(const json_t *o, const char *a, const char *b) {
    return json_string_value(json_object_get(json_object_get(o, a), b));
}

/* "metadata.labels['key']" -> the label's value (or ""); NULL if the path is
 * not of that form. */
static const char *map_entry(const json_t *pod, const char *path, const char *prefix, char *key,
                             size_t cap) {
    size_t pl = strlen(prefix);
    if (strncmp(path, prefix, pl) != 0 || path[pl] != '[' || path[pl + 1] != '\'')
        return NULL;
    const char *k = path + pl + 2, *end = strchr(k, '\'');
    if (end == NULL || strcmp(end, "']") != 0 || (size_t)(end - k) >= cap)
        return NULL;
    memcpy(key, k, (size_t)(end - k));
    key[end - k] = '\0';
    const char *v = json_string_value(
        json_object_get(json_object_get(json_object_get(pod, "metadata"), prefix + 9), key));
    return v ? v : "";
}

/* The value of a downward-API fieldPath, or NULL for an unsupported path. */
static const char *field_value(const json_t *pod, const char *path, const sim_env_ctx *ctx,
                               char *scratch, size_t cap) {
    const char *v;
    if (strcmp(path, "metadata.name") == 0 || strcmp(path, "metadata.namespace") == 0 ||
        strcmp(path, "metadata.uid") == 0)
        v = str_at(pod, "metadata", path + 9);
    else if (strcmp(path, "spec.nodeName") == 0 || strcmp(path, "spec.serviceAccountName") == 0)
        v = str_at(pod, "spec", path + 5);
    else if (strcmp(path, "status.podIP") == 0 || strcmp(path, "status.podIPs") == 0)
        v = ctx->pod_ip;
    else if (strcmp(path, "status.hostIP") == 0 || strcmp(path, "status.hostIPs") == 0)
        v = ctx->host_ip;
    else if ((v = map_entry(pod, path, "metadata.labels", scratch, cap)) != NULL ||
             (v = map_entry(pod, path, "metadata.annotations", scratch, cap)) != NULL)
        return v;
    else
        return NULL;
    return v ? v : "";
}

static int build(const json_t *pod, const json_t *container, const sim_env_ctx *ctx, sim_strv *argv,
                 sim_strv *envp, areal_error *err) {
    char path[1200];
    snprintf(path, sizeof path, "%s%s/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             ctx->image_dir ? ctx->image_dir : "", ctx->image_dir ? ":" : "");
    const char *host = str_at(pod, "spec", "hostname");
    if (host == NULL || host[0] == '\0')
        host = str_at(pod, "metadata", "name");
    int rc = env_set(envp, "PATH", path, err);
    if (rc == AREAL_OK)
        rc = env_set(envp, "HOSTNAME", host ? host : "", err);
    for (const char *const *se = ctx->service_env; rc == AREAL_OK && se && *se; se++) {
        const char *eq = strchr(*se, '=');
        char sname[128];
        if (eq == NULL || eq == *se || (size_t)(eq - *se) >= sizeof sname)
            return areal_error_set(err, AREAL_EINVAL, -1, "service variable '%s' is not NAME=value",
                                   *se);
        snprintf(sname, sizeof sname, "%.*s", (int)(eq - *se), *se);
        rc = env_set(envp, sname, eq + 1, err);
    }
    size_t i;
    json_t *e;
    const char *cname = json_string_value(json_object_get(container, "name"));
    json_array_foreach(json_object_get(container, "env"), i, e) {
        if (rc != AREAL_OK)
            return rc;
        const char *name = json_string_value(json_object_get(e, "name"));
        if (name == NULL || name[0] == '\0' || strchr(name, '=') != NULL)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "container '%s' env[%zu] has no valid name", cname ? cname : "?",
                                   i);
        const json_t *from = json_object_get(e, "valueFrom");
        if (from != NULL) {
            const char *fp = str_at(from, "fieldRef", "fieldPath");
            char key[256];
            const char *v = fp ? field_value(pod, fp, ctx, key, sizeof key) : NULL;
            if (v == NULL)
                return areal_error_set(err, AREAL_EINVAL, -1,
                                       "container '%s' env %s: only valueFrom.fieldRef with a "
                                       "downward-API path (metadata.name, status.podIP, ...) is "
                                       "supported by the node simulator",
                                       cname ? cname : "?", name);
            rc = env_set(envp, name, v, err);
            continue;
        }
        const char *value = json_string_value(json_object_get(e, "value"));
        char *x = expand(value ? value : "", envp);
        if (x == NULL)
            return areal_error_set(err, AREAL_ENOMEM, -1, "env %s: value too long or no memory",
                                   name);
        rc = env_set(envp, name, x, err);
        free(x);
    }
    if (rc != AREAL_OK)
        return rc;
    const char *lists[2] = {"command", "args"};
    /* Kubernetes' rule: `command` replaces the image's ENTRYPOINT; without
     * one the ENTRYPOINT runs with `args` */
    if (json_array_size(json_object_get(container, "command")) == 0 && ctx->entrypoint != NULL &&
        ctx->entrypoint[0] != '\0') {
        char *ep = strdup(ctx->entrypoint);
        if (ep == NULL)
            return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
        if ((rc = strv_push(argv, ep, err)) != AREAL_OK)
            return rc;
    }
    for (int l = 0; l < 2; l++) {
        json_array_foreach(json_object_get(container, lists[l]), i, e) {
            const char *s = json_string_value(e);
            if (s == NULL)
                return areal_error_set(err, AREAL_EINVAL, -1,
                                       "container '%s' %s[%zu] is not a string",
                                       cname ? cname : "?", lists[l], i);
            if ((rc = strv_push(argv, expand(s, envp), err)) != AREAL_OK)
                return rc;
        }
    }
    if (argv->n == 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "container '%s' has no command and its image no entrypoint "
                               "(areal-e2e-kubelet --entrypoint REPOSITORY=PROGRAM): set "
                               "spec.containers[].command",
                               cname ? cname : "?");
    return AREAL_OK;
}

int sim_env_build(const json_t *pod, const json_t *container, const sim_env_ctx *ctx,
                  sim_strv *argv, sim_strv *envp, areal_error *err) {
    sim_strv_free(argv);
    sim_strv_free(envp);
    int rc = build(pod, container, ctx, argv, envp, err);
    if (rc != AREAL_OK) {
        sim_strv_free(argv);
        sim_strv_free(envp);
    }
    return rc;
}
