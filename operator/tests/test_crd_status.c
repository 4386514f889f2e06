/*
 * test_crd_status.c - every status field the reconcile writes survives the
 * CRD's structural schema (crds/areal.io_arealjobs.yaml): the API server
 * prunes a field the schema does not declare (issue 11 saw
 * status.placement.quality always {} because its "trainer/tp" keys were
 * pruned) and refuses a value of the wrong type or outside an enum. The
 * statuses checked are the reconcile's own, over a job's life: first
 * placement (placement pods with role and ranks, quality, defaults), a
 * replaced rollout server, a pod that cannot pull its image, and Failed.
 * The checker is a small structural-schema walker (properties,
 * additionalProperties, items, x-kubernetes-preserve-unknown-fields, type,
 * enum), checked itself against a field the schema lacks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "areal/operator/reconcile.h"
#include "areal/yaml_json.h"

#define CRD "crds/areal.io_arealjobs.yaml"

static json_t *load_crd(void) {
    FILE *f = fopen(CRD, "rb");
    assert_non_null(f); /* tests run from the repository root */
    static char buf[1 << 17];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 0 && n < sizeof buf);
    areal_error e;
    json_t *crd = areal_yaml_to_json(buf, n, CRD, &e);
    if (crd == NULL)
        fail_msg("%s", e.msg);
    return crd;
}

static const json_t *status_schema(const json_t *crd) {
    const json_t *v = json_array_get(json_object_get(json_object_get(crd, "spec"), "versions"), 0);
    const json_t *s = json_object_get(
        json_object_get(json_object_get(json_object_get(v, "schema"), "openAPIV3Schema"),
                        "properties"),
        "status");
    assert_non_null(s);
    return s;
}

