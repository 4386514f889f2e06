/*
 * fake_api_gen.c - the generated objects of the fake API server (see
 * fake_api_gen.h): pods and nodes shaped like what a real API server returns
 * (managedFields, owner references, env, conditions, node images and ~15
 * labels), written straight into the list page's text so a large cluster
 * costs the server no memory.
 */
#include "fake_api_gen.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a growable text buffer ------------------------------------------------ */

void fake_put(fake_text *t, const char *s, size_t n) {
    if (t->oom)
        return;
    if (t->n + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->n + n + 1)
            cap *= 2;
        char *g = realloc(t->p, cap);
        if (g == NULL) {
            t->oom = true;
            return;
        }
        t->p = g;
        t->cap = cap;
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = '\0';
}

void fake_putf(fake_text *t, const char *fmt, ...) {
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        fake_put(t, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* ---- generated objects ------------------------------------------------------- */

void fake_gen_pod(fake_text *t, int i, int n_nodes) {
    int job = i / 16, idx = i % 16, node = n_nodes > 0 ? i % n_nodes : 0;
    fake_putf(
        t,
        "{\"metadata\":{\"name\":\"job-%d-trainer-%d\",\"namespace\":\"team\","
        "\"uid\":\"6b1f%04x-3c7e-4d5e-9a8b-%012d\",\"resourceVersion\":\"%d\","
        "\"creationTimestamp\":\"2026-11-29T20:00:00Z\",\"labels\":{\"areal.io/job\":\"job-%d\","
        "\"areal.io/role\":\"trainer\",\"areal.io/role-kind\":\"trainer\","
        "\"areal.io/pod-index\":\"%d\",\"app.kubernetes.io/managed-by\":\"areal-operator\"},"
        "\"annotations\":{\"areal.io/planned-node\":\"node-%04d\"},"
        "\"ownerReferences\":[{\"apiVersion\":\"areal.io/v1alpha1\",\"kind\":\"AReaLJob\","
        "\"name\":\"job-%d\",\"uid\":\"0f9c1b5e-3c7e-4d5e-9a8b-%012d\",\"controller\":true,"
        "\"blockOwnerDeletion\":true}],\"managedFields\":[{\"manager\":\"areal-operator\","
        "\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":\"2026-11-29T20:00:00Z\","
        "\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{\"f:labels\":{\".\":{},"
        "\"f:areal.io/job\":{},\"f:areal.io/role\":{}}},\"f:spec\":{\"f:containers\":{"
        "\"k:{\\\"name\\\":\\\"worker\\\"}\":{\".\":{},\"f:env\":{},\"f:image\":{}}}}}}]},",
        job, idx, i & 0xffff, i, 1000 + i, job, idx, node, job, job);
    fake_putf(
        t,
        "\"spec\":{\"nodeName\":\"node-%04d\",\"schedulerName\":\"areal-operator\","
        "\"hostname\":\"job-%d-trainer-%d\",\"subdomain\":\"job-%d\",\"restartPolicy\":\"Never\","
        "\"containers\":[{\"name\":\"worker\",\"image\":\"areal/worker:latest\","
        "\"command\":[\"areal-worker\"],\"env\":[",
        node, job, idx, job);
    static const char *const env[] = {"AREAL_JOB",        "AREAL_NAMESPACE", "AREAL_ROLE",
                                      "AREAL_ALLOCATION", "AREAL_POD_INDEX", "AREAL_FIRST_RANK",
                                      "AREAL_POD_RANKS",  "WORLD_SIZE",      "MASTER_ADDR",
                                      "MASTER_PORT",      "NCCL_DEBUG",      "NCCL_SOCKET_IFNAME"};
    for (size_t e = 0; e < sizeof env / sizeof env[0]; e++)
        fake_putf(t, "%s{\"name\":\"%s\",\"value\":\"value-of-%s-%d\"}", e ? "," : "", env[e],
                  env[e], i);
    fake_putf(
        t,
        "],\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"8\",\"cpu\":\"32\","
        "\"memory\":\"256Gi\"},\"requests\":{\"nvidia.com/gpu\":\"8\",\"cpu\":\"32\","
        "\"memory\":\"256Gi\"}},\"volumeMounts\":[{\"name\":\"areal-config\","
        "\"mountPath\":\"/etc/areal\",\"readOnly\":true}],\"ports\":[{\"name\":\"rendezvous\","
        "\"containerPort\":29500,\"protocol\":\"TCP\"}]}],\"volumes\":[{\"name\":"
        "\"areal-config\",\"configMap\":{\"name\":\"job-%d-config\"}}],\"tolerations\":["
        "{\"key\":\"nvidia.com/gpu\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]},",
        job);
    fake_putf(
        t,
        "\"status\":{\"phase\":\"Running\",\"podIP\":\"10.%d.%d.%d\",\"hostIP\":\"10.1.%d.%d\","
        "\"startTime\":\"2026-11-29T20:00:01Z\",\"conditions\":["
        "{\"type\":\"Initialized\",\"status\":\"True\",\"lastTransitionTime\":"
        "\"2026-11-29T20:00:01Z\"},{\"type\":\"Ready\",\"status\":\"True\","
        "\"lastTransitionTime\":\"2026-11-29T20:00:05Z\"},{\"type\":\"ContainersReady\","
        "\"status\":\"True\",\"lastTransitionTime\":\"2026-11-29T20:00:05Z\"},"
        "{\"type\":\"PodScheduled\",\"status\":\"True\",\"lastTransitionTime\":"
        "\"2026-11-29T20:00:00Z\"}],\"containerStatuses\":[{\"name\":\"worker\",\"ready\":true,"
        "\"restartCount\":0,\"started\":true,\"image\":\"areal/worker:latest\",\"imageID\":"
        "\"areal/worker@sha256:4f1c7d0e9b3a2c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5\","
        "\"containerID\":\"containerd://%064d\",\"state\":{\"running\":{\"startedAt\":"
        "\"2026-11-29T20:00:04Z\"}}}]}}",
        (i >> 16) & 255, (i >> 8) & 255, i & 255, (node >> 8) & 255, node & 255, i);
}

void fake_gen_node(fake_text *t, int i) {
    fake_putf(
        t,
        "{\"metadata\":{\"name\":\"node-%04d\",\"uid\":\"9a8b%04x-3c7e-4d5e-9a8b-%012d\","
        "\"resourceVersion\":\"%d\",\"creationTimestamp\":\"2026-11-01T00:00:00Z\",\"labels\":{"
        "\"beta.kubernetes.io/arch\":\"amd64\",\"beta.kubernetes.io/os\":\"linux\","
        "\"kubernetes.io/arch\":\"amd64\",\"kubernetes.io/os\":\"linux\","
        "\"kubernetes.io/hostname\":\"node-%04d\",\"node.kubernetes.io/instance-type\":"
        "\"gpu-8xh200\",\"topology.kubernetes.io/region\":\"region-1\","
        "\"topology.kubernetes.io/zone\":\"zone-%d\",\"nvidia.com/gpu.product\":"
        "\"NVIDIA-H200\",\"nvidia.com/gpu.count\":\"8\",\"nvidia.com/gpu.memory\":\"143771\","
        "\"nvidia.com/gpu.clique\":\"clique-%d\",\"network.topology.nvidia.com/leaf\":"
        "\"leaf-%d\",\"network.topology.nvidia.com/spine\":\"spine-%d\"},\"annotations\":{"
        "\"node.alpha.kubernetes.io/ttl\":\"0\",\"volumes.kubernetes.io/"
        "controller-managed-attach-detach\":\"true\"}},",
        i, i & 0xffff, i, 500 + i, i, i / 1000, i / 18, i / 16, i / 256);
    fake_putf(t,
              "\"spec\":{\"podCIDR\":\"10.%d.%d.0/24\",\"taints\":[{\"key\":\"nvidia.com/gpu\","
              "\"value\":\"present\",\"effect\":\"NoSchedule\"}]},\"status\":{\"capacity\":{"
              "\"cpu\":\"192\",\"memory\":\"2113612Mi\",\"nvidia.com/gpu\":\"8\",\"pods\":\"110\","
              "\"ephemeral-storage\":\"3751778Mi\",\"hugepages-1Gi\":\"0\"},\"allocatable\":{"
              "\"cpu\":\"190\",\"memory\":\"2013612Mi\",\"nvidia.com/gpu\":\"8\",\"pods\":\"110\","
              "\"ephemeral-storage\":\"3457671Mi\",\"hugepages-1Gi\":\"0\"},\"conditions\":[",
              (i >> 8) & 255, i & 255);
    static const char *const conds[][2] = {{"MemoryPressure", "False"},
                                           {"DiskPressure", "False"},
                                           {"PIDPressure", "False"},
                                           {"Ready", "True"}};
    for (int c = 0; c < 4; c++)
        fake_putf(t,
                  "%s{\"type\":\"%s\",\"status\":\"%s\",\"lastHeartbeatTime\":"
                  "\"2026-11-29T20:00:00Z\",\"lastTransitionTime\":\"2026-11-01T00:00:00Z\","
                  "\"reason\":\"Kubelet%s\",\"message\":\"kubelet reports %s\"}",
                  c ? "," : "", conds[c][0], conds[c][1], conds[c][0], conds[c][0]);
    fake_putf(
        t,
        "],\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.1.%d.%d\"},{\"type\":"
        "\"Hostname\",\"address\":\"node-%04d\"}],\"nodeInfo\":{\"kernelVersion\":"
        "\"6.8.0-49-generic\",\"osImage\":\"Ubuntu 24.04.1 LTS\",\"containerRuntimeVersion\":"
        "\"containerd://1.7.22\",\"kubeletVersion\":\"v1.36.3\",\"architecture\":\"amd64\"},"
        "\"images\":[{\"names\":[\"areal/worker@sha256:4f1c7d0e9b3a2c5d\",\"areal/worker:latest\"],"
        "\"sizeBytes\":9876543210}]}}",
        (i >> 8) & 255, i & 255, i);
}
