/*
 * st_file.c - a safetensors file mapped read-only, and fp32 loading.
 *
 * mmap keeps opening a multi-gigabyte shard cheap (only the header is touched
 * until a tensor is read) and lets the page cache share shards between
 * processes on one node. Reading into a malloc'd copy was rejected for that
 * reason.
 */
#include <stdlib.h>
#include <string.h>

#include "areal/model/safetensors.h"
#include "file_util.h"

int areal_st_open(const char *path, areal_st_file *f, areal_error *err) {
    memset(f, 0, sizeof *f);
    size_t n = strlen(path) + 1;
    f->path = malloc(n);
    if (f->path == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "%s: no memory", path);
    memcpy(f->path, path, n);
    int rc = areal_map_file(path, &f->map, &f->size, err);
    if (rc == AREAL_OK)
        rc = areal_st_header_parse(f->map, f->size, path, &f->hdr, err);
    if (rc != AREAL_OK)
        areal_st_close(f);
    return rc;
}

void areal_st_close(areal_st_file *f) {
    if (f == NULL)
        return;
    areal_st_header_free(&f->hdr);
    areal_unmap_file(f->map, f->size);
    free(f->path);
    memset(f, 0, sizeof *f);
}

const void *areal_st_data(const areal_st_file *f, const areal_st_tensor *t) {
    return f->map + 8 + f->hdr.header_len + t->begin;
}

int areal_st_read_f32(const areal_st_file *f, const areal_st_tensor *t, float *dst, size_t cap,
                      areal_error *err) {
    if (!areal_dtype_is_float(t->dtype))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: tensor \"%s\" has dtype %s; only F32, F16 and BF16 load as "
                               "fp32",
                               f->path, t->name, areal_dtype_name(t->dtype));
    if (t->numel > cap)
        return areal_error_set(err, AREAL_ERANGE, -1,
                               "%s: tensor \"%s\" has %llu elements, the buffer holds %zu", f->path,
                               t->name, (unsigned long long)t->numel, cap);
    areal_dtype_to_f32(t->dtype, areal_st_data(f, t), dst, (size_t)t->numel);
    return AREAL_OK;
}
