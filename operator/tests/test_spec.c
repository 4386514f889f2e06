/*
 * test_spec.c - the typed AReaLJob spec: defaults, the role split, and every
 * refusal naming the field and the fix (a misspelt role, a bad backoff, a
 * Required topology level on a label no node carries), and the reconcile
 * surfacing them as conditions and status.defaults.
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
#include "areal/operator/spec.h"

static json_t *job_with(const char *spec_json) {
    json_t *spec = json_loads(spec_json, 0, NULL);
    assert_non_null(spec);
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:i},s:o}", "apiVersion", "areal.io/v1alpha1", "kind",
                     "AReaLJob", "metadata", "name", "j", "namespace", "ns", "uid", "u1",
                     "generation", 3, "spec", spec);
}

static void defaults_and_the_split(void **state) {
    (void)state;
    json_t *job = job_with("{\"allocation\":\"sglang:d4t2+megatron:d2p2t2\"}");
    job_spec s;
    assert_int_equal(job_spec_parse(job, &s, NULL), AREAL_OK);
    assert_true(s.valid);
    assert_int_equal(s.generation, 3);
    assert_int_equal(s.max_restarts, SPEC_DEFAULT_MAX_RESTARTS);
    assert_int_equal(s.backoff_initial_s, SPEC_DEFAULT_BACKOFF_S);
    assert_int_equal(s.backoff_max_s, SPEC_DEFAULT_BACKOFF_MAX_S);
    assert_int_equal(s.node_lost_s, SPEC_DEFAULT_NODE_LOST_S);
    assert_int_equal(s.container_error_s, SPEC_DEFAULT_CONTAINER_ERROR_S);
    assert_int_equal(s.restart_scope, SPEC_RESTART_ROLE);
    /* one separate inference component: its replicas are servers of their own */
    assert_true(s.split);
    assert_int_equal(s.rollout_replicas, 4);
    assert_string_equal(s.rollout_role, "rollout");
    assert_int_equal(s.trainer.n_components, 1);
    assert_string_equal(s.trainer.comp[0].name, "trainer");
    assert_int_equal(s.server.n_components, 1);
    assert_int_equal(s.server.comp[0].strategy.dp, 1);
    assert_int_equal(s.server.comp[0].strategy.tp, 2);
    assert_string_equal(s.master_pod, "j-trainer-0");
    /* every pod is told one server's shape: scaling changes no pod */
    assert_non_null(strstr(s.canonical, "sglang:d1t2"));
    /* the backoff doubles up to its cap */
    assert_int_equal(job_spec_backoff_ms(&s, 1), 10000);
    assert_int_equal(job_spec_backoff_ms(&s, 3), 40000);
    assert_int_equal(job_spec_backoff_ms(&s, 30), 300000);
    json_t *d = job_spec_defaults_json(&s);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(d, "failurePolicy"), "maxRestarts")), 3);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(d, "rollout"), "replicas")),
                     4);
    json_decref(d);
    json_decref(job);

    /* spec.rollout.replicas is the count of servers, 0 included */
    job = job_with("{\"allocation\":\"sglang:d4t2+megatron:d2p2t2\",\"rollout\":{\"replicas\":0}}");
    assert_int_equal(job_spec_parse(job, &s, NULL), AREAL_OK);
    assert_true(s.valid && s.split);
    assert_int_equal(s.rollout_replicas, 0);
    json_decref(job);

    /* a colocated rollout cannot come or go alone: one gang, as before */
    job = job_with("{\"allocation\":\"sglang:d4t2|megatron[actor]:d2p2t2\"}");
    assert_int_equal(job_spec_parse(job, &s, NULL), AREAL_OK);
    if (!s.valid)
        fail_msg("%s", s.error);
    assert_false(s.split);
    assert_int_equal(s.rollout_comp, -1);
    assert_int_equal(s.trainer.n_components, 2); /* the whole string is the gang */
    json_decref(job);
}

