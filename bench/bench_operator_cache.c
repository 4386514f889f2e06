/*
 * bench_operator_cache.c - resident memory of the operator's informer caches
 * holding 10,000 pods and 4,000 nodes (issue goal: under 32 MB), measured as
 * the growth of this process's VmRSS while the caches fill.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/operator/cache.h"

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

static json_t *pod(int i) {
    char name[48], node[32];
    snprintf(name, sizeof name, "job-%d-trainer-%d", i / 16, i % 16);
    snprintf(node, sizeof node, "node-%04d", i % 4000);
    return json_pack("{s:{s:s,s:s,s:s,s:{s:s,s:s,s:s},s:{s:s}},"
                     "s:{s:s,s:s,s:[{s:s,s:s,s:[{s:s,s:s}],s:{s:{s:s}}}]},"
                     "s:{s:s,s:[{s:s,s:s},{s:s,s:s}],s:[{s:s,s:{s:{s:s}}}]}}",
                     "metadata", "name", name, "namespace", "team", "uid",
                     "0f9c1b5e-3c7e-4d5e-9a8b-1c2d3e4f5a6b", "labels", "areal.io/job", "job",
                     "areal.io/role", "trainer", "areal.io/pod-index", "3", "annotations",
                     "areal.io/planned-node", node, "spec", "nodeName", node, "schedulerName",
                     "areal-operator", "containers", "name", "worker", "image", "img", "env",
                     "name", "K", "value", "V", "resources", "limits", "nvidia.com/gpu", "8",
                     "status", "phase", "Running", "conditions", "type", "Ready", "status", "True",
                     "type", "PodScheduled", "status", "True", "containerStatuses", "name",
                     "worker", "state", "running", "startedAt", "2026-11-29T20:00:00Z");
}

int main(void) {
    long before = rss_kb();
    obj_cache *pods = cache_new(cache_prune_pod), *nodes = cache_new(cache_prune_node);
    for (int i = 0; i < 10000; i++) {
        json_t *p = pod(i);
        cache_apply(pods, p, false);
        json_decref(p);
    }
    for (int i = 0; i < 4000; i++) {
        char name[32], leaf[32];
        snprintf(name, sizeof name, "node-%04d", i);
        snprintf(leaf, sizeof leaf, "leaf-%d", i / 16);
        json_t *n = json_pack(
            "{s:{s:s,s:{s:s,s:s,s:s}},s:{s:{s:s,s:s,s:s},s:[{s:s,s:s}]}}", "metadata", "name", name,
            "labels", "network.topology.nvidia.com/leaf", leaf, "kubernetes.io/hostname", name,
            "nvidia.com/gpu.product", "NVIDIA-H200", "status", "allocatable", "nvidia.com/gpu", "8",
            "cpu", "96", "memory", "1024Gi", "conditions", "type", "Ready", "status", "True");
        cache_apply(nodes, n, false);
        json_decref(n);
    }
    long after = rss_kb();
    printf("operator caches with %zu pods and %zu nodes: %.1f MB resident (goal < 32 MB)\n",
           cache_len(pods), cache_len(nodes), (double)(after - before) / 1024.0);
    cache_free(pods);
    cache_free(nodes);
    return 0;
}
