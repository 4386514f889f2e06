/*
 * domains.c - builds the topology tree (see domains.h) in O(N log N * levels).
 */
#include "domains.h"

#include <stdlib.h>
#include <string.h>

typedef struct sort_ctx {
    const areal_cluster *c;
    const char **values; /* values[node * L + j]: label of kept level j (0 = innermost) or NULL */
    int L;
} sort_ctx;

/* qsort has no context argument; placement is single-threaded per call but
 * may run on several threads in a process, so the context is thread-local. */
static _Thread_local const sort_ctx *g_sort;

/* Missing labels sort after present ones; "" never equals a missing label. */
static int cmp_value(const char *a, const char *b) {
    if (a == NULL || b == NULL)
        return (a == NULL) - (b == NULL);
    return strcmp(a, b);
}

static int cmp_nodes(const void *pa, const void *pb) {
    int a = *(const int *)pa, b = *(const int *)pb;
    const sort_ctx *s = g_sort;
    for (int j = s->L - 1; j >= 0; j--) {
        int r = cmp_value(s->values[a * s->L + j], s->values[b * s->L + j]);
        if (r != 0)
            return r;
    }
    int r = strcmp(s->c->nodes[a].name, s->c->nodes[b].name);
    return r != 0 ? r : (a > b) - (a < b);
}

/* True when sorted nodes a and b share their domain at kept level j (1-based). */
static bool same_domain(const sort_ctx *s, int a, int b, int level) {
    for (int j = s->L - 1; j >= level - 1; j--) {
        const char *va = s->values[a * s->L + j], *vb = s->values[b * s->L + j];
        if (va == NULL || vb == NULL || strcmp(va, vb) != 0)
            return false; /* a node without the label shares that level with nobody */
    }
    return true;
}

int domain_tree_build(domain_tree *t, const areal_cluster *c, const areal_topology *topo,
                      areal_error *err) {
    memset(t, 0, sizeof *t);
    int N = c->n_nodes;
    /* Keep the levels that at least one node carries. */
    for (int i = 0; i < topo->n_levels; i++) {
        bool present = false;
        for (int n = 0; n < N && !present; n++)
            present = areal_node_label(&c->nodes[n], topo->key[i]) != NULL;
        if (present)
            t->level_src[t->n_levels++] = i;
    }
    int L = t->n_levels, LV = L + 2;
    sort_ctx s = {.c = c, .L = L};
    int *order = malloc((size_t)(N ? N : 1) * sizeof *order);
    s.values = malloc((size_t)(N * L > 0 ? N * L : 1) * sizeof *s.values);
    /* At most one domain per node and level, plus the root. */
    t->dom = malloc((size_t)(N * (L + 1) + 1) * sizeof *t->dom);
    t->node_dom = malloc((size_t)(N ? N : 1) * sizeof *t->node_dom);
    t->dom_at = malloc((size_t)(N ? N : 1) * (size_t)LV * sizeof *t->dom_at);
    /* lo/hi ranges of the sorted order per domain, only while building */
    int *lo = malloc((size_t)(N * (L + 1) + 1) * sizeof *lo);
    int *hi = malloc((size_t)(N * (L + 1) + 1) * sizeof *hi);
    if (!order || !s.values || !t->dom || !t->node_dom || !t->dom_at || !lo || !hi) {
        free(order);
        free(s.values);
        free(lo);
        free(hi);
        domain_tree_free(t);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory building the topology tree");
    }
    for (int n = 0; n < N; n++) {
        order[n] = n;
        for (int j = 0; j < L; j++) {
            const char *v = areal_node_label(&c->nodes[n], topo->key[t->level_src[j]]);
            s.values[n * L + j] = v;
        }
    }
    g_sort = &s;
    qsort(order, (size_t)N, sizeof *order, cmp_nodes);
    g_sort = NULL;

    /* Root, then each level top-down: children of consecutive parents are consecutive. */
    t->dom[0] = (domain){.level = L + 1, .parent = -1, .node = -1};
    lo[0] = 0;
    hi[0] = N;
    t->n_dom = 1;
    t->root = 0;
    int level_begin = 0, level_end = 1;
    for (int level = L; level >= 0; level--) {
        for (int p = level_begin; p < level_end; p++) {
            t->dom[p].first_child = t->n_dom;
            int a = lo[p];
            while (a < hi[p]) {
                int b = a + 1;
                if (level > 0)
                    while (b < hi[p] && same_domain(&s, order[a], order[b], level))
                        b++;
                int d = t->n_dom++;
                t->dom[d] =
                    (domain){.level = level, .parent = p, .node = level == 0 ? order[a] : -1};
                lo[d] = a;
                hi[d] = b;
                a = b;
            }
            t->dom[p].n_children = t->n_dom - t->dom[p].first_child;
        }
        level_begin = level_end;
        level_end = t->n_dom;
    }
    /* Leaves: record each node's domain at every level by walking up. */
    for (int d = level_begin; d < level_end; d++) {
        int node = t->dom[d].node;
        t->node_dom[node] = d;
        t->dom[d].first_child = -1;
        t->dom[d].n_children = 0;
        for (int x = d; x >= 0; x = t->dom[x].parent)
            t->dom_at[node * LV + t->dom[x].level] = x;
    }
    free(order);
    free(s.values);
    free(lo);
    free(hi);
    return AREAL_OK;
}

void domain_tree_free(domain_tree *t) {
    free(t->dom);
    free(t->node_dom);
    free(t->dom_at);
    memset(t, 0, sizeof *t);
}
