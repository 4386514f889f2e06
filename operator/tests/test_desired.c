/*
 * test_desired.c - the children of an AReaLJob: allocation with the rollout
 * replica count, placement constraints from role overrides, and the exact
 * shape of the Service, ConfigMap and Pods (environment, GPUs, owner
 * references, overrides), deterministically.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "areal/operator/desired.h"
#include "areal/podenv.h"

static const char *JOB =
    "{\"apiVersion\":\"areal.io/v1alpha1\",\"kind\":\"AReaLJob\","
    "\"metadata\":{\"name\":\"gsm8k\",\"namespace\":\"rl\",\"uid\":\"u-1\"},"
    "\"spec\":{\"allocation\":\"sglang:d2t2+megatron:d2p2t2\","
    "\"image\":\"areal-worker:1.0\","
    "\"rollout\":{\"replicas\":4},"
    "\"config\":{\"rl\":{\"groupSize\":4},\"model\":{\"path\":\"/m\"}},"
    "\"roles\":[{\"name\":\"trainer\",\"env\":[{\"name\":\"X\",\"value\":\"1\"}],"
    "\"args\":[\"--selftest\"],"
    "\"nodeSelector\":{\"gpu\":\"h200\"},"
    "\"resources\":{\"requests\":{\"cpu\":\"8\"}}},"
    "{\"name\":\"rollout\",\"image\":\"sglang-worker:2\","
    "\"tolerations\":[{\"key\":\"spot\",\"operator\":\"Exists\"}]}]}}";

static json_t *load(const char *text) {
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    assert_non_null(j);
    return j;
}

static const char *env_value(const json_t *pod, const char *name) {
    const json_t *env = json_object_get(
        json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0), "env");
    size_t i;
    json_t *e;
    json_array_foreach((json_t *)env, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
            return json_string_value(json_object_get(e, "value"));
    }
    return NULL;
}

static void alloc_takes_rollout_replicas(void **state) {
    (void)state;
    json_t *job = load(JOB);
    areal_alloc a;
    areal_error e;
    assert_int_equal(desired_job_alloc(job, &a, &e), AREAL_OK);
    assert_int_equal(a.comp[0].strategy.dp, 4);
    assert_int_equal(areal_alloc_total_gpus(&a), 8 + 8);
    json_t *spec = json_object_get(job, "spec");
    json_object_set_new(spec, "allocation", json_string("sglang:d2t2+megatron:d2p2x2"));
    assert_int_equal(desired_job_alloc(job, &a, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "spec.allocation: at 25"));
    json_object_set_new(spec, "allocation", json_string("megatron:d2p2t2"));
    assert_int_equal(desired_job_alloc(job, &a, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "no inference component"));
    json_object_set_new(spec, "allocation", json_string("sglang:d2+megatron:d2"));
    json_object_set_new(json_object_get(spec, "rollout"), "replicas", json_integer(0));
    /* scaled to zero: the trainer alone (issue 11: scaling never fails a job) */
    assert_int_equal(desired_job_alloc(job, &a, &e), AREAL_OK);
    assert_int_equal(a.n_components, 1);
    assert_false(areal_backend_is_inference(a.comp[0].backend));
    assert_int_equal(areal_alloc_total_gpus(&a), 2);
    json_object_del(spec, "allocation");
    assert_int_equal(desired_job_alloc(job, &a, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "spec.allocation is required"));
    json_decref(job);
}

/* Issue 11: what the API server would refuse child by child is refused
 * first, naming the field. */
