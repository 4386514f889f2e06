/*
 * st_write.c - writing safetensors files the way the Python package does.
 *
 * Layout rules of the reference writer (safetensors `prepare`): tensors are
 * sorted by dtype rank descending, then by name; offsets are assigned in that
 * order with no padding; the header is compact JSON ("__metadata__" first,
 * then the tensors in layout order, fields dtype, shape, data_offsets) padded
 * with spaces to a multiple of 8 bytes. Strings are escaped as serde_json does
 * (\" \\ \b \f \n \r \t, other control characters as \u00xx, everything else
 * raw UTF-8), which jansson's encoder does not match (it writes \u001F and may
 * escape '/'), so the header is formatted here by hand into a growing buffer
 * (areal/buf.h).
 * The file is written to PATH.tmp and renamed, so a reader never sees half a file.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/buf.h"
#include "areal/model/safetensors.h"

static void sb_json_str(areal_buf *b, const char *s) {
    areal_buf_append(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '"':
            areal_buf_append(b, "\\\"", 2);
            break;
        case '\\':
            areal_buf_append(b, "\\\\", 2);
            break;
        case '\b':
            areal_buf_append(b, "\\b", 2);
            break;
        case '\f':
            areal_buf_append(b, "\\f", 2);
            break;
        case '\n':
            areal_buf_append(b, "\\n", 2);
            break;
        case '\r':
            areal_buf_append(b, "\\r", 2);
            break;
        case '\t':
            areal_buf_append(b, "\\t", 2);
            break;
        default:
            if (c < 0x20)
                areal_buf_printf(b, "\\u%04x", c);
            else
                areal_buf_append(b, (const char *)&c, 1);
        }
    }
    areal_buf_append(b, "\"", 1);
}

typedef struct item {
    const areal_st_out *t;
    uint64_t bytes;
} item;

static int cmp_layout(const void *a, const void *b) {
    const item *x = a, *y = b;
    if (x->t->dtype != y->t->dtype)
        return x->t->dtype > y->t->dtype ? -1 : 1;
    return strcmp(x->t->name, y->t->name);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Validates the tensors, fills it[] (bytes of each) and sorts it into layout order. */
static int check_input(const areal_st_out *t, size_t n, item *it, const char *path, int streamed,
                       areal_error *err) {
    for (size_t i = 0; i < n; i++) {
        if (t[i].name == NULL || strcmp(t[i].name, "__metadata__") == 0)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "%s: tensor %zu needs a name other than \"__metadata__\"", path,
                                   i);
        if (areal_dtype_size(t[i].dtype) == 0 || t[i].ndim < 0 || t[i].ndim > AREAL_ST_MAX_DIMS)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "%s: tensor \"%s\": bad dtype or more than %d dims", path,
                                   t[i].name, AREAL_ST_MAX_DIMS);
        uint64_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            if (t[i].shape[d] < 0 || __builtin_mul_overflow(numel, (uint64_t)t[i].shape[d], &numel))
                return areal_error_set(err, AREAL_EINVAL, -1, "%s: tensor \"%s\": bad shape[%d]",
                                       path, t[i].name, d);
        }
        it[i].t = &t[i];
        if (__builtin_mul_overflow(numel, (uint64_t)areal_dtype_size(t[i].dtype), &it[i].bytes))
            return areal_error_set(err, AREAL_EINVAL, -1, "%s: tensor \"%s\": too large", path,
                                   t[i].name);
        if (it[i].bytes > 0 && t[i].data == NULL && !streamed)
            return areal_error_set(err, AREAL_EINVAL, -1, "%s: tensor \"%s\": no data", path,
                                   t[i].name);
    }
    const char **names = malloc((n + 1) * sizeof *names);
    if (names == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "%s: no memory", path);
    for (size_t i = 0; i < n; i++)
        names[i] = t[i].name;
    qsort(names, n, sizeof *names, cmp_str);
    int rc = AREAL_OK;
    for (size_t i = 1; i < n && rc == AREAL_OK; i++) {
        if (strcmp(names[i], names[i - 1]) == 0)
            rc = areal_error_set(err, AREAL_EINVAL, -1, "%s: tensor name \"%s\" appears twice",
                                 path, names[i]);
    }
    free(names);
    qsort(it, n, sizeof *it, cmp_layout);
    return rc;
}

