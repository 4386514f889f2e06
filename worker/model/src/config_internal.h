/*
 * config_internal.h - the pieces of the config.json reader shared by its
 * files (config.c: architecture and sizes; config_rope.c: rope_theta,
 * rope_scaling and transformers 5's rope_parameters; config_keys.c: the table
 * of every key the reader understands). Internal to model/src.
 */
#ifndef AREAL_MODEL_CONFIG_INTERNAL_H
#define AREAL_MODEL_CONFIG_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "areal/model/config.h"

typedef struct cfg_reader {
    json_t *doc;
    const char *file;
    areal_error *err;
} cfg_reader;

/* Sets err to "FILE: field "x" what" and returns AREAL_EINVAL. */
int cfg_bad(const cfg_reader *r, const char *field, const char *what);

/* A positive finite number; `def` when absent or null. `field` names it in messages. */
int cfg_get_num(const cfg_reader *r, json_t *obj, const char *key, const char *field, double def,
                double *out);

/* An integer in [lo, hi]; `def` when absent or null unless required. */
int cfg_get_int(const cfg_reader *r, json_t *obj, const char *key, const char *field, int64_t lo,
                int64_t hi, bool required, int64_t def, int64_t *out);

/* Reads rope_theta / rope_scaling (4.x) or rope_parameters (5.x) into c. */
int cfg_read_rope(const cfg_reader *r, areal_model_config *c);

/*
 * Refuses a top-level key this reader does not understand, naming it: an
 * unknown key may change the math (a new attention variant, quantisation), so
 * guessing a default would load a model that computes something else.
 */
int cfg_check_keys(const cfg_reader *r);

#endif
