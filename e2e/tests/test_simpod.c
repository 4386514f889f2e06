/* test_simpod.c - the node simulator's pure parts: pod IPs, hosts files,
 * image map, container env/argv, status patches (areal/simpod.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "areal/simpod.h"

static void ipalloc_round_robin_and_bounds(void **state) {
    (void)state;
    sim_ipalloc a;
    areal_error e;
    assert_int_equal(sim_ipalloc_init(&a, "127.20.0.0/30", &e), AREAL_OK);
    char ip1[SIM_IP_MAX], ip2[SIM_IP_MAX], ip3[SIM_IP_MAX];
    /* a /30 has two usable addresses: .1 and .2 */
    assert_int_equal(sim_ipalloc_get(&a, ip1, &e), AREAL_OK);
    assert_string_equal(ip1, "127.20.0.1");
    assert_int_equal(sim_ipalloc_get(&a, ip2, &e), AREAL_OK);
    assert_string_equal(ip2, "127.20.0.2");
    assert_int_equal(sim_ipalloc_get(&a, ip3, &e), AREAL_ENOFIT);
    assert_non_null(strstr(e.msg, "wider pod CIDR"));
    assert_int_equal(sim_ipalloc_put(&a, ip1, &e), AREAL_OK);
    assert_int_equal(sim_ipalloc_put(&a, ip1, &e), AREAL_EINVAL); /* twice */
    assert_int_equal(sim_ipalloc_put(&a, "10.0.0.1", &e), AREAL_EINVAL);
    assert_int_equal(sim_ipalloc_get(&a, ip3, &e), AREAL_OK);
    assert_string_equal(ip3, "127.20.0.1");

    /* round robin: a freed address is reused last */
    assert_int_equal(sim_ipalloc_init(&a, "127.21.5.9/16", &e), AREAL_OK); /* host bits dropped */
    assert_int_equal(sim_ipalloc_get(&a, ip1, &e), AREAL_OK);
    assert_string_equal(ip1, "127.21.0.1");
    assert_int_equal(sim_ipalloc_put(&a, ip1, &e), AREAL_OK);
    assert_int_equal(sim_ipalloc_get(&a, ip2, &e), AREAL_OK);
    assert_string_equal(ip2, "127.21.0.2");
    for (int i = 0; i < 300; i++)
        assert_int_equal(sim_ipalloc_get(&a, ip3, &e), AREAL_OK);
    assert_string_equal(ip3, "127.21.1.46"); /* offsets 3..302: 302 = 1*256 + 46 */
    assert_int_equal(a.used_count, 301);

    const char *bad[] = {"127.0.0.0", "127.0.0.0/8", "127.0.0.0/31", "x/16", "127.0.0.0/1x", NULL};
    for (int i = 0; bad[i]; i++) {
        assert_int_equal(sim_ipalloc_init(&a, bad[i], &e), AREAL_EINVAL);
        assert_non_null(strstr(e.msg, bad[i]));
    }
}

