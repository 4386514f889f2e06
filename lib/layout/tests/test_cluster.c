/*
 * test_cluster.c - the cluster inventory of areal/cluster.h.
 *
 * Four parts: Kubernetes quantities; the project's own form in YAML and JSON;
 * kubectl output (a NodeList, and a List of Nodes and Pods whose requests count
 * as used); and every way a file can be wrong, each of which must give
 * AREAL_EINVAL (AREAL_EIO for a missing file) with a message naming the source
 * and the field. Larger kubectl documents live in layout/tests/data/, and the
 * examples in examples/clusters/ are loaded and checked too; both are read by
 * paths relative to the repository root, where the tests run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "areal/cluster.h"

#define GiB (1LL << 30)

/* ---- helpers --------------------------------------------------------------- */

static areal_cluster parse_ok(const char *text, int default_gpus) {
    areal_cluster c;
    areal_error e;
    areal_error_clear(&e);
    int rc = areal_cluster_parse(text, strlen(text), "inv", default_gpus, &c, &e);
    if (rc != AREAL_OK)
        fail_msg("parse failed (%d): %s", rc, e.msg);
    return c;
}

static areal_cluster load_ok(const char *path, int default_gpus) {
    areal_cluster c;
    areal_error e;
    areal_error_clear(&e);
    int rc = areal_cluster_load_file(path, default_gpus, &c, &e);
    if (rc != AREAL_OK)
        fail_msg("loading %s failed (%d): %s", path, rc, e.msg);
    return c;
}

static void assert_has(const char *msg, const char *part) {
    if (strstr(msg, part) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", msg, part);
}

/*
 * Parses `text` as source `src`, expects AREAL_EINVAL, a message that starts
 * with the source and contains `part1` (and `part2` unless NULL), and an empty
 * cluster.
 */
static void expect_invalid_from(const char *src, const char *text, const char *part1,
                                const char *part2) {
    areal_cluster c;
    areal_error e;
    areal_error_clear(&e);
    assert_int_equal(areal_cluster_parse(text, strlen(text), src, 8, &c, &e), AREAL_EINVAL);
    assert_int_equal(e.code, AREAL_EINVAL);
    if (strncmp(e.msg, src, strlen(src)) != 0)
        fail_msg("message \"%s\" does not start with the source %s", e.msg, src);
    assert_has(e.msg, part1);
    if (part2 != NULL)
        assert_has(e.msg, part2);
    assert_int_equal(c.n_nodes, 0);
    assert_null(c.nodes);
}

static void expect_invalid(const char *text, const char *part1, const char *part2) {
    expect_invalid_from("inv.yaml", text, part1, part2);
}

static const areal_node *find_node(const areal_cluster *c, const char *name) {
    for (int i = 0; i < c->n_nodes; i++)
        if (strcmp(c->nodes[i].name, name) == 0)
            return &c->nodes[i];
    fail_msg("no node %s", name);
    return NULL;
}

static void assert_label(const areal_node *n, const char *key, const char *value) {
    const char *v = areal_node_label(n, key);
    if (v == NULL)
        fail_msg("node %s has no label %s", n->name, key);
    assert_string_equal(v, value);
}

/* ---- quantities -------------------------------------------------------------- */

static long long qty(const char *s, long long scale) {
    long long v = -1;
    int rc = areal_quantity_parse(s, scale, &v);
    if (rc != AREAL_OK)
        fail_msg("quantity \"%s\" (scale %lld) gave %d", s, scale, rc);
    return v;
}

static void quantity_plain_integers(void **state) {
    (void)state;
    assert_int_equal(qty("8", 1), 8);
    assert_int_equal(qty("8", 1000), 8000);
    assert_int_equal(qty("0", 1), 0);
    assert_int_equal(qty("0", 1000), 0);
    assert_int_equal(qty("+3", 1), 3);
    assert_int_equal(qty("007", 1), 7);
}

static void quantity_decimal_suffixes(void **state) {
    (void)state;
    assert_int_equal(qty("500m", 1000), 500);
    assert_int_equal(qty("1k", 1), 1000);
    assert_int_equal(qty("1M", 1), 1000000);
    assert_int_equal(qty("3G", 1), 3000000000LL);
    assert_int_equal(qty("2T", 1), 2000000000000LL);
    assert_int_equal(qty("1P", 1), 1000000000000000LL);
    assert_int_equal(qty("1E", 1), 1000000000000000000LL);
    assert_int_equal(qty("250u", 1000000), 250);
    assert_int_equal(qty("7n", 1000000000), 7);
}

static void quantity_binary_suffixes(void **state) {
    (void)state;
    assert_int_equal(qty("1Ki", 1), 1024);
    assert_int_equal(qty("1Mi", 1), 1LL << 20);
    assert_int_equal(qty("64Gi", 1), 64 * GiB);
    assert_int_equal(qty("2Ti", 1), 2LL << 40);
    assert_int_equal(qty("1Pi", 1), 1LL << 50);
    assert_int_equal(qty("2Ei", 1), 2LL << 60);
    assert_int_equal(qty("1.5Gi", 1), 3 * (GiB / 2));
}

static void quantity_fractions_are_exact(void **state) {
    (void)state;
    assert_int_equal(qty("1.5", 1000), 1500);
    assert_int_equal(qty("0.1", 1000), qty("100m", 1000));
    assert_int_equal(qty("0.1", 1000), 100);
    assert_int_equal(qty(".25", 1000), 250);
    assert_int_equal(qty("2.", 1), 2);
    assert_int_equal(qty("0.000", 1000), 0);
    /* The 128-bit product: neither needs an intermediate past 2^62. */
    assert_int_equal(qty("0.5Ei", 1), 1LL << 59);
    assert_int_equal(qty("1.5Ei", 1), 3LL << 59);
    assert_int_equal(qty("1000000000000.123456789", 1000), 1000000000000124LL);
}

static void quantity_exponents(void **state) {
    (void)state;
    assert_int_equal(qty("2e3", 1), 2000);
    assert_int_equal(qty("2E3", 1), 2000);
    assert_int_equal(qty("1e+2", 1), 100);
    assert_int_equal(qty("5e-1", 1000), 500);
    assert_int_equal(qty("0e99", 1), 0);
}

static void quantity_rounds_up(void **state) {
    (void)state;
    assert_int_equal(qty("0.5m", 1000), 1);
    assert_int_equal(qty("1.5", 1), 2);
    assert_int_equal(qty("100n", 1000), 1);
    assert_int_equal(qty("1e-50", 1), 1);
    assert_int_equal(qty("1001m", 1), 2);
    assert_int_equal(qty("1000m", 1), 1);
    /* A 20th significant digit is dropped but still rounds up. */
    assert_int_equal(qty("1000000000000000000.00001", 1), 1000000000000000001LL);
}

static void quantity_rejects_malformed(void **state) {
    (void)state;
    const char *bad[] = {"",   "-1",  "-0",   "abc",  "1Zi", "1e",    "1.2.3", "1 Gi", " 1",
                         "1 ", ".",   "e3",   "1e+",  "++1", "+-1",   "1i",    "1KI",  "1gi",
                         "m",  "1mm", "0x10", "1e5m", "1,5", "1Gi\n", "1_000", "Gi"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        long long v = 42;
        int rc = areal_quantity_parse(bad[i], 1, &v);
        if (rc != AREAL_EINVAL)
            fail_msg("quantity \"%s\" gave %d (value %lld), expected AREAL_EINVAL", bad[i], rc, v);
    }
    long long v;
    assert_int_equal(areal_quantity_parse(NULL, 1, &v), AREAL_EINVAL);
    assert_int_equal(areal_quantity_parse("1", 0, &v), AREAL_EINVAL);
}

static void quantity_overflow_is_erange(void **state) {
    (void)state;
    long long v;
    assert_int_equal(qty("4611686018427387904", 1), 1LL << 62);
    assert_int_equal(qty("4Ei", 1), 1LL << 62);
    const char *big[] = {
        "99999999999999999999Ei", "4611686018427387905", "5Ei", "8Ei", "1e41", "10E",
        "99999999999999999999999"};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        int rc = areal_quantity_parse(big[i], 1, &v);
        if (rc != AREAL_ERANGE)
            fail_msg("quantity \"%s\" gave %d, expected AREAL_ERANGE", big[i], rc);
    }
    /* In range as bytes, out of range as millicores. */
    assert_int_equal(areal_quantity_parse("4611686018427387", 1000, &v), AREAL_OK);
    assert_int_equal(areal_quantity_parse("4611686018427388", 1000, &v), AREAL_ERANGE);
    assert_int_equal(areal_quantity_parse("1Ei", 1000, &v), AREAL_ERANGE);
}

