/* test_simnodes.c - Node and tenant-Pod objects of the e2e simulated nodes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "areal/simnodes.h"

static const char INVENTORY[] = "gpusPerNode: 8\n"
                                "nodes:\n"
                                "  - name: a-0\n"
                                "    gpus: 4\n"
                                "    cpu: 1500m\n"
                                "    memory: 192Gi\n"
                                "    labels: {network.topology.nvidia.com/leaf: leaf-0,"
                                " kubernetes.io/hostname: custom}\n"
                                "    taints: [{key: nvidia.com/gpu, value: maint,"
                                " effect: NoSchedule}]\n"
                                "  - name: b-1\n"
                                "    gpusUsed: 3\n"
                                "    cpuUsed: \"2\"\n"
                                "    unschedulable: true\n"
                                "    ready: false\n";

static void load(areal_cluster *c, const char *text) {
    areal_error err;
    areal_cluster_init(c);
    int rc = areal_cluster_parse(text, strlen(text), "test", 8, c, &err);
    if (rc != 0)
        fail_msg("inventory: %s", err.msg);
}

static const char *str_at(json_t *root, const char *path) {
    json_t *v = root;
    char buf[256];
    strncpy(buf, path, sizeof buf - 1);
    buf[sizeof buf - 1] = '\0';
    for (char *save = NULL, *tok = strtok_r(buf, "|", &save); tok && v;
         tok = strtok_r(NULL, "|", &save)) {
        if (json_is_array(v))
            v = json_array_get(v, (size_t)(tok[0] - '0'));
        else
            v = json_object_get(v, tok);
    }
    if (!json_is_string(v))
        fail_msg("no string at %s", path);
    return json_string_value(v);
}

static void formats_quantities_in_exact_units(void **state) {
    (void)state;
    char b[16];
    assert_int_equal(areal_simnodes_format_cpu(8000, b, sizeof b), 0);
    assert_string_equal(b, "8");
    assert_int_equal(areal_simnodes_format_cpu(1500, b, sizeof b), 0);
    assert_string_equal(b, "1500m");
    assert_int_equal(areal_simnodes_format_bytes(2LL << 40, b, sizeof b), 0);
    assert_string_equal(b, "2Ti");
    assert_int_equal(areal_simnodes_format_bytes(192LL << 30, b, sizeof b), 0);
    assert_string_equal(b, "192Gi");
    assert_int_equal(areal_simnodes_format_bytes(1000, b, sizeof b), 0);
    assert_string_equal(b, "1000");
    assert_int_equal(areal_simnodes_format_bytes(0, b, sizeof b), 0);
    assert_string_equal(b, "0");
    assert_int_equal(areal_simnodes_format_cpu(-1, b, sizeof b), AREAL_ERANGE);
    assert_int_equal(areal_simnodes_format_bytes(123456789, b, 4), AREAL_ERANGE);
}

static void nodes_carry_inventory_capacity_labels_taints(void **state) {
    (void)state;
    areal_cluster c;
    load(&c, INVENTORY);
    json_t *list = NULL;
    areal_error err;
    areal_simnodes_opts o = {.kubelet_version = "v1.2.3", .now = "2026-01-02T03:04:05Z"};
    assert_int_equal(areal_simnodes_nodes(&c, &o, &list, &err), 0);
    assert_string_equal(str_at(list, "kind"), "List");
    assert_int_equal(json_array_size(json_object_get(list, "items")), 2);

    json_t *a = json_array_get(json_object_get(list, "items"), 0);
    assert_string_equal(str_at(a, "metadata|name"), "a-0");
    assert_string_equal(str_at(a, "status|capacity|nvidia.com/gpu"), "4");
    assert_string_equal(str_at(a, "status|allocatable|nvidia.com/gpu"), "4");
    assert_string_equal(str_at(a, "status|allocatable|cpu"), "1500m");
    assert_string_equal(str_at(a, "status|allocatable|memory"), "192Gi");
    assert_string_equal(str_at(a, "metadata|labels|network.topology.nvidia.com/leaf"), "leaf-0");
    assert_string_equal(str_at(a, "metadata|labels|kubernetes.io/hostname"), "custom");
    assert_string_equal(str_at(a, "metadata|labels|" AREAL_SIMNODES_LABEL), "true");
    assert_string_equal(str_at(a, "spec|taints|0|key"), "nvidia.com/gpu");
    assert_string_equal(str_at(a, "spec|taints|0|value"), "maint");
    assert_string_equal(str_at(a, "spec|taints|0|effect"), "NoSchedule");
    assert_string_equal(str_at(a, "status|conditions|0|type"), "Ready");
    assert_string_equal(str_at(a, "status|conditions|0|status"), "True");
    assert_string_equal(str_at(a, "status|conditions|0|lastHeartbeatTime"), "2026-01-02T03:04:05Z");
    assert_string_equal(str_at(a, "status|nodeInfo|kubeletVersion"), "v1.2.3");
    assert_false(json_is_true(json_object_get(json_object_get(a, "spec"), "unschedulable")));

    json_t *b = json_array_get(json_object_get(list, "items"), 1);
    assert_string_equal(str_at(b, "status|capacity|nvidia.com/gpu"), "8");
    assert_string_equal(str_at(b, "status|capacity|cpu"), "64"); /* untracked: default */
    assert_string_equal(str_at(b, "status|capacity|memory"), "512Gi");
    assert_string_equal(str_at(b, "metadata|labels|kubernetes.io/hostname"), "b-1");
    assert_string_equal(str_at(b, "status|conditions|0|status"), "False");
    assert_true(json_is_true(json_object_get(json_object_get(b, "spec"), "unschedulable")));
    assert_int_equal(json_array_size(json_object_get(json_object_get(b, "spec"), "taints")), 0);
    /* distinct addresses and pod ranges */
    assert_string_not_equal(str_at(a, "status|addresses|0|address"),
                            str_at(b, "status|addresses|0|address"));
    assert_string_not_equal(str_at(a, "spec|podCIDR"), str_at(b, "spec|podCIDR"));
    json_decref(list);
    areal_cluster_free(&c);
}

