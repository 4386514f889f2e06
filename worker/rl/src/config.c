/*
 * config.c - reads the RL job configuration (config.h): AReaL's defaults,
 * OmegaConf-style ${a.b} interpolations resolved against the document,
 * every key checked against the table of understood keys (config_fields.c),
 * the CRD's short aliases, and AReaL's own key list (config_areal_keys.c,
 * generated from cli_args.py) for keys accepted but unused; then AReaL's
 * cross-field rules (NormConfig, RejectionSamplingConfig, PPOActorConfig
 * __post_init__).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/rl/config.h"
#include "areal/yaml_json.h"
#include "config_internal.h"
#include "config_keys.h"

#define PATH_MAX_LEN 512

void areal_rl_config_defaults(areal_rl_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->algorithm, sizeof c->algorithm, "grpo");
    c->seed = 1;
    c->total_train_epochs = 1;
    areal_actor_config *a = &c->actor;
    snprintf(a->dtype, sizeof a->dtype, "bfloat16");
    snprintf(a->optimizer.type, sizeof a->optimizer.type, "adam");
    a->optimizer.lr = 1e-3;
    a->optimizer.weight_decay = 0.01;
    a->optimizer.beta1 = 0.9;
    a->optimizer.beta2 = 0.999;
    a->optimizer.eps = 1e-8;
    a->optimizer.min_lr_ratio = 0.0;
    a->optimizer.lr_scheduler = AREAL_SCHED_CONSTANT;
    a->optimizer.warmup_steps_proportion = 0.001;
    a->optimizer.gradient_clipping = 1.0;
    a->vpp = 1;
    a->group_size = 1;
    a->ppo_n_minibatches = 4;
    a->eps_clip = 0.2;
    a->reward_scaling = 1.0;
    a->reward_clip = 20.0;
    a->discount = 1.0;
    a->gae_lambda = 1.0;
    a->kl_ctl = 0.1;
    a->kl_estimator = AREAL_KL_K1;
    a->temperature = 1.0;
    a->n_mbs = 1;
    a->max_new_tokens = 1024;
    areal_gconfig *g = &c->gconfig;
    g->n_samples = 1;
    g->max_new_tokens = 16384;
    g->max_tokens = 32768;
    g->top_p = 1.0;
    g->top_k = 100000000;
    g->temperature = 1.0;
    g->skip_special_tokens = true;
    areal_rollout_config *r = &c->rollout;
    r->consumer_batch_size = 1;
    r->request_timeout = 3600;
    r->request_retries = 3;
    snprintf(r->weight_update_mode, sizeof r->weight_update_mode, "xccl");
    areal_dataset_config *d = &c->train_dataset;
    d->present = true;
    snprintf(d->type, sizeof d->type, "rl");
    d->batch_size = 1;
    d->shuffle = true;
    d->drop_last = true;
    snprintf(c->valid_dataset.type, sizeof c->valid_dataset.type, "rl");
    snprintf(c->recover_mode, sizeof c->recover_mode, "disabled");
}

static void norm_defaults(areal_norm_config *n) {
    n->enabled = true;
    n->mean_level = AREAL_NORM_BATCH;
    n->mean_leave1out = false;
    n->std_level = AREAL_NORM_BATCH;
    n->std_unbiased = true;
    n->eps = 1e-5;
    n->group_size = 1;
}

static void rs_defaults(areal_rejection_config *r) {
    memset(r, 0, sizeof *r);
    r->enabled = true;
    r->level = AREAL_RS_TOKEN;
    r->action = AREAL_RS_MASK;
    r->metric = AREAL_RS_RATIO;
    r->agg = AREAL_RS_AGG_MEAN;
    r->upper = 5.0;
}

void areal_rl_config_free(areal_rl_config *c) {
    free(c->experiment_name);
    free(c->trial_name);
    free(c->fileroot);
    free(c->tokenizer_path);
    free(c->actor.path);
    free(c->ref_path);
    free(c->gconfig.stop_token_ids);
    free(c->train_dataset.path);
    free(c->train_dataset.prompt_template);
    free(c->valid_dataset.path);
    free(c->valid_dataset.prompt_template);
    for (size_t i = 0; i < c->n_ignored; i++)
        free(c->ignored[i]);
    free(c->ignored);
    areal_rl_config_defaults(c);
}

/* ---- the reading context ------------------------------------------------ */

typedef struct {
    char path[PATH_MAX_LEN];
    const json_t *val;
    char given_as[PATH_MAX_LEN];
} set_entry;

typedef struct {
    areal_rl_config *c;
    const char *source;
    areal_error *err;
    set_entry *set;
    size_t n_set, cap_set;
    size_t copied; /* values copied by whole-section ${a.b} interpolations so far */
} ctx;

/* "SOURCE: key.path: what is wrong and how to fix it" */
static int fail(ctx *x, const char *path, const char *msg) {
    return areal_error_set(x->err, AREAL_EINVAL, -1, "%s: %s: %s", x->source, path, msg);
}

