/*
 * cached_pack.h - the two-pass string packer of the cached entries (private
 * to operator/src): with `at` NULL, cached_pack only adds up the bytes a
 * string needs; with `at` pointing into the entry's allocation, it copies the
 * string there and returns the copy. The same reading code runs in both
 * passes, so the size computed is exactly the size used.
 */
#ifndef AREAL_OPERATOR_CACHED_PACK_H
#define AREAL_OPERATOR_CACHED_PACK_H

#include <stddef.h>
#include <string.h>

typedef struct cached_packer {
    size_t bytes; /* pass 1: bytes the strings need */
    char *at;     /* pass 2: where the next string goes */
} cached_packer;

/* NULL for a NULL string and in pass 1; the packed copy in pass 2. */
static inline const char *cached_pack(cached_packer *k, const char *s) {
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    if (k->at == NULL) {
        k->bytes += n;
        return NULL;
    }
    memcpy(k->at, s, n);
    const char *copy = k->at;
    k->at += n;
    return copy;
}

#endif
