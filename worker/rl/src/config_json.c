/*
 * config_json.c - the effective configuration as JSON (config.h), written
 * from the same key table that the reader uses, so every understood key
 * appears under its AReaL path.
 */
#include <stdio.h>
#include <string.h>

#include "areal/rl/config.h"
#include "config_internal.h"

/* Sets value v at dotted path under root, creating the objects on the way. */
static int put(json_t *root, const char *path, json_t *v) {
    if (v == NULL)
        return -1;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *cur = root;
    char *tok = buf;
    for (char *dot; (dot = strchr(tok, '.')) != NULL; tok = dot + 1) {
        *dot = '\0';
        json_t *next = json_object_get(cur, tok);
        if (!json_is_object(next)) {
            next = json_object();
            if (next == NULL || json_object_set_new(cur, tok, next) != 0) {
                json_decref(v);
                return -1;
            }
        }
        cur = next;
    }
    return json_object_set_new(cur, tok, v);
}

static json_t *norm_json(const areal_norm_config *n) {
    if (!n->enabled)
        return json_null();
    static const char *const lv[] = {NULL, "batch", "group"};
    return json_pack("{s:o,s:b,s:o,s:b,s:f,s:i}", "mean_level",
                     lv[n->mean_level] ? json_string(lv[n->mean_level]) : json_null(),
                     "mean_leave1out", n->mean_leave1out, "std_level",
                     lv[n->std_level] ? json_string(lv[n->std_level]) : json_null(), "std_unbiased",
                     n->std_unbiased, "eps", n->eps, "group_size", n->group_size);
}

static json_t *value_json(const cfg_field *f, const char *base) {
    const char *p = base + f->off;
    switch (f->kind) {
    case K_BOOL:
        return json_boolean(*(const bool *)p);
    case K_INT:
        return json_integer(*(const int *)p);
    case K_LONG:
        return json_integer(*(const long *)p);
    case K_LONG_NULL0:
        return *(const long *)p ? json_integer(*(const long *)p) : json_null();
    case K_OPT_LONG:
        return *(const bool *)(base + f->off2) ? json_integer(*(const long *)p) : json_null();
    case K_DOUBLE:
        return json_real(*(const double *)p);
    case K_DOUBLE_NULL0:
        return *(const double *)p != 0.0 ? json_real(*(const double *)p) : json_null();
    case K_OPT_DOUBLE:
        return *(const bool *)(base + f->off2) ? json_real(*(const double *)p) : json_null();
    case K_STR:
        return *(char *const *)p ? json_string(*(char *const *)p) : json_null();
    case K_BUF:
        return json_string(p);
    case K_ENUM: {
        int idx = strcmp(f->path, "actor.importance_sampling_level") == 0 ? *(const bool *)p
                                                                          : *(const int *)p;
        return json_string(f->choices[idx]);
    }
    case K_INTLIST: {
        json_t *a = json_array();
        const int *v = *(int *const *)p;
        size_t n = *(const size_t *)(base + f->off2);
        for (size_t i = 0; a != NULL && i < n; i++)
            json_array_append_new(a, json_integer(v[i]));
        return a;
    }
    case K_NORM:
        return norm_json((const areal_norm_config *)p);
    default:
        return NULL;
    }
}

json_t *areal_rl_config_to_json(const areal_rl_config *c) {
    json_t *root = json_object();
    if (root == NULL)
        return NULL;
    const char *base = (const char *)c;
    const areal_rejection_config *rs = &c->actor.rejection_sampling;
    for (const cfg_field *f = cfg_fields; f->path != NULL; f++) {
        if (f->kind == K_SECTION || f->kind == K_DATASET)
            continue;
        if (strncmp(f->path, "valid_dataset.", 14) == 0 && !c->valid_dataset.present)
            continue;
        if (f->kind == K_RS) {
            if (!rs->enabled && put(root, f->path, json_null()) != 0)
                goto oom;
            continue;
        }
        if (strncmp(f->path, "actor.rejection_sampling.", 25) == 0 && !rs->enabled)
            continue;
        if (put(root, f->path, value_json(f, base)) != 0)
            goto oom;
    }
    if (!c->valid_dataset.present && put(root, "valid_dataset", json_null()) != 0)
        goto oom;
    if (put(root, "actor.group_size", json_integer(c->actor.group_size)) != 0)
        goto oom;
    return root;
oom:
    json_decref(root);
    return NULL;
}