static int add_ignored(ctx *x, const char *path) {
    for (size_t i = 0; i < x->c->n_ignored; i++)
        if (strcmp(x->c->ignored[i], path) == 0)
            return AREAL_OK;
    char **n = realloc(x->c->ignored, sizeof(char *) * (x->c->n_ignored + 1));
    if (n == NULL)
        return areal_error_set(x->err, AREAL_ENOMEM, -1, "out of memory");
    x->c->ignored = n;
    n[x->c->n_ignored] = strdup(path);
    if (n[x->c->n_ignored] == NULL)
        return areal_error_set(x->err, AREAL_ENOMEM, -1, "out of memory");
    x->c->n_ignored++;
    return AREAL_OK;
}

/* Records that `path` was set (given as `given_as`); a second, different value is a conflict. */
static int mark_set(ctx *x, const char *path, const json_t *val, const char *given_as) {
    for (size_t i = 0; i < x->n_set; i++) {
        set_entry *e = &x->set[i];
        if (strcmp(e->path, path) != 0)
            continue;
        if (json_equal((json_t *)e->val, (json_t *)val))
            return AREAL_OK;
        return areal_error_set(x->err, AREAL_EINVAL, -1,
                               "%s: %s and %s both set %s to different values; keep one", x->source,
                               e->given_as, given_as, path);
    }
    if (x->n_set == x->cap_set) {
        size_t nc = x->cap_set ? x->cap_set * 2 : 32;
        set_entry *n = realloc(x->set, nc * sizeof *n);
        if (n == NULL)
            return areal_error_set(x->err, AREAL_ENOMEM, -1, "out of memory");
        x->set = n;
        x->cap_set = nc;
    }
    set_entry *e = &x->set[x->n_set++];
    snprintf(e->path, sizeof e->path, "%s", path);
    snprintf(e->given_as, sizeof e->given_as, "%s", given_as);
    e->val = val;
    return AREAL_OK;
}

static bool was_set(const ctx *x, const char *path) {
    for (size_t i = 0; i < x->n_set; i++)
        if (strcmp(x->set[i].path, path) == 0)
            return true;
    return false;
}

/* ---- AReaL's key list ----------------------------------------------------- */

static int cmp_key(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool areal_has(const char *k) {
    return bsearch(&k, areal_config_keys, areal_config_keys_n, sizeof(char *), cmp_key) != NULL;
}

/* Whether AReaL's list has `path`, a key under it (a section), or it lies in a free map. */
static bool areal_known(const char *path, bool *section) {
    char buf[PATH_MAX_LEN + 4];
    *section = false;
    snprintf(buf, sizeof buf, "%s.*", path);
    if (areal_has(buf))
        return true; /* a free map itself */
    /* an ancestor that is a free map */
    snprintf(buf, sizeof buf, "%s", path);
    for (char *dot = strrchr(buf, '.'); dot != NULL; dot = strrchr(buf, '.')) {
        *dot = '\0';
        char star[PATH_MAX_LEN + 8];
        snprintf(star, sizeof star, "%s.*", buf);
        if (areal_has(star))
            return true;
    }
    /* a section: some key starts with "path." (lower bound in the sorted list) */
    snprintf(buf, sizeof buf, "%s.", path);
    size_t lo = 0, hi = areal_config_keys_n, n = strlen(buf);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(areal_config_keys[mid], buf) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < areal_config_keys_n && strncmp(areal_config_keys[lo], buf, n) == 0)
        *section = true;
    return *section || areal_has(path);
}

/* ---- unknown keys: the nearest spelling among the siblings --------------- */