static void refusals_name_the_field_and_the_fix(void **state) {
    (void)state;
    struct {
        const char *spec, *reason, *field;
    } cases[] = {
        {"{\"allocation\":\"sglang:d2+megatron:d1t2\",\"roles\":[{\"name\":\"trainr\"}]}",
         "InvalidSpec",
         "spec.roles[0].name \"trainr\" matches no role of spec.allocation "
         "(rollout, trainer)"},
        {"{\"allocation\":\"fsdp:d4p2\"}", "InvalidAllocation", "spec.allocation"},
        {"{\"allocation\":\"sglang:d2+megatron:d1t2\",\"failurePolicy\":{\"backoff\":"
         "{\"initialSeconds\":60,\"maxSeconds\":10}}}",
         "InvalidSpec", "spec.failurePolicy.backoff.initialSeconds (60) must not exceed"},
        {"{\"allocation\":\"sglang:d2+megatron:d1t2\",\"failurePolicy\":{\"maxRestarts\":-1}}",
         "InvalidSpec", "spec.failurePolicy.maxRestarts must be a whole number from 0"},
        {"{\"allocation\":\"sglang:d2+megatron:d1t2\",\"failurePolicy\":{\"restartScope\":"
         "\"Pod\"}}",
         "InvalidSpec", "spec.failurePolicy.restartScope \"Pod\" must be Role"},
        {"{\"allocation\":\"sglang:d2+megatron:d1t2\",\"topology\":{\"levels\":[{\"label\":"
         "\"rack\",\"policy\":\"Must\"}]}}",
         "InvalidSpec", "spec.topology.levels[0].policy \"Must\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *job = job_with(cases[i].spec);
        job_spec s;
        assert_int_equal(job_spec_parse(job, &s, NULL), AREAL_OK);
        if (s.valid || strstr(s.error, cases[i].field) == NULL)
            fail_msg("case %zu: valid %d, error \"%s\"", i, s.valid, s.error);
        assert_string_equal(s.reason, cases[i].reason);
        json_decref(job);
    }
}

/* A Required level on a label no node carries: Pending with a condition that
 * names the field, not a silent placement; labelling a node places the job. */
static void a_required_label_no_node_carries_is_a_condition(void **state) {
    (void)state;
    json_t *job = job_with("{\"allocation\":\"sglang:d2+megatron:d1t2\",\"topology\":{\"levels\":"
                           "[{\"label\":\"example.com/rack\",\"policy\":\"Required\"}]}}");
    areal_cluster c;
    areal_cluster_init(&c);
    for (int i = 0; i < 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        assert_true(areal_cluster_add_node(&c, name, 8, 0, NULL) >= 0);
    }
    reconcile_input in = {.job = job, .cluster = &c, .now_ms = 1795000000000LL};
    reconcile_result r;
    areal_error e;
    assert_int_equal(reconcile_job(&in, &r, &e), AREAL_OK);
    for (int i = 0; i < r.n_actions; i++)
        assert_int_not_equal(r.actions[i].kind, RECONCILE_BIND);
    assert_string_equal(json_string_value(json_object_get(r.status, "phase")), "Pending");
    const json_t *cond = json_array_get(json_object_get(r.status, "conditions"), 0);
    assert_string_equal(json_string_value(json_object_get(cond, "reason")), "TopologyLabelMissing");
    const char *msg = json_string_value(json_object_get(cond, "message"));
    assert_non_null(strstr(msg, "spec.topology.levels[0].label \"example.com/rack\""));
    assert_non_null(strstr(msg, "Preferred"));
    /* the effective defaults are in status */
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_object_get(r.status, "defaults"), "failurePolicy"),
                         "nodeLostSeconds")),
                     30);
    reconcile_result_free(&r);

    for (int i = 0; i < 2; i++)
        assert_int_equal(areal_cluster_set_label(&c, i, "example.com/rack", "r1", NULL), AREAL_OK);
    assert_int_equal(reconcile_job(&in, &r, &e), AREAL_OK);
    int binds = 0;
    for (int i = 0; i < r.n_actions; i++)
        binds += r.actions[i].kind == RECONCILE_BIND;
    assert_int_equal(binds, 3); /* the trainer and its two servers */
    reconcile_result_free(&r);
    areal_cluster_free(&c);
    json_decref(job);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_and_the_split),
        cmocka_unit_test(refusals_name_the_field_and_the_fix),
        cmocka_unit_test(a_required_label_no_node_carries_is_a_condition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