static void validate_names_the_field(void **state) {
    (void)state;
    json_t *job = load(JOB);
    areal_error e;
    assert_int_equal(desired_job_validate(job, &e), AREAL_OK);
    json_t *roles = json_object_get(json_object_get(job, "spec"), "roles");
    json_object_set_new(json_array_get(roles, 1), "name", json_string("trainr"));
    assert_int_equal(desired_job_validate(job, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "spec.roles[1].name \"trainr\" matches no role"));
    json_object_set_new(json_array_get(roles, 1), "name", json_string("rollout"));

    json_t *meta = json_object_get(job, "metadata");
    json_object_set_new(meta, "name", json_string("my.job"));
    assert_int_equal(desired_job_validate(job, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "metadata.name \"my.job\""));
    assert_non_null(strstr(e.msg, "DNS label"));
    char long_name[71];
    memset(long_name, 'a', 70);
    long_name[70] = '\0';
    json_object_set_new(meta, "name", json_string(long_name));
    assert_int_equal(desired_job_validate(job, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "too long"));
    assert_non_null(strstr(e.msg, "by 7 characters"));
    json_decref(job);

    /* 63 fits the Service, not the pods: gsm8k-like name of 57 + "-rollout-0" */
    char pod[80];
    memset(pod, 'b', 57);
    snprintf(pod + 57, sizeof pod - 57, "-rollout-0");
    assert_int_equal(desired_check_name(pod, "pod", "bbb", &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "(67 characters)"));
    assert_non_null(strstr(e.msg, "by 4 characters"));
    assert_int_equal(desired_check_name("j-trainer-0", "pod", "j", &e), AREAL_OK);
}

/* 4 nodes of 8 GPUs; nodes 2 and 3 carry gpu=h200. */
static void make_cluster(areal_cluster *c) {
    areal_cluster_init(c);
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        int idx = areal_cluster_add_node(c, name, 8, 0, NULL);
        if (i >= 2)
            assert_int_equal(areal_cluster_set_label(c, idx, "gpu", "h200", NULL), AREAL_OK);
    }
}