static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return 99;
    size_t d[65][65];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t s = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = s < del ? (s < ins ? s : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

/* The closest known sibling of path (same parent), or "" when none is close. */
static void suggest(const char *path, char *out, size_t cap) {
    out[0] = '\0';
    const char *dot = strrchr(path, '.');
    size_t plen = dot ? (size_t)(dot - path) + 1 : 0;
    const char *leaf = path + plen;
    size_t best = 3;
    const char *cands[2048];
    size_t nc = 0;
    for (size_t i = 0; i < areal_config_keys_n && nc < 2048; i++)
        cands[nc++] = areal_config_keys[i];
    for (const cfg_field *f = cfg_fields; f->path != NULL && nc < 2048; f++)
        cands[nc++] = f->path;
    for (const cfg_alias *a = cfg_aliases; a->alias != NULL && nc < 2048; a++)
        cands[nc++] = a->alias;
    for (size_t i = 0; i < nc; i++) {
        const char *k = cands[i];
        if (strncmp(k, path, plen) != 0 || strchr(k + plen, '.') != NULL)
            continue;
        size_t dd = edit_distance(leaf, k + plen);
        if (dd < best) {
            best = dd;
            snprintf(out, cap, "%s", k);
        }
    }
}

/* ---- values ------------------------------------------------------------- */

static const char *type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "a mapping";
    case JSON_ARRAY:
        return "a list";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

static int bad_type(ctx *x, const char *path, const json_t *v, const char *want) {
    char m[256];
    snprintf(m, sizeof m, "expected %s, got %s", want, type_name(v));
    return fail(x, path, m);
}

static int get_number(ctx *x, const char *path, const json_t *v, bool integer, double lo, double hi,
                      double *out) {
    double d;
    if (json_is_string(v)) {
        /* YAML 1.1 loaders (PyYAML) leave "1e-8" a string; OmegaConf and AReaL read a
         * number, so a string that is wholly a number counts as one */
        const char *s = json_string_value(v);
        char *end = NULL;
        errno = 0;
        d = strtod(s, &end);
        if (s[0] == '\0' || end == NULL || *end != '\0' || errno != 0 ||
            isspace((unsigned char)s[0]))
            return bad_type(x, path, v, integer ? "an integer" : "a number");
        if (integer && d != floor(d))
            return bad_type(x, path, v, "an integer");
    } else if (!json_is_number(v)) {
        return bad_type(x, path, v, integer ? "an integer" : "a number");
    } else {
        d = json_number_value(v);
    }
    if (integer && json_is_real(v) && d != floor(d))
        return bad_type(x, path, v, "an integer");
    char m[256];
    if (!isfinite(d) || d < lo || d > hi) {
        if (hi >= 1e299)
            snprintf(m, sizeof m, "%g is out of range; it must be >= %g", d, lo);
        else
            snprintf(m, sizeof m, "%g is out of range; it must be between %g and %g", d, lo, hi);
        return fail(x, path, m);
    }
    *out = d;
    return AREAL_OK;
}

static int choice_index(ctx *x, const char *path, const json_t *v, const char *const *choices,
                        int *idx) {
    if (!json_is_string(v))
        return bad_type(x, path, v, "a string");
    const char *s = json_string_value(v);
    for (int i = 0; choices[i] != NULL; i++)
        if (strcmp(s, choices[i]) == 0) {
            *idx = i;
            return AREAL_OK;
        }
    char m[300];
    size_t k = (size_t)snprintf(m, sizeof m, "\"%.60s\" is not one of", s);
    for (int i = 0; choices[i] != NULL && k < sizeof m; i++)
        k += (size_t)snprintf(m + k, sizeof m - k, "%s %s", i ? "," : "", choices[i]);
    return fail(x, path, m);
}

static int set_value(ctx *x, const cfg_field *f, void *base, const char *path, const json_t *v) {
    char *p = (char *)base + f->off;
    double d;
    int rc, idx;
    switch (f->kind) {
    case K_BOOL:
        if (!json_is_boolean(v))
            return bad_type(x, path, v, "true or false");
        *(bool *)p = json_is_true(v);
        return AREAL_OK;
    case K_INT:
        if ((rc = get_number(x, path, v, true, f->lo, f->hi, &d)) != AREAL_OK)
            return rc;
        *(int *)p = (int)d;
        return AREAL_OK;
    case K_LONG_NULL0:
    case K_OPT_LONG:
        if (json_is_null(v)) {
            *(long *)p = 0;
            if (f->kind == K_OPT_LONG)
                *(bool *)((char *)base + f->off2) = false;
            return AREAL_OK;
        }
        /* fall through */
    case K_LONG:
        if ((rc = get_number(x, path, v, true, f->lo, f->hi, &d)) != AREAL_OK)
            return rc;
        if (json_is_integer(v))
            *(long *)p = (long)json_integer_value(v); /* exact beyond 2^53 */
        else
            *(long *)p = (long)d;
        if (f->kind == K_OPT_LONG)
            *(bool *)((char *)base + f->off2) = true;
        return AREAL_OK;
    case K_DOUBLE_NULL0:
    case K_OPT_DOUBLE:
        if (json_is_null(v)) {
            *(double *)p = 0.0;
            if (f->kind == K_OPT_DOUBLE)
                *(bool *)((char *)base + f->off2) = false;
            return AREAL_OK;
        }
        /* fall through */
    case K_DOUBLE:
        if ((rc = get_number(x, path, v, false, f->lo, f->hi, &d)) != AREAL_OK)
            return rc;
        *(double *)p = d;
        if (f->kind == K_OPT_DOUBLE)
            *(bool *)((char *)base + f->off2) = true;
        return AREAL_OK;
    case K_STR: {
        char **s = (char **)p;
        if (json_is_null(v)) {
            free(*s);
            *s = NULL;
            return AREAL_OK;
        }
        if (!json_is_string(v))
            return bad_type(x, path, v, "a string");
        char *n = strdup(json_string_value(v));
        if (n == NULL)
            return areal_error_set(x->err, AREAL_ENOMEM, -1, "out of memory");
        free(*s);
        *s = n;
        return AREAL_OK;
    }
    case K_BUF:
        if ((rc = choice_index(x, path, v, f->choices, &idx)) != AREAL_OK)
            return rc;
        snprintf(p, 16, "%s", f->choices[idx]);
        return AREAL_OK;
    case K_ENUM:
        if ((rc = choice_index(x, path, v, f->choices, &idx)) != AREAL_OK)
            return rc;
        if (strcmp(f->path, "actor.importance_sampling_level") == 0)
            *(bool *)p = idx == 1;
        else
            *(int *)p = idx;
        return AREAL_OK;
    case K_NORM_LEVEL:
        if (json_is_null(v)) {
            *(areal_norm_level *)p = AREAL_NORM_NONE;
            return AREAL_OK;
        }
        if (json_is_string(v) && strcmp(json_string_value(v), "none") == 0) {
            *(areal_norm_level *)p = AREAL_NORM_NONE;
            return AREAL_OK;
        }
        if ((rc = choice_index(x, path, v, f->choices, &idx)) != AREAL_OK)
            return rc;
        *(areal_norm_level *)p = (areal_norm_level)idx;
        return AREAL_OK;
    case K_INTLIST: {
        if (json_is_null(v))
            v = NULL;
        else if (!json_is_array(v))
            return bad_type(x, path, v, "a list of integers");
        size_t n = v ? json_array_size(v) : 0;
        int *arr = n ? malloc(sizeof(int) * n) : NULL;
        if (n && arr == NULL)
            return areal_error_set(x->err, AREAL_ENOMEM, -1, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *e = json_array_get(v, i);
            if (!json_is_integer(e) || json_integer_value(e) < 0 ||
                json_integer_value(e) > 0x7fffffff) {
                free(arr);
                char m[128];
                snprintf(m, sizeof m, "item %zu must be a token id (an integer >= 0)", i);
                return fail(x, path, m);
            }
            arr[i] = (int)json_integer_value(e);
        }
        int **dst = (int **)p;
        free(*dst);
        *dst = arr;
        *(size_t *)((char *)base + f->off2) = n;
        return AREAL_OK;
    }
    default:
        return fail(x, path, "internal: not a value key");
    }
}

/* ---- the walk ------------------------------------------------------------- */

static int walk(ctx *x, const json_t *obj, const char *prefix, int depth);

static int join(ctx *x, char *out, const char *prefix, const char *key) {
    int n = prefix[0] ? snprintf(out, PATH_MAX_LEN, "%s.%s", prefix, key)
                      : snprintf(out, PATH_MAX_LEN, "%s", key);
    if (n < 0 || n >= PATH_MAX_LEN)
        return areal_error_set(x->err, AREAL_EINVAL, -1, "%s: key path too long under %.60s",
                               x->source, prefix);
    return AREAL_OK;
}

/* A NormConfig mapping at `path` into n. */
static int read_norm(ctx *x, const char *path, const json_t *v, areal_norm_config *n) {
    if (json_is_null(v)) {
        memset(n, 0, sizeof *n);
        return AREAL_OK;
    }
    if (!json_is_object(v))
        return bad_type(x, path, v, "a mapping or null");
    norm_defaults(n);
    const char *k;
    json_t *sub;
    json_object_foreach((json_t *)v, k, sub) {
        char p[PATH_MAX_LEN];
        int rc = join(x, p, path, k);
        if (rc != AREAL_OK)
            return rc;
        const cfg_field *f = NULL;
        for (const cfg_field *g = cfg_norm_fields; g->path != NULL; g++)
            if (strcmp(g->path, k) == 0)
                f = g;
        if (f == NULL) {
            char s[PATH_MAX_LEN];
            suggest(p, s, sizeof s);
            char m[PATH_MAX_LEN + 64];
            snprintf(m, sizeof m, "unknown key%s%s%s", s[0] ? " (did you mean " : "", s,
                     s[0] ? "?)" : "");
            return fail(x, p, m);
        }
        if ((rc = set_value(x, f, n, p, sub)) != AREAL_OK)
            return rc;
    }
    return AREAL_OK;
}

/* The removed behave_imp_weight_cap / _mode (AReaL's migration table). */
static int legacy_rs(ctx *x, const json_t *actor) {
    const json_t *cap = json_object_get(actor, "behave_imp_weight_cap");
    const char *capk = "actor.behave_imp_weight_cap";
    if (cap == NULL) {
        cap = json_object_get(actor, "behav_imp_weight_cap");
        capk = "actor.behav_imp_weight_cap";
    }
    const json_t *mode = json_object_get(actor, "behave_imp_weight_mode");
    if (cap == NULL && mode == NULL)
        return AREAL_OK;
    if (json_object_get(actor, "rejection_sampling") != NULL)
        return areal_error_set(x->err, AREAL_EINVAL, -1,
                               "%s: %s and actor.rejection_sampling both given; keep "
                               "rejection_sampling (the old key was removed in AReaL)",
                               x->source, cap ? capk : "actor.behave_imp_weight_mode");
    const char *m = "token_mask";
    if (mode != NULL) {
        if (!json_is_string(mode))
            return bad_type(x, "actor.behave_imp_weight_mode", mode, "a string");
        m = json_string_value(mode);
    }
    areal_rejection_config *rs = &x->c->actor.rejection_sampling;
    if (strcmp(m, "disabled") == 0) {
        memset(rs, 0, sizeof *rs);
        return AREAL_OK;
    }
    rs_defaults(rs);
    if (strcmp(m, "token_truncate") == 0)
        rs->action = AREAL_RS_CLAMP;
    else if (strcmp(m, "token_mask") != 0)
        return fail(x, "actor.behave_imp_weight_mode",
                    "must be disabled, token_mask or token_truncate");
    if (cap != NULL) {
        double d;
        int rc = get_number(x, capk, cap, false, 1.000001, 1e300, &d);
        if (rc != AREAL_OK)
            return rc;
        rs->upper = d;
    }
    return AREAL_OK;
}

static bool is_legacy_rs(const char *path) {
    return strcmp(path, "actor.behave_imp_weight_cap") == 0 ||
           strcmp(path, "actor.behav_imp_weight_cap") == 0 ||
           strcmp(path, "actor.behave_imp_weight_mode") == 0;
}

/* Keys of AReaL that change the algorithm in ways this trainer does not implement. */
static int unsupported(ctx *x, const char *path, const json_t *v) {
    static const struct {
        const char *path;
        const char *why;
    } rules[] = {
        {"actor.use_sapo_loss", "SAPO is not implemented; remove it or set false"},
        {"actor.m2_threshold", "M2PO masking is not implemented; remove it or set null"},
        {"actor.use_lora", "LoRA training is not implemented; remove it or set false"},
    };
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
        if (strcmp(path, rules[i].path) != 0)
            continue;
        if (json_is_null(v) || json_is_false(v))
            return AREAL_OK;
        return fail(x, path, rules[i].why);
    }
    if (strcmp(path, "actor.prox_logp_method") == 0 && json_is_string(v) &&
        strcmp(json_string_value(v), "recompute") != 0)
        return fail(x, path,
                    "only \"recompute\" is implemented (the proximal logprobs are recomputed)");
    return AREAL_OK;
}

