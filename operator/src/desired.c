/*
 * desired.c - the children of an AReaLJob (see areal/operator/desired.h).
 *
 * Role overrides (spec.roles[]) apply in two layers: first an entry named
 * after the role's kind ("trainer" or "rollout"), then an entry with the
 * role's own name, so a specific override wins. Lists (env, volumes,
 * tolerations) from both layers are concatenated, the specific one last
 * (container args are replaced, the specific layer winning), and
 * the operator's own environment comes after them: a user cannot override
 * RANK-defining variables by accident.
 */
#include "areal/operator/desired.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/operator/cached.h"
#include "areal/podenv.h"

static const char *job_name(const json_t *job) {
    return json_string_value(json_object_get(json_object_get(job, "metadata"), "name"));
}

static const char *job_ns(const json_t *job) {
    const char *ns =
        json_string_value(json_object_get(json_object_get(job, "metadata"), "namespace"));
    return ns ? ns : "default";
}

static const json_t *spec_of(const json_t *job) {
    return json_object_get(job, "spec");
}

static desired_config defaults(const desired_config *cfg) {
    desired_config c = cfg ? *cfg : (desired_config){0};
    if (c.scheduler_name == NULL)
        c.scheduler_name = "areal-operator";
    if (c.default_image == NULL)
        c.default_image = "areal-worker:latest";
    if (c.master_port <= 0)
        c.master_port = AREAL_DEFAULT_MASTER_PORT;
    if (c.trainer_port <= 0)
        c.trainer_port = c.master_port + 1;
    return c;
}

int desired_job_alloc(const json_t *job, areal_alloc *out, areal_error *err) {
    const json_t *spec = spec_of(job);
    const char *text = json_string_value(json_object_get(spec, "allocation"));
    if (text == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "spec.allocation is required, e.g. sglang:d4t2+megatron:d2p2t2");
    areal_error perr;
    if (areal_alloc_parse(text, out, &perr) != AREAL_OK)
        return areal_error_set(err, AREAL_EINVAL, perr.pos, "spec.allocation: %s", perr.msg);
    const json_t *replicas = json_object_get(json_object_get(spec, "rollout"), "replicas");
    if (replicas == NULL || json_is_null(replicas))
        return AREAL_OK;
    if (!json_is_integer(replicas) || json_integer_value(replicas) < 0 ||
        json_integer_value(replicas) > AREAL_ALLOC_MAX_DIM)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "spec.rollout.replicas must be a whole number from 0 to %d",
                               AREAL_ALLOC_MAX_DIM);
    int inference = -1;
    for (int i = 0; i < out->n_components; i++) {
        if (!areal_backend_is_inference(out->comp[i].backend))
            continue;
        if (inference >= 0)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "spec.rollout.replicas applies to one inference component, "
                                   "but spec.allocation has several; set their d in the string");
        inference = i;
    }
    if (inference < 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "spec.rollout.replicas is set but spec.allocation has no "
                               "inference component (sglang or vllm)");
    long r = (long)json_integer_value(replicas);
    if (r == 0) {
        /* Zero rollout servers: the gang is the trainer alone (it waits for
         * servers); scaling never fails a job. */
        for (int i = 0; i < out->n_components; i++)
            if (out->comp[i].colocate_with == inference)
                return areal_error_set(err, AREAL_EINVAL, -1,
                                       "spec.rollout.replicas 0: component %d of spec.allocation "
                                       "is colocated with the rollout; write its own GPUs first",
                                       i + 1);
        for (int i = inference; i + 1 < out->n_components; i++)
            out->comp[i] = out->comp[i + 1];
        out->n_components--;
        for (int i = 0; i < out->n_components; i++)
            if (out->comp[i].colocate_with > inference)
                out->comp[i].colocate_with--;
        return AREAL_OK;
    }
    areal_strategy *s = &out->comp[inference].strategy;
    s->dp = (int)r;
    s->edp = (int)(areal_strategy_world(s) / ((long)s->pp * s->etp * s->ep));
    return AREAL_OK;
}

