/*
 * cluster_parse.c - decodes an inventory file (see areal/cluster.h for the two
 * shapes) into an areal_cluster.
 *
 * JSON goes through jansson, YAML through yaml_json.c; both end as one json_t
 * tree and one decoder. The decoder is strict: unknown fields in the project's
 * own form are errors (a typo like `gpuUsed` must not silently mean 0), every
 * message names the file and the field path (`nodes[3].gpusUsed`) and says
 * what was expected. kubectl output is read leniently, since the API server
 * adds many fields that placement does not need.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "areal/cluster.h"
#include "areal/cluster_kube.h"
#include "areal/yaml_json.h"

#define MAX_INVENTORY_BYTES (256L << 20)
#define AMOUNT_MAX          (1LL << 62) /* the largest amount, as in areal_quantity_parse */

/* A node's name, its index in the cluster and where the file gives it. */
typedef struct named {
    const char *name;
    int node;
    size_t origin; /* index into `nodes` or `items` */
} named;

typedef struct decoder {
    const char *source;
    int default_gpus;
    areal_cluster *c;
    areal_error *err;
    bool kube;      /* kubectl output: names come from items[i].metadata.name */
    named *by_name; /* the nodes sorted by name, once check_names has run */
} decoder;

static int fail(decoder *d, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records "SOURCE: PATH: what" and returns AREAL_EINVAL. */
static int fail(decoder *d, const char *path, const char *fmt, ...) {
    char what[AREAL_ERROR_MSG_MAX / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return areal_error_set(d->err, AREAL_EINVAL, -1, "%s: %s: %s", d->source, path, what);
}

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "a list";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/*
 * A resource amount given as an integer or a quantity string, scaled by `scale`.
 * Missing (NULL) leaves *out unchanged.
 */
static int get_quantity(decoder *d, const json_t *v, const char *path, long long scale,
                        long long *out) {
    if (v == NULL)
        return AREAL_OK;
    if (json_is_integer(v)) {
        long long i = json_integer_value(v);
        if (i < 0)
            return fail(d, path, "expected a non-negative amount, found %lld", i);
        if (i > AMOUNT_MAX / scale)
            return fail(d, path, "amount %lld is too large", i);
        *out = i * scale;
        return AREAL_OK;
    }
    char num[40];
    const char *text;
    if (json_is_string(v)) {
        text = json_string_value(v);
    } else if (json_is_real(v)) {
        /* cpu: 0.5 written as a number: its shortest decimal form is a quantity. */
        snprintf(num, sizeof num, "%.15g", json_real_value(v));
        text = num;
    } else {
        return fail(d, path, "expected a number or a quantity string, found %s", json_kind(v));
    }
    if (areal_quantity_parse(text, scale, out) == AREAL_OK)
        return AREAL_OK;
    return fail(d, path, "expected a Kubernetes quantity such as 8, 500m or 64Gi, found \"%.60s\"",
                text);
}

/* a + b for amounts in [0, AMOUNT_MAX], saturating: many pods cannot overflow a sum. */
static long long add_amount(long long a, long long b) {
    return a > AMOUNT_MAX - b ? AMOUNT_MAX : a + b;
}

static int get_count(decoder *d, const json_t *v, const char *path, int *out) {
    long long q = *out;
    int rc = get_quantity(d, v, path, 1, &q);
    if (rc != AREAL_OK)
        return rc;
    if (q > 1000000)
        return fail(d, path, "expected at most 1000000, found %lld", q);
    *out = (int)q;
    return AREAL_OK;
}

static int get_bool(decoder *d, const json_t *v, const char *path, bool *out) {
    if (v == NULL)
        return AREAL_OK;
    if (!json_is_boolean(v))
        return fail(d, path, "expected true or false, found %s", json_kind(v));
    *out = json_is_true(v);
    return AREAL_OK;
}

/*
 * Label values may be written as YAML numbers or booleans; they are strings.
 * Returns the text (a string's own, or formatted into `buf`), or NULL.
 */
static const char *scalar_text(const json_t *v, char *buf, size_t cap) {
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_integer(v))
        snprintf(buf, cap, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, cap, "%.15g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(buf, cap, "%s", json_is_true(v) ? "true" : "false");
    else
        return NULL;
    return buf;
}

static int decode_labels(decoder *d, int idx, const json_t *labels, const char *path) {
    if (labels == NULL || json_is_null(labels))
        return AREAL_OK;
    if (!json_is_object(labels))
        return fail(d, path, "expected a mapping of label keys to values, found %s",
                    json_kind(labels));
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)labels, key, val) {
        char buf[40], sub[256];
        snprintf(sub, sizeof sub, "%s.%s", path, key);
        const char *text = scalar_text(val, buf, sizeof buf);
        if (text == NULL)
            return fail(d, sub, "expected a string label value, found %s", json_kind(val));
        int rc = areal_cluster_set_label(d->c, idx, key, text, d->err);
        if (rc != AREAL_OK)
            return rc;
    }
    return AREAL_OK;
}