static void hosts_file_has_self_and_dns_records(void **state) {
    (void)state;
    sim_host_entry self = {"127.20.0.3", "job-trainer-0", "job", "ns1"};
    sim_host_entry peers[] = {
        {"127.20.0.3", "job-trainer-0", "job", "ns1"}, /* self again: skipped */
        {"127.20.0.4", "job-rollout-0", "job", "ns1"},
        {"127.20.0.5", "other-0", "other", "ns2"},
        {"127.20.0.6", "plain", NULL, "ns1"}, /* no subdomain: no record */
    };
    char buf[4096];
    size_t len = 0;
    areal_error e;
    assert_int_equal(sim_hosts_render(&self, peers, 4, NULL, buf, sizeof buf, &len, &e), AREAL_OK);
    assert_int_equal(len, strlen(buf));
    assert_true(strncmp(buf, "# Kubernetes-managed hosts file", 31) == 0);
    assert_non_null(strstr(buf, "127.0.0.1\tlocalhost\n"));
    /* the kubelet's own line, then the pod's own DNS record with short forms */
    assert_non_null(
        strstr(buf, "127.20.0.3\tjob-trainer-0.job.ns1.svc.cluster.local\tjob-trainer-0\n"));
    assert_non_null(strstr(buf, "\tjob-trainer-0.job\n"));
    assert_non_null(
        strstr(buf, "127.20.0.4\tjob-rollout-0.job.ns1.svc.cluster.local\t"
                    "job-rollout-0.job.ns1.svc\tjob-rollout-0.job.ns1\tjob-rollout-0.job\n"));
    /* another namespace: no short form that the search path would not make */
    assert_non_null(strstr(buf, "127.20.0.5\tother-0.other.ns2.svc.cluster.local\t"
                                "other-0.other.ns2.svc\tother-0.other.ns2\n"));
    assert_null(strstr(buf, "plain"));
    /* self is listed once as a record */
    const char *first = strstr(buf, "job-trainer-0.job.ns1.svc\t");
    assert_non_null(first);
    assert_null(strstr(first + 1, "job-trainer-0.job.ns1.svc\t"));

    assert_int_equal(sim_hosts_render(&self, peers, 4, "example.org", buf, sizeof buf, &len, &e),
                     AREAL_OK);
    assert_non_null(strstr(buf, "job-rollout-0.job.ns1.svc.example.org"));
    assert_int_equal(sim_hosts_render(&self, peers, 4, NULL, buf, 200, &len, &e), AREAL_ERANGE);
    sim_host_entry noip = {NULL, "x", "job", "ns1"};
    assert_int_equal(sim_hosts_render(&noip, NULL, 0, NULL, buf, sizeof buf, &len, &e),
                     AREAL_EINVAL);
    sim_host_entry lone = {"127.20.0.9", "lone", NULL, "ns1"};
    assert_int_equal(sim_hosts_render(&lone, NULL, 0, NULL, buf, sizeof buf, &len, &e), AREAL_OK);
    assert_non_null(strstr(buf, "127.20.0.9\tlone\n"));
}

static void image_map_matches_repository_exactly(void **state) {
    (void)state;
    sim_image_map m = {0};
    areal_error e;
    assert_int_equal(sim_image_add(&m, "areal/worker=/opt/bin", &e), AREAL_OK);
    assert_int_equal(sim_image_add(&m, "localhost:5000/w=/w", &e), AREAL_OK);
    assert_string_equal(sim_image_dir(&m, "areal/worker"), "/opt/bin");
    assert_string_equal(sim_image_dir(&m, "areal/worker:latest"), "/opt/bin");
    assert_string_equal(sim_image_dir(&m, "areal/worker@sha256:abc"), "/opt/bin");
    assert_string_equal(sim_image_dir(&m, "localhost:5000/w:1"), "/w");
    assert_null(sim_image_dir(&m, "areal/worker-x:1"));
    assert_null(sim_image_dir(&m, "areal/work"));
    assert_null(sim_image_dir(&m, NULL));
    assert_int_equal(sim_image_add(&m, "noequals", &e), AREAL_EINVAL);
    assert_int_equal(sim_image_add(&m, "=dir", &e), AREAL_EINVAL);
    assert_int_equal(sim_image_add(&m, "repo=", &e), AREAL_EINVAL);
    for (int i = m.n; i < SIM_IMAGES_MAX; i++)
        assert_int_equal(sim_image_add(&m, "r=d", &e), AREAL_OK);
    assert_int_equal(sim_image_add(&m, "r=d", &e), AREAL_ERANGE);
}

static const char *env_of(const sim_strv *v, const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i < v->n; i++)
        if (strncmp(v->v[i], name, n) == 0 && v->v[i][n] == '=')
            return v->v[i] + n + 1;
    return NULL;
}

