/*
 * fuzz_st_header.c - libFuzzer target for the safetensors header parser.
 *
 * The input is a whole file: 8-byte length, header, data. On success the
 * header must keep its promises: every tensor inside the data, its byte count
 * equal to numel x dtype size, no two non-empty tensors overlapping, names
 * unique and findable. Each float tensor is then converted to fp32 (reading
 * every byte it spans, so ASan sees any out-of-bounds offset), and the file is
 * written back through the writer and must parse again with the same tensors.
 * On failure the header must be empty and the message non-empty.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "areal/model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const areal_st_header *h, const uint8_t *data) {
    for (size_t i = 0; i < h->n_tensors; i++) {
        const areal_st_tensor *t = &h->tensors[i];
        if (t->end > h->data_len || t->begin > t->end ||
            t->end - t->begin != t->numel * areal_dtype_size(t->dtype))
            abort();
        if (areal_st_header_find(h, t->name) != t)
            abort();
        for (size_t j = i + 1; j < h->n_tensors; j++) {
            const areal_st_tensor *u = &h->tensors[j];
            if (strcmp(t->name, u->name) == 0)
                abort();
            if (t->begin < t->end && u->begin < u->end && t->begin < u->end && u->begin < t->end)
                abort();
        }
        if (areal_dtype_is_float(t->dtype) && t->numel <= (1u << 20)) {
            float *out = malloc((size_t)t->numel * sizeof *out + 1);
            const uint8_t *src = data + 8 + h->header_len + t->begin;
            if (out == NULL || areal_dtype_to_f32(t->dtype, src, out, (size_t)t->numel) != 0)
                abort();
            free(out);
        }
    }
}

static void rewrite(const areal_st_header *h, const uint8_t *data) {
    areal_st_out *out = calloc(h->n_tensors + 1, sizeof *out);
    const char **meta = calloc(2 * h->n_meta + 1, sizeof *meta);
    if (out == NULL || meta == NULL)
        abort();
    for (size_t i = 0; i < h->n_tensors; i++) {
        const areal_st_tensor *t = &h->tensors[i];
        out[i] = (areal_st_out){t->name, t->dtype, t->ndim, t->shape,
                                data + 8 + h->header_len + t->begin};
    }
    for (size_t i = 0; i < h->n_meta; i++) {
        meta[2 * i] = h->meta_keys[i];
        meta[2 * i + 1] = h->meta_values[i];
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_st_header.%d", (int)getpid());
    areal_error err;
    if (areal_st_write(path, out, h->n_tensors, meta, h->n_meta, &err) != AREAL_OK)
        abort(); /* anything the parser accepted, the writer must write */
    areal_st_file f;
    if (areal_st_open(path, &f, &err) != AREAL_OK || f.hdr.n_tensors != h->n_tensors)
        abort();
    for (size_t i = 0; i < h->n_tensors; i++) {
        const areal_st_tensor *a = &h->tensors[i];
        const areal_st_tensor *b = areal_st_header_find(&f.hdr, a->name);
        if (b == NULL || b->dtype != a->dtype || b->numel != a->numel ||
            memcmp(areal_st_data(&f, b), data + 8 + h->header_len + a->begin, a->end - a->begin))
            abort();
    }
    areal_st_close(&f);
    unlink(path);
    free(out);
    free(meta);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    areal_st_header h;
    areal_error err;
    areal_error_clear(&err);
    int rc = areal_st_header_parse(data, size, "fuzz.safetensors", &h, &err);
    if (rc != AREAL_OK) {
        if (h.n_tensors != 0 || h.tensors != NULL || err.msg[0] == '\0')
            abort();
        return 0;
    }
    check(&h, data);
    if (h.n_tensors <= 64)
        rewrite(&h, data);
    areal_st_header_free(&h);
    return 0;
}