/* True when `s` is a DNS-1035 label: [a-z]([-a-z0-9]*[a-z0-9])?, at most 63 bytes. */
static bool dns_label(const char *s, bool digit_first) {
    size_t n = strlen(s);
    if (n == 0 || n > DESIRED_DNS_LABEL_MAX)
        return false;
    if (!(s[0] >= 'a' && s[0] <= 'z') && !(digit_first && s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return false;
    }
    return s[n - 1] != '-';
}

int desired_check_name(const char *child, const char *what, const char *job, areal_error *err) {
    if (dns_label(child, strcmp(what, "pod") == 0))
        return AREAL_OK;
    size_t n = strlen(child), over = n > DESIRED_DNS_LABEL_MAX ? n - DESIRED_DNS_LABEL_MAX : 0;
    if (over > 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "metadata.name \"%s\" is too long: its %s would be \"%s\" (%zu "
                               "characters), more than the %d of a DNS label; shorten the job's "
                               "name by %zu characters",
                               job, what, child, n, DESIRED_DNS_LABEL_MAX, over);
    return areal_error_set(err, AREAL_EINVAL, -1,
                           "metadata.name \"%s\": its %s \"%s\" must be a DNS label (lowercase "
                           "letters, digits and '-', starting with a letter, ending with a letter "
                           "or digit); rename the job",
                           job, what, child);
}

int desired_job_validate(const json_t *job, areal_error *err) {
    const char *name = job_name(job);
    if (name == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "metadata.name is required");
    /* the headless Service is named like the job and is each pod's subdomain */
    if (desired_check_name(name, "Service", name, err) != AREAL_OK)
        return AREAL_EINVAL;
    const char *text = json_string_value(json_object_get(spec_of(job), "allocation"));
    areal_alloc a;
    if (text == NULL || areal_alloc_parse(text, &a, NULL) != AREAL_OK)
        return AREAL_OK; /* desired_job_alloc says what is wrong with it */
    char names[AREAL_ALLOC_MAX_COMPONENTS][AREAL_ALLOC_NAME_MAX];
    areal_role_names(&a, names);
    size_t i;
    json_t *entry;
    json_array_foreach(json_object_get(spec_of(job), "roles"), i, entry) {
        const char *role = json_string_value(json_object_get(entry, "name"));
        if (role == NULL)
            return areal_error_set(err, AREAL_EINVAL, -1, "spec.roles[%zu].name is required", i);
        bool known = strcmp(role, "trainer") == 0 || strcmp(role, "rollout") == 0;
        for (int r = 0; r < a.n_components && !known; r++)
            known = strcmp(role, names[r]) == 0;
        if (!known) {
            char list[AREAL_ALLOC_MAX_COMPONENTS * (AREAL_ALLOC_NAME_MAX + 2)] = "";
            for (int r = 0; r < a.n_components; r++) {
                if (r > 0)
                    strcat(list, ", ");
                strcat(list, names[r]);
            }
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "spec.roles[%zu].name \"%s\" matches no role of "
                                   "spec.allocation (%s) nor the kinds trainer and rollout",
                                   i, role, list);
        }
    }
    return AREAL_OK;
}

/* The override entries for role `name` of kind `kind`, kind first. */
static int overrides(const json_t *job, const char *name, bool inference, const json_t *out[2]) {
    const char *kind = inference ? "rollout" : "trainer";
    int n = 0;
    out[0] = out[1] = NULL;
    size_t i;
    json_t *entry;
    json_t *roles = json_object_get(spec_of(job), "roles");
    json_array_foreach(roles, i, entry) {
        const char *n_ = json_string_value(json_object_get(entry, "name"));
        if (n_ != NULL && strcmp(n_, kind) == 0 && strcmp(n_, name) != 0)
            out[0] = entry;
    }
    json_array_foreach(roles, i, entry) {
        const char *n_ = json_string_value(json_object_get(entry, "name"));
        if (n_ != NULL && strcmp(n_, name) == 0)
            out[1] = entry;
    }
    n = (out[0] != NULL) + (out[1] != NULL);
    return n;
}

