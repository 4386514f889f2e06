/*
 * yaml_json.h - reads a YAML document into a jansson value, so that every
 * input file, YAML or JSON, is decoded by one JSON-shaped decoder.
 */
#ifndef AREAL_YAML_JSON_H
#define AREAL_YAML_JSON_H

#include <stddef.h>

#include <jansson.h>

#include "areal/error.h"

/*
 * Parses the first YAML document in `text` into a new json_t (caller owns one
 * reference). Plain scalars become null, booleans, integers or reals when they
 * read as such (YAML 1.2 core schema); quoted scalars are always strings.
 * Aliases, non-scalar mapping keys and nesting deeper than 64 are rejected.
 * Returns NULL and fills `err` (line:column in the message, pos = byte offset)
 * on failure. `source` names the input in messages.
 */
json_t *areal_yaml_to_json(const char *text, size_t len, const char *source, areal_error *err);

#endif
