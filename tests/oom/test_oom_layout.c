/*
 * test_oom_layout.c - `make test-oom` over the layout parsers and the
 * placement: allocation strings, YAML to JSON, cluster inventories in the
 * project's YAML and JSON forms and as `kubectl get nodes,pods -o json`, and
 * placing a job on the parsed cluster. Each fails every allocation once (oom.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "areal/alloc.h"
#include "areal/cluster.h"
#include "areal/mem.h"
#include "areal/placement.h"
#include "areal/yaml_json.h"
#include "oom.h"

/* A whole file read before the torture starts (its allocation is not counted). */
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

typedef struct input {
    const char *text;
    size_t len;
} input;

static int alloc_strings(void *ud) {
    (void)ud;
    static const char *const texts[] = {"sglang:d4t2+megatron:d2p2t4e2",
                                        "megatron:(attn:d4p2t2c2|ffn:d2p2t4e2)",
                                        "sglang.d4p1t1+d4p1t1", "megatron:d4x2"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        areal_alloc a;
        areal_error err;
        /* the parser itself allocates nothing; the copy goes through areal/mem.h,
         * which the torture counts like any malloc */
        char *copy = areal_strdup(texts[i]);
        if (copy == NULL)
            return AREAL_ENOMEM;
        int rc = areal_alloc_parse(copy, &a, &err);
        areal_free(copy);
        if (rc == AREAL_ENOMEM)
            return rc;
        if ((rc == AREAL_OK) != (i < 3))
            return rc == AREAL_OK ? AREAL_EINVAL : rc;
        char buf[256];
        if (rc == AREAL_OK && areal_alloc_format(&a, buf, sizeof buf) < 0)
            return AREAL_ENOMEM;
    }
    return 0;
}

static int yaml_to_json(void *ud) {
    const input *in = ud;
    areal_error err;
    json_t *j = areal_yaml_to_json(in->text, in->len, "oom.yaml", &err);
    if (j == NULL)
        return err.code;
    json_decref(j);
    return 0;
}

static int cluster_parse(void *ud) {
    const input *in = ud;
    areal_cluster c;
    areal_error err;
    int rc = areal_cluster_parse(in->text, in->len, "oom", 8, &c, &err);
    if (rc == AREAL_OK)
        areal_cluster_free(&c);
    return rc;
}

/* Parse the inventory, then place a job on it, as arealctl plan does. */
static int parse_and_place(void *ud) {
    const input *in = ud;
    areal_alloc a;
    areal_error err;
    int rc = areal_alloc_parse("sglang:d4t2+megatron:d2p2t4e2", &a, &err);
    if (rc != AREAL_OK)
        return rc;
    areal_cluster c;
    if ((rc = areal_cluster_parse(in->text, in->len, "oom", 8, &c, &err)) != AREAL_OK)
        return rc;
    areal_job job;
    areal_job_init(&job, "oom", &a);
    areal_plan plan;
    rc = areal_place(&job, &c, &plan, &err);
    if (rc == AREAL_OK)
        areal_plan_free(&plan);
    areal_cluster_free(&c);
    return rc;
}

static void allocation_strings(void **state) {
    (void)state;
    oom_torture("alloc strings", alloc_strings, NULL, AREAL_ENOMEM);
}

static void yaml(void **state) {
    (void)state;
    input in;
    char *text = slurp("examples/clusters/two-racks.yaml", &in.len);
    in.text = text;
    oom_torture("yaml to json", yaml_to_json, &in, AREAL_ENOMEM);
    free(text);
}

static void inventories(void **state) {
    (void)state;
    input in;
    char *text = slurp("examples/clusters/two-racks.yaml", &in.len);
    in.text = text;
    oom_torture("inventory two-racks.yaml", cluster_parse, &in, AREAL_ENOMEM);
    free(text);
    /* `kubectl get nodes -o json`: the first two nodes of the example (each run
     * parses the whole input, so the torture's cost grows with its square) */
    json_t *list = json_load_file("examples/clusters/kubectl-nodes.json", 0, NULL);
    assert_non_null(list);
    json_t *items = json_object_get(list, "items");
    while (json_array_size(items) > 2)
        json_array_remove(items, json_array_size(items) - 1);
    text = json_dumps(list, JSON_COMPACT);
    json_decref(list);
    in = (input){text, strlen(text)};
    oom_torture("inventory kubectl nodes", cluster_parse, &in, AREAL_ENOMEM);
    free(text);
    const char *json = "{\"nodes\": [{\"name\": \"a\", \"gpus\": 8, \"labels\": "
                       "{\"network.topology.nvidia.com/leaf\": \"l1\"}, \"taints\": "
                       "[{\"key\": \"k\", \"value\": \"v\", \"effect\": \"NoSchedule\"}]},"
                       "{\"name\": \"b\", \"gpus\": 8, \"gpusUsed\": 2}]}";
    in = (input){json, strlen(json)};
    oom_torture("inventory project json", cluster_parse, &in, AREAL_ENOMEM);
}

static void placement(void **state) {
    (void)state;
    input in;
    char *text = slurp("examples/clusters/two-racks.yaml", &in.len);
    in.text = text;
    oom_torture("parse and place", parse_and_place, &in, AREAL_ENOMEM);
    free(text);
}

int main(void) {
    oom_setup();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(allocation_strings),
        cmocka_unit_test(yaml),
        cmocka_unit_test(inventories),
        cmocka_unit_test(placement),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
