/*
 * config_rope.c - the rotary embedding settings of config.json in every
 * spelling transformers writes:
 *   4.x  top-level "rope_theta" and "rope_scaling" {"rope_type" | "type",
 *        "factor", ...} (null or absent: plain RoPE);
 *   5.x  "rope_parameters" {"rope_theta", "rope_type", "factor", ...}, with a
 *        top-level rope_theta as fallback for the base.
 * When both spellings are present they must agree, or the file is refused
 * naming both: which one a given transformers release reads is exactly the
 * kind of guess that gave logprob errors of 0.4-2.9 when rope_parameters was
 * ignored. A key inside the scaling object that this reader does not know
 * (mrope_section, a partial_rotary_factor other than 1, ...) is refused by
 * name, for the same reason.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config_internal.h"

typedef struct rope_type_name {
    const char *name;
    areal_rope_type type;
} rope_type_name;

static const rope_type_name types[] = {
    {"default", AREAL_ROPE_DEFAULT}, {"linear", AREAL_ROPE_LINEAR}, {"dynamic", AREAL_ROPE_DYNAMIC},
    {"yarn", AREAL_ROPE_YARN},       {"llama3", AREAL_ROPE_LLAMA3},
};

/* Keys a scaling object may hold (each checked or read below). */
static const char *const scaling_keys[] = {
    "rope_type",
    "type",
    "rope_theta",
    "factor",
    "original_max_position_embeddings",
    "low_freq_factor",
    "high_freq_factor",
    "beta_fast",
    "beta_slow",
    "partial_rotary_factor",
    "attention_factor",
    "mscale",
    "mscale_all_dim",
    "truncate",
};

static int check_scaling_keys(const cfg_reader *r, json_t *o, const char *where) {
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        (void)v;
        size_t i = 0;
        while (i < sizeof scaling_keys / sizeof *scaling_keys && strcmp(key, scaling_keys[i]) != 0)
            i++;
        if (i == sizeof scaling_keys / sizeof *scaling_keys) {
            char field[96];
            snprintf(field, sizeof field, "%s.%.40s", where, key);
            return cfg_bad(r, field,
                           "is not understood by this runtime; it may change the rotary "
                           "embedding, so the model is refused");
        }
    }
    return AREAL_OK;
}

/* Parses a scaling object (rope_scaling or rope_parameters) named `where` into rs. */
static int parse_scaling(const cfg_reader *r, json_t *o, const char *where,
                         areal_rope_scaling *rs) {
    char field[96];
    memset(rs, 0, sizeof *rs);
    int rc = check_scaling_keys(r, o, where);
    if (rc != AREAL_OK)
        return rc;
    json_t *t1 = json_object_get(o, "rope_type"), *t2 = json_object_get(o, "type");
    if (t1 != NULL && t2 != NULL && !json_equal(t1, t2)) {
        snprintf(field, sizeof field, "%s.type", where);
        return cfg_bad(r, field, "disagrees with rope_type; give one of them");
    }
    json_t *t = t1 != NULL ? t1 : t2;
    const char *s = t == NULL ? "default" : json_string_value(t);
    snprintf(field, sizeof field, "%s.rope_type", where);
    if (s == NULL)
        return cfg_bad(r, field, "must be a string");
    size_t i = 0;
    while (i < sizeof types / sizeof *types && strcmp(s, types[i].name) != 0)
        i++;
    if (i == sizeof types / sizeof *types)
        return cfg_bad(r, field, "is not one of default, linear, dynamic, yarn, llama3");
    rs->type = types[i].type;
    double prf;
    snprintf(field, sizeof field, "%s.partial_rotary_factor", where);
    if ((rc = cfg_get_num(r, o, "partial_rotary_factor", field, 1.0, &prf)) != AREAL_OK)
        return rc;
    if (prf != 1.0)
        return cfg_bad(r, field, "is not 1; partial rotary embeddings are not supported");
    if (rs->type == AREAL_ROPE_DEFAULT)
        return AREAL_OK;
    snprintf(field, sizeof field, "%s.factor", where);
    if ((rc = cfg_get_num(r, o, "factor", field, 0, &rs->factor)) != AREAL_OK)
        return rc;
    if (rs->factor == 0)
        return cfg_bad(r, field, "is missing");
    snprintf(field, sizeof field, "%s.original_max_position_embeddings", where);
    if ((rc = cfg_get_int(r, o, "original_max_position_embeddings", field, 1, INT64_MAX / 2,
                          rs->type == AREAL_ROPE_LLAMA3, 0,
                          &rs->original_max_position_embeddings)) != AREAL_OK)
        return rc;
    if (rs->type == AREAL_ROPE_LLAMA3) {
        snprintf(field, sizeof field, "%s.low_freq_factor", where);
        if ((rc = cfg_get_num(r, o, "low_freq_factor", field, 0, &rs->low_freq_factor)) != 0)
            return rc;
        snprintf(field, sizeof field, "%s.high_freq_factor", where);
        if ((rc = cfg_get_num(r, o, "high_freq_factor", field, 0, &rs->high_freq_factor)) != 0)
            return rc;
        if (rs->low_freq_factor == 0 || rs->high_freq_factor == 0 ||
            rs->high_freq_factor <= rs->low_freq_factor)
            return cfg_bad(r, field, "and low_freq_factor must be set, with high > low");
    }
    if (rs->type == AREAL_ROPE_YARN) {
        snprintf(field, sizeof field, "%s.beta_fast", where);
        if ((rc = cfg_get_num(r, o, "beta_fast", field, 32, &rs->beta_fast)) != AREAL_OK)
            return rc;
        snprintf(field, sizeof field, "%s.beta_slow", where);
        if ((rc = cfg_get_num(r, o, "beta_slow", field, 1, &rs->beta_slow)) != AREAL_OK)
            return rc;
    }
    return AREAL_OK;
}