/* The first problem of `v` against `schema`, into why (empty: none). */
static void check(const json_t *v, const json_t *schema, const char *path, char *why, size_t cap) {
    if (why[0] != '\0')
        return;
    const char *type = json_string_value(json_object_get(schema, "type"));
    bool preserve = json_is_true(json_object_get(schema, "x-kubernetes-preserve-unknown-fields"));
    bool int_or_string = json_is_true(json_object_get(schema, "x-kubernetes-int-or-string"));
    if (int_or_string && (json_is_integer(v) || json_is_string(v)))
        return;
    if (type != NULL) {
        bool ok = (strcmp(type, "object") == 0 && json_is_object(v)) ||
                  (strcmp(type, "array") == 0 && json_is_array(v)) ||
                  (strcmp(type, "string") == 0 && json_is_string(v)) ||
                  (strcmp(type, "integer") == 0 && json_is_integer(v)) ||
                  (strcmp(type, "number") == 0 && json_is_number(v)) ||
                  (strcmp(type, "boolean") == 0 && json_is_boolean(v));
        if (!ok) {
            snprintf(why, cap, "%s: not of type %s", path, type);
            return;
        }
    }
    const json_t *en = json_object_get(schema, "enum");
    if (json_is_array(en)) {
        bool found = false;
        size_t i;
        json_t *e;
        json_array_foreach(en, i, e) found = found || json_equal(e, v);
        if (!found) {
            snprintf(why, cap, "%s: not one of the enum", path);
            return;
        }
    }
    if (json_is_object(v)) {
        const json_t *props = json_object_get(schema, "properties");
        const json_t *extra = json_object_get(schema, "additionalProperties");
        const char *key;
        json_t *sub;
        json_object_foreach((json_t *)v, key, sub) {
            char p[512];
            snprintf(p, sizeof p, "%s.%s", path, key);
            const json_t *s = json_object_get(props, key);
            if (s == NULL && json_is_object(extra))
                s = extra;
            if (s != NULL)
                check(sub, s, p, why, cap);
            else if (!preserve)
                snprintf(why, cap, "%s: not in the schema (the API server prunes it)", p);
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *item;
        json_array_foreach(v, i, item) {
            char p[512];
            snprintf(p, sizeof p, "%s[%zu]", path, i);
            check(item, json_object_get(schema, "items"), p, why, cap);
        }
    }
}

static void expect_kept(const json_t *status, const json_t *schema, const char *when) {
    char why[600] = "";
    check(status, schema, "status", why, sizeof why);
    if (why[0] != '\0')
        fail_msg("%s: %s", when, why);
}

#define MAX_PODS 16

typedef struct life {
    json_t *job;
    json_t *pods[MAX_PODS];
    int n;
    areal_cluster c;
    long long now;
} life;

/* One reconcile; creates become bound, running pods; deletes remove them. */
static json_t *pass(life *l) {
    reconcile_input in = {.job = l->job,
                          .pods = (const json_t *const *)l->pods,
                          .n_pods = l->n,
                          .has_service = true,
                          .has_configmap = true,
                          .cluster = &l->c,
                          .now_ms = l->now};
    reconcile_result r;
    areal_error e;
    assert_int_equal(reconcile_job(&in, &r, &e), AREAL_OK);
    for (int i = 0; i < r.n_actions; i++) {
        reconcile_action *a = &r.actions[i];
        if (a->kind == RECONCILE_CREATE && strcmp(a->resource, "pods") == 0) {
            assert_true(l->n < MAX_PODS);
            l->pods[l->n++] = json_deep_copy(a->obj);
        } else if (a->kind == RECONCILE_BIND) {
            for (int k = 0; k < l->n; k++)
                if (strcmp(json_string_value(
                               json_object_get(json_object_get(l->pods[k], "metadata"), "name")),
                           a->name) == 0)
                    json_object_set_new(json_object_get(l->pods[k], "spec"), "nodeName",
                                        json_string(a->node));
        } else if (a->kind == RECONCILE_DELETE) {
            for (int k = 0; k < l->n; k++)
                if (strcmp(json_string_value(
                               json_object_get(json_object_get(l->pods[k], "metadata"), "name")),
                           a->name) == 0) {
                    json_decref(l->pods[k]);
                    l->pods[k] = l->pods[--l->n];
                    break;
                }
        } else if (a->kind == RECONCILE_PATCH_JOB) {
            json_object_update_recursive(l->job, a->obj);
        }
    }
    if (r.status != NULL)
        json_object_set(l->job, "status", r.status);
    reconcile_result_free(&r);
    return json_object_get(l->job, "status");
}

static void set_all(life *l, const char *phase) {
    for (int k = 0; k < l->n; k++)
        json_object_set_new(l->pods[k], "status",
                            json_pack("{s:s,s:[{s:s,s:s}]}", "phase", phase, "conditions", "type",
                                      "Ready", "status", "True"));
}

static void reconcile_statuses_survive_the_schema(void **state) {
    (void)state;
    json_t *crd = load_crd();
    const json_t *schema = status_schema(crd);
    life l = {.now = 1795000000000LL};
    l.job = json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:i},s:{s:s,s:{s:[{s:s,s:s}]}}}", "apiVersion",
                      "areal.io/v1alpha1", "kind", "AReaLJob", "metadata", "name", "j", "namespace",
                      "ns", "uid", "u", "generation", 1, "spec", "allocation",
                      "sglang:d2t2+megatron:d2p2t2", "topology", "levels", "label",
                      "example.com/rack", "policy", "Preferred");
    areal_cluster_init(&l.c);
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        assert_true(areal_cluster_add_node(&l.c, name, 8, 0, NULL) >= 0);
        assert_int_equal(areal_cluster_set_label(&l.c, i, "example.com/rack", "r0", NULL),
                         AREAL_OK);
    }
    const json_t *st = pass(&l);
    /* what issue 11 saw pruned is there, and kept */
    const json_t *placement = json_object_get(st, "placement");
    assert_non_null(json_object_get(json_object_get(placement, "quality"), "trainer/tp"));
    const json_t *first = json_array_get(json_object_get(placement, "pods"), 0);
    assert_non_null(json_object_get(first, "role"));
    assert_non_null(json_object_get(first, "ranks"));
    assert_non_null(json_object_get(st, "defaults"));
    expect_kept(st, schema, "first placement");

    set_all(&l, "Running");
    expect_kept(pass(&l), schema, "running");
    /* a rollout server fails and is replaced */
    for (int k = 0; k < l.n; k++)
        if (strstr(
                json_string_value(json_object_get(json_object_get(l.pods[k], "metadata"), "name")),
                "rollout") != NULL) {
            json_object_set_new(l.pods[k], "status", json_pack("{s:s}", "phase", "Failed"));
            break;
        }
    st = pass(&l);
    assert_int_equal(json_integer_value(json_object_get(st, "rolloutReplacements")), 1);
    expect_kept(st, schema, "a server replaced");
    expect_kept(pass(&l), schema, "a server placed again");
    /* an image that cannot be pulled, then Failed */
    json_object_set_new(l.pods[0], "status",
                        json_pack("{s:s,s:[{s:s,s:{s:{s:s,s:s}}}]}", "phase", "Pending",
                                  "containerStatuses", "name", "worker", "state", "waiting",
                                  "reason", "ErrImagePull", "message", "not found"));
    expect_kept(pass(&l), schema, "container error");
    l.now += 3600 * 1000;
    st = pass(&l);
    assert_string_equal(json_string_value(json_object_get(st, "phase")), "Failed");
    expect_kept(st, schema, "failed");

    /* the checker sees what the schema lacks */
    json_t *bad = json_pack("{s:s,s:{s:i}}", "phase", "Running", "placement", "bogus", 1);
    char why[600] = "";
    check(bad, schema, "status", why, sizeof why);
    assert_non_null(strstr(why, "status.placement.bogus"));
    json_object_set_new(bad, "placement", json_object());
    json_object_set_new(bad, "phase", json_string("Exploded"));
    why[0] = '\0';
    check(bad, schema, "status", why, sizeof why);
    assert_non_null(strstr(why, "enum"));
    json_decref(bad);

    for (int k = 0; k < l.n; k++)
        json_decref(l.pods[k]);
    json_decref(l.job);
    areal_cluster_free(&l.c);
    json_decref(crd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reconcile_statuses_survive_the_schema),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
