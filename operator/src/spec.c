/*
 * spec.c - the typed AReaLJob spec (see areal/operator/spec.h).
 *
 * The CRD's schema and CEL rules refuse most bad specs at apply; what they
 * cannot see (the allocation grammar, role names of the string, pod names
 * that outgrow a DNS label, labels no node carries) is checked here, once,
 * with a message that names the field and the fix. Values are re-checked
 * even where the schema bounds them: a job written before a schema change,
 * or by a client that skipped validation, must not reach the planner with a
 * negative backoff.
 */
#include "areal/operator/spec.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "areal/operator/desired.h"
#include "areal/operator/priority.h"

static const char *str_at(const json_t *obj, const char *a, const char *b) {
    const json_t *v = json_object_get(obj, a);
    if (b != NULL)
        v = json_object_get(v, b);
    return json_string_value(v);
}

static void invalid(job_spec *s, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void invalid(job_spec *s, const char *reason, const char *fmt, ...) {
    if (!s->valid)
        return; /* the first problem is reported */
    s->valid = false;
    snprintf(s->reason, sizeof s->reason, "%s", reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->error, sizeof s->error, fmt, ap);
    va_end(ap);
}

/* An integer field of `obj` within [lo, hi], or `dflt` when absent. */
static int int_field(job_spec *s, const json_t *obj, const char *key, const char *path, int lo,
                     int hi, int dflt) {
    const json_t *v = json_object_get(obj, key);
    if (v == NULL || json_is_null(v))
        return dflt;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        invalid(s, "InvalidSpec", "%s must be a whole number from %d to %d (default %d)", path, lo,
                hi, dflt);
        return dflt;
    }
    return (int)json_integer_value(v);
}

static void parse_failure_policy(job_spec *s, const json_t *spec) {
    const json_t *fp = json_object_get(spec, "failurePolicy");
    const json_t *b = json_object_get(fp, "backoff");
    s->max_restarts = int_field(s, fp, "maxRestarts", "spec.failurePolicy.maxRestarts", 0, 1000,
                                SPEC_DEFAULT_MAX_RESTARTS);
    s->backoff_initial_s =
        int_field(s, b, "initialSeconds", "spec.failurePolicy.backoff.initialSeconds", 1, 86400,
                  SPEC_DEFAULT_BACKOFF_S);
    s->backoff_max_s = int_field(s, b, "maxSeconds", "spec.failurePolicy.backoff.maxSeconds", 1,
                                 86400, SPEC_DEFAULT_BACKOFF_MAX_S);
    if (s->backoff_max_s < s->backoff_initial_s) {
        if (json_object_get(b, "maxSeconds") != NULL)
            invalid(s, "InvalidSpec",
                    "spec.failurePolicy.backoff.initialSeconds (%d) must not exceed maxSeconds "
                    "(%d); lower the first or raise the second",
                    s->backoff_initial_s, s->backoff_max_s);
        else
            s->backoff_max_s = s->backoff_initial_s; /* only the first was given */
    }
    s->node_lost_s = int_field(s, fp, "nodeLostSeconds", "spec.failurePolicy.nodeLostSeconds", 0,
                               86400, SPEC_DEFAULT_NODE_LOST_S);
    s->container_error_s =
        int_field(s, fp, "containerErrorSeconds", "spec.failurePolicy.containerErrorSeconds", 0,
                  86400, SPEC_DEFAULT_CONTAINER_ERROR_S);
    const char *scope = str_at(fp, "restartScope", NULL);
    s->restart_scope = SPEC_RESTART_ROLE;
    if (scope != NULL && strcmp(scope, "Gang") == 0)
        s->restart_scope = SPEC_RESTART_GANG;
    else if (scope != NULL && strcmp(scope, "Role") != 0)
        invalid(s, "InvalidSpec",
                "spec.failurePolicy.restartScope \"%s\" must be Role (a rollout server's failure "
                "replaces that server; the default) or Gang (any failure restarts the trainer "
                "gang)",
                scope);
}