static int walk_key(ctx *x, const char *path, const json_t *v, int depth) {
    int rc;
    const cfg_field *f = cfg_find_field(path);
    if (f != NULL) {
        if ((rc = mark_set(x, path, v, path)) != AREAL_OK)
            return rc;
        char *base = (char *)x->c;
        switch (f->kind) {
        case K_SECTION:
            if (!json_is_object(v))
                return bad_type(x, path, v, "a mapping");
            return walk(x, v, path, depth + 1);
        case K_NORM:
            return read_norm(x, path, v, (areal_norm_config *)(base + f->off));
        case K_RS: {
            areal_rejection_config *rs = (areal_rejection_config *)(base + f->off);
            if (json_is_null(v)) {
                memset(rs, 0, sizeof *rs);
                return AREAL_OK;
            }
            if (!json_is_object(v))
                return bad_type(x, path, v, "a mapping or null");
            rs_defaults(rs);
            return walk(x, v, path, depth + 1);
        }
        case K_DATASET: {
            areal_dataset_config *d = (areal_dataset_config *)(base + f->off);
            if (json_is_null(v)) {
                d->present = false;
                return AREAL_OK;
            }
            if (!json_is_object(v))
                return bad_type(x, path, v, "a mapping or null");
            d->present = true;
            return walk(x, v, path, depth + 1);
        }
        default:
            return set_value(x, f, base, path, v);
        }
    }
    for (const cfg_alias *a = cfg_aliases; a->alias != NULL; a++) {
        if (strcmp(a->alias, path) != 0)
            continue;
        const cfg_field *t = cfg_find_field(a->target);
        if ((rc = mark_set(x, a->target, v, path)) != AREAL_OK)
            return rc;
        return set_value(x, t, x->c, path, v);
    }
    if (is_legacy_rs(path))
        return AREAL_OK; /* applied by legacy_rs() */
    if ((rc = unsupported(x, path, v)) != AREAL_OK)
        return rc;
    bool section = false;
    bool ours = false; /* a prefix of an understood key or alias: model, rl, actor, ... */
    size_t pl = strlen(path);
    for (const cfg_field *g = cfg_fields; g->path != NULL && !ours; g++)
        ours = strncmp(g->path, path, pl) == 0 && g->path[pl] == '.';
    for (const cfg_alias *a = cfg_aliases; a->alias != NULL && !ours; a++)
        ours = strncmp(a->alias, path, pl) == 0 && a->alias[pl] == '.';
    bool known = areal_known(path, &section);
    if (json_is_object(v) && (section || ours))
        return walk(x, v, path, depth + 1);
    if (known)
        return add_ignored(x, path);
    char s[PATH_MAX_LEN];
    suggest(path, s, sizeof s);
    char m[PATH_MAX_LEN + 96];
    snprintf(m, sizeof m, "unknown key%s%s%s", s[0] ? " (did you mean " : "", s,
             s[0] ? "?)" : "; it is neither an AReaL key nor one of the job's short keys");
    return fail(x, path, m);
}