static int decode_taints(decoder *d, int idx, const json_t *taints, const char *path) {
    if (taints == NULL || json_is_null(taints))
        return AREAL_OK;
    if (!json_is_array(taints))
        return fail(d, path, "expected a list of {key, value, effect}, found %s",
                    json_kind(taints));
    size_t i;
    json_t *t;
    json_array_foreach(taints, i, t) {
        char sub[256];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        const json_t *key = json_object_get(t, "key");
        const json_t *value = json_object_get(t, "value");
        const json_t *effect = json_object_get(t, "effect");
        if (!json_is_object(t) || !json_is_string(key) || !json_is_string(effect))
            return fail(d, sub, "expected a taint with string fields key and effect");
        const char *e = json_string_value(effect);
        if (strcmp(e, "NoSchedule") != 0 && strcmp(e, "PreferNoSchedule") != 0 &&
            strcmp(e, "NoExecute") != 0)
            return fail(d, sub,
                        "effect must be NoSchedule, PreferNoSchedule or NoExecute, found \"%s\"",
                        e);
        int rc = areal_cluster_add_taint(d->c, idx, json_string_value(key),
                                         json_is_string(value) ? json_string_value(value) : "", e,
                                         d->err);
        if (rc != AREAL_OK)
            return rc;
    }
    return AREAL_OK;
}

/* One node of the project's own form. */
static int decode_own_node(decoder *d, const json_t *n, size_t i) {
    static const char *const known[] = {"name",    "gpus",   "gpusUsed",      "cpu",
                                        "cpuUsed", "memory", "memoryUsed",    "labels",
                                        "taints",  "ready",  "unschedulable", NULL};
    char path[64];
    snprintf(path, sizeof path, "nodes[%zu]", i);
    if (!json_is_object(n))
        return fail(d, path, "expected a node object with at least a name, found %s", json_kind(n));
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)n, key, val) {
        int k = 0;
        while (known[k] != NULL && strcmp(known[k], key) != 0)
            k++;
        if (known[k] == NULL) {
            char sub[128];
            snprintf(sub, sizeof sub, "%s.%.60s", path, key);
            return fail(d, sub,
                        "unknown field; a node has name, gpus, gpusUsed, cpu, cpuUsed, memory, "
                        "memoryUsed, labels, taints, ready, unschedulable");
        }
    }
    const json_t *name = json_object_get(n, "name");
    if (!json_is_string(name) || json_string_value(name)[0] == '\0') {
        char sub[80];
        snprintf(sub, sizeof sub, "%s.name", path);
        return fail(d, sub, "every node needs a non-empty string name");
    }
    int gpus = d->default_gpus, used = 0;
    long long cpu = 0, cpu_used = 0, mem = 0, mem_used = 0;
    bool ready = true, unschedulable = false;
    char sub[128];
