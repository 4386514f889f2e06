/*
 * safetensors.h - reading, validating and writing safetensors files.
 *
 * Format: an 8-byte little-endian header length N, N bytes of JSON
 * {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
 * then the data; offsets are relative to the first byte after the header.
 *
 * Reading maps the file and validates the whole header before anything is
 * used: N within the file and at most AREAL_ST_HEADER_MAX, the header a JSON
 * object with unique names, every dtype known, every shape non-negative with
 * numel x element size == end - begin (no overflow), offsets inside the data
 * and no two tensors overlapping. Every error names the file and the tensor
 * or field. Lookup by name is a binary search over a sorted index.
 *
 * Writing lays tensors out the way the Python `safetensors` package does
 * (sorted by dtype rank, larger first, then by name; compact JSON with
 * "__metadata__" first; the header padded with spaces to a multiple of 8), so a
 * file that package wrote is reproduced byte for byte.
 */
#ifndef AREAL_MODEL_SAFETENSORS_H
#define AREAL_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/dtype.h"

#define AREAL_ST_MAX_DIMS 8
/* The safetensors package refuses headers over 100 MB; so do we. */
#define AREAL_ST_HEADER_MAX ((uint64_t)100000000)

typedef struct areal_st_tensor {
    char *name; /* owned by the header */
    areal_dtype dtype;
    int ndim; /* 0 for a scalar */
    int64_t shape[AREAL_ST_MAX_DIMS];
    uint64_t numel;      /* product of shape (1 for a scalar) */
    uint64_t begin, end; /* byte offsets into the data section */
} areal_st_tensor;

typedef struct areal_st_header {
    areal_st_tensor *tensors; /* in header order */
    size_t n_tensors;
    char **meta_keys, **meta_values; /* "__metadata__", in header order */
    size_t n_meta;
    uint64_t header_len;             /* N */
    uint64_t data_len;               /* bytes after the header in the file */
    const areal_st_tensor **by_name; /* tensors sorted by name */
} areal_st_header;

/*
 * Parses and validates the header of a safetensors file whose whole content
 * is buf[0..len) (`file` names it in messages). On success *h owns its
 * strings; free with areal_st_header_free. On failure returns AREAL_EINVAL
 * (or AREAL_ENOMEM) and leaves *h empty.
 */
int areal_st_header_parse(const uint8_t *buf, size_t len, const char *file, areal_st_header *h,
                          areal_error *err);
void areal_st_header_free(areal_st_header *h);

/* The tensor called `name`, or NULL. */
const areal_st_tensor *areal_st_header_find(const areal_st_header *h, const char *name);

/* A mapped, validated file. */
typedef struct areal_st_file {
    char *path;
    uint8_t *map;
    size_t size;
    areal_st_header hdr;
} areal_st_file;

/* Maps and validates `path`. Returns 0, AREAL_EIO, AREAL_EINVAL or AREAL_ENOMEM. */
int areal_st_open(const char *path, areal_st_file *f, areal_error *err);
void areal_st_close(areal_st_file *f);

/* The raw little-endian bytes of t (end - begin of them) inside the mapping. */
const void *areal_st_data(const areal_st_file *f, const areal_st_tensor *t);

/*
 * Loads t as fp32 into dst, which holds `cap` floats. Returns 0, AREAL_EINVAL
 * when t's dtype is not F32/F16/BF16, or AREAL_ERANGE when cap < numel.
 */
int areal_st_read_f32(const areal_st_file *f, const areal_st_tensor *t, float *dst, size_t cap,
                      areal_error *err);

/* One tensor to write: raw little-endian data of numel(shape) x size(dtype) bytes. */
typedef struct areal_st_out {
    const char *name;
    areal_dtype dtype;
    int ndim;
    const int64_t *shape;
    const void *data;
} areal_st_out;

/*
 * Writes a safetensors file at `path` (replaced atomically via path.tmp and
 * rename). meta_kv holds n_meta key/value pairs (keys at even positions) for
 * "__metadata__", written in the given order (keys unique); n_meta 0 writes
 * none. Names must be unique and not "__metadata__". Returns 0, AREAL_EINVAL (bad input,
 * naming the tensor), AREAL_EIO or AREAL_ENOMEM.
 */
int areal_st_write(const char *path, const areal_st_out *t, size_t n, const char *const *meta_kv,
                   size_t n_meta, areal_error *err);

/* Gives tensor t[i]'s bytes (*data, valid until the next call) to a streamed write. */
typedef int (*areal_st_fill_fn)(void *ctx, size_t i, const void **data, areal_error *err);

/*
 * As areal_st_write, the same bytes on disk, but each tensor's data asked
 * for through fill (t[i].data unused) just before it is written, in the
 * file's layout order (dtype rank descending, then name), so a caller that
 * produces the tensors one at a time (a gather over ranks) holds one at a
 * time. Stops at the first error (fill's is returned as it is); the caller
 * learns from its own count which tensors were asked for.
 */
int areal_st_write_stream(const char *path, const areal_st_out *t, size_t n,
                          const char *const *meta_kv, size_t n_meta, areal_st_fill_fn fill,
                          void *ctx, areal_error *err);

#endif