/* ---- the project's own form ---------------------------------------------------- */

static const char own_yaml[] =
    "# two nodes; the second takes gpusPerNode\n"
    "gpusPerNode: 4\n"
    "nodes:\n"
    "  - name: gpu-a\n"
    "    gpus: 8\n"
    "    gpusUsed: 3\n"
    "    cpu: \"64\"\n"
    "    cpuUsed: 500m\n"
    "    memory: 512Gi\n"
    "    memoryUsed: 64Gi\n"
    "    labels:\n"
    "      network.topology.nvidia.com/leaf: rack-0\n"
    "      nvidia.com/gpu.count: 8\n"
    "      example.com/infiniband: true\n"
    "      example.com/cuda: 12.5\n"
    "      example.com/quoted: \"007\"\n"
    "    taints:\n"
    "      - {key: nvidia.com/gpu, value: maintenance, effect: NoSchedule}\n"
    "      - key: dedicated\n"
    "        effect: NoExecute\n"
    "    ready: false\n"
    "    unschedulable: true\n"
    "  - name: gpu-b\n";

static const char own_json[] =
    "{\"gpusPerNode\": 4, \"nodes\": [\n"
    "  {\"name\": \"gpu-a\", \"gpus\": 8, \"gpusUsed\": 3, \"cpu\": \"64\", \"cpuUsed\": "
    "\"500m\",\n"
    "   \"memory\": \"512Gi\", \"memoryUsed\": \"64Gi\",\n"
    "   \"labels\": {\"network.topology.nvidia.com/leaf\": \"rack-0\", \"nvidia.com/gpu.count\": "
    "8,\n"
    "              \"example.com/infiniband\": true, \"example.com/cuda\": 12.5,\n"
    "              \"example.com/quoted\": \"007\"},\n"
    "   \"taints\": [{\"key\": \"nvidia.com/gpu\", \"value\": \"maintenance\", \"effect\": "
    "\"NoSchedule\"},\n"
    "              {\"key\": \"dedicated\", \"effect\": \"NoExecute\"}],\n"
    "   \"ready\": false, \"unschedulable\": true},\n"
    "  {\"name\": \"gpu-b\"}\n"
    "]}\n";

static void check_own_form(const areal_cluster *c) {
    assert_int_equal(c->n_nodes, 2);
    const areal_node *a = &c->nodes[0], *b = &c->nodes[1];
    assert_string_equal(a->name, "gpu-a");
    assert_int_equal(a->gpus, 8);
    assert_int_equal(a->gpus_used, 3);
    assert_int_equal(a->cpu_milli, 64000);
    assert_int_equal(a->cpu_used_milli, 500);
    assert_int_equal(a->mem_bytes, 512 * GiB);
    assert_int_equal(a->mem_used_bytes, 64 * GiB);
    assert_int_equal(a->n_labels, 5);
    assert_label(a, "network.topology.nvidia.com/leaf", "rack-0");
    assert_label(a, "nvidia.com/gpu.count", "8");
    assert_label(a, "example.com/infiniband", "true");
    assert_label(a, "example.com/cuda", "12.5");
    assert_label(a, "example.com/quoted", "007");
    assert_int_equal(a->n_taints, 2);
    assert_string_equal(a->taints[0].key, "nvidia.com/gpu");
    assert_string_equal(a->taints[0].value, "maintenance");
    assert_string_equal(a->taints[0].effect, "NoSchedule");
    assert_string_equal(a->taints[1].key, "dedicated");
    assert_string_equal(a->taints[1].value, "");
    assert_string_equal(a->taints[1].effect, "NoExecute");
    assert_false(a->ready);
    assert_true(a->unschedulable);

    assert_string_equal(b->name, "gpu-b");
    assert_int_equal(b->gpus, 4); /* gpusPerNode, not the caller's 8 */
    assert_int_equal(b->gpus_used, 0);
    assert_int_equal(b->cpu_milli, 0);
    assert_int_equal(b->mem_bytes, 0);
    assert_int_equal(b->n_labels, 0);
    assert_int_equal(b->n_taints, 0);
    assert_true(b->ready);
    assert_false(b->unschedulable);
}