static const char POD[] =
    "{\"metadata\":{\"name\":\"j-trainer-0\",\"namespace\":\"rl\",\"uid\":\"u-7\","
    "\"labels\":{\"app\":\"x\"},\"annotations\":{\"note\":\"hi\"}},"
    "\"spec\":{\"hostname\":\"j-trainer-0\",\"nodeName\":\"gpu-node-1\","
    "\"containers\":[{\"name\":\"worker\",\"command\":[\"areal-worker\"],"
    "\"args\":[\"--rank-of\",\"$(POD_NAME)\",\"$$(POD_NAME)\",\"$(NOPE)\"],"
    "\"env\":[{\"name\":\"A\",\"value\":\"1\"},"
    "{\"name\":\"POD_NAME\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"metadata.name\"}}},"
    "{\"name\":\"POD_IP\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"status.podIP\"}}},"
    "{\"name\":\"HOST_IP\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"status.hostIP\"}}},"
    "{\"name\":\"NS\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"metadata.namespace\"}}},"
    "{\"name\":\"NODE\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"spec.nodeName\"}}},"
    "{\"name\":\"APP\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"metadata.labels['app']\"}}},"
    "{\"name\":\"NOTE\",\"valueFrom\":{\"fieldRef\":"
    "{\"fieldPath\":\"metadata.annotations['note']\"}}},"
    "{\"name\":\"ADDR\",\"value\":\"$(POD_IP):29500\"},"
    "{\"name\":\"A\",\"value\":\"2\"}]}]}}";

static void env_resolves_downward_api_and_expansion(void **state) {
    (void)state;
    json_t *pod = json_loads(POD, 0, NULL);
    assert_non_null(pod);
    json_t *c = json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
    sim_env_ctx ctx = {.pod_ip = "127.20.0.7", .host_ip = "10.200.0.2", .image_dir = "/opt/areal"};
    sim_strv argv = {0}, envp = {0};
    areal_error e;
    assert_int_equal(sim_env_build(pod, c, &ctx, &argv, &envp, &e), AREAL_OK);
    assert_string_equal(env_of(&envp, "PATH"), "/opt/areal:/usr/local/sbin:/usr/local/bin:"
                                               "/usr/sbin:/usr/bin:/sbin:/bin");
    assert_string_equal(env_of(&envp, "HOSTNAME"), "j-trainer-0");
    assert_string_equal(env_of(&envp, "POD_NAME"), "j-trainer-0");
    assert_string_equal(env_of(&envp, "POD_IP"), "127.20.0.7");
    assert_string_equal(env_of(&envp, "HOST_IP"), "10.200.0.2");
    assert_string_equal(env_of(&envp, "NS"), "rl");
    assert_string_equal(env_of(&envp, "NODE"), "gpu-node-1");
    assert_string_equal(env_of(&envp, "APP"), "x");
    assert_string_equal(env_of(&envp, "NOTE"), "hi");
    assert_string_equal(env_of(&envp, "ADDR"), "127.20.0.7:29500");
    assert_string_equal(env_of(&envp, "A"), "2"); /* the later one wins, once */
    int count_a = 0;
    for (size_t i = 0; i < envp.n; i++)
        count_a += strncmp(envp.v[i], "A=", 2) == 0;
    assert_int_equal(count_a, 1);
    assert_null(envp.v[envp.n]);
    assert_int_equal(argv.n, 5);
    assert_string_equal(argv.v[0], "areal-worker");
    assert_string_equal(argv.v[2], "j-trainer-0");
    assert_string_equal(argv.v[3], "$(POD_NAME)"); /* $$ escapes */
    assert_string_equal(argv.v[4], "$(NOPE)");     /* undefined: kept */
    assert_null(argv.v[argv.n]);

    /* unsupported sources are a config error naming the variable */
    json_t *env = json_object_get(c, "env");
    json_array_append_new(env, json_pack("{s:s,s:{s:{s:s,s:s}}}", "name", "SECRET", "valueFrom",
                                         "secretKeyRef", "name", "s", "key", "k"));
    assert_int_equal(sim_env_build(pod, c, &ctx, &argv, &envp, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "SECRET"));
    assert_int_equal(argv.n, 0);
    assert_int_equal(envp.n, 0);
    json_array_remove(env, json_array_size(env) - 1);
    json_object_del(c, "command");
    json_object_del(c, "args");
    assert_int_equal(sim_env_build(pod, c, &ctx, &argv, &envp, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "no command"));
    sim_strv_free(&argv);
    sim_strv_free(&envp);
    json_decref(pod);
}