static int walk(ctx *x, const json_t *obj, const char *prefix, int depth) {
    if (depth > 32)
        return fail(x, prefix, "nested too deeply");
    if (strcmp(prefix, "actor") == 0) {
        int rc = legacy_rs(x, obj);
        if (rc != AREAL_OK)
            return rc;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        char path[PATH_MAX_LEN];
        int rc = join(x, path, prefix, k);
        if (rc != AREAL_OK)
            return rc;
        if ((rc = walk_key(x, path, v, depth)) != AREAL_OK)
            return rc;
    }
    return AREAL_OK;
}

/* ---- ${a.b} interpolations -------------------------------------------------- */

static json_t *lookup(json_t *root, const char *path) {
    char buf[PATH_MAX_LEN];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *cur = root;
    for (char *tok = buf, *dot; cur != NULL && tok != NULL; tok = dot) {
        dot = strchr(tok, '.');
        if (dot)
            *dot++ = '\0';
        cur = json_is_object(cur) ? json_object_get(cur, tok) : NULL;
    }
    return cur;
}

static int resolve_value(ctx *x, json_t *root, json_t *parent, const char *key, json_t *v,
                         const char *path, int depth);

/* A whole-section interpolation copies its target, and copies may hold
 * further interpolations of sections: nested that way ("b: {x: ${a}, y: ${a}}",
 * "c: {x: ${b}, y: ${b}}", ...) a few lines grow to billions of values. Real
 * configs copy a section or two (tens of values), so the reader stops at this
 * many copied values with an error instead of running out of memory.
 * Rejected: resolving lazily as OmegaConf does; the config is read once and
 * walked whole, so the copies would be made anyway. */