static void own_form_yaml_reads_every_field(void **state) {
    (void)state;
    areal_cluster c = parse_ok(own_yaml, 8);
    check_own_form(&c);
    areal_cluster_free(&c);
}

static void own_form_json_reads_every_field(void **state) {
    (void)state;
    areal_cluster c = parse_ok(own_json, 8);
    check_own_form(&c);
    areal_cluster_free(&c);
}

static void own_form_yaml_flow_style_is_yaml(void **state) {
    (void)state;
    areal_cluster c = parse_ok("{nodes: [{name: a, gpus: 2}, {name: b, labels: {k: v,},},]}", 8);
    assert_int_equal(c.n_nodes, 2);
    assert_int_equal(c.nodes[0].gpus, 2);
    assert_int_equal(c.nodes[1].gpus, 8);
    assert_label(&c.nodes[1], "k", "v");
    areal_cluster_free(&c);
}

static void own_form_default_gpus_from_caller(void **state) {
    (void)state;
    areal_cluster c = parse_ok("nodes:\n  - name: a\n  - name: b\n    gpus: 0\n", 8);
    assert_int_equal(c.nodes[0].gpus, 8);
    assert_int_equal(c.nodes[1].gpus, 0); /* an explicit 0 is not "none given" */
    areal_cluster_free(&c);
    c = parse_ok("nodes:\n  - name: a\n", 2);
    assert_int_equal(c.nodes[0].gpus, 2);
    areal_cluster_free(&c);
}

static void own_form_gpus_per_node_overrides_default(void **state) {
    (void)state;
    areal_cluster c = parse_ok("nodes: [{name: a}, {name: b, gpus: 2}]\ngpusPerNode: \"4\"\n", 8);
    assert_int_equal(c.nodes[0].gpus, 4);
    assert_int_equal(c.nodes[1].gpus, 2);
    areal_cluster_free(&c);
}

static void own_form_numbers_as_quantities(void **state) {
    (void)state;
    /* YAML numbers: cpu 1.5 and 64 are cores, memory 1024 bytes; quoted strings too. */
    areal_cluster c = parse_ok("nodes:\n"
                               "  - name: a\n"
                               "    cpu: 1.5\n"
                               "    cpuUsed: 0.25\n"
                               "    memory: 1024\n"
                               "    memoryUsed: \"1Ki\"\n"
                               "    gpus: \"8\"\n"
                               "    gpusUsed: 8\n"
                               "  - name: b\n"
                               "    cpu: 64\n",
                               8);
    assert_int_equal(c.nodes[0].cpu_milli, 1500);
    assert_int_equal(c.nodes[0].cpu_used_milli, 250);
    assert_int_equal(c.nodes[0].mem_bytes, 1024);
    assert_int_equal(c.nodes[0].mem_used_bytes, 1024);
    assert_int_equal(c.nodes[0].gpus, 8);
    assert_int_equal(c.nodes[0].gpus_used, 8);
    assert_int_equal(c.nodes[1].cpu_milli, 64000);
    areal_cluster_free(&c);
    c = parse_ok("{\"nodes\": [{\"name\": \"a\", \"cpu\": 0.5, \"memory\": 2.5e3}]}", 8);
    assert_int_equal(c.nodes[0].cpu_milli, 500);
    assert_int_equal(c.nodes[0].mem_bytes, 2500);
    areal_cluster_free(&c);
}

static void own_form_long_label_value_kept_whole(void **state) {
    (void)state;
    char value[700], text[900];
    memset(value, 'v', sizeof value - 1);
    value[sizeof value - 1] = '\0';
    snprintf(text, sizeof text, "nodes:\n  - name: a\n    labels: {k: %s}\n", value);
    areal_cluster c = parse_ok(text, 8);
    assert_label(&c.nodes[0], "k", value);
    areal_cluster_free(&c);
}

static void own_form_null_labels_and_taints_are_empty(void **state) {
    (void)state;
    areal_cluster c = parse_ok("nodes:\n  - name: a\n    labels:\n    taints: ~\n", 8);
    assert_int_equal(c.nodes[0].n_labels, 0);
    assert_int_equal(c.nodes[0].n_taints, 0);
    areal_cluster_free(&c);
}

static void own_form_second_document_ignored(void **state) {
    (void)state;
    areal_cluster c = parse_ok("nodes: [{name: a}]\n---\nnodes: [{name: b}, {name: c}]\n", 8);
    assert_int_equal(c.n_nodes, 1);
    assert_string_equal(c.nodes[0].name, "a");
    areal_cluster_free(&c);
}

static void own_form_many_nodes(void **state) {
    (void)state;
    size_t cap = 64 * 1000;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t len = (size_t)snprintf(text, cap, "nodes:\n");
    for (int i = 0; i < 1000; i++)
        len += (size_t)snprintf(text + len, cap - len, "  - {name: node-%04d, gpusUsed: %d}\n", i,
                                i % 9);
    areal_cluster c = parse_ok(text, 8);
    assert_int_equal(c.n_nodes, 1000);
    assert_string_equal(c.nodes[999].name, "node-0999");
    assert_int_equal(c.nodes[999].gpus_used, 999 % 9);
    areal_cluster_free(&c);
    free(text);
}

/* ---- kubectl output ---------------------------------------------------------------- */