#define FIELD(f) (snprintf(sub, sizeof sub, "%s.%s", path, f), sub)
    int rc = get_count(d, json_object_get(n, "gpus"), FIELD("gpus"), &gpus);
    if (rc == AREAL_OK)
        rc = get_count(d, json_object_get(n, "gpusUsed"), FIELD("gpusUsed"), &used);
    if (rc == AREAL_OK)
        rc = get_quantity(d, json_object_get(n, "cpu"), FIELD("cpu"), 1000, &cpu);
    if (rc == AREAL_OK)
        rc = get_quantity(d, json_object_get(n, "cpuUsed"), FIELD("cpuUsed"), 1000, &cpu_used);
    if (rc == AREAL_OK)
        rc = get_quantity(d, json_object_get(n, "memory"), FIELD("memory"), 1, &mem);
    if (rc == AREAL_OK)
        rc = get_quantity(d, json_object_get(n, "memoryUsed"), FIELD("memoryUsed"), 1, &mem_used);
    if (rc == AREAL_OK)
        rc = get_bool(d, json_object_get(n, "ready"), FIELD("ready"), &ready);
    if (rc == AREAL_OK)
        rc = get_bool(d, json_object_get(n, "unschedulable"), FIELD("unschedulable"),
                      &unschedulable);
    if (rc != AREAL_OK)
        return rc;
    if (used > gpus)
        return fail(d, FIELD("gpusUsed"), "is larger than gpus; use at most the node's GPUs");
    int idx = areal_cluster_add_node(d->c, json_string_value(name), gpus, used, d->err);
    if (idx < 0)
        return idx;
    areal_node *node = &d->c->nodes[idx];
    node->cpu_milli = (long)cpu;
    node->cpu_used_milli = (long)cpu_used;
    node->mem_bytes = mem;
    node->mem_used_bytes = mem_used;
    node->ready = ready;
    node->unschedulable = unschedulable;
    rc = decode_labels(d, idx, json_object_get(n, "labels"), FIELD("labels"));
    if (rc == AREAL_OK)
        rc = decode_taints(d, idx, json_object_get(n, "taints"), FIELD("taints"));
#undef FIELD
    return rc;
}

static int cmp_named_name(const void *a, const void *b) {
    return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

static int cmp_named(const void *a, const void *b) {
    const named *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c != 0 ? c : (x->origin > y->origin) - (x->origin < y->origin);
}

/* The path of the name of the node given at position `origin` of the file. */
static const char *name_path(const decoder *d, size_t origin, char *buf, size_t cap) {
    if (d->kube)
        snprintf(buf, cap, "items[%zu].metadata.name", origin);
    else
        snprintf(buf, cap, "nodes[%zu].name", origin);
    return buf;
}

/*
 * Sorts the node names into d->by_name (for finding a pod's node) and rejects
 * a name given twice. `origin[i]` is where node i stands in the file (NULL:
 * at position i).
 */
static int check_names(decoder *d, const size_t *origin) {
    int n = d->c->n_nodes;
    d->by_name = malloc((size_t)(n ? n : 1) * sizeof *d->by_name);
    if (d->by_name == NULL)
        return areal_error_set(d->err, AREAL_ENOMEM, -1, "out of memory");
    for (int i = 0; i < n; i++)
        d->by_name[i] = (named){d->c->nodes[i].name, i, origin ? origin[i] : (size_t)i};
    qsort(d->by_name, (size_t)n, sizeof *d->by_name, cmp_named);
    for (int i = 1; i < n; i++) {
        if (strcmp(d->by_name[i - 1].name, d->by_name[i].name) == 0) {
            char here[80], first[80];
            name_path(d, d->by_name[i].origin, here, sizeof here);
            name_path(d, d->by_name[i - 1].origin, first, sizeof first);
            return fail(d, here, "node name '%s' is already used by %s; node names must be unique",
                        d->by_name[i].name, first);
        }
    }
    return AREAL_OK;
}

static int decode_own(decoder *d, const json_t *root) {
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)root, key, val) {
        if (strcmp(key, "nodes") != 0 && strcmp(key, "gpusPerNode") != 0)
            return fail(d, key, "unknown top-level field; an inventory has nodes and gpusPerNode");
    }
    int rc = get_count(d, json_object_get(root, "gpusPerNode"), "gpusPerNode", &d->default_gpus);
    if (rc != AREAL_OK)
        return rc;
    const json_t *nodes = json_object_get(root, "nodes");
    if (!json_is_array(nodes))
        return fail(d, "nodes", "expected a list of nodes, found %s",
                    nodes ? json_kind(nodes) : "nothing");
    size_t i;
    json_t *n;
    json_array_foreach(nodes, i, n) {
        rc = decode_own_node(d, n, i);
        if (rc != AREAL_OK)
            return rc;
    }
    return check_names(d, NULL); /* node i is nodes[i] */
}

