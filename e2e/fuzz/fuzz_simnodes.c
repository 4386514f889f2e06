/*
 * fuzz_simnodes.c - libFuzzer target for the simulated-node objects.
 *
 * Arbitrary bytes are read as an inventory (areal_cluster_parse); every
 * inventory that parses must turn into a Node list with one item per node
 * (or a clean AREAL_EINVAL naming a node the API server would refuse) and a
 * tenant Pod list, both serialisable. Sanitizers and libFuzzer's leak check
 * catch memory errors and lost references in the jansson building code.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "areal/simnodes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    areal_cluster c;
    areal_error e;
    areal_error_clear(&e);
    if (areal_cluster_parse((const char *)data, size, "fuzz", 8, &c, &e) != AREAL_OK)
        return 0;
    json_t *list = NULL;
    areal_simnodes_opts o = {.kubelet_version = "v1.0.0", .now = "2026-01-01T00:00:00Z"};
    int rc = areal_simnodes_nodes(&c, &o, &list, &e);
    if (rc == AREAL_OK) {
        if (json_array_size(json_object_get(list, "items")) != (size_t)c.n_nodes)
            abort();
        char *s = json_dumps(list, JSON_COMPACT);
        if (s == NULL)
            abort();
        free(s);
    } else if ((rc != AREAL_EINVAL && rc != AREAL_ERANGE) || list != NULL || e.msg[0] == '\0') {
        abort();
    }
    json_decref(list);
    list = NULL;
    if (areal_simnodes_tenant_pods(&c, NULL, &list, &e) != AREAL_OK || list == NULL)
        abort();
    if (json_array_size(json_object_get(list, "items")) > (size_t)c.n_nodes)
        abort();
    json_decref(list);
    areal_cluster_free(&c);
    return 0;
}