static void kubectl_nodelist(void **state) {
    (void)state;
    areal_cluster c = load_ok("lib/layout/tests/data/nodelist.json", 8);
    assert_int_equal(c.n_nodes, 4);
    const areal_node *n = find_node(&c, "h100-0");
    assert_int_equal(n->gpus, 8);
    assert_int_equal(n->gpus_used, 0);
    assert_int_equal(n->cpu_milli, 191000);
    assert_int_equal(n->mem_bytes, 2113628160LL * 1024);
    assert_label(n, "network.topology.nvidia.com/leaf", "leaf-0");
    assert_label(n, "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3");
    assert_label(n, "kubernetes.io/hostname", "h100-0");
    assert_int_equal(n->n_taints, 0);
    assert_true(n->ready);
    assert_false(n->unschedulable);

    n = find_node(&c, "h100-1");
    assert_int_equal(n->cpu_milli, 191500);
    assert_int_equal(n->mem_bytes, 2064 * GiB);
    assert_true(n->unschedulable);
    assert_true(n->ready);
    assert_int_equal(n->n_taints, 2);
    assert_string_equal(n->taints[0].key, "nvidia.com/gpu");
    assert_string_equal(n->taints[0].value, "present");
    assert_string_equal(n->taints[0].effect, "NoSchedule");
    assert_string_equal(n->taints[1].key, "node.kubernetes.io/unschedulable");
    assert_string_equal(n->taints[1].value, "");

    n = find_node(&c, "h100-2");
    assert_false(n->ready); /* Ready=False */
    assert_false(n->unschedulable);
    assert_label(n, "network.topology.nvidia.com/leaf", "leaf-1");

    n = find_node(&c, "system-0");
    assert_int_equal(n->gpus, 0); /* no nvidia.com/gpu: none, whatever the default */
    assert_int_equal(n->cpu_milli, 7910);
    assert_int_equal(n->mem_bytes, 31 * GiB);
    assert_label(n, "node-role.kubernetes.io/control-plane", "");
    areal_cluster_free(&c);
}

static void kubectl_list_counts_pod_requests(void **state) {
    (void)state;
    areal_cluster c = load_ok("lib/layout/tests/data/nodes-and-pods.json", 8);
    assert_int_equal(c.n_nodes, 2);
    /* trainer-0 (listed before its node): 2 GPUs, 4 CPU, 16Gi; rollout-0: a GPU given only
     * as a limit and 500m; finished and crashed pods, the orphan and the unbound one: nothing. */
    const areal_node *n = find_node(&c, "gpu-0");
    assert_int_equal(n->gpus, 8);
    assert_int_equal(n->gpus_used, 3);
    assert_int_equal(n->cpu_milli, 96000);
    assert_int_equal(n->cpu_used_milli, 4500);
    assert_int_equal(n->mem_bytes, 1LL << 40);
    assert_int_equal(n->mem_used_bytes, 16 * GiB);
    /* eval-0: a limits-only container (1 GPU, 2 CPU, 8Gi) and one with requests (1, 250m,
     * 512Mi); coredns: 100m and 70Mi (its memory limit is not its request); greedy-0 asks for
     * 8 more GPUs than are left, so the node is simply full. */
    n = find_node(&c, "gpu-1");
    assert_int_equal(n->gpus_used, 8);
    assert_int_equal(n->cpu_used_milli, 2000 + 250 + 100);
    assert_int_equal(n->mem_used_bytes, 8 * GiB + (512LL << 20) + (70LL << 20));
    areal_cluster_free(&c);
}

static void kubectl_list_without_pods_or_kinds(void **state) {
    (void)state;
    /* In a List only items that say kind: Node are nodes. */
    areal_cluster c = parse_ok("{\"kind\": \"List\", \"items\": [\n"
                               "  {\"kind\": \"Node\", \"metadata\": {\"name\": \"n0\"},\n"
                               "   \"status\": {\"capacity\": {\"nvidia.com/gpu\": 4}}},\n"
                               "  {\"metadata\": {\"name\": \"no-kind\"}},\n"
                               "  {\"kind\": \"Service\", \"metadata\": {\"name\": \"svc\"}}]}",
                               8);
    assert_int_equal(c.n_nodes, 1);
    assert_int_equal(c.nodes[0].gpus, 4); /* capacity when allocatable is absent */
    assert_true(c.nodes[0].ready);        /* no conditions: ready */
    areal_cluster_free(&c);
}

static void kubectl_pod_sums_saturate(void **state) {
    (void)state;
    char text[4096];
    size_t len = (size_t)snprintf(text, sizeof text,
                                  "{\"kind\": \"List\", \"items\": [{\"kind\": \"Node\", "
                                  "\"metadata\": {\"name\": \"n\"}}");
    for (int i = 0; i < 4; i++)
        len += (size_t)snprintf(text + len, sizeof text - len,
                                ", {\"kind\": \"Pod\", \"spec\": {\"nodeName\": \"n\", "
                                "\"containers\": [{\"resources\": {\"requests\": "
                                "{\"cpu\": \"4P\", \"memory\": \"4Ei\"}}}]}}");
    snprintf(text + len, sizeof text - len, "]}");
    areal_cluster c = parse_ok(text, 8);
    assert_int_equal(c.nodes[0].cpu_used_milli, 1LL << 62);
    assert_int_equal(c.nodes[0].mem_used_bytes, 1LL << 62);
    areal_cluster_free(&c);
}

/* ---- the examples ------------------------------------------------------------------ */