/* An image's ENTRYPOINT runs when the container has no command (args after
 * it); a command replaces it. Service variables come before the container's
 * env, which overrides them. */
static void entrypoint_and_service_env(void **state) {
    (void)state;
    sim_image_map m = {0};
    areal_error e;
    assert_int_equal(sim_image_set_entrypoint(&m, "areal/operator=areal-operator", &e),
                     AREAL_EINVAL); /* not mapped yet */
    assert_non_null(strstr(e.msg, "--image"));
    assert_int_equal(sim_image_add(&m, "areal/operator=/opt/bin", &e), AREAL_OK);
    assert_null(sim_image_entrypoint(&m, "areal/operator:1"));
    assert_int_equal(sim_image_set_entrypoint(&m, "areal/operator", &e), AREAL_EINVAL);
    assert_int_equal(sim_image_set_entrypoint(&m, "areal/operator=areal-operator", &e), AREAL_OK);
    assert_string_equal(sim_image_entrypoint(&m, "areal/operator:1"), "areal-operator");
    assert_null(sim_image_entrypoint(&m, "areal/worker:1"));

    json_t *pod = json_loads("{\"metadata\":{\"name\":\"op-1\",\"namespace\":\"s\"},"
                             "\"spec\":{\"containers\":[{\"name\":\"operator\","
                             "\"args\":[\"--qps=5\"],\"env\":[{\"name\":"
                             "\"KUBERNETES_SERVICE_PORT\",\"value\":\"9\"}]}]}}",
                             0, NULL);
    assert_non_null(pod);
    json_t *c = json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
    const char *svc[] = {"KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT=16443",
                         NULL};
    sim_env_ctx ctx = {.pod_ip = "127.20.0.8",
                       .image_dir = "/opt/bin",
                       .entrypoint = sim_image_entrypoint(&m, "areal/operator:1"),
                       .service_env = svc};
    sim_strv argv = {0}, envp = {0};
    assert_int_equal(sim_env_build(pod, c, &ctx, &argv, &envp, &e), AREAL_OK);
    assert_int_equal(argv.n, 2);
    assert_string_equal(argv.v[0], "areal-operator");
    assert_string_equal(argv.v[1], "--qps=5");
    assert_string_equal(env_of(&envp, "KUBERNETES_SERVICE_HOST"), "127.0.0.1");
    assert_string_equal(env_of(&envp, "KUBERNETES_SERVICE_PORT"), "9"); /* the pod's wins */
    /* a command replaces the entrypoint */
    json_object_set_new(c, "command", json_pack("[s]", "other"));
    assert_int_equal(sim_env_build(pod, c, &ctx, &argv, &envp, &e), AREAL_OK);
    assert_string_equal(argv.v[0], "other");
    assert_int_equal(argv.n, 2);
    const char *bad[] = {"NOEQUALS", NULL};
    ctx.service_env = bad;
    assert_int_equal(sim_env_build(pod, c, &ctx, &argv, &envp, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "NOEQUALS"));
    sim_strv_free(&argv);
    sim_strv_free(&envp);
    json_decref(pod);
}

static const char *jstr(json_t *root, const char *a, const char *b, const char *c) {
    json_t *v = json_object_get(root, a);
    if (b)
        v = json_object_get(v, b);
    if (c)
        v = json_object_get(v, c);
    return json_string_value(v);
}

static const char *cond(json_t *status, const char *type) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(status, "conditions"), i, c) {
        if (strcmp(json_string_value(json_object_get(c, "type")), type) == 0)
            return json_string_value(json_object_get(c, "status"));
    }
    return NULL;
}