int desired_job_constraints(const json_t *job, const areal_alloc *alloc, areal_job *job_out,
                            areal_error *err) {
    char names[AREAL_ALLOC_MAX_COMPONENTS][AREAL_ALLOC_NAME_MAX];
    areal_role_names(alloc, names);
    for (int r = 0; r < alloc->n_components; r++) {
        const json_t *layer[2];
        overrides(job, names[r], areal_backend_is_inference(alloc->comp[r].backend), layer);
        areal_role_resources *res = &job_out->resources[r];
        for (int l = 0; l < 2; l++) {
            if (layer[l] == NULL)
                continue;
            const char *key;
            json_t *val;
            json_object_foreach(json_object_get(layer[l], "nodeSelector"), key, val) {
                if (!json_is_string(val) || res->n_selectors == AREAL_MAX_SELECTORS)
                    return areal_error_set(err, AREAL_EINVAL, -1,
                                           "spec.roles[%s].nodeSelector.%s: expected at most %d "
                                           "string values",
                                           names[r], key, AREAL_MAX_SELECTORS);
                areal_selector *sel = &res->selectors[res->n_selectors++];
                snprintf(sel->key, sizeof sel->key, "%s", key);
                snprintf(sel->value, sizeof sel->value, "%s", json_string_value(val));
            }
            size_t i;
            json_t *tol;
            json_array_foreach(json_object_get(layer[l], "tolerations"), i, tol) {
                if (res->n_tolerations == AREAL_MAX_TOLERATIONS)
                    return areal_error_set(err, AREAL_EINVAL, -1,
                                           "spec.roles[%s].tolerations: at most %d are used for "
                                           "placement",
                                           names[r], AREAL_MAX_TOLERATIONS);
                areal_toleration *t = &res->tolerations[res->n_tolerations++];
                const char *k = json_string_value(json_object_get(tol, "key"));
                const char *v = json_string_value(json_object_get(tol, "value"));
                const char *e = json_string_value(json_object_get(tol, "effect"));
                const char *op = json_string_value(json_object_get(tol, "operator"));
                snprintf(t->key, sizeof t->key, "%s", k ? k : "");
                snprintf(t->value, sizeof t->value, "%s", v ? v : "");
                snprintf(t->effect, sizeof t->effect, "%s", e ? e : "");
                t->exists = op != NULL && strcmp(op, "Exists") == 0;
            }
        }
    }
    return AREAL_OK;
}

static json_t *owner_refs(const json_t *job) {
    const json_t *meta = json_object_get(job, "metadata");
    const char *uid = json_string_value(json_object_get(meta, "uid"));
    return json_pack("[{s:s,s:s,s:s,s:s,s:b,s:b}]", "apiVersion", "areal.io/v1alpha1", "kind",
                     "AReaLJob", "name", job_name(job), "uid", uid ? uid : "", "controller", 1,
                     "blockOwnerDeletion", 1);
}

static json_t *child_meta(const json_t *job, const char *name, json_t *labels) {
    json_object_set_new(labels, AREAL_LABEL_JOB, json_string(job_name(job)));
    json_object_set_new(labels, AREAL_LABEL_MANAGED_BY, json_string("areal-operator"));
    return json_pack("{s:s,s:s,s:o,s:o}", "name", name, "namespace", job_ns(job), "labels", labels,
                     "ownerReferences", owner_refs(job));
}