static void example_two_racks(void **state) {
    (void)state;
    areal_cluster c = load_ok("examples/clusters/two-racks.yaml", 1);
    assert_int_equal(c.n_nodes, 8);
    int per_leaf[2] = {0, 0}, used = 0, tainted = 0;
    for (int i = 0; i < c.n_nodes; i++) {
        const areal_node *n = &c.nodes[i];
        assert_int_equal(n->gpus, 8);
        assert_true(n->ready);
        assert_false(n->unschedulable);
        assert_label(n, "topology.kubernetes.io/zone", "zone-a");
        const char *leaf = areal_node_label(n, "network.topology.nvidia.com/leaf");
        assert_non_null(leaf);
        assert_true(strcmp(leaf, "leaf-0") == 0 || strcmp(leaf, "leaf-1") == 0);
        per_leaf[leaf[5] - '0']++;
        used += n->gpus_used;
        tainted += n->n_taints;
    }
    assert_int_equal(per_leaf[0], 4);
    assert_int_equal(per_leaf[1], 4);
    assert_int_equal(used, 3);
    assert_int_equal(find_node(&c, "rack-1-node-1")->gpus_used, 3);
    assert_int_equal(tainted, 1);
    const areal_node *t = find_node(&c, "rack-1-node-3");
    assert_int_equal(t->n_taints, 1);
    assert_string_equal(t->taints[0].key, "nvidia.com/gpu");
    assert_string_equal(t->taints[0].value, "maintenance");
    assert_string_equal(t->taints[0].effect, "NoSchedule");
    areal_cluster_free(&c);
}

static void example_kubectl_nodes(void **state) {
    (void)state;
    areal_cluster c = load_ok("examples/clusters/kubectl-nodes.json", 8);
    assert_int_equal(c.n_nodes, 5);
    int gpu_nodes = 0, gpus = 0;
    for (int i = 0; i < c.n_nodes; i++) {
        const areal_node *n = &c.nodes[i];
        assert_true(n->ready);
        assert_false(n->unschedulable);
        if (n->gpus == 0)
            continue;
        gpu_nodes++;
        gpus += n->gpus;
        assert_int_equal(n->cpu_milli, 143000);
        assert_int_equal(n->mem_bytes, 888114696LL * 1024);
        assert_non_null(areal_node_label(n, "nvidia.com/gpu.clique"));
        assert_non_null(areal_node_label(n, "network.topology.nvidia.com/leaf"));
    }
    assert_int_equal(gpu_nodes, 4);
    assert_int_equal(gpus, 16);
    const areal_node *a = find_node(&c, "gb200-0"), *b = find_node(&c, "gb200-2");
    assert_string_equal(areal_node_label(a, "nvidia.com/gpu.clique"),
                        areal_node_label(find_node(&c, "gb200-1"), "nvidia.com/gpu.clique"));
    assert_string_not_equal(areal_node_label(a, "nvidia.com/gpu.clique"),
                            areal_node_label(b, "nvidia.com/gpu.clique"));
    assert_label(b, "network.topology.nvidia.com/leaf", "leaf-1");
    const areal_node *cpu = find_node(&c, "cpu-0");
    assert_int_equal(cpu->gpus, 0);
    assert_int_equal(cpu->cpu_milli, 63500);
    assert_null(areal_node_label(cpu, "nvidia.com/gpu.clique"));
    areal_cluster_free(&c);
}

/* ---- errors -------------------------------------------------------------------------- */

static void error_unknown_node_field(void **state) {
    (void)state;
    expect_invalid("nodes:\n  - name: a\n    gpus: 8\n    gpuUsed: 2\n", "nodes[0].gpuUsed",
                   "unknown field");
    expect_invalid("nodes: [{name: a}, {name: b, Labels: {}}]", "nodes[1].Labels", NULL);
}

static void error_unknown_top_level_field(void **state) {
    (void)state;
    expect_invalid("gpusPerNode: 8\nnode:\n  - name: a\n", "node:", "unknown top-level field");
}

static void error_name_missing_or_empty(void **state) {
    (void)state;
    expect_invalid("nodes:\n  - name: a\n  - gpus: 8\n", "nodes[1].name", "non-empty");
    expect_invalid("nodes:\n  - name: \"\"\n", "nodes[0].name", NULL);
    expect_invalid("nodes:\n  - name: [a]\n", "nodes[0].name", NULL);
    expect_invalid("nodes:\n  - name: \"\\0a\"\n", "nodes[0].name", NULL);
}

static void error_gpus_used_above_gpus(void **state) {
    (void)state;
    expect_invalid("nodes:\n  - name: a\n    gpus: 4\n    gpusUsed: 5\n", "nodes[0].gpusUsed",
                   "larger than gpus");
    /* Against the default, too. */
    expect_invalid("gpusPerNode: 2\nnodes:\n  - {name: a, gpusUsed: 3}\n", "nodes[0].gpusUsed",
                   NULL);
}

static void error_bad_quantities(void **state) {
    (void)state;
    expect_invalid("nodes:\n  - name: a\n    memory: 12XB\n", "nodes[0].memory", "\"12XB\"");
    expect_invalid("nodes:\n  - name: a\n    cpu: -2\n", "nodes[0].cpu", "non-negative");
    expect_invalid("nodes:\n  - name: a\n    cpuUsed: -0.5\n", "nodes[0].cpuUsed", "\"-0.5\"");
    expect_invalid("nodes:\n  - name: a\n    gpus: eight\n", "nodes[0].gpus", "quantity");
    expect_invalid("nodes:\n  - name: a\n    gpus: 2000000\n", "nodes[0].gpus", "at most");
    expect_invalid("nodes:\n  - name: a\n    memoryUsed: [1]\n", "nodes[0].memoryUsed", "a list");
    expect_invalid("nodes:\n  - name: a\n    memory: 99999999999999999999Ei\n", "nodes[0].memory",
                   NULL);
    expect_invalid("nodes:\n  - name: a\n    memory: 9223372036854775807\n", "nodes[0].memory",
                   "too large");
    expect_invalid("gpusPerNode: 1.5.1\nnodes: [{name: a}]\n", "gpusPerNode", NULL);
}

static void error_bad_booleans(void **state) {
    (void)state;
    expect_invalid("nodes:\n  - name: a\n    ready: yes\n", "nodes[0].ready", "true or false");
    expect_invalid("nodes:\n  - name: a\n    unschedulable: 1\n", "nodes[0].unschedulable", NULL);
}

static void error_bad_taints(void **state) {
    (void)state;
    expect_invalid("nodes:\n  - name: a\n    taints: [{key: k, effect: NoScheduleX}]\n",
                   "nodes[0].taints[0]", "NoScheduleX");
    expect_invalid("nodes:\n  - name: a\n    taints:\n      - {key: k, effect: NoSchedule}\n"
                   "      - {effect: NoSchedule}\n",
                   "nodes[0].taints[1]", "key and effect");
    expect_invalid("nodes:\n  - name: a\n    taints: {key: k, effect: NoSchedule}\n",
                   "nodes[0].taints", "a list");
}