/* Levels innermost first; a Required level holds every pp group inside one domain. */
static void parse_topology(job_spec *s, const json_t *spec) {
    areal_topology_default(&s->topology);
    s->n_rules = 0;
    const json_t *levels = json_object_get(json_object_get(spec, "topology"), "levels");
    if (!json_is_array(levels) || json_array_size(levels) == 0)
        return;
    if (json_array_size(levels) > AREAL_TOPO_MAX_LEVELS) {
        invalid(s, "InvalidSpec", "spec.topology.levels has %zu levels; at most %d are supported",
                json_array_size(levels), AREAL_TOPO_MAX_LEVELS);
        return;
    }
    s->topology.n_levels = 0;
    size_t i;
    json_t *lv;
    json_array_foreach((json_t *)levels, i, lv) {
        const char *label = str_at(lv, "label", NULL);
        if (label == NULL || label[0] == '\0' || strlen(label) >= AREAL_TOPO_KEY_MAX) {
            invalid(s, "InvalidSpec",
                    "spec.topology.levels[%zu].label must be a node label key of 1 to %d "
                    "characters, e.g. network.topology.nvidia.com/leaf",
                    i, AREAL_TOPO_KEY_MAX - 1);
            return;
        }
        int l = s->topology.n_levels++;
        snprintf(s->topology.key[l], AREAL_TOPO_KEY_MAX, "%s", label);
        const char *slash = strrchr(label, '/');
        snprintf(s->topology.name[l], AREAL_TOPO_NAME_MAX, "%s", slash ? slash + 1 : label);
        const char *policy = str_at(lv, "policy", NULL);
        if (policy != NULL && strcmp(policy, "Required") != 0 && strcmp(policy, "Preferred") != 0) {
            invalid(s, "InvalidSpec",
                    "spec.topology.levels[%zu].policy \"%s\" must be Required or Preferred", i,
                    policy);
            return;
        }
        if (policy && strcmp(policy, "Required") == 0 && s->n_rules < AREAL_MAX_RULES) {
            s->rule_level_index[s->n_rules] = (int)i;
            s->rules[s->n_rules++] = (areal_locality_rule){
                .kind = AREAL_GROUP_PP, .level = l + 1, .mode = AREAL_TOPO_REQUIRED};
        }
    }
}

/* Removes component `k` of `a` (nothing may be colocated with it). */
static void drop_component(areal_alloc *a, int k) {
    for (int i = k; i + 1 < a->n_components; i++)
        a->comp[i] = a->comp[i + 1];
    a->n_components--;
    for (int i = 0; i < a->n_components; i++)
        if (a->comp[i].colocate_with > k)
            a->comp[i].colocate_with--;
}

static void set_dp(areal_strategy *st, int dp) {
    st->dp = dp;
    st->edp = (int)(areal_strategy_world(st) / ((long)st->pp * st->etp * st->ep));
}

/* The split of `s->alloc` into the trainer gang and one rollout server, when it splits. */
static void split_roles(job_spec *s) {
    s->split = false;
    s->rollout_comp = -1;
    int inference = -1, n_inference = 0;
    for (int i = 0; i < s->alloc.n_components; i++)
        if (areal_backend_is_inference(s->alloc.comp[i].backend)) {
            inference = i;
            n_inference++;
        }
    if (n_inference == 1) {
        bool alone = s->alloc.comp[inference].sched == AREAL_SCHED_SEPARATION;
        for (int i = 0; i < s->alloc.n_components; i++)
            alone = alone && s->alloc.comp[i].colocate_with != inference;
        bool trainer_left = s->alloc.n_components > 1;
        s->split = alone && trainer_left;
    }
    s->trainer = s->alloc;
    for (int i = 0; i < s->trainer.n_components; i++) /* names stay those of the whole string */
        memcpy(s->trainer.comp[i].name, s->role_names[i], AREAL_ALLOC_NAME_MAX);
    s->shape = s->alloc;
    if (!s->split)
        return;
    s->rollout_comp = inference;
    memcpy(s->rollout_role, s->role_names[inference], sizeof s->rollout_role);
    memset(&s->server, 0, sizeof s->server);
    s->server.n_components = 1;
    s->server.comp[0] = s->trainer.comp[inference];
    s->server.comp[0].colocate_with = -1;
    set_dp(&s->server.comp[0].strategy, 1);
    drop_component(&s->trainer, inference);
    set_dp(&s->shape.comp[inference].strategy, 1);
}

