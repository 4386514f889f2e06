/*
 * simnodes.c - Node and tenant-Pod objects for the e2e suite's simulated nodes.
 *
 * How: one pass over the inventory, building jansson objects; every node gets
 * the well-known labels a kubelet would set (hostname, os, arch) unless the
 * inventory sets them itself, the GPU labels of the NVIDIA GPU feature
 * discovery, an InternalIP and podCIDR from its index (10.200.0.0/16 and
 * 10.244.0.0/16; the index is bounded so they never collide), and Ready
 * according to the inventory. Quantities are written in the largest exact
 * unit so `kubectl describe node` reads like a real node.
 * Rejected: generating the objects in shell from the YAML (a second parser of
 * the inventory that could disagree with the planner's); a fixed node template
 * (scenarios need taints, unschedulable and not-ready nodes).
 */
#include "areal/simnodes.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define MAX_SIM_NODES 65024 /* 254 * 256: every node gets a distinct IP and /24 */

int areal_simnodes_format_cpu(long milli, char *buf, size_t n) {
    int w;
    if (milli < 0 || n == 0)
        return AREAL_ERANGE;
    if (milli % 1000 == 0)
        w = snprintf(buf, n, "%ld", milli / 1000);
    else
        w = snprintf(buf, n, "%ldm", milli);
    return (w < 0 || (size_t)w >= n) ? AREAL_ERANGE : AREAL_OK;
}

int areal_simnodes_format_bytes(long long bytes, char *buf, size_t n) {
    static const char *const units[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    int u = 0, w;
    if (bytes < 0 || n == 0)
        return AREAL_ERANGE;
    while (bytes != 0 && bytes % 1024 == 0 && u < 6) {
        bytes /= 1024;
        u++;
    }
    w = snprintf(buf, n, "%lld%s", bytes, units[u]);
    return (w < 0 || (size_t)w >= n) ? AREAL_ERANGE : AREAL_OK;
}

/* DNS-1123 subdomain: what the API server demands of a Node name. */
static bool valid_node_name(const char *s) {
    size_t len = strlen(s);
    if (len == 0 || len > 253)
        return false;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (!alnum && ch != '-' && ch != '.')
            return false;
        if ((i == 0 || i == len - 1) && !alnum)
            return false;
    }
    return true;
}

/* obj[key] = new string value; false when out of memory. */
static bool set_str(json_t *obj, const char *key, const char *value) {
    return obj && json_object_set_new(obj, key, json_string(value)) == 0;
}

/* The resource list {cpu, memory, pods, nvidia.com/gpu} of a node. */
static json_t *node_resources(const areal_node *n) {
    char cpu[32], mem[32], gpus[16];
    long cpu_milli = n->cpu_milli > 0 ? n->cpu_milli : AREAL_SIMNODES_DEFAULT_CPU_MILLI;
    long long mem_bytes = n->mem_bytes > 0 ? n->mem_bytes : AREAL_SIMNODES_DEFAULT_MEM_BYTES;
    if (areal_simnodes_format_cpu(cpu_milli, cpu, sizeof cpu) != 0 ||
        areal_simnodes_format_bytes(mem_bytes, mem, sizeof mem) != 0)
        return NULL;
    snprintf(gpus, sizeof gpus, "%d", n->gpus);
    return json_pack("{s:s, s:s, s:s, s:s, s:s}", "cpu", cpu, "memory", mem, "pods", "110",
                     "ephemeral-storage", "1Ti", "nvidia.com/gpu", gpus);
}