static void error_labels_not_a_mapping(void **state) {
    (void)state;
    expect_invalid("nodes:\n  - name: a\n    labels: [a, b]\n", "nodes[0].labels", "mapping");
    expect_invalid("nodes:\n  - name: a\n    labels: {k: [v]}\n", "nodes[0].labels.k",
                   "label value");
}

static void error_nodes_not_a_list(void **state) {
    (void)state;
    expect_invalid("nodes:\n  name: a\n", "nodes", "expected a list");
    expect_invalid("gpusPerNode: 8\n", "nodes", "found nothing");
    expect_invalid("nodes: [a]\n", "nodes[0]", "node object");
}

static void error_duplicate_node_names(void **state) {
    (void)state;
    expect_invalid("nodes: [{name: a}, {name: b}, {name: a}]\n", "nodes[2].name", "nodes[0].name");
    expect_invalid_from("kube.json",
                        "{\"kind\": \"List\", \"items\": [\n"
                        "  {\"kind\": \"Node\", \"metadata\": {\"name\": \"n\"}},\n"
                        "  {\"kind\": \"Pod\", \"metadata\": {\"name\": \"p\"}},\n"
                        "  {\"kind\": \"Node\", \"metadata\": {\"name\": \"n\"}}]}",
                        "items[2].metadata.name", "items[0].metadata.name");
}

static void error_empty_inventory(void **state) {
    (void)state;
    expect_invalid("nodes: []\n", "no nodes", NULL);
    expect_invalid_from("kube.json", "{\"kind\": \"NodeList\", \"items\": []}", "no nodes", NULL);
    expect_invalid_from("kube.json", "{\"kind\": \"List\", \"items\": [{\"kind\": \"Pod\"}]}",
                        "no nodes", NULL);
}

static void error_invalid_json(void **state) {
    (void)state;
    expect_invalid_from("inv.json", "{\"nodes\": [\n  {\"name\": \"a\"},\n  {\"name\": }\n]}",
                        "inv.json:3:", "invalid JSON");
    expect_invalid_from("inv.json", "{\"nodes\": [{\"name\": \"a\"}", "invalid JSON", NULL);
    expect_invalid_from("inv.json", "{\"nodes\": [], \"nodes\": []}", "invalid JSON", NULL);
}

static void error_yaml_syntax(void **state) {
    (void)state;
    expect_invalid("nodes:\n  - name: a\n    gpus: [1\n", "YAML syntax error", "inv.yaml:");
    expect_invalid("nodes:\n  - name: a\n   gpus: 8\n", "YAML syntax error", NULL);
    expect_invalid("nodes: \"unterminated\n", "YAML syntax error", NULL);
}

static void error_yaml_alias(void **state) {
    (void)state;
    expect_invalid("base: &b {name: a}\nnodes:\n  - *b\n", "aliases", "inv.yaml:3:");
}

static void error_yaml_duplicate_key(void **state) {
    (void)state;
    expect_invalid("nodes:\n  - name: a\n    name: b\n", "duplicate key 'name'", "inv.yaml:3:");
}

static void error_yaml_complex_key(void **state) {
    (void)state;
    expect_invalid("? [a, b]\n: c\n", "mapping key", NULL);
}

static void error_yaml_nesting_too_deep(void **state) {
    (void)state;
    char text[256];
    /* 64 levels (a mapping and 63 lists) are read, and then are not an inventory ... */
    memcpy(text, "a: ", 3);
    memset(text + 3, '[', 63);
    memset(text + 66, ']', 63);
    text[129] = '\0';
    expect_invalid(text, "a: ", "unknown top-level field");
    /* ... 65 are refused while reading. */
    memset(text + 3, '[', 64);
    memset(text + 67, ']', 64);
    text[131] = '\0';
    expect_invalid(text, "inv.yaml:1:67: ", "nesting deeper than 64");
    expect_invalid("nodes:\n  - name: a\n    labels: {a: {b: {c: {d: {e: {f: {g: "
                   "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                   "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}}}}}}\n",
                   "nesting deeper than 64", "inv.yaml:3:");
}

static void error_top_level_not_a_mapping(void **state) {
    (void)state;
    expect_invalid("just a string\n", "top level", "found a string");
    expect_invalid("42\n", "top level", "found an integer");
    expect_invalid("- name: a\n", "top level", "found a list");
    expect_invalid_from("inv.json", "[{\"name\": \"a\"}]", "top level", "found a list");
    expect_invalid("---\n", "top level", "found null");
}

static void error_wrong_kind(void **state) {
    (void)state;
    expect_invalid("kind: Deployment\nitems: []\n", "kind", "\"Deployment\"");
    expect_invalid_from("kube.json", "{\"kind\": \"PodList\", \"items\": []}", "kind", "PodList");
}

static void error_kubectl_fields(void **state) {
    (void)state;
    expect_invalid_from("kube.json", "{\"kind\": \"NodeList\", \"items\": {}}", "items",
                        "found an object");
    expect_invalid_from("kube.json", "{\"kind\": \"NodeList\", \"items\": [{\"metadata\": {}}]}",
                        "items[0].metadata.name", NULL);
    expect_invalid_from("kube.json",
                        "{\"kind\": \"NodeList\", \"items\": [{\"metadata\": {\"name\": \"n\"},"
                        " \"status\": {\"allocatable\": {\"nvidia.com/gpu\": \"eight\"}}}]}",
                        "items[0].status.allocatable.nvidia.com/gpu", "\"eight\"");
    expect_invalid_from(
        "kube.json",
        "{\"kind\": \"List\", \"items\": [{\"kind\": \"Node\", \"metadata\": {\"name\": \"n\"}},"
        " {\"kind\": \"Pod\", \"spec\": {\"nodeName\": \"n\", \"containers\": [{}, {\"resources\":"
        " {\"limits\": {\"cpu\": \"lots\"}}}]}}]}",
        "items[1].spec.containers[1].resources.limits.cpu", "\"lots\"");
    expect_invalid_from(
        "kube.json",
        "{\"kind\": \"NodeList\", \"items\": [{\"metadata\": {\"name\": \"n\", \"labels\":"
        " {\"a\": null}}}]}",
        "items[0].metadata.labels.a", NULL);
}