/* ---- kubectl output ------------------------------------------------------ */

static const char *get_str(const json_t *obj, const char *a, const char *b) {
    const json_t *v = json_object_get(obj, a);
    if (b != NULL)
        v = json_object_get(v, b);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int decode_kube_node(decoder *d, const json_t *item, const char *path) {
    char sub[160];
    const char *name = get_str(item, "metadata", "name");
    if (name == NULL || *name == '\0') {
        snprintf(sub, sizeof sub, "%s.metadata.name", path);
        return fail(d, sub, "a Node needs metadata.name");
    }
    const json_t *status = json_object_get(item, "status");
    const json_t *alloc = json_object_get(status, "allocatable");
    if (alloc == NULL)
        alloc = json_object_get(status, "capacity");
    int gpus = 0; /* a node without the GPU resource has none, whatever the default */
    long long cpu = 0, mem = 0;
    snprintf(sub, sizeof sub, "%s.status.allocatable.nvidia.com/gpu", path);
    int rc = get_count(d, json_object_get(alloc, "nvidia.com/gpu"), sub, &gpus);
    snprintf(sub, sizeof sub, "%s.status.allocatable.cpu", path);
    if (rc == AREAL_OK)
        rc = get_quantity(d, json_object_get(alloc, "cpu"), sub, 1000, &cpu);
    snprintf(sub, sizeof sub, "%s.status.allocatable.memory", path);
    if (rc == AREAL_OK)
        rc = get_quantity(d, json_object_get(alloc, "memory"), sub, 1, &mem);
    if (rc != AREAL_OK)
        return rc;
    int idx = areal_cluster_add_node(d->c, name, gpus, 0, d->err);
    if (idx < 0)
        return idx;
    areal_node *node = &d->c->nodes[idx];
    node->cpu_milli = (long)cpu;
    node->mem_bytes = mem;
    node->unschedulable =
        json_is_true(json_object_get(json_object_get(item, "spec"), "unschedulable"));
    /* Ready unless a Ready condition says otherwise. */
    size_t k;
    json_t *cond;
    json_array_foreach(json_object_get(status, "conditions"), k, cond) {
        const char *type = get_str(cond, "type", NULL), *st = get_str(cond, "status", NULL);
        if (type && st && strcmp(type, "Ready") == 0)
            node->ready = strcmp(st, "True") == 0;
    }
    snprintf(sub, sizeof sub, "%s.metadata.labels", path);
    rc = decode_labels(d, idx, json_object_get(json_object_get(item, "metadata"), "labels"), sub);
    snprintf(sub, sizeof sub, "%s.spec.taints", path);
    if (rc == AREAL_OK)
        rc = decode_taints(d, idx, json_object_get(json_object_get(item, "spec"), "taints"), sub);
    return rc;
}

/*
 * What container resources `res` request of resource `name`, and the path of
 * that field: Kubernetes defaults a request that is not given to the limit.
 */
static const json_t *requested(const json_t *res, const char *name, const char *base, char *path,
                               size_t cap) {
    const char *part = "requests";
    const json_t *v = json_object_get(json_object_get(res, part), name);
    if (v == NULL) {
        part = "limits";
        v = json_object_get(json_object_get(res, part), name);
    }
    snprintf(path, cap, "%s.%s.%s", base, part, name);
    return v;
}

/* The summed container requests of a Pod object; `path` names it in messages. */
static int pod_requests(decoder *d, const json_t *item, const char *path, int *gpus_out,
                        long long *cpu_out, long long *mem_out) {
    size_t k;
    json_t *ctr;
    *gpus_out = 0;
    *cpu_out = *mem_out = 0;
    json_array_foreach(json_object_get(json_object_get(item, "spec"), "containers"), k, ctr) {
        const json_t *res = json_object_get(ctr, "resources");
        char base[160], sub[224];
        int gpus = 0;
        long long cpu = 0, mem = 0;
        snprintf(base, sizeof base, "%s.spec.containers[%zu].resources", path, k);
        int rc = get_count(d, requested(res, "nvidia.com/gpu", base, sub, sizeof sub), sub, &gpus);
        if (rc == AREAL_OK)
            rc = get_quantity(d, requested(res, "cpu", base, sub, sizeof sub), sub, 1000, &cpu);
        if (rc == AREAL_OK)
            rc = get_quantity(d, requested(res, "memory", base, sub, sizeof sub), sub, 1, &mem);
        if (rc != AREAL_OK)
            return rc;
        *gpus_out = (int)add_amount(*gpus_out, gpus);
        *cpu_out = add_amount(*cpu_out, cpu);
        *mem_out = add_amount(*mem_out, mem);
    }
    return AREAL_OK;
}

/* Adds the requests of one bound, non-terminated Pod to its node's used amounts. */
static int account_kube_pod(decoder *d, const json_t *item, size_t i) {
    const char *node = get_str(item, "spec", "nodeName");
    const char *phase = get_str(item, "status", "phase");
    if (node == NULL ||
        (phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0)))
        return AREAL_OK;
    named key = {.name = node};
    const named *found =
        bsearch(&key, d->by_name, (size_t)d->c->n_nodes, sizeof key, cmp_named_name);
    if (found == NULL)
        return AREAL_OK; /* a pod on a node the file does not list uses nothing we place on */
    areal_node *n = &d->c->nodes[found->node];
    char path[32];
    snprintf(path, sizeof path, "items[%zu]", i);
    int gpus;
    long long cpu, mem;
    int rc = pod_requests(d, item, path, &gpus, &cpu, &mem);
    if (rc != AREAL_OK)
        return rc;
    n->gpus_used = (int)add_amount(n->gpus_used, gpus);
    if (n->gpus_used > n->gpus)
        n->gpus_used = n->gpus; /* over-committed in the snapshot: the node is full */
    n->cpu_used_milli = (long)add_amount(n->cpu_used_milli, cpu);
    n->mem_used_bytes = add_amount(n->mem_used_bytes, mem);
    return AREAL_OK;
}