#define COPY_BUDGET 100000

/* The number of values in v, counting up to limit + 1 and no further. */
static size_t count_values(const json_t *v, size_t limit) {
    size_t n = 1;
    const char *k;
    json_t *c;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, c) {
            if (n > limit)
                break;
            n += count_values(c, limit - n);
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, c) {
            if (n > limit)
                break;
            n += count_values(c, limit - n);
        }
    }
    return n;
}

/* True when ref names path itself or a section that holds it: "a" for "a.x.y". */
static bool ref_holds(const char *ref, const char *path) {
    size_t rl = strlen(ref);
    return strncmp(ref, path, rl) == 0 && (path[rl] == '\0' || path[rl] == '.');
}

/* Resolves "${p}" strings in place; keys whose reference is absent are removed (unset). */
static int resolve_tree(ctx *x, json_t *root, json_t *node, const char *prefix, int depth) {
    if (depth > 32 || !json_is_object(node))
        return AREAL_OK;
    /* Resolving one key may remove or replace others of this object (a
     * reference resolved first), so walk a copy of the key list and look each
     * key up afresh. */
    json_t *keys = json_array();
    if (keys == NULL)
        return areal_error_set(x->err, AREAL_ENOMEM, -1, "out of memory");
    const char *k;
    json_t *v;
    json_object_foreach(node, k, v) {
        if (json_array_append_new(keys, json_string(k)) != 0) {
            json_decref(keys);
            return areal_error_set(x->err, AREAL_ENOMEM, -1, "out of memory");
        }
    }
    int rc = AREAL_OK;
    size_t i;
    json_t *kj;
    json_array_foreach(keys, i, kj) {
        const char *key = json_string_value(kj);
        char path[PATH_MAX_LEN];
        if ((rc = join(x, path, prefix, key)) != AREAL_OK)
            break;
        json_t *cur = json_object_get(node, key);
        if (cur == NULL)
            continue;
        if ((rc = resolve_value(x, root, node, key, cur, path, 0)) != AREAL_OK)
            break;
        json_t *nv = json_object_get(node, key);
        if (nv != NULL && (rc = resolve_tree(x, root, nv, path, depth + 1)) != AREAL_OK)
            break;
    }
    json_decref(keys);
    return rc;
}