static void error_empty_file(void **state) {
    (void)state;
    expect_invalid("", "empty", NULL);
    expect_invalid("  \n\n# only a comment\n", "empty", NULL);
}

static void error_file_not_found(void **state) {
    (void)state;
    areal_cluster c;
    areal_error e;
    areal_error_clear(&e);
    assert_int_equal(
        areal_cluster_load_file("lib/layout/tests/data/no-such-cluster.yaml", 8, &c, &e),
        AREAL_EIO);
    assert_int_equal(e.code, AREAL_EIO);
    assert_has(e.msg, "lib/layout/tests/data/no-such-cluster.yaml");
    assert_int_equal(c.n_nodes, 0);
}

static void error_file_names_source(void **state) {
    (void)state;
    areal_cluster c;
    areal_error e;
    areal_error_clear(&e);
    assert_int_equal(areal_cluster_load_file("lib/layout/tests/data/typo.yaml", 8, &c, &e),
                     AREAL_EINVAL);
    assert_has(e.msg, "lib/layout/tests/data/typo.yaml: nodes[1].gpuUsed: unknown field");
    assert_int_equal(c.n_nodes, 0);
}

static void error_without_error_struct(void **state) {
    (void)state;
    areal_cluster c;
    const char *bad[] = {"nodes: [{name: a, gpuUsed: 1}]", "{\"nodes\": [", "nodes: *a", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(areal_cluster_parse(bad[i], strlen(bad[i]), NULL, 8, &c, NULL),
                         AREAL_EINVAL);
        assert_int_equal(c.n_nodes, 0);
    }
}

static void error_source_defaults_to_inventory(void **state) {
    (void)state;
    areal_cluster c;
    areal_error e;
    const char *text = "nodes: []";
    assert_int_equal(areal_cluster_parse(text, strlen(text), NULL, 8, &c, &e), AREAL_EINVAL);
    assert_has(e.msg, "inventory");
}

/* ---- the programmatic API ------------------------------------------------------------- */

static void api_add_nodes(void **state) {
    (void)state;
    areal_cluster c;
    areal_cluster_init(&c);
    assert_int_equal(areal_cluster_add_node(&c, "a", 8, 2, NULL), 0);
    assert_int_equal(areal_cluster_add_node(&c, "b", 0, 0, NULL), 1);
    assert_int_equal(c.n_nodes, 2);
    assert_string_equal(c.nodes[0].name, "a");
    assert_int_equal(c.nodes[0].gpus, 8);
    assert_int_equal(c.nodes[0].gpus_used, 2);
    assert_true(c.nodes[0].ready);
    assert_false(c.nodes[0].unschedulable);
    assert_int_equal(c.nodes[0].n_labels, 0);
    assert_int_equal(c.nodes[0].n_taints, 0);
    assert_int_equal(c.nodes[0].cpu_milli, 0);
    for (int i = 2; i < 100; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        assert_int_equal(areal_cluster_add_node(&c, name, i, i / 2, NULL), i);
    }
    assert_string_equal(c.nodes[0].name, "a");
    assert_string_equal(c.nodes[99].name, "n99");
    assert_int_equal(c.nodes[99].gpus_used, 49);
    areal_cluster_free(&c);
}

static void api_rejects_invalid_counts(void **state) {
    (void)state;
    areal_cluster c;
    areal_cluster_init(&c);
    areal_error e;
    areal_error_clear(&e);
    assert_int_equal(areal_cluster_add_node(&c, "a", -1, 0, &e), AREAL_EINVAL);
    assert_has(e.msg, "node a");
    assert_int_equal(areal_cluster_add_node(&c, "a", 4, -1, &e), AREAL_EINVAL);
    assert_int_equal(areal_cluster_add_node(&c, "a", 4, 5, &e), AREAL_EINVAL);
    assert_int_equal(areal_cluster_add_node(&c, "", 4, 0, &e), AREAL_EINVAL);
    assert_int_equal(areal_cluster_add_node(&c, NULL, 4, 0, &e), AREAL_EINVAL);
    assert_int_equal(c.n_nodes, 0);
    assert_int_equal(areal_cluster_add_node(&c, "a", 4, 4, &e), 0);
    areal_cluster_free(&c);
}

static void api_labels_set_and_replace(void **state) {
    (void)state;
    areal_cluster c;
    areal_cluster_init(&c);
    assert_int_equal(areal_cluster_add_node(&c, "a", 8, 0, NULL), 0);
    assert_null(areal_node_label(&c.nodes[0], "leaf"));
    assert_int_equal(areal_cluster_set_label(&c, 0, "leaf", "leaf-0", NULL), AREAL_OK);
    assert_int_equal(areal_cluster_set_label(&c, 0, "zone", "zone-a", NULL), AREAL_OK);
    assert_label(&c.nodes[0], "leaf", "leaf-0");
    assert_int_equal(areal_cluster_set_label(&c, 0, "leaf", "leaf-1", NULL), AREAL_OK);
    assert_int_equal(c.nodes[0].n_labels, 2);
    assert_label(&c.nodes[0], "leaf", "leaf-1");
    assert_label(&c.nodes[0], "zone", "zone-a");
    assert_null(areal_node_label(&c.nodes[0], "lea"));
    assert_int_equal(areal_cluster_set_label(&c, 0, "empty", "", NULL), AREAL_OK);
    assert_label(&c.nodes[0], "empty", "");
    areal_cluster_free(&c);
}