static void pods_carry_plan_environment_and_overrides(void **state) {
    (void)state;
    json_t *job = load(JOB);
    areal_alloc a;
    assert_int_equal(desired_job_alloc(job, &a, NULL), AREAL_OK);
    areal_job pj;
    areal_job_init(&pj, "gsm8k", &a);
    assert_int_equal(desired_job_constraints(job, &a, &pj, NULL), AREAL_OK);
    assert_int_equal(pj.resources[1].n_selectors, 1);
    assert_int_equal(pj.resources[0].n_selectors, 0);
    assert_int_equal(pj.resources[0].n_tolerations, 1);
    assert_true(pj.resources[0].tolerations[0].exists);
    areal_cluster c;
    make_cluster(&c);
    areal_plan plan;
    areal_error e;
    assert_int_equal(areal_place(&pj, &c, &plan, &e), AREAL_OK);
    desired_config cfg = {.scheduler_name = "areal-operator"};
    int checked_trainer = 0;
    for (int i = 0; i < plan.n_pods; i++) {
        const areal_pod_plan *p = &plan.pods[i];
        json_t *pod = desired_pod(job, &a, &plan, &c, i, &cfg, &e);
        assert_non_null(pod);
        json_t *again = desired_pod(job, &a, &plan, &c, i, &cfg, &e);
        assert_true(json_equal(pod, again)); /* deterministic */
        json_decref(again);
        json_t *meta = json_object_get(pod, "metadata"), *spec = json_object_get(pod, "spec");
        assert_string_equal(json_string_value(json_object_get(meta, "name")), p->name);
        assert_string_equal(json_string_value(json_object_get(meta, "namespace")), "rl");
        json_t *owner = json_array_get(json_object_get(meta, "ownerReferences"), 0);
        assert_string_equal(json_string_value(json_object_get(owner, "uid")), "u-1");
        assert_true(json_is_true(json_object_get(owner, "controller")));
        json_t *labels = json_object_get(meta, "labels");
        assert_string_equal(json_string_value(json_object_get(labels, AREAL_LABEL_JOB)), "gsm8k");
        assert_string_equal(json_string_value(json_object_get(labels, AREAL_LABEL_ROLE)),
                            plan.roles[p->role].name);
        assert_string_equal(json_string_value(json_object_get(json_object_get(meta, "annotations"),
                                                              AREAL_ANNOTATION_NODE)),
                            c.nodes[p->node].name);
        assert_string_equal(json_string_value(json_object_get(spec, "schedulerName")),
                            "areal-operator");
        assert_string_equal(json_string_value(json_object_get(spec, "subdomain")), "gsm8k");
        assert_string_equal(json_string_value(json_object_get(spec, "hostname")), p->name);
        assert_null(json_object_get(spec, "nodeName")); /* bound as a gang, later */
        char text[32];
        snprintf(text, sizeof text, "%d", p->first_rank);
        assert_string_equal(env_value(pod, AREAL_ENV_FIRST_RANK), text);
        snprintf(text, sizeof text, "%d", p->n_ranks);
        assert_string_equal(env_value(pod, AREAL_ENV_POD_RANKS), text);
        json_t *ctr = json_array_get(json_object_get(spec, "containers"), 0);
        json_t *res = json_object_get(ctr, "resources");
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(res, "limits"), "nvidia.com/gpu")),
            text);
        assert_string_equal(env_value(pod, AREAL_ENV_MASTER_ADDR), "gsm8k-trainer-0.gsm8k");
        assert_string_equal(env_value(pod, AREAL_ENV_ALLOCATION), "sglang:d4t2+megatron:d2p2t2");
        assert_string_equal(json_string_value(json_object_get(labels, AREAL_LABEL_ROLE_KIND)),
                            plan.roles[p->role].inference ? "rollout" : "trainer");
        if (!plan.roles[p->role].inference) {
            checked_trainer++;
            assert_string_equal(env_value(pod, "X"), "1");
            json_t *args = json_object_get(ctr, "args");
            assert_int_equal(json_array_size(args), 1);
            assert_string_equal(json_string_value(json_array_get(args, 0)), "--selftest");
            assert_string_equal(json_string_value(json_object_get(ctr, "image")),
                                "areal-worker:1.0");
            assert_string_equal(
                json_string_value(json_object_get(json_object_get(res, "requests"), "cpu")), "8");
            assert_string_equal(
                json_string_value(json_object_get(json_object_get(spec, "nodeSelector"), "gpu")),
                "h200");
            /* the node selector was honoured by placement */
            assert_string_equal(areal_node_label(&c.nodes[p->node], "gpu"), "h200");
            assert_string_equal(env_value(pod, AREAL_ENV_WORLD_SIZE), "8");
            /* the trainer group's rendezvous: its rank-0 pod, a port apart from the store's */
            assert_string_equal(env_value(pod, AREAL_ENV_TRAINER_ADDR), "gsm8k-trainer-0.gsm8k");
            assert_string_equal(env_value(pod, AREAL_ENV_TRAINER_PORT), "29501");
            assert_string_equal(env_value(pod, AREAL_ENV_MASTER_PORT), "29500");
            /* the trainer's last words: the kubelet's file, named to the trainer too */
            assert_string_equal(json_string_value(json_object_get(ctr, "terminationMessagePath")),
                                "/var/run/areal/termination-log");
            assert_string_equal(json_string_value(json_object_get(ctr, "terminationMessagePolicy")),
                                "File");
            assert_string_equal(env_value(pod, AREAL_ENV_TERMINATION_LOG),
                                "/var/run/areal/termination-log");
        } else {
            assert_null(env_value(pod, "X"));
            /* rollout servers' status is read live; theirs stays the kubelet default */
            assert_null(json_object_get(ctr, "terminationMessagePath"));
            assert_null(env_value(pod, AREAL_ENV_TERMINATION_LOG));
            assert_null(env_value(pod, AREAL_ENV_TRAINER_ADDR));
            assert_null(env_value(pod, AREAL_ENV_TRAINER_PORT));
            assert_int_equal(json_array_size(json_object_get(ctr, "ports")), 1);
            assert_null(json_object_get(ctr, "args"));
            assert_string_equal(json_string_value(json_object_get(ctr, "image")),
                                "sglang-worker:2");
            assert_int_equal(json_array_size(json_object_get(spec, "tolerations")), 1);
        }
        json_decref(pod);
    }
    assert_true(checked_trainer > 0);
    assert_null(desired_pod(job, &a, &plan, &c, plan.n_pods, &cfg, &e));

    json_t *svc = desired_service(job, &cfg);
    json_t *sspec = json_object_get(svc, "spec");
    assert_string_equal(json_string_value(json_object_get(sspec, "clusterIP")), "None");
    assert_true(json_is_true(json_object_get(sspec, "publishNotReadyAddresses")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(sspec, "selector"), AREAL_LABEL_JOB)),
        "gsm8k");
    json_t *ports = json_object_get(sspec, "ports");
    assert_int_equal(json_array_size(ports), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ports, 0), "port")), 29500);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ports, 1), "port")), 29501);
    json_decref(svc);

    json_t *cm = desired_configmap(job, &a, &plan, &c, &cfg);
    json_t *data = json_object_get(cm, "data");
    assert_string_equal(json_string_value(json_object_get(data, "allocation")),
                        "sglang:d4t2+megatron:d2p2t2");
    assert_string_equal(json_string_value(json_object_get(data, "config.json")),
                        "{\"model\":{\"path\":\"/m\"},\"recover\":{\"mode\":\"auto\"},"
                        "\"rl\":{\"groupSize\":4}}");
    json_t *plan_doc = json_loads(json_string_value(json_object_get(data, "plan.json")), 0, NULL);
    assert_int_equal(json_array_size(json_object_get(plan_doc, "pods")), plan.n_pods);
    json_decref(plan_doc);
    json_decref(cm);
    areal_plan_free(&plan);
    areal_cluster_free(&c);
    json_decref(job);
}