static void tenant_pods_hold_used_capacity(void **state) {
    (void)state;
    areal_cluster c;
    load(&c, INVENTORY);
    json_t *list = NULL;
    areal_error err;
    assert_int_equal(areal_simnodes_tenant_pods(&c, NULL, &list, &err), 0);
    json_t *items = json_object_get(list, "items");
    assert_int_equal(json_array_size(items), 1); /* a-0 uses nothing */
    json_t *p = json_array_get(items, 0);
    assert_string_equal(str_at(p, "metadata|name"), "tenant-b-1");
    assert_string_equal(str_at(p, "metadata|namespace"), "areal-e2e-tenants");
    assert_string_equal(str_at(p, "spec|nodeName"), "b-1");
    json_t *ctr = json_array_get(json_object_get(json_object_get(p, "spec"), "containers"), 0);
    assert_string_equal(str_at(ctr, "resources|requests|nvidia.com/gpu"), "3");
    assert_string_equal(str_at(ctr, "resources|limits|nvidia.com/gpu"), "3");
    assert_string_equal(str_at(ctr, "resources|requests|cpu"), "2");
    assert_null(
        json_object_get(json_object_get(json_object_get(ctr, "resources"), "requests"), "memory"));
    json_decref(list);

    areal_simnodes_opts o = {.tenant_namespace = "other"};
    assert_int_equal(areal_simnodes_tenant_pods(&c, &o, &list, &err), 0);
    assert_string_equal(str_at(list, "items|0|metadata|namespace"), "other");
    json_decref(list);
    areal_cluster_free(&c);
}

static void rejects_names_kubernetes_would_reject(void **state) {
    (void)state;
    const char *bad[] = {"Upper-0", "a_b", "-lead", "trail-"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[128];
        snprintf(text, sizeof text, "nodes:\n  - name: %s\n", bad[i]);
        areal_cluster c;
        load(&c, text);
        json_t *list = (json_t *)&c; /* must be reset to NULL */
        areal_error err;
        areal_error_clear(&err);
        assert_int_equal(areal_simnodes_nodes(&c, NULL, &list, &err), AREAL_EINVAL);
        assert_null(list);
        assert_non_null(strstr(err.msg, bad[i]));
        assert_non_null(strstr(err.msg, "node name"));
        areal_cluster_free(&c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(formats_quantities_in_exact_units),
        cmocka_unit_test(nodes_carry_inventory_capacity_labels_taints),
        cmocka_unit_test(tenant_pods_hold_used_capacity),
        cmocka_unit_test(rejects_names_kubernetes_would_reject),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
