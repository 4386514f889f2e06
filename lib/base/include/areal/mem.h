/*
 * mem.h - the project's allocation calls, for code that wants to say so:
 * areal_malloc, areal_calloc, areal_realloc, areal_strdup, areal_free.
 *
 * They are the C library's calls, inline; what makes them testable is the
 * build, not this header: `make test-oom` links its binaries with
 * -Wl,--wrap=malloc,... (tests/oom/oom.h), so these and every bare malloc of
 * the tree reach the failure counter alike, and jansson is routed there with
 * json_set_alloc_funcs. Named mem.h because areal/alloc.h is the allocation
 * *string* grammar. Rejected: a counter compiled into the product (a global
 * branch on every allocation of every program, for a test-only feature), and
 * converting the existing calls now (a diff across every component while the
 * tree's other branches edit the same files; the wrap covers them unchanged).
 */
#ifndef AREAL_MEM_H
#define AREAL_MEM_H

#include <stdlib.h>
#include <string.h>

/* As malloc: NULL when out of memory. */
static inline void *areal_malloc(size_t n) {
    return malloc(n);
}

/* As calloc: zeroed, NULL when out of memory (or when n * size overflows). */
static inline void *areal_calloc(size_t n, size_t size) {
    return calloc(n, size);
}

/* As realloc: NULL when out of memory, and then `p` is unchanged (still owned). */
static inline void *areal_realloc(void *p, size_t n) {
    return realloc(p, n);
}

/* A copy of `s` to free with areal_free; NULL when out of memory. */
static inline char *areal_strdup(const char *s) {
    return strdup(s);
}

/* As free; NULL is allowed. */
static inline void areal_free(void *p) {
    free(p);
}

#endif
