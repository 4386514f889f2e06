/*
 * buf.h - a bounded, growable byte buffer: the one string builder of the
 * project (request paths and bodies, JSON written by hand, environment files).
 *
 * Every buffer has a maximum (`max`): appending past it fails instead of
 * growing without end, so a peer that decides how much it sends never decides
 * how much memory we use. The content is always NUL-terminated once anything
 * was appended (the NUL is not counted in `len`). A failed append leaves the
 * content unchanged and records the first failure in `err`, so a writer may
 * append many pieces and check once at the end (SQLite's StrAccum, curl's
 * dynbuf with a maximum). Rejected: fixed arrays with snprintf, which truncate
 * silently.
 */
#ifndef AREAL_BUF_H
#define AREAL_BUF_H

#include <stddef.h>

#define AREAL_BUF_UNBOUNDED ((size_t)-1 / 2) /* "no maximum" (still fails on overflow) */

typedef struct areal_buf {
    char *data; /* NULL until the first append; owned */
    size_t len; /* bytes used, excluding the NUL */
    size_t cap; /* bytes allocated */
    size_t max; /* the most `len` may ever be */
    int err;    /* AREAL_OK, or the first failure: AREAL_ERANGE (max) / AREAL_ENOMEM */
} areal_buf;

/* An empty buffer that may hold up to `max` bytes. Allocates nothing. */
void areal_buf_init(areal_buf *b, size_t max);

/* Frees the storage; the buffer is empty, with err cleared, and reusable (same max). */
void areal_buf_free(areal_buf *b);

/* Empties the buffer and clears err, keeping the storage. */
void areal_buf_clear(areal_buf *b);

/*
 * Appends `n` bytes. Returns AREAL_OK, AREAL_ERANGE when the result would
 * exceed `max`, or AREAL_ENOMEM; on failure the content is unchanged and
 * `err` keeps the first failure.
 */
int areal_buf_append(areal_buf *b, const void *p, size_t n);

/* Appends a NUL-terminated string; as areal_buf_append. */
int areal_buf_puts(areal_buf *b, const char *s);

/* Appends printf output; as areal_buf_append. */
int areal_buf_printf(areal_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends `s` percent-encoded (all but A-Z a-z 0-9 - . _ ~, RFC 3986 unreserved);
 * all of it or, on failure, nothing. As areal_buf_append. */
int areal_buf_put_pct(areal_buf *b, const char *s);

/* Drops the first `n` bytes (all of them when n >= len), moving the rest to the front. */
void areal_buf_consume(areal_buf *b, size_t n);

#endif
