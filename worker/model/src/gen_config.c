/*
 * gen_config.c - generation_config.json (see gen_config.h). A field the
 * file leaves out means no restriction (temperature 1, top_p 1, top_k off):
 * transformers 5 writes every default as null or leaves it out, and the
 * serving engines read an absent field the same way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "areal/model/gen_config.h"
#include "file_util.h"

static int bad(const char *file, const char *field, const char *what, areal_error *err) {
    return areal_error_set(err, AREAL_EINVAL, -1, "%s: field \"%s\" %s", file, field, what);
}

static int num(json_t *doc, const char *file, const char *key, float def, float *out,
               areal_error *err) {
    json_t *v = json_object_get(doc, key);
    *out = def;
    if (v == NULL || json_is_null(v))
        return AREAL_OK;
    if (!json_is_number(v) || json_number_value(v) < 0)
        return bad(file, key, "must be a non-negative number", err);
    *out = (float)json_number_value(v);
    return AREAL_OK;
}

static int eos(json_t *doc, const char *file, areal_gen_config *g, areal_error *err) {
    json_t *v = json_object_get(doc, "eos_token_id");
    if (v == NULL || json_is_null(v))
        return AREAL_OK;
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    if (n > AREAL_GEN_MAX_EOS)
        return bad(file, "eos_token_id", "lists more than 16 ids", err);
    for (size_t i = 0; i < n; i++) {
        json_t *id = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) > INT32_MAX)
            return bad(file, "eos_token_id", "must be a token id or a list of them", err);
        g->eos[g->n_eos++] = (int32_t)json_integer_value(id);
    }
    return AREAL_OK;
}

int areal_gen_config_load(const char *dir, areal_gen_config *g, areal_error *err) {
    memset(g, 0, sizeof *g);
    g->temperature = g->top_p = g->repetition_penalty = 1.0f;
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    if (stat(path, &st) != 0)
        return AREAL_OK;
    char *text;
    size_t len;
    int rc = areal_read_file(path, AREAL_MODEL_JSON_MAX, &text, &len, err);
    if (rc != AREAL_OK)
        return rc;
    json_t *doc = areal_json_parse(text, len, path, err);
    free(text);
    if (doc == NULL)
        return AREAL_EINVAL;
    g->present = true;
    json_t *ds = json_object_get(doc, "do_sample"), *tk = json_object_get(doc, "top_k");
    if (ds != NULL && !json_is_null(ds) && !json_is_boolean(ds))
        rc = bad(path, "do_sample", "must be true or false", err);
    g->do_sample = json_is_true(ds);
    if (rc == AREAL_OK && tk != NULL && !json_is_null(tk) &&
        (!json_is_integer(tk) || json_integer_value(tk) < 0 || json_integer_value(tk) > 1 << 30))
        rc = bad(path, "top_k", "must be a non-negative integer", err);
    g->top_k = json_is_integer(tk) ? (int)json_integer_value(tk) : 0;
    if (rc == AREAL_OK)
        rc = num(doc, path, "temperature", 1.0f, &g->temperature, err);
    if (rc == AREAL_OK)
        rc = num(doc, path, "top_p", 1.0f, &g->top_p, err);
    if (rc == AREAL_OK && (g->top_p <= 0 || g->top_p > 1))
        rc = bad(path, "top_p", "must be in (0, 1]", err);
    if (rc == AREAL_OK)
        rc = num(doc, path, "repetition_penalty", 1.0f, &g->repetition_penalty, err);
    if (rc == AREAL_OK)
        rc = eos(doc, path, g, err);
    json_decref(doc);
    return rc;
}
