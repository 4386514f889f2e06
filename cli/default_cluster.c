/*
 * default_cluster.c - the embedded inventory of `arealctl plan` without
 * --cluster: 2 leaf switches x 4 nodes, one zone, one node partly used, so the
 * demonstration shows placement around existing load.
 */
#include <stdio.h>

#include "cli.h"

int default_cluster(areal_cluster *c, int gpus, areal_error *err) {
    areal_cluster_init(c);
    for (int leaf = 0; leaf < 2; leaf++) {
        for (int i = 0; i < 4; i++) {
            char name[32], leaf_name[16];
            snprintf(name, sizeof name, "gpu-%c%d", 'a' + leaf, i);
            snprintf(leaf_name, sizeof leaf_name, "leaf-%c", 'a' + leaf);
            int idx = areal_cluster_add_node(c, name, gpus, 0, err);
            int rc = idx < 0 ? idx : AREAL_OK;
            if (rc == AREAL_OK)
                rc = areal_cluster_set_label(c, idx, "network.topology.nvidia.com/leaf", leaf_name,
                                             err);
            if (rc == AREAL_OK)
                rc = areal_cluster_set_label(c, idx, "topology.kubernetes.io/zone", "zone-a", err);
            if (rc != AREAL_OK) {
                areal_cluster_free(c);
                return rc;
            }
        }
    }
    /* Another tenant holds two GPUs of the first node. */
    c->nodes[0].gpus_used = gpus >= 2 ? 2 : 0;
    return AREAL_OK;
}