static json_t *node_labels(const areal_node *n) {
    char count[16];
    json_t *l = json_object();
    if (!l)
        return NULL;
    snprintf(count, sizeof count, "%d", n->gpus);
    bool ok = set_str(l, "kubernetes.io/hostname", n->name) &&
              set_str(l, "kubernetes.io/os", "linux") &&
              set_str(l, "kubernetes.io/arch", "amd64") &&
              set_str(l, "nvidia.com/gpu.present", n->gpus > 0 ? "true" : "false") &&
              set_str(l, "nvidia.com/gpu.count", count) && set_str(l, AREAL_SIMNODES_LABEL, "true");
    for (int i = 0; ok && i < n->n_labels; i++) /* the inventory wins */
        ok = set_str(l, n->labels[i].key, n->labels[i].value);
    if (!ok) {
        json_decref(l);
        return NULL;
    }
    return l;
}

static json_t *node_taints(const areal_node *n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n->n_taints; i++) {
        const areal_taint *t = &n->taints[i];
        json_t *o = json_pack("{s:s, s:s}", "key", t->key, "effect", t->effect);
        if (o && t->value[0] != '\0' && !set_str(o, "value", t->value)) {
            json_decref(o);
            o = NULL;
        }
        if (!o || json_array_append_new(a, o) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* Sets lastHeartbeatTime and lastTransitionTime of every condition to `now`. */
static json_t *stamp(json_t *conds, const char *now) {
    size_t i;
    json_t *cnd;
    if (!conds || !now)
        return conds;
    json_array_foreach(conds, i, cnd) {
        if (!set_str(cnd, "lastHeartbeatTime", now) || !set_str(cnd, "lastTransitionTime", now)) {
            json_decref(conds);
            return NULL;
        }
    }
    return conds;
}

static json_t *node_conditions(const areal_node *n, const char *now) {
    const char *ready = n->ready ? "True" : "False";
    const char *reason = n->ready ? "KubeletReady" : "KubeletNotReady";
    const char *msg = n->ready ? "simulated kubelet is posting ready status"
                               : "the scenario marks this node not ready";
    return stamp(json_pack("[{s:s,s:s,s:s,s:s}, {s:s,s:s,s:s}, {s:s,s:s,s:s}, {s:s,s:s,s:s}]",
                           "type", "Ready", "status", ready, "reason", reason, "message", msg,
                           "type", "MemoryPressure", "status", "False", "reason",
                           "KubeletHasSufficientMemory", "type", "DiskPressure", "status", "False",
                           "reason", "KubeletHasNoDiskPressure", "type", "PIDPressure", "status",
                           "False", "reason", "KubeletHasSufficientPID"),
                 now);
}

static json_t *one_node(const areal_node *n, int idx, const char *kubelet_version,
                        const char *now) {
    char ip[32], cidr[32];
    snprintf(ip, sizeof ip, "10.200.%d.%d", idx / 254, idx % 254 + 1);
    snprintf(cidr, sizeof cidr, "10.244.%d.0/24", idx % 256);
    json_t *res = node_resources(n);
    json_t *node = json_pack(
        "{s:s, s:s, s:{s:s, s:o}, s:{s:s, s:[s], s:b, s:o},"
        " s:{s:O, s:O, s:o, s:[{s:s,s:s},{s:s,s:s}],"
        "    s:{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}}}",
        "apiVersion", "v1", "kind", "Node", "metadata", "name", n->name, "labels", node_labels(n),
        "spec", "podCIDR", cidr, "podCIDRs", cidr, "unschedulable", n->unschedulable, "taints",
        node_taints(n), "status", "capacity", res, "allocatable", res, "conditions",
        node_conditions(n, now), "addresses", "type", "InternalIP", "address", ip, "type",
        "Hostname", "address", n->name, "nodeInfo", "kubeletVersion", kubelet_version,
        "kubeProxyVersion", "", "architecture", "amd64", "operatingSystem", "linux", "osImage",
        "areal-e2e simulated node", "kernelVersion", "", "containerRuntimeVersion",
        "areal-e2e-sim://1", "machineID", "", "systemUUID", "", "bootID", "");
    json_decref(res); /* both "O" took their own reference */
    return node;
}

static json_t *new_list(void) {
    return json_pack("{s:s, s:s, s:[]}", "apiVersion", "v1", "kind", "List", "items");
}

int areal_simnodes_nodes(const areal_cluster *c, const areal_simnodes_opts *o, json_t **out,
                         areal_error *err) {
    const char *kv = (o && o->kubelet_version) ? o->kubelet_version : "v0.0.0";
    *out = NULL;
    if (c->n_nodes > MAX_SIM_NODES)
        return areal_error_set(err, AREAL_ERANGE, -1,
                               "the inventory has %d nodes; the e2e suite simulates at most %d",
                               c->n_nodes, MAX_SIM_NODES);
    json_t *list = new_list();
    if (!list)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory building the Node list");
    json_t *items = json_object_get(list, "items");
    for (int i = 0; i < c->n_nodes; i++) {
        const areal_node *n = &c->nodes[i];
        if (!valid_node_name(n->name)) {
            json_decref(list);
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "node '%s': not a valid Kubernetes node name (lower-case "
                                   "letters, digits, '-' and '.', starting and ending with a "
                                   "letter or digit, at most 253 characters); rename it in the "
                                   "inventory",
                                   n->name);
        }
        if (json_array_append_new(items, one_node(n, i, kv, o ? o->now : NULL)) != 0) {
            json_decref(list);
            return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory building node '%s'",
                                   n->name);
        }
    }
    *out = list;
    return AREAL_OK;
}