json_t *desired_service(const json_t *job, const desired_config *cfg) {
    desired_config c = defaults(cfg);
    return json_pack(
        "{s:s,s:s,s:o,s:{s:s,s:b,s:{s:s},s:[{s:s,s:i,s:i},{s:s,s:i,s:i}]}}", "apiVersion", "v1",
        "kind", "Service", "metadata", child_meta(job, job_name(job), json_object()), "spec",
        "clusterIP", "None", "publishNotReadyAddresses", 1, "selector", AREAL_LABEL_JOB,
        job_name(job), "ports", "name", "rendezvous", "port", c.master_port, "targetPort",
        c.master_port, "name", "trainer", "port", c.trainer_port, "targetPort", c.trainer_port);
}

json_t *desired_trainer_config(const json_t *config) {
    json_t *out = json_is_object(config) ? json_deep_copy(config) : json_object();
    if (out == NULL)
        return NULL;
    json_t *recover = json_object_get(out, "recover");
    if (!json_is_object(recover)) {
        recover = json_object();
        json_object_set_new(out, "recover", recover);
    }
    if (recover != NULL && json_object_get(recover, "mode") == NULL)
        json_object_set_new(recover, "mode", json_string("auto"));
    return out;
}

json_t *desired_configmap(const json_t *job, const areal_alloc *alloc, const areal_plan *plan,
                          const areal_cluster *cluster, const desired_config *cfg) {
    (void)cfg;
    char name[320], canonical[4096];
    snprintf(name, sizeof name, "%s-config", job_name(job));
    areal_alloc_format(alloc, canonical, sizeof canonical);
    json_t *config = desired_trainer_config(json_object_get(spec_of(job), "config"));
    char *config_text = config ? json_dumps(config, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    json_decref(config);
    json_t *pods = json_array();
    for (int i = 0; i < plan->n_pods; i++) {
        const areal_pod_plan *p = &plan->pods[i];
        json_array_append_new(pods, json_pack("{s:s,s:s,s:s,s:i,s:i}", "name", p->name, "role",
                                              plan->roles[p->role].name, "node",
                                              cluster->nodes[p->node].name, "firstRank",
                                              p->first_rank, "ranks", p->n_ranks));
    }
    json_t *plan_doc = json_pack("{s:s,s:o}", "allocation", canonical, "pods", pods);
    char *plan_text = json_dumps(plan_doc, JSON_COMPACT);
    json_t *cm = json_pack("{s:s,s:s,s:o,s:{s:s,s:s,s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                           "metadata", child_meta(job, name, json_object()), "data", "allocation",
                           canonical, "config.json", config_text ? config_text : "{}", "plan.json",
                           plan_text ? plan_text : "{}");
    free(config_text);
    free(plan_text);
    json_decref(plan_doc);
    return cm;
}

/* The trainer's rank-0 pod: the first pod of the first non-colocated training role. */
static const areal_pod_plan *master_pod(const areal_plan *plan) {
    for (int r = 0; r < plan->n_roles; r++)
        if (!plan->roles[r].inference && plan->roles[r].colocated_with < 0)
            return &plan->pods[plan->roles[r].first_pod];
    return &plan->pods[0];
}

static void add_env(json_t *env, const char *name, const char *value) {
    json_array_append_new(env, json_pack("{s:s,s:s}", "name", name, "value", value));
}

static void add_env_int(json_t *env, const char *name, long value) {
    char text[32];
    snprintf(text, sizeof text, "%ld", value);
    add_env(env, name, text);
}

static void add_env_field(json_t *env, const char *name, const char *path) {
    json_array_append_new(env, json_pack("{s:s,s:{s:{s:s}}}", "name", name, "valueFrom", "fieldRef",
                                         "fieldPath", path));
}

/* Appends the items of list `key` of each override layer to `dst`. */
static void extend(json_t *dst, const json_t *layer[2], const char *key) {
    for (int l = 0; l < 2; l++)
        if (layer[l] != NULL)
            json_array_extend(dst, json_object_get(layer[l], key));
}

/* True when a mount of `mounts` is at `path`. */
static bool mounts_at(const json_t *mounts, const char *path) {
    size_t i;
    const json_t *m;
    json_array_foreach(mounts, i, m) {
        const char *at = json_string_value(json_object_get(m, "mountPath"));
        if (at != NULL && strcmp(at, path) == 0)
            return true;
    }
    return false;
}

/*
 * A memory-backed /dev/shm for a pod of `gpus` GPUs, DESIRED_SHM_GIB_PER_GPU
 * GiB each: NCCL's shared-memory transport (and this worker's own shm rings,
 * worker/comm) map their buffers there, and the 64 MiB the container runtime
 * gives /dev/shm makes NCCL fail at its first intra-node collective. A tmpfs
 * is charged to the pod's memory as written, not at its size. A role override
 * that mounts its own /dev/shm keeps it (the user sized it), so no second
 * mount at one path is sent. Rejected: a CRD field for the size - a role's
 * volumes and volumeMounts already say it.
 */
static void add_shm(json_t *volumes, json_t *mounts, int gpus) {
    if (gpus <= 0 || mounts_at(mounts, "/dev/shm"))
        return;
    char size[32];
    snprintf(size, sizeof size, "%dGi", gpus * DESIRED_SHM_GIB_PER_GPU);
    json_array_append_new(volumes, json_pack("{s:s,s:{s:s,s:s}}", "name", "areal-shm", "emptyDir",
                                             "medium", "Memory", "sizeLimit", size));
    json_array_append_new(mounts,
                          json_pack("{s:s,s:s}", "name", "areal-shm", "mountPath", "/dev/shm"));
}

json_t *desired_pod(const json_t *job, const areal_alloc *alloc, const areal_plan *plan,
                    const areal_cluster *cluster, int pod, const desired_config *cfg,
                    areal_error *err) {
    if (pod < 0 || pod >= plan->n_pods) {
        areal_error_set(err, AREAL_EINVAL, -1, "pod %d is not in the plan", pod);
        return NULL;
    }
    desired_config c = defaults(cfg);
    const areal_pod_plan *p = &plan->pods[pod];
    const areal_role_plan *role = &plan->roles[p->role];
    const json_t *spec = spec_of(job);
    const json_t *layer[2];
    overrides(job, role->name, role->inference, layer);

    const char *image = json_string_value(json_object_get(spec, "image"));
    for (int l = 0; l < 2; l++) {
        const char *img = layer[l] ? json_string_value(json_object_get(layer[l], "image")) : NULL;
        if (img != NULL && img[0] != '\0')
            image = img;
    }
    if (image == NULL || image[0] == '\0')
        image = c.default_image;

    char canonical[4096], master[512], index[16];
    areal_alloc_format(alloc, canonical, sizeof canonical);
    const char *master_name = c.master_pod ? c.master_pod : master_pod(plan)->name;
    snprintf(master, sizeof master, "%s.%s", master_name, job_name(job));
    snprintf(index, sizeof index, "%d", p->index);

    json_t *env = json_array();
    extend(env, layer, "env");
    add_env(env, AREAL_ENV_JOB, job_name(job));
    add_env(env, AREAL_ENV_NAMESPACE, job_ns(job));
    add_env(env, AREAL_ENV_ROLE, role->name);
    add_env(env, AREAL_ENV_ALLOCATION, canonical);
    add_env(env, AREAL_ENV_POD_INDEX, index);
    if (c.server_index != NULL)
        add_env(env, AREAL_ENV_SERVER_INDEX, c.server_index);
    add_env_int(env, AREAL_ENV_FIRST_RANK, p->first_rank);
    add_env_int(env, AREAL_ENV_POD_RANKS, p->n_ranks);
    add_env_int(env, AREAL_ENV_WORLD_SIZE, role->world);
    add_env(env, AREAL_ENV_MASTER_ADDR, master);
    add_env_int(env, AREAL_ENV_MASTER_PORT, c.master_port);
    add_env(env, AREAL_ENV_CONFIG, "/etc/areal/config.json");
    add_env_field(env, AREAL_ENV_POD_NAME, "metadata.name");
    add_env_field(env, AREAL_ENV_POD_IP, "status.podIP");
    if (!role->inference) {
        /* the role's own group: its rank-0 pod (a colocated role runs in its
         * anchor's pods, whose first is its rank 0 too) and a port of its own */
        char trainer[512];
        snprintf(trainer, sizeof trainer, "%s.%s", plan->pods[role->first_pod].name, job_name(job));
        add_env(env, AREAL_ENV_TRAINER_ADDR, trainer);
        add_env_int(env, AREAL_ENV_TRAINER_PORT, c.trainer_port);
        add_env(env, AREAL_ENV_TERMINATION_LOG, AREAL_TERMINATION_LOG_PATH);
    }

    json_t *limits = json_object(), *requests = json_object();
    for (int l = 0; l < 2; l++) {
        const json_t *res = layer[l] ? json_object_get(layer[l], "resources") : NULL;
        json_object_update(limits, json_object_get(res, "limits"));
        json_object_update(requests, json_object_get(res, "requests"));
    }
    char gpus[16];
    snprintf(gpus, sizeof gpus, "%d", p->n_ranks);
    json_object_set_new(limits, "nvidia.com/gpu", json_string(gpus));
    json_object_set_new(requests, "nvidia.com/gpu", json_string(gpus));

    char cm_name[320];
    snprintf(cm_name, sizeof cm_name, "%s-config", job_name(job));
    json_t *volumes =
        json_pack("[{s:s,s:{s:s}}]", "name", "areal-config", "configMap", "name", cm_name);
    extend(volumes, layer, "volumes");
    json_t *mounts = json_pack("[{s:s,s:s,s:b}]", "name", "areal-config", "mountPath", "/etc/areal",
                               "readOnly", 1);
    extend(mounts, layer, "volumeMounts");
    add_shm(volumes, mounts, p->n_ranks);
    json_t *tolerations = json_array();
    extend(tolerations, layer, "tolerations");
    json_t *selector = json_object();
    for (int l = 0; l < 2; l++)
        if (layer[l] != NULL)
            json_object_update(selector, json_object_get(layer[l], "nodeSelector"));

    json_t *labels = json_object();
    for (int l = 0; l < 2; l++)
        if (layer[l] != NULL)
            json_object_update(labels, json_object_get(layer[l], "labels"));
    json_object_set_new(labels, AREAL_LABEL_ROLE, json_string(role->name));
    json_object_set_new(labels, AREAL_LABEL_ROLE_KIND,
                        json_string(role->inference ? "rollout" : "trainer"));
    json_object_set_new(labels, AREAL_LABEL_POD_INDEX, json_string(index));
    if (strcmp(p->name, master_name) == 0)
        json_object_set_new(labels, AREAL_LABEL_MASTER, json_string("true"));
    json_t *meta = child_meta(job, p->name, labels);
    json_t *annotations = json_object();
    for (int l = 0; l < 2; l++)
        if (layer[l] != NULL)
            json_object_update(annotations, json_object_get(layer[l], "annotations"));
    json_object_set_new(annotations, AREAL_ANNOTATION_NODE,
                        json_string(cluster->nodes[p->node].name));
    char gang[16];
    snprintf(gang, sizeof gang, "%d", plan->n_pods);
    json_object_set_new(annotations, AREAL_ANNOTATION_GANG, json_string(gang));
    json_object_set_new(annotations, AREAL_ANNOTATION_ALLOC, json_string(canonical));
    json_object_set_new(meta, "annotations", annotations);

    const char *pull = json_string_value(json_object_get(spec, "imagePullPolicy"));
    /* The worker reads everything from its environment (areal/podenv.h). */
    json_t *container = json_pack(
        "{s:s,s:s,s:s,s:[s],s:o,s:{s:o,s:o},s:o,s:[{s:s,s:i}]}", "name", "worker", "image", image,
        "imagePullPolicy", pull ? pull : "IfNotPresent", "command", "areal-worker", "env", env,
        "resources", "limits", limits, "requests", requests, "volumeMounts", mounts, "ports",
        "name", "rendezvous", "containerPort", c.master_port);
    if (!role->inference) {
        json_array_append_new(
            json_object_get(container, "ports"),
            json_pack("{s:s,s:i}", "name", "trainer", "containerPort", c.trainer_port));
        /* the trainer's last words (its final /status) as the termination message:
         * the operator's only view of a step finished after its last poll. Not a
         * volume: the kubelet makes and mounts this file itself. */
        json_object_set_new(container, "terminationMessagePath",
                            json_string(AREAL_TERMINATION_LOG_PATH));
        json_object_set_new(container, "terminationMessagePolicy", json_string("File"));
    }
    /* args: the most specific layer that sets them wins (lists are not merged:
     * two halves of a command line would not make one) */
    for (int l = 1; l >= 0; l--) {
        const json_t *args = layer[l] ? json_object_get(layer[l], "args") : NULL;
        if (json_is_array(args)) {
            json_object_set_new(container, "args", json_deep_copy(args));
            break;
        }
    }
    json_t *pod_obj =
        json_pack("{s:s,s:s,s:o,s:{s:s,s:s,s:s,s:s,s:b,s:o,s:o,s:o,s:o}}", "apiVersion", "v1",
                  "kind", "Pod", "metadata", meta, "spec", "schedulerName", c.scheduler_name,
                  "hostname", p->name, "subdomain", job_name(job), "restartPolicy", "Never",
                  "enableServiceLinks", 0, "containers", json_pack("[o]", container), "volumes",
                  volumes, "tolerations", tolerations, "nodeSelector", selector);
    if (pod_obj == NULL)
        areal_error_set(err, AREAL_ENOMEM, -1, "out of memory building pod %s", p->name);
    return pod_obj;
}

int desired_plan_fits(const json_t *job, const areal_alloc *alloc, const areal_plan *plan,
                      const areal_cluster *cluster, const desired_config *cfg, areal_error *err) {
    int n = cluster->n_nodes;
    long long *cpu = calloc((size_t)n + 1, sizeof *cpu), *mem = calloc((size_t)n + 1, sizeof *mem);
    int rc = cpu && mem ? AREAL_OK : areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    for (int i = 0; rc == AREAL_OK && i < plan->n_pods; i++) {
        json_t *pod = desired_pod(job, alloc, plan, cluster, i, cfg, err);
        cached_pod *cp = pod ? cached_pod_new(pod) : NULL;
        json_decref(pod);
        if (cp == NULL) {
            rc = areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
            break;
        }
        int at = plan->pods[i].node;
        if (at >= 0 && at < n) {
            cpu[at] += cp->cpu_milli;
            mem[at] += cp->mem_bytes;
        }
        cached_pod_release(cp);
    }
    for (int i = 0; rc == AREAL_OK && i < n; i++) {
        const areal_node *nd = &cluster->nodes[i];
        if (nd->cpu_milli > 0 && cpu[i] > 0 && nd->cpu_used_milli + cpu[i] > nd->cpu_milli)
            rc = areal_error_set(err, AREAL_ENOFIT, -1,
                                 "node %s has %ldm CPU free, the pods planned there request "
                                 "%lldm (spec.roles[].resources.requests.cpu)",
                                 nd->name, nd->cpu_milli - nd->cpu_used_milli, cpu[i]);
        else if (nd->mem_bytes > 0 && mem[i] > 0 && nd->mem_used_bytes + mem[i] > nd->mem_bytes)
            rc = areal_error_set(err, AREAL_ENOFIT, -1,
                                 "node %s has %lld bytes of memory free, the pods planned there "
                                 "request %lld (spec.roles[].resources.requests.memory)",
                                 nd->name, nd->mem_bytes - nd->mem_used_bytes, mem[i]);
    }
    free(cpu);
    free(mem);
    return rc;
}
