/*
 * file_util.h - internal helpers of the model component: whole-file reads,
 * read-only mappings and JSON documents loaded with errors that name the file.
 *
 * Files are read whole (config.json, tokenizer.json, the index) or mapped
 * (safetensors). JSON goes through jansson with duplicate keys rejected, since
 * a duplicate key in a model file is always a mistake that would otherwise be
 * resolved silently (last one wins).
 */
#ifndef AREAL_MODEL_FILE_UTIL_H
#define AREAL_MODEL_FILE_UTIL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"

/* Largest JSON file read whole (tokenizer.json of a 150k vocabulary is ~10 MB). */
#define AREAL_MODEL_JSON_MAX ((size_t)256 << 20)

/*
 * Reads all of `path` into a new NUL-terminated buffer (*out, length *len,
 * caller frees). Files larger than `max` are refused. Returns 0, AREAL_EIO,
 * AREAL_ERANGE or AREAL_ENOMEM; on failure *out is NULL.
 */
int areal_read_file(const char *path, size_t max, char **out, size_t *len, areal_error *err);

/*
 * Maps `path` read-only: *map and *size (an empty file gives NULL and 0).
 * Release with areal_unmap_file. Returns 0 or AREAL_EIO.
 */
int areal_map_file(const char *path, uint8_t **map, size_t *size, areal_error *err);
void areal_unmap_file(uint8_t *map, size_t size);

/*
 * Parses `len` bytes of JSON; `name` (a file name) goes into the message on
 * failure together with jansson's line and column. Duplicate keys are errors.
 * Returns a new reference or NULL with err set (AREAL_EINVAL).
 */
json_t *areal_json_parse(const char *text, size_t len, const char *name, areal_error *err);

/* areal_read_file + areal_json_parse. */
json_t *areal_json_load(const char *path, areal_error *err);

/* Joins dir and file with one '/' into a new string (caller frees), or NULL. */
char *areal_path_join(const char *dir, const char *file);

#endif
