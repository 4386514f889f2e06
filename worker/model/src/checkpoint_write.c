/*
 * checkpoint_write.c - writing a model directory's weights, single file or
 * sharded with model.safetensors.index.json.
 *
 * The caller decides which tensor goes to which shard (transformers' own
 * split depends on its max_shard_size and state-dict order; a trainer saving
 * TP/PP-partitioned weights has its own natural split), so this file only
 * names the shards, writes them and writes the index. The index is formatted
 * by jansson with sorted keys and an indent of 2, which is the byte layout of
 * Python's json.dumps(indent=2, sort_keys=True) for ASCII names.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/checkpoint.h"
#include "file_util.h"

static const char *const pt_meta[] = {"format", "pt"};

static int write_index(const char *dir, const areal_st_out *t, size_t n, const int *shard_of,
                       int n_shards, areal_error *err) {
    json_t *doc = json_object(), *meta = json_object(), *wmap = json_object();
    uint64_t total = 0;
    int rc = AREAL_OK;
    if (doc == NULL || meta == NULL || wmap == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the index");
    for (size_t i = 0; i < n && rc == AREAL_OK; i++) {
        uint64_t bytes = areal_dtype_size(t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++)
            bytes *= (uint64_t)t[i].shape[d];
        total += bytes;
        char shard[64];
        snprintf(shard, sizeof shard, "model-%05d-of-%05d.safetensors", shard_of[i] + 1, n_shards);
        if (json_object_set_new(wmap, t[i].name, json_string(shard)) != 0)
            rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the index");
    }
    if (rc == AREAL_OK) {
        json_object_set_new(meta, "total_size", json_integer((json_int_t)total));
        json_object_set(doc, "metadata", meta);
        json_object_set(doc, "weight_map", wmap);
        char *path = areal_path_join(dir, "model.safetensors.index.json");
        char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
        FILE *f = path && text ? fopen(path, "wb") : NULL;
        int bad = f == NULL || fputs(text, f) == EOF || fputc('\n', f) == EOF;
        if (f != NULL && fclose(f) != 0)
            bad = 1;
        if (bad)
            rc = areal_error_set(err, AREAL_EIO, -1, "%s: cannot write the index",
                                 path ? path : dir);
        free(path);
        free(text);
    }
    json_decref(meta);
    json_decref(wmap);
    json_decref(doc);
    return rc;
}

int areal_checkpoint_write(const char *dir, const areal_st_out *t, size_t n, const int *shard_of,
                           int n_shards, areal_error *err) {
    if (n_shards < 1 || n_shards > 99999)
        return areal_error_set(err, AREAL_EINVAL, -1, "%s: %d shards (1 to 99999 allowed)", dir,
                               n_shards);
    if (n_shards == 1) {
        char *p = areal_path_join(dir, "model.safetensors");
        int rc = p ? areal_st_write(p, t, n, pt_meta, 1, err)
                   : areal_error_set(err, AREAL_ENOMEM, -1, "no memory");
        free(p);
        return rc;
    }
    areal_st_out *part = malloc((n + 1) * sizeof *part);
    if (part == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory");
    int rc = AREAL_OK;
    for (size_t i = 0; i < n && rc == AREAL_OK; i++) {
        if (shard_of[i] < 0 || shard_of[i] >= n_shards)
            rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "%s: tensor \"%s\" is assigned to shard %d of %d", dir, t[i].name,
                                 shard_of[i], n_shards);
    }
    for (int s = 0; s < n_shards && rc == AREAL_OK; s++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (shard_of[i] == s)
                part[k++] = t[i];
        }
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
        if (k == 0) {
            rc = areal_error_set(err, AREAL_EINVAL, -1, "%s: shard %s would be empty", dir, name);
            break;
        }
        char *p = areal_path_join(dir, name);
        rc = p ? areal_st_write(p, part, k, pt_meta, 1, err)
               : areal_error_set(err, AREAL_ENOMEM, -1, "no memory");
        free(p);
    }
    free(part);
    if (rc == AREAL_OK)
        rc = write_index(dir, t, n, shard_of, n_shards, err);
    return rc;
}
