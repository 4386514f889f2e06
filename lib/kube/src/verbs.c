/*
 * verbs.c - paths of resources and the verbs: get, list (paginated), create,
 * update, status update, patch, delete, pods/binding.
 *
 * How: every path is built in a bounded kbuf with each segment
 * percent-escaped (no fixed buffers, no silent truncation). Paging: one walker
 * follows metadata.continue until it is empty and hands each page to a
 * consumer before fetching the next: kube_list appends the items to one
 * array, kube_list_pages passes them on and drops the page (a long list is
 * never held whole). The list's resourceVersion is the last page's, which for
 * a paginated list is the snapshot's (the server keeps it constant across
 * continue tokens).
 */
#include "client_int.h"

#include <stdlib.h>
#include <string.h>

#define LIST_MAX_ITEMS_DEFAULT 1000000

static int put_seg(kbuf *b, const char *seg) {
    return kbuf_puts(b, "/") || kbuf_put_escaped(b, seg);
}

static int valid_seg(const char *s) {
    return s != NULL && s[0] != '\0' && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

char *kube_resource_path(const kube_resource *res, const char *name, const char *subresource,
                         kube_error *err) {
    if (res == NULL || !valid_seg(res->version) || !valid_seg(res->resource)) {
        kube_error_set(err, KUBE_EINVAL, "a resource needs a version and a plural resource name");
        return NULL;
    }
    if ((res->ns && !valid_seg(res->ns)) || (name && !valid_seg(name)) ||
        (subresource && !valid_seg(subresource))) {
        kube_error_set(err, KUBE_EINVAL,
                       "resource %s: namespace, name and subresource must be "
                       "non-empty and not '.' or '..'",
                       res->resource);
        return NULL;
    }
    kbuf b;
    kbuf_init(&b, KUBE_PATH_MAX);
    int bad;
    if (res->group && res->group[0])
        bad = kbuf_puts(&b, "/apis") || put_seg(&b, res->group) || put_seg(&b, res->version);
    else
        bad = kbuf_puts(&b, "/api") || put_seg(&b, res->version);
    if (!bad && res->ns)
        bad = kbuf_puts(&b, "/namespaces") || put_seg(&b, res->ns);
    if (!bad)
        bad = put_seg(&b, res->resource);
    if (!bad && name)
        bad = put_seg(&b, name);
    if (!bad && subresource)
        bad = put_seg(&b, subresource);
    if (bad) {
        kbuf_free(&b);
        kube_error_set(err, KUBE_EINVAL, "the path of %s is longer than %d bytes", res->resource,
                       KUBE_PATH_MAX);
        return NULL;
    }
    return b.data;
}

int kube_get(kube_client *c, const kube_resource *res, const char *name, json_t **out,
             kube_error *err) {
    if (out)
        *out = NULL;
    if (name == NULL)
        return kube_error_set(err, KUBE_EINVAL, "kube_get needs a name");
    char *path = kube_resource_path(res, name, NULL, err);
    if (path == NULL)
        return err ? err->code : KUBE_EINVAL;
    int rc = kube_request(c, "GET", path, NULL, NULL, out, err);
    free(path);
    return rc;
}

static int add_query(kbuf *b, int *first, const char *key, const char *value) {
    int bad = kbuf_puts(b, *first ? "?" : "&") || kbuf_puts(b, key) || kbuf_puts(b, "=") ||
              kbuf_put_escaped(b, value);
    *first = 0;
    return bad;
}

/* Called with each page object (borrowed) and whether it is the last. */
typedef int (*page_fn)(void *ud, json_t *page, size_t items_so_far, int last, const char *base,
                       kube_error *err);

/*
 * Follows continue tokens, handing each page to `fn` and freeing it before
 * the next request, so at most one page is held. The item bound counts every
 * page's items.
 */
static int walk_pages(kube_client *c, const kube_resource *res, const kube_list_opts *opts,
                      page_fn fn, void *ud, kube_error *err) {
    kube_list_opts none = {0};
    if (opts == NULL)
        opts = &none;
    size_t max_items = opts->max_items ? opts->max_items : LIST_MAX_ITEMS_DEFAULT;
    char *base = kube_resource_path(res, NULL, NULL, err);
    if (base == NULL)
        return err ? err->code : KUBE_EINVAL;
    json_t *page = NULL;
    char *cont = NULL;
    size_t seen = 0;
    int rc = KUBE_OK;
    for (int pages = 0;; pages++) {
        kbuf q;
        kbuf_init(&q, KUBE_PATH_MAX);
        int first = 1;
        char num[32];
        snprintf(num, sizeof num, "%ld", opts->limit);
        int bad = kbuf_puts(&q, base) ||
                  (opts->label_selector &&
                   add_query(&q, &first, "labelSelector", opts->label_selector)) ||
                  (opts->field_selector &&
                   add_query(&q, &first, "fieldSelector", opts->field_selector)) ||
                  (opts->limit > 0 && add_query(&q, &first, "limit", num)) ||
                  (cont && add_query(&q, &first, "continue", cont));
        if (bad) {
            kbuf_free(&q);
            rc = kube_error_set(err, KUBE_EINVAL, "list %s: the query is longer than %d bytes",
                                base, KUBE_PATH_MAX);
            break;
        }
        json_decref(page);
        page = NULL;
        rc = kube_request(c, "GET", q.data, NULL, NULL, &page, err);
        if (rc == KUBE_OK) {
            json_t *items = json_object_get(page, "items");
            if (!json_is_object(page) || !(json_is_array(items) || json_is_null(items)))
                rc = kube_error_set(err, KUBE_EDECODE,
                                    "GET %s: the answer is not a list (no items array)", q.data);
            else if ((seen += json_array_size(items)) > max_items)
                rc = kube_error_set(err, KUBE_ETOOBIG,
                                    "list %s has more than %zu items; narrow it with a "
                                    "selector or raise max_items",
                                    base, max_items);
        }
        kbuf_free(&q);
        if (rc != KUBE_OK)
            break;
        json_t *meta = json_object_get(page, "metadata");
        const char *next = json_string_value(json_object_get(meta, "continue"));
        free(cont);
        cont = NULL;
        int last = next == NULL || next[0] == '\0';
        if (!last && (opts->limit <= 0 || pages > 100000)) {
            rc = kube_error_set(err, KUBE_EDECODE,
                                "list %s: the server sent a continue token for an unpaginated "
                                "list, or paging never ended",
                                base);
            break;
        }
        if (!last && (cont = strdup(next)) == NULL) {
            rc = kube_error_set(err, KUBE_ENOMEM, "out of memory listing %s", base);
            break;
        }
        rc = fn(ud, page, seen, last, base, err);
        if (rc != KUBE_OK || last)
            break;
    }
    free(cont);
    free(base);
    json_decref(page);
    return rc;
}

typedef struct merge_ctx {
    json_t *merged; /* every page's items */
    json_t *last;   /* the last page, which becomes the answer */
} merge_ctx;

static int merge_page(void *ud, json_t *page, size_t seen, int last, const char *base,
                      kube_error *err) {
    (void)seen;
    merge_ctx *m = ud;
    json_t *items = json_object_get(page, "items");
    if (m->merged == NULL && (m->merged = json_array()) == NULL)
        return kube_error_set(err, KUBE_ENOMEM, "out of memory merging %s", base);
    if (json_is_array(items) && json_array_extend(m->merged, items) != 0)
        return kube_error_set(err, KUBE_ENOMEM, "out of memory merging %s", base);
    if (last)
        m->last = json_incref(page);
    return KUBE_OK;
}

int kube_list(kube_client *c, const kube_resource *res, const kube_list_opts *opts, json_t **out,
              kube_error *err) {
    *out = NULL;
    merge_ctx m = {NULL, NULL};
    int rc = walk_pages(c, res, opts, merge_page, &m, err);
    if (rc == KUBE_OK) {
        json_t *meta = json_object_get(m.last, "metadata");
        if (json_is_object(meta)) {
            json_object_del(meta, "continue");
            json_object_del(meta, "remainingItemCount");
        }
        if (json_object_set_new(m.last, "items", m.merged) != 0) {
            rc = kube_error_set(err, KUBE_ENOMEM, "out of memory merging a list");
        } else {
            *out = m.last;
            m.last = NULL;
        }
        m.merged = NULL;
    }
    json_decref(m.merged);
    json_decref(m.last);
    return rc;
}

typedef struct each_ctx {
    kube_page_fn fn;
    void *ud;
    char *rv;
    size_t rv_cap;
} each_ctx;

static int each_page(void *ud, json_t *page, size_t seen, int last, const char *base,
                     kube_error *err) {
    (void)seen;
    each_ctx *e = ud;
    json_t *items = json_object_get(page, "items");
    int rc = e->fn(e->ud, json_is_array(items) ? items : NULL);
    if (rc != KUBE_OK)
        return rc;
    if (last && e->rv != NULL) {
        const char *rv = json_string_value(
            json_object_get(json_object_get(page, "metadata"), "resourceVersion"));
        int n = snprintf(e->rv, e->rv_cap, "%s", rv ? rv : "");
        if (n < 0 || (size_t)n >= e->rv_cap)
            return kube_error_set(err, KUBE_EDECODE,
                                  "list %s: its resourceVersion is longer than %zu bytes", base,
                                  e->rv_cap - 1);
    }
    return KUBE_OK;
}

int kube_list_pages(kube_client *c, const kube_resource *res, const kube_list_opts *opts,
                    kube_page_fn fn, void *ud, char *rv, size_t rv_cap, kube_error *err) {
    if (rv != NULL && rv_cap > 0)
        rv[0] = '\0';
    each_ctx e = {fn, ud, rv, rv_cap};
    return walk_pages(c, res, opts, each_page, &e, err);
}

int kube_create(kube_client *c, const kube_resource *res, const json_t *obj, json_t **out,
                kube_error *err) {
    if (out)
        *out = NULL;
    if (!json_is_object(obj))
        return kube_error_set(err, KUBE_EINVAL, "kube_create needs a JSON object");
    char *path = kube_resource_path(res, NULL, NULL, err);
    if (path == NULL)
        return err ? err->code : KUBE_EINVAL;
    int rc = kube_request(c, "POST", path, obj, NULL, out, err);
    free(path);
    return rc;
}

static int put_object(kube_client *c, const kube_resource *res, const json_t *obj, const char *sub,
                      json_t **out, kube_error *err) {
    if (out)
        *out = NULL;
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    if (name == NULL)
        return kube_error_set(err, KUBE_EINVAL, "update of %s: the object has no metadata.name",
                              res && res->resource ? res->resource : "(no resource)");
    char *path = kube_resource_path(res, name, sub, err);
    if (path == NULL)
        return err ? err->code : KUBE_EINVAL;
    int rc = kube_request(c, "PUT", path, obj, NULL, out, err);
    free(path);
    return rc;
}

int kube_update(kube_client *c, const kube_resource *res, const json_t *obj, json_t **out,
                kube_error *err) {
    return put_object(c, res, obj, NULL, out, err);
}

int kube_update_status(kube_client *c, const kube_resource *res, const json_t *obj, json_t **out,
                       kube_error *err) {
    return put_object(c, res, obj, "status", out, err);
}

int kube_patch(kube_client *c, const kube_resource *res, const char *name, kube_patch_type type,
               const json_t *patch, const char *subresource, json_t **out, kube_error *err) {
    if (out)
        *out = NULL;
    const char *ct;
    switch (type) {
    case KUBE_PATCH_MERGE:
        ct = "application/merge-patch+json";
        break;
    case KUBE_PATCH_JSON:
        ct = "application/json-patch+json";
        break;
    case KUBE_PATCH_STRATEGIC:
        ct = "application/strategic-merge-patch+json";
        break;
    default:
        return kube_error_set(err, KUBE_EINVAL, "unknown patch type %d", (int)type);
    }
    if (type == KUBE_PATCH_JSON ? !json_is_array(patch) : !json_is_object(patch))
        return kube_error_set(err, KUBE_EINVAL, "a %s patch must be a JSON %s",
                              type == KUBE_PATCH_JSON ? "JSON" : "merge",
                              type == KUBE_PATCH_JSON ? "array of operations" : "object");
    if (name == NULL)
        return kube_error_set(err, KUBE_EINVAL, "kube_patch needs a name");
    char *path = kube_resource_path(res, name, subresource, err);
    if (path == NULL)
        return err ? err->code : KUBE_EINVAL;
    int rc = kube_request(c, "PATCH", path, patch, ct, out, err);
    free(path);
    return rc;
}

int kube_delete(kube_client *c, const kube_resource *res, const char *name,
                const kube_delete_opts *opts, json_t **out, kube_error *err) {
    if (out)
        *out = NULL;
    if (name == NULL)
        return kube_error_set(err, KUBE_EINVAL, "kube_delete needs a name");
    char *path = kube_resource_path(res, name, NULL, err);
    if (path == NULL)
        return err ? err->code : KUBE_EINVAL;
    json_t *body = NULL;
    if (opts && (opts->uid || opts->resource_version || opts->propagation_policy ||
                 opts->grace_period_seconds >= 0)) {
        body = json_pack("{s:s, s:s}", "kind", "DeleteOptions", "apiVersion", "v1");
        json_t *pre = json_object();
        int bad = body == NULL || pre == NULL;
        if (!bad && opts->uid)
            bad = json_object_set_new(pre, "uid", json_string(opts->uid)) != 0;
        if (!bad && opts->resource_version)
            bad = json_object_set_new(pre, "resourceVersion",
                                      json_string(opts->resource_version)) != 0;
        if (!bad && json_object_size(pre) > 0)
            bad = json_object_set(body, "preconditions", pre) != 0;
        if (!bad && opts->propagation_policy)
            bad = json_object_set_new(body, "propagationPolicy",
                                      json_string(opts->propagation_policy)) != 0;
        if (!bad && opts->grace_period_seconds >= 0)
            bad = json_object_set_new(body, "gracePeriodSeconds",
                                      json_integer(opts->grace_period_seconds)) != 0;
        json_decref(pre);
        if (bad) {
            json_decref(body);
            free(path);
            return kube_error_set(err, KUBE_ENOMEM, "out of memory building DeleteOptions");
        }
    }
    int rc = kube_request(c, "DELETE", path, body, NULL, out, err);
    json_decref(body);
    free(path);
    return rc;
}

int kube_bind_pod(kube_client *c, const char *ns, const char *pod, const char *pod_uid,
                  const char *node, kube_error *err) {
    if (ns == NULL || pod == NULL || node == NULL || node[0] == '\0')
        return kube_error_set(err, KUBE_EINVAL,
                              "kube_bind_pod needs a namespace, a pod and a "
                              "node");
    kube_resource pods = {NULL, "v1", "pods", ns};
    char *path = kube_resource_path(&pods, pod, "binding", err);
    if (path == NULL)
        return err ? err->code : KUBE_EINVAL;
    json_t *b = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s}}", "apiVersion", "v1", "kind",
                          "Binding", "metadata", "name", pod, "namespace", ns, "target",
                          "apiVersion", "v1", "kind", "Node", "name", node);
    int rc;
    if (b == NULL) {
        rc = kube_error_set(err, KUBE_ENOMEM, "out of memory building a Binding");
    } else {
        if (pod_uid)
            json_object_set_new(json_object_get(b, "metadata"), "uid", json_string(pod_uid));
        rc = kube_request(c, "POST", path, b, NULL, NULL, err);
    }
    json_decref(b);
    free(path);
    return rc;
}