/* The trainer's container port named "trainer", or 0. */
static long trainer_container_port(const json_t *pod) {
    const json_t *ctr =
        json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
    size_t i;
    json_t *port;
    json_array_foreach(json_object_get(ctr, "ports"), i, port) {
        if (strcmp(json_string_value(json_object_get(port, "name")), "trainer") == 0)
            return (long)json_integer_value(json_object_get(port, "containerPort"));
    }
    return 0;
}

/*
 * A trainer of two ranks on nodes of one GPU: two pods of one rank each, rank
 * 0 and rank 1 of WORLD_SIZE 2, both naming the rank-0 pod and the group's
 * port (here a configured one); the master label on rank 0 only. On nodes of
 * 8 GPUs the same trainer is one pod holding both ranks.
 */
static void a_two_rank_trainer_gets_its_ranks_and_rendezvous(void **state) {
    (void)state;
    json_t *job = load("{\"metadata\":{\"name\":\"w\",\"namespace\":\"rl\",\"uid\":\"u\"},"
                       "\"spec\":{\"allocation\":\"sglang:d1+fsdp:d2\"}}");
    areal_alloc a;
    assert_int_equal(desired_job_alloc(job, &a, NULL), AREAL_OK);
    for (int gpus = 1; gpus <= 8; gpus += 7) {
        areal_job pj;
        areal_job_init(&pj, "w", &a);
        areal_cluster c;
        areal_cluster_init(&c);
        for (int i = 0; i < 3; i++) {
            char name[16];
            snprintf(name, sizeof name, "n%d", i);
            assert_true(areal_cluster_add_node(&c, name, gpus, 0, NULL) >= 0);
        }
        areal_plan plan;
        areal_error e;
        assert_int_equal(areal_place(&pj, &c, &plan, &e), AREAL_OK);
        desired_config cfg = {.master_port = 31000, .trainer_port = 31007};
        int trainer_pods = 0, ranks_seen = 0;
        for (int i = 0; i < plan.n_pods; i++) {
            const areal_role_plan *role = &plan.roles[plan.pods[i].role];
            json_t *pod = desired_pod(job, &a, &plan, &c, i, &cfg, &e);
            assert_non_null(pod);
            if (role->inference) {
                assert_null(env_value(pod, AREAL_ENV_TRAINER_PORT));
                assert_int_equal(trainer_container_port(pod), 0);
                json_decref(pod);
                continue;
            }
            const char *first = env_value(pod, AREAL_ENV_FIRST_RANK);
            const char *n = env_value(pod, AREAL_ENV_POD_RANKS);
            assert_int_equal(atoi(first), ranks_seen); /* consecutive slices from rank 0 */
            assert_int_equal(atoi(n), gpus == 1 ? 1 : 2);
            ranks_seen += atoi(n);
            assert_string_equal(env_value(pod, AREAL_ENV_WORLD_SIZE), "2");
            assert_string_equal(env_value(pod, AREAL_ENV_TRAINER_ADDR), "w-trainer-0.w");
            assert_string_equal(env_value(pod, AREAL_ENV_MASTER_ADDR), "w-trainer-0.w");
            assert_string_equal(env_value(pod, AREAL_ENV_TRAINER_PORT), "31007");
            assert_string_equal(env_value(pod, AREAL_ENV_MASTER_PORT), "31000");
            assert_int_equal(trainer_container_port(pod), 31007);
            const char *master = json_string_value(json_object_get(
                json_object_get(json_object_get(pod, "metadata"), "labels"), AREAL_LABEL_MASTER));
            if (atoi(first) == 0)
                assert_string_equal(master, "true");
            else
                assert_null(master);
            trainer_pods++;
            json_decref(pod);
        }
        assert_int_equal(ranks_seen, 2);
        assert_int_equal(trainer_pods, gpus == 1 ? 2 : 1);
        json_t *svc = desired_service(job, &cfg);
        json_t *ports = json_object_get(json_object_get(svc, "spec"), "ports");
        assert_int_equal(json_integer_value(json_object_get(json_array_get(ports, 1), "port")),
                         31007);
        json_decref(svc);
        areal_plan_free(&plan);
        areal_cluster_free(&c);
    }
    json_decref(job);
}

