/*
 * cluster_kube.h - Kubernetes objects (as the API returns them, jansson
 * values) into the inventory: the operator's node and pod caches feed
 * placement through these, with the same decoding kubectl files get.
 */
#ifndef AREAL_CLUSTER_KUBE_H
#define AREAL_CLUSTER_KUBE_H

#include <jansson.h>

#include "areal/cluster.h"

/*
 * Appends Node object `node` to `c`: allocatable nvidia.com/gpu, cpu and memory,
 * labels, taints, spec.unschedulable and the Ready condition. Returns the
 * node's index, or AREAL_EINVAL with a message naming `source` and the field.
 */
int areal_cluster_add_kube_node(areal_cluster *c, const json_t *node, const char *source,
                                areal_error *err);

/*
 * The GPUs, CPU (millicores) and memory (bytes) a Pod object requests, summed
 * over its containers; a request that is not given defaults to the limit, as
 * in Kubernetes. AREAL_EINVAL with a message naming `source` and the field.
 */
int areal_kube_pod_requests(const json_t *pod, const char *source, int *gpus, long long *cpu_milli,
                            long long *mem_bytes, areal_error *err);

#endif