static void status_patch_for_each_state(void **state) {
    (void)state;
    sim_report r = {.phase = "Running",
                    .pod_ip = "127.20.0.7",
                    .host_ip = "10.200.0.1",
                    .start_time = "2026-01-01T00:00:00Z",
                    .container = "worker",
                    .image = "areal/worker:latest",
                    .state = SIM_CSTATE_RUNNING,
                    .started_at = "2026-01-01T00:00:01Z",
                    .container_id = "sim://42"};
    json_t *p = sim_status_patch(&r, "2026-01-01T00:00:02Z");
    json_t *st = json_object_get(p, "status");
    assert_string_equal(jstr(st, "phase", NULL, NULL), "Running");
    assert_string_equal(jstr(st, "podIP", NULL, NULL), "127.20.0.7");
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(st, "podIPs"), 0), "ip")),
        "127.20.0.7");
    assert_string_equal(jstr(st, "hostIP", NULL, NULL), "10.200.0.1");
    assert_string_equal(cond(st, "Ready"), "True");
    assert_string_equal(cond(st, "ContainersReady"), "True");
    assert_string_equal(cond(st, "PodScheduled"), "True");
    assert_string_equal(cond(st, "Initialized"), "True");
    json_t *cs = json_array_get(json_object_get(st, "containerStatuses"), 0);
    assert_true(json_is_true(json_object_get(cs, "ready")));
    assert_string_equal(jstr(cs, "state", "running", "startedAt"), "2026-01-01T00:00:01Z");
    json_decref(p);

    r.phase = "Failed";
    r.state = SIM_CSTATE_TERMINATED;
    r.exit_code = 137;
    r.signal = 9;
    r.finished_at = "2026-01-01T00:00:09Z";
    p = sim_status_patch(&r, "2026-01-01T00:00:10Z");
    st = json_object_get(p, "status");
    assert_string_equal(jstr(st, "phase", NULL, NULL), "Failed");
    assert_string_equal(cond(st, "Ready"), "False");
    cs = json_array_get(json_object_get(st, "containerStatuses"), 0);
    json_t *t = json_object_get(json_object_get(cs, "state"), "terminated");
    assert_int_equal(json_integer_value(json_object_get(t, "exitCode")), 137);
    assert_int_equal(json_integer_value(json_object_get(t, "signal")), 9);
    assert_string_equal(jstr(t, "reason", NULL, NULL), "Error");
    assert_false(json_is_true(json_object_get(cs, "ready")));
    json_decref(p);

    r.exit_code = 0;
    r.signal = 0;
    r.phase = "Succeeded";
    p = sim_status_patch(&r, "2026-01-01T00:00:10Z");
    assert_string_equal(
        jstr(json_object_get(
                 json_object_get(
                     json_array_get(
                         json_object_get(json_object_get(p, "status"), "containerStatuses"), 0),
                     "state"),
                 "terminated"),
             "reason", NULL, NULL),
        "Completed");
    json_decref(p);

    sim_report w = {.phase = "Pending",
                    .container = "worker",
                    .image = "nope:1",
                    .state = SIM_CSTATE_WAITING,
                    .reason = "ErrImagePull",
                    .message = "not mapped"};
    p = sim_status_patch(&w, "2026-01-01T00:00:00Z");
    st = json_object_get(p, "status");
    assert_null(json_object_get(st, "podIP"));
    assert_string_equal(cond(st, "PodReadyToStartContainers"), "False");
    cs = json_array_get(json_object_get(st, "containerStatuses"), 0);
    assert_string_equal(jstr(cs, "state", "waiting", "reason"), "ErrImagePull");
    assert_string_equal(jstr(cs, "state", "waiting", "message"), "not mapped");
    json_decref(p);

    char buf[32];
    sim_rfc3339(0, buf, sizeof buf);
    assert_string_equal(buf, "1970-01-01T00:00:00Z");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ipalloc_round_robin_and_bounds),
        cmocka_unit_test(hosts_file_has_self_and_dns_records),
        cmocka_unit_test(image_map_matches_repository_exactly),
        cmocka_unit_test(env_resolves_downward_api_and_expansion),
        cmocka_unit_test(entrypoint_and_service_env),
        cmocka_unit_test(status_patch_for_each_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