/* The mounts of `pod` at `path`: how many, and the volume of the last one. */
static int mounts_at(const json_t *pod, const char *path, const char **volume) {
    const json_t *ctr =
        json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
    int n = 0;
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(ctr, "volumeMounts"), i, m) {
        if (strcmp(json_string_value(json_object_get(m, "mountPath")), path) == 0) {
            n++;
            *volume = json_string_value(json_object_get(m, "name"));
        }
    }
    return n;
}

static const json_t *volume_named(const json_t *pod, const char *name) {
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "volumes"), i, v) {
        if (strcmp(json_string_value(json_object_get(v, "name")), name) == 0)
            return v;
    }
    return NULL;
}

/* Every GPU pod gets a memory-backed /dev/shm of 1 GiB per GPU; a role that
 * mounts its own there keeps only its own. */
static void gpu_pods_get_a_memory_backed_dev_shm(void **state) {
    (void)state;
    json_t *job = load(JOB);
    json_t *trainer = json_array_get(json_object_get(json_object_get(job, "spec"), "roles"), 0);
    json_object_set_new(trainer, "volumes",
                        load("[{\"name\":\"big-shm\",\"emptyDir\":{\"medium\":\"Memory\","
                             "\"sizeLimit\":\"64Gi\"}}]"));
    json_object_set_new(trainer, "volumeMounts",
                        load("[{\"name\":\"big-shm\",\"mountPath\":\"/dev/shm\"}]"));
    areal_alloc a;
    assert_int_equal(desired_job_alloc(job, &a, NULL), AREAL_OK);
    areal_job pj;
    areal_job_init(&pj, "gsm8k", &a);
    assert_int_equal(desired_job_constraints(job, &a, &pj, NULL), AREAL_OK);
    areal_cluster c;
    make_cluster(&c);
    areal_plan plan;
    areal_error e;
    assert_int_equal(areal_place(&pj, &c, &plan, &e), AREAL_OK);
    desired_config cfg = {0};
    int rollouts = 0, trainers = 0;
    for (int i = 0; i < plan.n_pods; i++) {
        json_t *pod = desired_pod(job, &a, &plan, &c, i, &cfg, &e);
        assert_non_null(pod);
        const char *vol = NULL;
        assert_int_equal(mounts_at(pod, "/dev/shm", &vol), 1);
        if (plan.roles[plan.pods[i].role].inference) {
            rollouts++;
            assert_string_equal(vol, "areal-shm");
            const json_t *dir = json_object_get(volume_named(pod, "areal-shm"), "emptyDir");
            assert_string_equal(json_string_value(json_object_get(dir, "medium")), "Memory");
            char want[16];
            snprintf(want, sizeof want, "%dGi", plan.pods[i].n_ranks * DESIRED_SHM_GIB_PER_GPU);
            assert_string_equal(json_string_value(json_object_get(dir, "sizeLimit")), want);
        } else {
            trainers++;
            assert_string_equal(vol, "big-shm");
            assert_null(volume_named(pod, "areal-shm"));
            assert_non_null(volume_named(pod, "big-shm"));
        }
        json_decref(pod);
    }
    assert_true(rollouts > 0 && trainers > 0);
    areal_plan_free(&plan);
    areal_cluster_free(&c);
    json_decref(job);
}

