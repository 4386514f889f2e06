/*
 * sim_nodes.c - the node-status half of the simulator's kubelet duties
 * (see areal/simkubelet.h).
 *
 * What: a kubelet posts its node's Ready condition; the node-lifecycle
 * controller sets it to Unknown when the node's Lease is not renewed in time.
 * The e2e heartbeat loop renews the Leases, but nothing re-posted Ready=True,
 * so a node that missed its heartbeats once (an API server outage longer than
 * the grace period, scenario (e) on a slow machine) stayed NotReady for good.
 * Here, every simulated node whose Ready is Unknown and whose kubelet has not
 * been stopped on purpose gets Ready=True again, as a kubelet does once it
 * reaches the API server.
 * How: one LIST of the simulated nodes (label areal.io/simulated=true) and a
 * strategic merge patch of nodes/status (conditions merge by type, so the
 * other conditions stay) for each node to revive. Nodes that the inventory
 * marks not ready (Ready=False) are left alone.
 * Rejected: posting every node's status every period (a write per node per
 * period for nothing: the Lease already carries the heartbeat).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "areal/kube/client.h"
#include "areal/simkubelet.h"
#include "areal/simnodes.h"

static const json_t *ready_condition(const json_t *node) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(node, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t != NULL && strcmp(t, "Ready") == 0)
            return c;
    }
    return NULL;
}

int sim_nodes_revive(kube_client *c, sim_node_filter alive, void *ud, int *revived,
                     areal_error *err) {
    *revived = 0;
    kube_resource res = {NULL, "v1", "nodes", NULL};
    kube_list_opts lo = {.label_selector = AREAL_SIMNODES_LABEL "=true"};
    json_t *list = NULL;
    kube_error ke;
    if (kube_list(c, &res, &lo, &list, &ke) != KUBE_OK)
        return areal_error_set(err, AREAL_EIO, -1, "cannot list the simulated nodes: %s", ke.msg);
    char now[32];
    sim_rfc3339((int64_t)time(NULL), now, sizeof now);
    size_t i;
    json_t *node;
    int rc = AREAL_OK;
    json_array_foreach(json_object_get(list, "items"), i, node) {
        const char *name =
            json_string_value(json_object_get(json_object_get(node, "metadata"), "name"));
        const char *st = json_string_value(json_object_get(ready_condition(node), "status"));
        if (name == NULL || st == NULL || strcmp(st, "Unknown") != 0 || !alive(ud, name))
            continue;
        json_t *patch = json_pack("{s:{s:[{s:s,s:s,s:s,s:s,s:s,s:s}]}}", "status", "conditions",
                                  "type", "Ready", "status", "True", "reason", "KubeletReady",
                                  "message", "areal-e2e-kubelet is posting ready status",
                                  "lastHeartbeatTime", now, "lastTransitionTime", now);
        if (patch == NULL)
            return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
        if (kube_patch(c, &res, name, KUBE_PATCH_STRATEGIC, patch, "status", NULL, &ke) != KUBE_OK)
            rc = areal_error_set(err, AREAL_EIO, -1, "cannot mark node %s Ready: %s", name, ke.msg);
        else
            (*revived)++;
        json_decref(patch);
    }
    json_decref(list);
    return rc;
}
