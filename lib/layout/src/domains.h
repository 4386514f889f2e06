/*
 * domains.h - the topology tree of a cluster, internal to placement.
 *
 * Nodes are sorted by their label values from the outermost level inwards, so
 * every domain is a contiguous run of the sorted nodes and its children are
 * contiguous in the domain array. Domain identity at level i includes the
 * values of every level above it, so the tree always nests even when labels
 * are inconsistent (rack "r1" under two spines is two domains). Levels that no
 * node carries are dropped from reports; a node missing a label that others
 * carry forms a domain of its own at that level (and below it), so unknown
 * locality is never taken as shared.
 */
#ifndef AREAL_DOMAINS_H
#define AREAL_DOMAINS_H

#include "areal/cluster.h"
#include "areal/placement.h"

typedef struct domain {
    int level;       /* 0 = node, n_levels + 1 = the whole cluster */
    int parent;      /* -1 for the root */
    int first_child; /* children are domains first_child .. first_child + n_children - 1 */
    int n_children;
    int node;   /* cluster node index when level == 0, else -1 */
    long slots; /* pods of the current role and size the domain can still take */
} domain;

typedef struct domain_tree {
    int n_levels;                         /* kept topology levels (besides the node) */
    int level_src[AREAL_TOPO_MAX_LEVELS]; /* kept level i+1 -> index in the job's topology */
    domain *dom;
    int n_dom;
    int root;
    int *node_dom; /* cluster node index -> its level-0 domain */
    int *dom_at;   /* dom_at[node * (n_levels + 2) + level]: the node's domain at level */
} domain_tree;

/* Builds the tree; AREAL_ENOMEM or AREAL_OK. */
int domain_tree_build(domain_tree *t, const areal_cluster *c, const areal_topology *topo,
                      areal_error *err);
void domain_tree_free(domain_tree *t);

/* The domain holding cluster node `node` at `level` (0 .. n_levels + 1). */
static inline int domain_of(const domain_tree *t, int node, int level) {
    return t->dom_at[node * (t->n_levels + 2) + level];
}

#endif
