/*
 * st_header.c - parsing and validation of a safetensors header.
 *
 * The JSON is read with jansson (duplicate names rejected by the parser), then
 * every entry is checked on its own (dtype, shape, byte count, bounds) and the
 * set is checked for overlaps by sorting on the begin offset. Holes between
 * tensors are allowed, as readers of the format tolerate them; overlaps are
 * not, since a write to one tensor would change another. Names are copied, so
 * the header outlives the JSON document and does not point into the mapping.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/safetensors.h"
#include "file_util.h"

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p != NULL)
        memcpy(p, s, n);
    return p;
}

void areal_st_header_free(areal_st_header *h) {
    if (h == NULL)
        return;
    for (size_t i = 0; i < h->n_tensors; i++)
        free(h->tensors[i].name);
    for (size_t i = 0; i < h->n_meta; i++) {
        free(h->meta_keys[i]);
        free(h->meta_values[i]);
    }
    free(h->tensors);
    free(h->meta_keys);
    free(h->meta_values);
    free(h->by_name);
    memset(h, 0, sizeof *h);
}

static int parse_meta(json_t *meta, const char *file, areal_st_header *h, areal_error *err) {
    if (!json_is_object(meta))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: header field \"__metadata__\" must be an object of strings",
                               file);
    size_t n = json_object_size(meta);
    h->meta_keys = calloc(n + 1, sizeof *h->meta_keys);
    h->meta_values = calloc(n + 1, sizeof *h->meta_values);
    if (h->meta_keys == NULL || h->meta_values == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "%s: no memory for the metadata", file);
    const char *key;
    json_t *val;
    json_object_foreach(meta, key, val) {
        if (!json_is_string(val))
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "%s: \"__metadata__\" entry \"%s\" must be a string", file, key);
        h->meta_keys[h->n_meta] = dup_str(key);
        h->meta_values[h->n_meta] = dup_str(json_string_value(val));
        h->n_meta++;
        if (h->meta_keys[h->n_meta - 1] == NULL || h->meta_values[h->n_meta - 1] == NULL)
            return areal_error_set(err, AREAL_ENOMEM, -1, "%s: no memory for the metadata", file);
    }
    return AREAL_OK;
}

static int parse_tensor(const char *name, json_t *e, const char *file, uint64_t data_len,
                        areal_st_tensor *t, areal_error *err) {
    if (!json_is_object(e))
        return areal_error_set(err, AREAL_EINVAL, -1, "%s: tensor \"%s\": entry must be an object",
                               file, name);
    json_t *dt = json_object_get(e, "dtype");
    json_t *shape = json_object_get(e, "shape");
    json_t *offs = json_object_get(e, "data_offsets");
    if (!json_is_string(dt))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: tensor \"%s\": field \"dtype\" missing or not a string", file,
                               name);
    if (areal_dtype_parse(json_string_value(dt), &t->dtype) != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: tensor \"%s\": unknown dtype \"%.32s\" (expected F32, F16, "
                               "BF16, F64, I64, I32, I16, I8, U8, BOOL, ...)",
                               file, name, json_string_value(dt));
    if (!json_is_array(shape) || json_array_size(shape) > AREAL_ST_MAX_DIMS)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: tensor \"%s\": field \"shape\" must be an array of at most %d "
                               "sizes",
                               file, name, AREAL_ST_MAX_DIMS);
    t->ndim = (int)json_array_size(shape);
    uint64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        json_t *v = json_array_get(shape, (size_t)d);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "%s: tensor \"%s\": shape[%d] must be a non-negative integer",
                                   file, name, d);
        t->shape[d] = json_integer_value(v);
        if (__builtin_mul_overflow(numel, (uint64_t)t->shape[d], &numel))
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "%s: tensor \"%s\": shape overflows 64 bits", file, name);
    }
    t->numel = numel;
    if (!json_is_array(offs) || json_array_size(offs) != 2 ||
        !json_is_integer(json_array_get(offs, 0)) || !json_is_integer(json_array_get(offs, 1)))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: tensor \"%s\": field \"data_offsets\" must be [begin, end]",
                               file, name);
    json_int_t b = json_integer_value(json_array_get(offs, 0));
    json_int_t en = json_integer_value(json_array_get(offs, 1));
    if (b < 0 || en < b)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: tensor \"%s\": data_offsets [%lld, %lld] must satisfy 0 <= "
                               "begin <= end",
                               file, name, (long long)b, (long long)en);
    t->begin = (uint64_t)b;
    t->end = (uint64_t)en;
    if (t->end > data_len)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: tensor \"%s\": data_offsets end %llu is past the %llu data "
                               "bytes of the file (truncated file or bad offset)",
                               file, name, (unsigned long long)t->end,
                               (unsigned long long)data_len);
    uint64_t bytes;
    if (__builtin_mul_overflow(numel, (uint64_t)areal_dtype_size(t->dtype), &bytes) ||
        bytes != t->end - t->begin)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: tensor \"%s\": shape x %s size is %llu bytes but data_offsets "
                               "span %llu",
                               file, name, areal_dtype_name(t->dtype), (unsigned long long)bytes,
                               (unsigned long long)(t->end - t->begin));
    t->name = dup_str(name);
    if (t->name == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "%s: no memory for names", file);
    return AREAL_OK;
}

static int cmp_begin(const void *a, const void *b) {
    const areal_st_tensor *x = *(const areal_st_tensor *const *)a;
    const areal_st_tensor *y = *(const areal_st_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_name(const void *a, const void *b) {
    const areal_st_tensor *x = *(const areal_st_tensor *const *)a;
    const areal_st_tensor *y = *(const areal_st_tensor *const *)b;
    return strcmp(x->name, y->name);
}

static int check_overlaps(areal_st_header *h, const char *file, areal_error *err) {
    size_t n = h->n_tensors;
    const areal_st_tensor **v = h->by_name;
    for (size_t i = 0; i < n; i++)
        v[i] = &h->tensors[i];
    qsort(v, n, sizeof *v, cmp_begin);
    const areal_st_tensor *last = NULL;
    for (size_t i = 0; i < n; i++) {
        if (v[i]->begin == v[i]->end)
            continue;
        if (last != NULL && v[i]->begin < last->end)
            return areal_error_set(
                err, AREAL_EINVAL, -1,
                "%s: tensors \"%s\" [%llu, %llu) and \"%s\" [%llu, %llu) overlap "
                "in data_offsets",
                file, last->name, (unsigned long long)last->begin, (unsigned long long)last->end,
                v[i]->name, (unsigned long long)v[i]->begin, (unsigned long long)v[i]->end);
        last = v[i];
    }
    qsort(v, n, sizeof *v, cmp_name);
    return AREAL_OK;
}

static int parse_doc(json_t *doc, const char *file, areal_st_header *h, areal_error *err) {
    if (!json_is_object(doc))
        return areal_error_set(err, AREAL_EINVAL, -1, "%s: header must be a JSON object", file);
    size_t n = json_object_size(doc);
    h->tensors = calloc(n + 1, sizeof *h->tensors);
    h->by_name = calloc(n + 1, sizeof *h->by_name);
    if (h->tensors == NULL || h->by_name == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "%s: no memory for %zu tensors", file, n);
    const char *key;
    json_t *val;
    json_object_foreach(doc, key, val) {
        int rc;
        if (strcmp(key, "__metadata__") == 0) {
            rc = parse_meta(val, file, h, err);
        } else {
            rc = parse_tensor(key, val, file, h->data_len, &h->tensors[h->n_tensors], err);
            if (rc == AREAL_OK)
                h->n_tensors++;
        }
        if (rc != AREAL_OK)
            return rc;
    }
    return check_overlaps(h, file, err);
}

int areal_st_header_parse(const uint8_t *buf, size_t len, const char *file, areal_st_header *h,
                          areal_error *err) {
    memset(h, 0, sizeof *h);
    if (len < 8)
        return areal_error_set(err, AREAL_EINVAL, 0,
                               "%s: %zu bytes, too short for the 8-byte header length (truncated "
                               "file?)",
                               file, len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | buf[i];
    if (n > AREAL_ST_HEADER_MAX)
        return areal_error_set(
            err, AREAL_EINVAL, 0, "%s: header length %llu is absurd (at most %llu bytes allowed)",
            file, (unsigned long long)n, (unsigned long long)AREAL_ST_HEADER_MAX);
    if (n > len - 8)
        return areal_error_set(err, AREAL_EINVAL, 0,
                               "%s: header length %llu runs past the end of the %zu-byte file "
                               "(truncated file?)",
                               file, (unsigned long long)n, len);
    if (n < 2 || buf[8] != '{')
        return areal_error_set(err, AREAL_EINVAL, 8, "%s: header must start with '{'", file);
    h->header_len = n;
    h->data_len = len - 8 - n;
    char label[300];
    snprintf(label, sizeof label, "%s (header)", file);
    json_t *doc = areal_json_parse((const char *)buf + 8, (size_t)n, label, err);
    if (doc == NULL)
        return AREAL_EINVAL;
    int rc = parse_doc(doc, file, h, err);
    json_decref(doc);
    if (rc != AREAL_OK)
        areal_st_header_free(h);
    return rc;
}

const areal_st_tensor *areal_st_header_find(const areal_st_header *h, const char *name) {
    size_t lo = 0, hi = h->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, h->by_name[mid]->name);
        if (c == 0)
            return h->by_name[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}