static json_t *tenant_pod(const areal_node *n, const char *ns) {
    char name[300], cpu[32], mem[32], gpus[16];
    snprintf(name, sizeof name, "tenant-%s", n->name);
    if (strlen(name) > 253)
        name[253] = '\0';
    json_t *req = json_object();
    if (!req)
        return NULL;
    bool ok = true;
    if (n->gpus_used > 0) {
        snprintf(gpus, sizeof gpus, "%d", n->gpus_used);
        ok = set_str(req, "nvidia.com/gpu", gpus);
    }
    if (ok && n->cpu_used_milli > 0)
        ok = areal_simnodes_format_cpu(n->cpu_used_milli, cpu, sizeof cpu) == 0 &&
             set_str(req, "cpu", cpu);
    if (ok && n->mem_used_bytes > 0)
        ok = areal_simnodes_format_bytes(n->mem_used_bytes, mem, sizeof mem) == 0 &&
             set_str(req, "memory", mem);
    if (!ok) {
        json_decref(req);
        return NULL;
    }
    /* Extended resources need limits == requests; cpu/memory may match too. */
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}},"
                     " s:{s:s, s:b, s:[{s:s, s:s, s:[s,s], s:{s:O, s:o}}]}}",
                     "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace", ns,
                     "labels", AREAL_SIMNODES_LABEL, "tenant", "spec", "nodeName", n->name,
                     "automountServiceAccountToken", 0, "containers", "name", "tenant", "image",
                     "areal-e2e/tenant", "command", "sleep", "infinity", "resources", "requests",
                     req, "limits", req);
}

int areal_simnodes_tenant_pods(const areal_cluster *c, const areal_simnodes_opts *o, json_t **out,
                               areal_error *err) {
    const char *ns = (o && o->tenant_namespace) ? o->tenant_namespace : "areal-e2e-tenants";
    *out = NULL;
    json_t *list = new_list();
    if (!list)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory building the Pod list");
    json_t *items = json_object_get(list, "items");
    for (int i = 0; i < c->n_nodes; i++) {
        const areal_node *n = &c->nodes[i];
        if (n->gpus_used <= 0 && n->cpu_used_milli <= 0 && n->mem_used_bytes <= 0)
            continue;
        if (json_array_append_new(items, tenant_pod(n, ns)) != 0) {
            json_decref(list);
            return areal_error_set(err, AREAL_ENOMEM, -1,
                                   "out of memory building the tenant pod of node '%s'", n->name);
        }
    }
    *out = list;
    return AREAL_OK;
}