int job_spec_parse(const json_t *job, job_spec *s, areal_error *err) {
    memset(s, 0, sizeof *s);
    s->valid = true;
    s->rollout_comp = -1;
    const json_t *meta = json_object_get(job, "metadata");
    s->name = str_at(meta, "name", NULL);
    if (s->name == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "the job has no metadata.name");
    s->ns = str_at(meta, "namespace", NULL);
    if (s->ns == NULL)
        s->ns = "default";
    const json_t *gen = json_object_get(meta, "generation");
    s->generation = json_is_integer(gen) ? (long long)json_integer_value(gen) : 0;
    s->deleting = str_at(meta, "deletionTimestamp", NULL) != NULL;
    const json_t *spec = json_object_get(job, "spec");
    s->suspend = json_is_true(json_object_get(spec, "suspend"));
    const json_t *ttl = json_object_get(spec, "ttlSecondsAfterFinished");
    s->ttl_s = json_is_integer(ttl) && json_integer_value(ttl) >= 0 ? json_integer_value(ttl) : -1;
    s->priority = job_spec_priority(job);
    parse_failure_policy(s, spec);
    parse_topology(s, spec);

    areal_error e;
    if (desired_job_alloc(job, &s->alloc, &e) != AREAL_OK) {
        /* the parser's message comes first: it names the position in the string */
        s->valid = true;
        invalid(s, "InvalidAllocation", "%s", e.msg);
        return AREAL_OK;
    }
    const json_t *replicas = json_object_get(json_object_get(spec, "rollout"), "replicas");
    s->replicas_given = json_is_integer(replicas);
    /* The split works on the string as written (desired_job_alloc applied
     * spec.rollout.replicas, and 0 removed the rollout component). */
    areal_alloc unsplit = s->alloc;
    if (areal_alloc_parse(str_at(spec, "allocation", NULL), &s->alloc, NULL) != AREAL_OK)
        s->alloc = unsplit;
    areal_role_names(&s->alloc, s->role_names);
    split_roles(s);
    if (s->split) {
        s->rollout_replicas = s->replicas_given ? (int)json_integer_value(replicas)
                                                : s->alloc.comp[s->rollout_comp].strategy.dp;
    } else {
        /* one gang: it scales as a whole, as before the split */
        s->alloc = unsplit;
        areal_role_names(&s->alloc, s->role_names);
        split_roles(s);
        s->split = false;
        s->rollout_comp = -1;
        s->rollout_replicas = 0;
        for (int i = 0; i < s->alloc.n_components; i++)
            if (areal_backend_is_inference(s->alloc.comp[i].backend))
                s->rollout_replicas += s->alloc.comp[i].strategy.dp;
    }
    areal_alloc_format(&s->shape, s->canonical, sizeof s->canonical);
    /* the trainer's rank 0: pod 0 of the first training component that owns its GPUs */
    const char *master_role = s->trainer.n_components > 0 ? s->trainer.comp[0].name : "trainer";
    for (int i = 0; i < s->trainer.n_components; i++)
        if (!areal_backend_is_inference(s->trainer.comp[i].backend) &&
            s->trainer.comp[i].sched == AREAL_SCHED_SEPARATION) {
            master_role = s->trainer.comp[i].name;
            break;
        }
    char role[AREAL_ALLOC_NAME_MAX];
    memcpy(role, master_role, sizeof role);
    snprintf(s->master_pod, sizeof s->master_pod, "%s-%s-0", s->name, role);

    if (desired_job_validate(job, &e) != AREAL_OK)
        invalid(s, "InvalidSpec", "%s", e.msg);
    return AREAL_OK;
}

int job_spec_placement(const job_spec *s, const json_t *job, const areal_alloc *alloc,
                       areal_job *out, areal_error *err) {
    areal_job_init(out, s->name, alloc);
    out->topology = s->topology;
    out->n_rules = s->n_rules;
    memcpy(out->rules, s->rules, sizeof s->rules);
    return desired_job_constraints(job, alloc, out, err);
}

int job_spec_check_cluster(const job_spec *s, const areal_cluster *c, areal_error *err) {
    for (int r = 0; r < s->n_rules; r++) {
        const char *key = s->topology.key[s->rules[r].level - 1];
        bool carried = false;
        for (int n = 0; n < c->n_nodes && !carried; n++)
            for (int l = 0; l < c->nodes[n].n_labels && !carried; l++)
                carried = strcmp(c->nodes[n].labels[l].key, key) == 0;
        if (!carried)
            return areal_error_set(
                err, AREAL_ENOFIT, -1,
                "spec.topology.levels[%d].label \"%s\" is Required but no node carries that "
                "label; label the nodes (kubectl label node NODE %s=DOMAIN) or make the level "
                "Preferred",
                s->rule_level_index[r], key, key);
    }
    return AREAL_OK;
}

json_t *job_spec_defaults_json(const job_spec *s) {
    return json_pack("{s:{s:i,s:i,s:i,s:s,s:{s:i,s:i}},s:{s:i,s:b}}", "failurePolicy",
                     "maxRestarts", s->max_restarts, "nodeLostSeconds", s->node_lost_s,
                     "containerErrorSeconds", s->container_error_s, "restartScope",
                     s->restart_scope == SPEC_RESTART_GANG ? "Gang" : "Role", "backoff",
                     "initialSeconds", s->backoff_initial_s, "maxSeconds", s->backoff_max_s,
                     "rollout", "replicas", s->rollout_replicas, "separateServers", s->split);
}

long job_spec_backoff_ms(const job_spec *s, long long restarts) {
    long long d = s->backoff_initial_s;
    for (long long i = 1; i < restarts && d < s->backoff_max_s; i++)
        d *= 2;
    return (long)((d < s->backoff_max_s ? d : s->backoff_max_s) * 1000);
}
