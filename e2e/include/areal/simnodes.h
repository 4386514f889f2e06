/*
 * simnodes.h - Kubernetes objects for the simulated GPU nodes of the e2e suite.
 *
 * The e2e cluster (e2e/cluster) has no kubelets: its nodes are Node objects
 * created from an inventory file, the same file `arealctl plan --cluster`
 * reads (areal/cluster.h), so a scenario can compare the operator's placement
 * with the planner's for one inventory. This module turns an areal_cluster
 * into JSON documents for `kubectl create -f -`:
 *   - a List of Nodes: capacity and allocatable nvidia.com/gpu, cpu, memory,
 *     pods; the inventory's labels and taints plus the well-known ones;
 *     Ready (or not), addresses, a podCIDR per node and the label
 *     areal.io/simulated=true;
 *   - a List of "tenant" Pods, one per node whose inventory gives gpusUsed,
 *     cpuUsed or memoryUsed: bound to the node (spec.nodeName) and requesting
 *     exactly that, so the node's free capacity seen through the API equals
 *     the inventory's.
 * Ownership: the returned json_t is new; the caller json_decref()s it. On
 * failure *out is NULL and err says why.
 */
#ifndef AREAL_SIMNODES_H
#define AREAL_SIMNODES_H

#include <jansson.h>
#include <stddef.h>

#include "areal/cluster.h"
#include "areal/error.h"

/* Label every simulated Node carries (value "true"). */
#define AREAL_SIMNODES_LABEL "areal.io/simulated"
/* Defaults for a node whose inventory tracks no CPU or memory. */
#define AREAL_SIMNODES_DEFAULT_CPU_MILLI 64000L
#define AREAL_SIMNODES_DEFAULT_MEM_BYTES (512LL << 30)

typedef struct areal_simnodes_opts {
    const char *kubelet_version;  /* status.nodeInfo.kubeletVersion; NULL = "v0.0.0" */
    const char *tenant_namespace; /* namespace of tenant pods; NULL = "areal-e2e-tenants" */
    const char *now;              /* RFC 3339 time of the conditions' heartbeat; NULL = none */
} areal_simnodes_opts;

/*
 * A v1 List of the cluster's Nodes (see above). `o` may be NULL. Returns 0,
 * AREAL_ENOMEM, or AREAL_EINVAL when the inventory holds a node name that is
 * not a valid Kubernetes node name (message names the node and the rule).
 */
int areal_simnodes_nodes(const areal_cluster *c, const areal_simnodes_opts *o, json_t **out,
                         areal_error *err);

/*
 * A v1 List of tenant Pods (possibly empty). `o` may be NULL. Returns 0 or
 * AREAL_ENOMEM.
 */
int areal_simnodes_tenant_pods(const areal_cluster *c, const areal_simnodes_opts *o, json_t **out,
                               areal_error *err);

/*
 * Writes a CPU quantity for `milli` millicores ("8", "1500m") into buf.
 * Returns 0, or AREAL_ERANGE if it does not fit in `n` bytes or milli < 0.
 */
int areal_simnodes_format_cpu(long milli, char *buf, size_t n);

/*
 * Writes a byte quantity in the largest binary unit that divides it exactly
 * ("2Ti", "192Gi", "1000") into buf. Returns 0 or AREAL_ERANGE as above.
 */
int areal_simnodes_format_bytes(long long bytes, char *buf, size_t n);

#endif