static int build_header(const item *it, size_t n, const char *const *meta_kv, size_t n_meta,
                        areal_buf *h) {
    areal_buf_append(h, "{", 1);
    int first = 1;
    if (n_meta > 0) {
        areal_buf_append(h, "\"__metadata__\":{", 16);
        for (size_t i = 0; i < n_meta; i++) {
            if (i > 0)
                areal_buf_append(h, ",", 1);
            sb_json_str(h, meta_kv[2 * i]);
            areal_buf_append(h, ":", 1);
            sb_json_str(h, meta_kv[2 * i + 1]);
        }
        areal_buf_append(h, "}", 1);
        first = 0;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const areal_st_out *t = it[i].t;
        if (!first)
            areal_buf_append(h, ",", 1);
        first = 0;
        sb_json_str(h, t->name);
        areal_buf_printf(h, ":{\"dtype\":\"%s\",\"shape\":[", areal_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++)
            areal_buf_printf(h, d ? ",%lld" : "%lld", (long long)t->shape[d]);
        areal_buf_printf(h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                         (unsigned long long)(off + it[i].bytes));
        off += it[i].bytes;
    }
    areal_buf_append(h, "}", 1);
    while (h->err == AREAL_OK && h->len % 8 != 0)
        areal_buf_append(h, " ", 1);
    return h->err;
}

static int write_all(FILE *f, const void *p, size_t n) {
    return n == 0 || fwrite(p, 1, n, f) == n ? 0 : -1;
}

/* areal_st_write, or its streamed form when fill is not NULL. */
static int write_file(const char *path, const areal_st_out *t, size_t n, const char *const *meta_kv,
                      size_t n_meta, areal_st_fill_fn fill, void *ctx, areal_error *err) {
    for (size_t i = 0; i < n_meta; i++) {
        if (meta_kv[2 * i] == NULL || meta_kv[2 * i + 1] == NULL)
            return areal_error_set(err, AREAL_EINVAL, -1, "%s: metadata pair %zu has a NULL", path,
                                   i);
        for (size_t j = 0; j < i; j++) {
            if (strcmp(meta_kv[2 * i], meta_kv[2 * j]) == 0)
                return areal_error_set(err, AREAL_EINVAL, -1,
                                       "%s: metadata key \"%s\" appears twice", path,
                                       meta_kv[2 * i]);
        }
    }
    item *it = calloc(n + 1, sizeof *it);
    areal_buf h;
    areal_buf_init(&h, AREAL_BUF_UNBOUNDED);
    char *tmp = malloc(strlen(path) + 5);
    int rc = AREAL_OK;
    if (it == NULL || tmp == NULL) {
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "%s: no memory", path);
        goto out;
    }
    rc = check_input(t, n, it, path, fill != NULL, err);
    if (rc != AREAL_OK)
        goto out;
    if (build_header(it, n, meta_kv, n_meta, &h) != AREAL_OK) {
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "%s: no memory for the header", path);
        goto out;
    }
    sprintf(tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL) {
        rc = areal_error_set(err, AREAL_EIO, -1, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)((uint64_t)h.len >> (8 * i));
    int bad = write_all(f, len8, 8) || write_all(f, h.data, h.len);
    for (size_t i = 0; i < n && !bad && rc == AREAL_OK; i++) {
        const void *data = it[i].t->data;
        if (fill != NULL)
            rc = fill(ctx, (size_t)(it[i].t - t), &data, err);
        if (rc == AREAL_OK)
            bad = write_all(f, data, (size_t)it[i].bytes);
    }
    if (fclose(f) != 0 || bad || rc != AREAL_OK) {
        remove(tmp);
        if (rc == AREAL_OK)
            rc = areal_error_set(err, AREAL_EIO, -1, "%s: write failed: %s", tmp, strerror(errno));
        goto out;
    }
    if (rename(tmp, path) != 0) {
        remove(tmp);
        rc = areal_error_set(err, AREAL_EIO, -1, "%s: cannot rename into place: %s", path,
                             strerror(errno));
    }
out:
    free(it);
    areal_buf_free(&h);
    free(tmp);
    return rc;
}

int areal_st_write(const char *path, const areal_st_out *t, size_t n, const char *const *meta_kv,
                   size_t n_meta, areal_error *err) {
    return write_file(path, t, n, meta_kv, n_meta, NULL, NULL, err);
}

int areal_st_write_stream(const char *path, const areal_st_out *t, size_t n,
                          const char *const *meta_kv, size_t n_meta, areal_st_fill_fn fill,
                          void *ctx, areal_error *err) {
    return write_file(path, t, n, meta_kv, n_meta, fill, ctx, err);
}