int areal_cluster_add_kube_node(areal_cluster *c, const json_t *node, const char *source,
                                areal_error *err) {
    decoder d = {.source = source ? source : "node", .c = c, .err = err, .kube = true};
    int before = c->n_nodes;
    int rc = decode_kube_node(&d, node, "node");
    if (rc != AREAL_OK) {
        areal_cluster_truncate(c, before); /* unchanged on error */
        return rc;
    }
    return c->n_nodes - 1;
}

int areal_kube_pod_requests(const json_t *pod, const char *source, int *gpus, long long *cpu_milli,
                            long long *mem_bytes, areal_error *err) {
    decoder d = {.source = source ? source : "pod", .err = err, .kube = true};
    return pod_requests(&d, pod, "pod", gpus, cpu_milli, mem_bytes);
}

/* An item of a NodeList, or an item of a List that says it is a Node. */
static bool is_node_item(const json_t *item, bool node_list) {
    const char *kind = get_str(item, "kind", NULL);
    return (kind == NULL && node_list) || (kind && strcmp(kind, "Node") == 0);
}

static int decode_kube(decoder *d, const json_t *root) {
    const json_t *items = json_object_get(root, "items");
    if (!json_is_array(items))
        return fail(d, "items", "expected the list of items of a NodeList, found %s",
                    items ? json_kind(items) : "nothing");
    const char *list_kind = get_str(root, "kind", NULL);
    bool node_list = list_kind != NULL && strcmp(list_kind, "NodeList") == 0;
    size_t *origin = malloc((json_array_size(items) + 1) * sizeof *origin);
    if (origin == NULL)
        return areal_error_set(d->err, AREAL_ENOMEM, -1, "out of memory");
    size_t i;
    json_t *item;
    int rc = AREAL_OK;
    /* Nodes first, so that pods listed before their node still count. */
    json_array_foreach(items, i, item) {
        if (is_node_item(item, node_list)) {
            origin[d->c->n_nodes] = i;
            char path[32];
            snprintf(path, sizeof path, "items[%zu]", i);
            rc = decode_kube_node(d, item, path);
            if (rc != AREAL_OK)
                break;
        }
    }
    if (rc == AREAL_OK)
        rc = check_names(d, origin);
    free(origin);
    if (rc != AREAL_OK)
        return rc;
    json_array_foreach(items, i, item) {
        const char *kind = get_str(item, "kind", NULL);
        if (kind && strcmp(kind, "Pod") == 0) {
            rc = account_kube_pod(d, item, i);
            if (rc != AREAL_OK)
                return rc;
        }
    }
    return AREAL_OK;
}