static int resolve_value(ctx *x, json_t *root, json_t *parent, const char *key, json_t *v,
                         const char *path, int depth) {
    if (!json_is_string(v))
        return AREAL_OK;
    const char *s = json_string_value(v);
    const char *open = strstr(s, "${");
    if (open == NULL)
        return AREAL_OK;
    if (depth > 16)
        return fail(x, path, "interpolations refer to each other in a cycle");
    size_t n = strlen(s);
    const char *close = strchr(open, '}');
    if (close == NULL)
        return fail(x, path, "an interpolation \"${\" is not closed by \"}\"");
    char ref[PATH_MAX_LEN];
    size_t rl = (size_t)(close - open - 2);
    if (rl == 0 || rl >= sizeof ref)
        return fail(x, path, "an empty or overlong ${...} interpolation");
    memcpy(ref, open + 2, rl);
    ref[rl] = '\0';
    for (size_t i = 0; i < rl; i++)
        if (!(isalnum((unsigned char)ref[i]) || ref[i] == '_' || ref[i] == '.'))
            return fail(x, path,
                        "only ${dotted.key} interpolations are supported (no resolvers such as "
                        "${oc.env:...})");
    json_t *target = lookup(root, ref);
    if (target != NULL && json_is_string(target) && strstr(json_string_value(target), "${")) {
        /* resolve the target first (it may live anywhere in the tree) */
        char *dot = strrchr(ref, '.');
        json_t *tparent = dot ? lookup(root, (*dot = '\0', ref)) : root;
        const char *tkey = dot ? dot + 1 : ref;
        int rc = resolve_value(x, root, tparent, tkey, target, path, depth + 1);
        if (rc != AREAL_OK)
            return rc;
        if (dot)
            *dot = '.';
        target = lookup(root, ref);
    }
    bool whole = open == s && close == s + n - 1;
    if (target == NULL) {
        if (whole) {
            /* a reference to a key left at its default: leave this one unset too */
            json_object_del(parent, key);
            return AREAL_OK;
        }
        char m[PATH_MAX_LEN + 64];
        snprintf(m, sizeof m, "cannot resolve ${%s}: the key is not in the document", ref);
        return fail(x, path, m);
    }
    json_t *nv;
    if (whole) {
        if ((json_is_object(target) || json_is_array(target)) && ref_holds(ref, path)) {
            char m[2 * PATH_MAX_LEN + 128];
            snprintf(m, sizeof m,
                     "${%s} refers to a section that holds this key, so it would contain itself "
                     "(a cycle); refer to a key outside %s",
                     ref, ref);
            return fail(x, path, m);
        }
        size_t n_vals = count_values(target, COPY_BUDGET - x->copied);
        if (x->copied + n_vals > COPY_BUDGET) {
            char m[PATH_MAX_LEN + 192];
            snprintf(m, sizeof m,
                     "${%s} takes the values copied by interpolations past %d (sections copied "
                     "into sections that are copied again); interpolate smaller sections or "
                     "write the values out",
                     ref, COPY_BUDGET);
            return fail(x, path, m);
        }
        x->copied += n_vals;
        nv = json_deep_copy(target);
    } else {
        char val[256];
        if (json_is_string(target))
            snprintf(val, sizeof val, "%s", json_string_value(target));
        else if (json_is_integer(target))
            snprintf(val, sizeof val, "%lld", (long long)json_integer_value(target));
        else if (json_is_real(target))
            snprintf(val, sizeof val, "%.17g", json_real_value(target));
        else if (json_is_boolean(target))
            snprintf(val, sizeof val, "%s", json_is_true(target) ? "true" : "false");
        else
            return fail(x, path, "only scalars can be interpolated inside a string");
        size_t pre = (size_t)(open - s), vl = strlen(val), post = n - (size_t)(close + 1 - s);
        char *buf = malloc(pre + vl + post + 1);
        if (buf == NULL)
            return areal_error_set(x->err, AREAL_ENOMEM, -1, "out of memory");
        memcpy(buf, s, pre);
        memcpy(buf + pre, val, vl);
        memcpy(buf + pre + vl, close + 1, post);
        buf[pre + vl + post] = '\0';
        nv = json_string(buf);
        free(buf);
    }
    if (nv == NULL || json_object_set_new(parent, key, nv) != 0)
        return areal_error_set(x->err, AREAL_ENOMEM, -1, "out of memory");
    /* the new string may hold a further interpolation */
    return resolve_value(x, root, parent, key, json_object_get(parent, key), path, depth + 1);
}

/* ---- cross-field rules ------------------------------------------------------ */

static int check_norm(ctx *x, const char *path, const areal_norm_config *n) {
    if (!n->enabled)
        return AREAL_OK;
    if ((n->mean_level == AREAL_NORM_GROUP || n->std_level == AREAL_NORM_GROUP) &&
        n->group_size < 1)
        return fail(x, path, "group_size must be >= 1 with group normalisation");
    return AREAL_OK;
}