static bool same_scaling(const areal_rope_scaling *a, const areal_rope_scaling *b) {
    return a->type == b->type && a->factor == b->factor &&
           a->low_freq_factor == b->low_freq_factor && a->high_freq_factor == b->high_freq_factor &&
           a->beta_fast == b->beta_fast && a->beta_slow == b->beta_slow &&
           a->original_max_position_embeddings == b->original_max_position_embeddings;
}

int cfg_read_rope(const cfg_reader *r, areal_model_config *c) {
    json_t *rp = json_object_get(r->doc, "rope_parameters");
    json_t *rs = json_object_get(r->doc, "rope_scaling");
    json_t *top = json_object_get(r->doc, "rope_theta");
    bool have_rp = rp != NULL && !json_is_null(rp), have_rs = rs != NULL && !json_is_null(rs);
    if (have_rp && !json_is_object(rp))
        return cfg_bad(r, "rope_parameters", "must be an object or null");
    if (have_rs && !json_is_object(rs))
        return cfg_bad(r, "rope_scaling", "must be an object or null");
    if (have_rp &&
        (json_object_get(rp, "full_attention") || json_object_get(rp, "sliding_attention")))
        return cfg_bad(r, "rope_parameters",
                       "holds one set per layer type; per-layer-type rotary embeddings are not "
                       "supported");
    int rc = cfg_get_num(r, r->doc, "rope_theta", "rope_theta", 10000.0, &c->rope_theta);
    if (rc != AREAL_OK)
        return rc;
    areal_rope_scaling from_rs = {0};
    if (have_rs && (rc = parse_scaling(r, rs, "rope_scaling", &from_rs)) != AREAL_OK)
        return rc;
    if (!have_rp) {
        c->rope_scaling = from_rs;
        return AREAL_OK;
    }
    if ((rc = parse_scaling(r, rp, "rope_parameters", &c->rope_scaling)) != AREAL_OK)
        return rc;
    json_t *inner = json_object_get(rp, "rope_theta");
    if (inner != NULL && !json_is_null(inner)) {
        double theta;
        if ((rc = cfg_get_num(r, rp, "rope_theta", "rope_parameters.rope_theta", 0, &theta)))
            return rc;
        if (top != NULL && !json_is_null(top) && theta != c->rope_theta)
            return cfg_bad(r, "rope_parameters.rope_theta",
                           "disagrees with the top-level rope_theta; keep one of them");
        c->rope_theta = theta;
    }
    if (have_rs && !same_scaling(&from_rs, &c->rope_scaling))
        return cfg_bad(r, "rope_scaling",
                       "disagrees with rope_parameters; keep one of them (transformers 5 reads "
                       "rope_parameters)");
    return AREAL_OK;
}