/*
 * Whether `text` is meant as JSON: it opens with '[', or with '{' followed by a
 * quoted key or '}'. YAML in flow style ({nodes: [...]}) is read as YAML.
 */
static bool looks_like_json(const char *text, size_t len) {
    size_t k = 0;
    while (k < len && strchr(" \t\r\n", text[k]) != NULL)
        k++;
    if (k == len || (text[k] != '{' && text[k] != '['))
        return false;
    if (text[k++] == '[')
        return true;
    while (k < len && strchr(" \t\r\n", text[k]) != NULL)
        k++;
    return k == len || text[k] == '"' || text[k] == '}';
}

int areal_cluster_parse(const char *text, size_t len, const char *source, int default_gpus,
                        areal_cluster *c, areal_error *err) {
    areal_cluster_init(c);
    if (source == NULL)
        source = "inventory";
    json_t *root;
    if (looks_like_json(text, len)) {
        json_error_t jerr;
        root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (root == NULL)
            return areal_error_set(err, AREAL_EINVAL, jerr.position, "%s:%d:%d: invalid JSON: %s",
                                   source, jerr.line, jerr.column, jerr.text);
    } else {
        root = areal_yaml_to_json(text, len, source, err);
        if (root == NULL)
            return err ? err->code : AREAL_EINVAL;
    }
    decoder d = {.source = source, .default_gpus = default_gpus, .c = c, .err = err};
    int rc;
    if (!json_is_object(root)) {
        rc = fail(&d, "top level",
                  "expected a mapping with `nodes` (or a kubectl NodeList), found %s",
                  json_kind(root));
    } else {
        const char *kind = get_str(root, "kind", NULL);
        d.kube = kind != NULL;
        if (kind && (strcmp(kind, "NodeList") == 0 || strcmp(kind, "List") == 0))
            rc = decode_kube(&d, root);
        else if (kind)
            rc = fail(&d, "kind",
                      "expected NodeList or List (kubectl get nodes -o json), found \"%s\"", kind);
        else
            rc = decode_own(&d, root);
    }
    if (rc == AREAL_OK && c->n_nodes == 0)
        rc = fail(&d, d.kube ? "items" : "nodes", "the inventory lists no nodes");
    free(d.by_name);
    json_decref(root);
    if (rc != AREAL_OK)
        areal_cluster_free(c);
    return rc;
}

int areal_cluster_load_file(const char *path, int default_gpus, areal_cluster *c,
                            areal_error *err) {
    areal_cluster_init(c);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return areal_error_set(err, AREAL_EIO, -1, "cannot open cluster file %s: %s", path,
                               strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = AREAL_OK;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 65536;
            if ((long)cap > MAX_INVENTORY_BYTES) {
                rc = areal_error_set(err, AREAL_EINVAL, -1, "%s: larger than %ld MiB", path,
                                     MAX_INVENTORY_BYTES >> 20);
                break;
            }
            char *grown = realloc(buf, cap);
            if (grown == NULL) {
                rc = areal_error_set(err, AREAL_ENOMEM, -1, "out of memory reading %s", path);
                break;
            }
            buf = grown;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f))
                rc = areal_error_set(err, AREAL_EIO, -1, "cannot read %s: %s", path,
                                     strerror(errno));
            break;
        }
    }
    fclose(f);
    if (rc == AREAL_OK)
        rc = areal_cluster_parse(buf, len, path, default_gpus, c, err);
    free(buf);
    return rc;
}
