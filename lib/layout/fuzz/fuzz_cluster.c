/*
 * fuzz_cluster.c - libFuzzer target for the inventory reader.
 *
 * Arbitrary bytes go to areal_cluster_parse, which picks JSON or YAML (own form
 * or kubectl) from the text itself, so one target reaches both parsers and both
 * decoders. The last byte also picks the caller's default GPU count, so that
 * nodes without gpus are exercised with several defaults. On success the
 * inventory must hold what the contract promises (at least one node; names
 * non-empty and unique; 0 <= gpus_used <= gpus; amounts non-negative; every
 * label and taint string present); on failure it must be empty with a message.
 * Sanitizers catch the rest, and libFuzzer's leak check that nothing is left.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "areal/cluster.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void check(const areal_cluster *c) {
    if (c->n_nodes <= 0 || c->n_nodes > c->cap_nodes)
        abort();
    const char **names = malloc((size_t)c->n_nodes * sizeof *names);
    if (names == NULL)
        abort();
    for (int i = 0; i < c->n_nodes; i++) {
        const areal_node *n = &c->nodes[i];
        if (n->name == NULL || n->name[0] == '\0')
            abort();
        if (n->gpus < 0 || n->gpus_used < 0 || n->gpus_used > n->gpus)
            abort();
        if (n->cpu_milli < 0 || n->cpu_used_milli < 0 || n->mem_bytes < 0 || n->mem_used_bytes < 0)
            abort();
        for (int j = 0; j < n->n_labels; j++)
            if (n->labels[j].key == NULL || n->labels[j].value == NULL ||
                areal_node_label(n, n->labels[j].key) != n->labels[j].value)
                abort(); /* keys are unique, so each finds its own value */
        for (int j = 0; j < n->n_taints; j++) {
            const char *e = n->taints[j].effect;
            if (n->taints[j].key == NULL || n->taints[j].value == NULL || e == NULL)
                abort();
            if (strcmp(e, "NoSchedule") != 0 && strcmp(e, "PreferNoSchedule") != 0 &&
                strcmp(e, "NoExecute") != 0)
                abort();
        }
        names[i] = n->name;
    }
    qsort(names, (size_t)c->n_nodes, sizeof *names, cmp_str);
    for (int i = 1; i < c->n_nodes; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            abort();
    free(names);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const int defaults[] = {8, 1, 4, 0};
    int default_gpus = size > 0 ? defaults[data[size - 1] % 4] : 8;
    areal_cluster c;
    areal_error e;
    areal_error_clear(&e);
    int rc = areal_cluster_parse((const char *)data, size, "fuzz", default_gpus, &c, &e);
    if (rc == AREAL_OK) {
        check(&c);
        areal_cluster_free(&c);
        if (c.n_nodes != 0 || c.nodes != NULL)
            abort();
    } else {
        if (rc != e.code || e.msg[0] == '\0' || c.n_nodes != 0 || c.nodes != NULL)
            abort();
    }
    /* The text need not be NUL-terminated: ASan flags any read past `size`. */
    return 0;
}