static int check_rs(ctx *x, areal_rejection_config *r) {
    const char *p = "actor.rejection_sampling";
    if (!r->enabled)
        return AREAL_OK;
    char m[200];
    if (r->has_lower && r->lower > r->upper) {
        snprintf(m, sizeof m, "lower (%g) cannot be greater than upper (%g)", r->lower, r->upper);
        return fail(x, p, m);
    }
    if (r->metric == AREAL_RS_RATIO) {
        if (r->upper <= 1.0) {
            snprintf(m, sizeof m,
                     "upper must be > 1.0 for the ratio metric (got %g; otherwise every token "
                     "of a changed policy is filtered)",
                     r->upper);
            return fail(x, p, m);
        }
        if (r->has_lower && r->lower <= 0.0)
            return fail(x, p, "lower must be positive for the ratio metric");
    }
    if ((r->metric == AREAL_RS_KL_K2 || r->metric == AREAL_RS_KL_K3) && r->upper <= 0.0)
        return fail(x, p, "upper must be positive for the kl_k2 and kl_k3 metrics");
    if (r->action == AREAL_RS_CLAMP && r->metric != AREAL_RS_RATIO)
        return fail(x, p,
                    "action clamp only supports metric ratio; use action mask for KL metrics");
    if (r->action == AREAL_RS_CLAMP && !r->has_lower) {
        r->has_lower = true;
        r->lower = 0.0;
    }
    return AREAL_OK;
}

static int finish(ctx *x) {
    areal_rl_config *c = x->c;
    int rc;
    if ((rc = check_norm(x, "actor.reward_norm", &c->actor.reward_norm)) != AREAL_OK ||
        (rc = check_norm(x, "actor.adv_norm", &c->actor.adv_norm)) != AREAL_OK ||
        (rc = check_rs(x, &c->actor.rejection_sampling)) != AREAL_OK)
        return rc;
    /* the GRPO group is G unless an older config named it */
    if (!was_set(x, "actor.group_size"))
        c->actor.group_size = c->gconfig.n_samples;
    /* AReaL's examples set consumer_batch_size: ${train_dataset.batch_size}; do the same
     * when it is not given (the code default 1 would train on one prompt a step) */
    if (!was_set(x, "rollout.consumer_batch_size"))
        c->rollout.consumer_batch_size = c->train_dataset.batch_size;
    if (c->valid_dataset.present && c->valid_dataset.batch_size == 0)
        c->valid_dataset.batch_size = c->train_dataset.batch_size;
    if (c->gconfig.min_new_tokens > c->gconfig.max_new_tokens)
        return fail(x, "gconfig.min_new_tokens", "must not exceed gconfig.max_new_tokens");
    if (c->actor.overlong_reward_penalty && c->actor.overlong_tokens <= 0)
        return fail(x, "actor.overlong_tokens", "must be set (> 0) with overlong_reward_penalty");
    if (c->actor.has_c_clip && c->actor.c_clip <= 1.0)
        return fail(x, "actor.c_clip", "must be > 1 (dual clip)");
    return AREAL_OK;
}

/* ---- entry points ------------------------------------------------------------ */

int areal_rl_config_from_json(const json_t *doc, const char *source, areal_rl_config *out,
                              areal_error *err) {
    areal_rl_config_defaults(out);
    ctx x = {out, source ? source : "config", err, NULL, 0, 0, 0};
    if (doc == NULL || json_is_null(doc))
        return finish(&x);
    if (!json_is_object(doc))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: the configuration must be a mapping of keys, got %s", x.source,
                               type_name(doc));
    json_t *copy = json_deep_copy(doc);
    if (copy == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    int rc = resolve_tree(&x, copy, copy, "", 0);
    if (rc == AREAL_OK)
        rc = walk(&x, copy, "", 0);
    if (rc == AREAL_OK)
        rc = finish(&x);
    free(x.set);
    json_decref(copy);
    return rc;
}

int areal_rl_config_parse(const char *text, size_t len, const char *source, areal_rl_config *out,
                          areal_error *err) {
    areal_rl_config_defaults(out);
    json_t *doc = areal_yaml_to_json(text, len, source ? source : "config", err);
    if (doc == NULL)
        return err != NULL && err->code != AREAL_OK ? err->code : AREAL_EINVAL;
    int rc = areal_rl_config_from_json(doc, source, out, err);
    json_decref(doc);
    return rc;
}

int areal_rl_config_load(const char *path, areal_rl_config *out, areal_error *err) {
    areal_rl_config_defaults(out);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return areal_error_set(err, AREAL_EIO, -1, "cannot open config %s: %s", path,
                               strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            size_t nc = cap ? cap * 2 : 1 << 14;
            if (nc > (64u << 20)) {
                free(buf);
                fclose(f);
                return areal_error_set(err, AREAL_EINVAL, -1, "config %s is over 64 MiB", path);
            }
            char *nb = realloc(buf, nc);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
            }
            buf = nb;
            cap = nc;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0)
            break;
    }
    fclose(f);
    int rc = areal_rl_config_parse(buf, len, path, out, err);
    free(buf);
    return rc;
}