/* The trainer's pods ask for 8 CPUs each (spec.roles[].resources.requests): a
 * plan on nodes with less free CPU than that is refused, naming the field;
 * with room it fits (the planner itself counts only GPUs here). */
/* recover.mode defaults to auto (a replanned gang resumes); the user's mode and
 * other recover keys are kept. */
static void trainer_config_recovers_by_default(void **state) {
    (void)state;
    const struct {
        const char *spec, *want;
    } cases[] = {
        {NULL, "{\"recover\":{\"mode\":\"auto\"}}"},
        {"{\"recover\":{\"freq_steps\":5}}", "{\"recover\":{\"freq_steps\":5,\"mode\":\"auto\"}}"},
        {"{\"recover\":{\"mode\":\"disabled\"}}", "{\"recover\":{\"mode\":\"disabled\"}}"},
        {"{\"rl\":{\"totalSteps\":3}}",
         "{\"recover\":{\"mode\":\"auto\"},\"rl\":{\"totalSteps\":3}}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *in = cases[i].spec ? json_loads(cases[i].spec, 0, NULL) : NULL;
        json_t *out = desired_trainer_config(in);
        char *text = json_dumps(out, JSON_SORT_KEYS | JSON_COMPACT);
        assert_string_equal(text, cases[i].want);
        if (in != NULL) /* the spec itself is not changed */
            assert_string_equal(
                json_string_value(json_object_get(json_object_get(in, "recover"), "mode"))
                    ?: "none",
                i == 2 ? "disabled" : "none");
        free(text);
        json_decref(out);
        json_decref(in);
    }
}

static void plans_are_checked_for_cpu_requests(void **state) {
    (void)state;
    json_t *job = load(JOB);
    areal_alloc a;
    assert_int_equal(desired_job_alloc(job, &a, NULL), AREAL_OK);
    areal_job pj;
    areal_job_init(&pj, "gsm8k", &a);
    assert_int_equal(desired_job_constraints(job, &a, &pj, NULL), AREAL_OK);
    areal_cluster c;
    make_cluster(&c);
    areal_plan plan;
    areal_error e;
    assert_int_equal(areal_place(&pj, &c, &plan, &e), AREAL_OK);
    desired_config cfg = {0};
    for (int i = 0; i < c.n_nodes; i++) {
        c.nodes[i].cpu_milli = 64000;
        c.nodes[i].cpu_used_milli = 0;
    }
    assert_int_equal(desired_plan_fits(job, &a, &plan, &c, &cfg, &e), AREAL_OK);
    for (int i = 0; i < c.n_nodes; i++)
        c.nodes[i].cpu_used_milli = 64000 - 7000; /* 7 CPUs free: less than one trainer pod */
    assert_int_equal(desired_plan_fits(job, &a, &plan, &c, &cfg, &e), AREAL_ENOFIT);
    assert_non_null(strstr(e.msg, "requests.cpu"));
    assert_non_null(strstr(e.msg, "7000m CPU free"));
    areal_plan_free(&plan);
    areal_cluster_free(&c);
    json_decref(job);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(alloc_takes_rollout_replicas),
        cmocka_unit_test(validate_names_the_field),
        cmocka_unit_test(pods_carry_plan_environment_and_overrides),
        cmocka_unit_test(a_two_rank_trainer_gets_its_ranks_and_rendezvous),
        cmocka_unit_test(gpu_pods_get_a_memory_backed_dev_shm),
        cmocka_unit_test(plans_are_checked_for_cpu_requests),
        cmocka_unit_test(trainer_config_recovers_by_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