static void api_taints(void **state) {
    (void)state;
    areal_cluster c;
    areal_cluster_init(&c);
    assert_int_equal(areal_cluster_add_node(&c, "a", 8, 0, NULL), 0);
    assert_int_equal(areal_cluster_add_taint(&c, 0, "k", "v", "NoSchedule", NULL), AREAL_OK);
    assert_int_equal(areal_cluster_add_taint(&c, 0, "k2", NULL, "NoExecute", NULL), AREAL_OK);
    assert_int_equal(c.nodes[0].n_taints, 2);
    assert_string_equal(c.nodes[0].taints[0].key, "k");
    assert_string_equal(c.nodes[0].taints[0].value, "v");
    assert_string_equal(c.nodes[0].taints[0].effect, "NoSchedule");
    assert_string_equal(c.nodes[0].taints[1].value, "");
    assert_string_equal(c.nodes[0].taints[1].effect, "NoExecute");
    areal_cluster_free(&c);
}

static void api_bad_index(void **state) {
    (void)state;
    areal_cluster c;
    areal_cluster_init(&c);
    areal_error e;
    assert_int_equal(areal_cluster_set_label(&c, 0, "k", "v", &e), AREAL_EINVAL);
    assert_has(e.msg, "out of range");
    assert_int_equal(areal_cluster_add_node(&c, "a", 8, 0, NULL), 0);
    assert_int_equal(areal_cluster_set_label(&c, 1, "k", "v", &e), AREAL_EINVAL);
    assert_int_equal(areal_cluster_set_label(&c, -1, "k", "v", &e), AREAL_EINVAL);
    assert_int_equal(areal_cluster_add_taint(&c, 1, "k", "v", "NoSchedule", &e), AREAL_EINVAL);
    assert_int_equal(c.nodes[0].n_labels, 0);
    assert_int_equal(c.nodes[0].n_taints, 0);
    areal_cluster_free(&c);
}

static void api_free_leaves_reusable(void **state) {
    (void)state;
    areal_cluster c;
    areal_cluster_init(&c);
    assert_int_equal(areal_cluster_add_node(&c, "a", 8, 0, NULL), 0);
    assert_int_equal(areal_cluster_set_label(&c, 0, "k", "v", NULL), AREAL_OK);
    assert_int_equal(areal_cluster_add_taint(&c, 0, "k", "v", "NoSchedule", NULL), AREAL_OK);
    areal_cluster_free(&c);
    assert_int_equal(c.n_nodes, 0);
    assert_int_equal(c.cap_nodes, 0);
    assert_null(c.nodes);
    assert_int_equal(areal_cluster_add_node(&c, "b", 4, 1, NULL), 0);
    assert_string_equal(c.nodes[0].name, "b");
    areal_cluster_free(&c);
    areal_cluster_free(&c); /* freeing an empty cluster is harmless */
    /* A parsed cluster is reusable too, and a failed parse leaves it empty. */
    c = parse_ok("nodes: [{name: x}]", 8);
    areal_cluster_free(&c);
    assert_int_equal(areal_cluster_add_node(&c, "y", 1, 0, NULL), 0);
    areal_cluster_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(quantity_plain_integers),
        cmocka_unit_test(quantity_decimal_suffixes),
        cmocka_unit_test(quantity_binary_suffixes),
        cmocka_unit_test(quantity_fractions_are_exact),
        cmocka_unit_test(quantity_exponents),
        cmocka_unit_test(quantity_rounds_up),
        cmocka_unit_test(quantity_rejects_malformed),
        cmocka_unit_test(quantity_overflow_is_erange),
        cmocka_unit_test(own_form_yaml_reads_every_field),
        cmocka_unit_test(own_form_json_reads_every_field),
        cmocka_unit_test(own_form_yaml_flow_style_is_yaml),
        cmocka_unit_test(own_form_default_gpus_from_caller),
        cmocka_unit_test(own_form_gpus_per_node_overrides_default),
        cmocka_unit_test(own_form_numbers_as_quantities),
        cmocka_unit_test(own_form_long_label_value_kept_whole),
        cmocka_unit_test(own_form_null_labels_and_taints_are_empty),
        cmocka_unit_test(own_form_second_document_ignored),
        cmocka_unit_test(own_form_many_nodes),
        cmocka_unit_test(kubectl_nodelist),
        cmocka_unit_test(kubectl_list_counts_pod_requests),
        cmocka_unit_test(kubectl_list_without_pods_or_kinds),
        cmocka_unit_test(kubectl_pod_sums_saturate),
        cmocka_unit_test(example_two_racks),
        cmocka_unit_test(example_kubectl_nodes),
        cmocka_unit_test(error_unknown_node_field),
        cmocka_unit_test(error_unknown_top_level_field),
        cmocka_unit_test(error_name_missing_or_empty),
        cmocka_unit_test(error_gpus_used_above_gpus),
        cmocka_unit_test(error_bad_quantities),
        cmocka_unit_test(error_bad_booleans),
        cmocka_unit_test(error_bad_taints),
        cmocka_unit_test(error_labels_not_a_mapping),
        cmocka_unit_test(error_nodes_not_a_list),
        cmocka_unit_test(error_duplicate_node_names),
        cmocka_unit_test(error_empty_inventory),
        cmocka_unit_test(error_invalid_json),
        cmocka_unit_test(error_yaml_syntax),
        cmocka_unit_test(error_yaml_alias),
        cmocka_unit_test(error_yaml_duplicate_key),
        cmocka_unit_test(error_yaml_complex_key),
        cmocka_unit_test(error_yaml_nesting_too_deep),
        cmocka_unit_test(error_top_level_not_a_mapping),
        cmocka_unit_test(error_wrong_kind),
        cmocka_unit_test(error_kubectl_fields),
        cmocka_unit_test(error_empty_file),
        cmocka_unit_test(error_file_not_found),
        cmocka_unit_test(error_file_names_source),
        cmocka_unit_test(error_without_error_struct),
        cmocka_unit_test(error_source_defaults_to_inventory),
        cmocka_unit_test(api_add_nodes),
        cmocka_unit_test(api_rejects_invalid_counts),
        cmocka_unit_test(api_labels_set_and_replace),
        cmocka_unit_test(api_taints),
        cmocka_unit_test(api_bad_index),
        cmocka_unit_test(api_free_leaves_reusable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
