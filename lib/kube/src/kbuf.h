/*
 * kbuf.h - a bounded, growable byte buffer (internal to the kube client).
 *
 * What: request paths, query strings and response bodies are built in one of
 * these. Every buffer has a maximum (`max`), and appending past it fails
 * instead of growing without end - the server decides how much it sends, so an
 * unbounded buffer would let it decide how much memory we use. The content is
 * always NUL-terminated (the NUL is not counted in `len`).
 * Rejected: fixed arrays with snprintf - they truncate silently (the official C
 * client's 128-byte path buffer does exactly that).
 */
#ifndef KUBE_KBUF_H
#define KUBE_KBUF_H

#include <stddef.h>

typedef struct kbuf {
    char *data; /* NULL until the first append; owned */
    size_t len; /* bytes used, excluding the NUL */
    size_t cap; /* bytes allocated */
    size_t max; /* the most `len` may ever be */
} kbuf;

/* An empty buffer that may hold up to `max` bytes. Allocates nothing. */
void kbuf_init(kbuf *b, size_t max);

/* Frees the storage; the buffer is empty (and reusable) afterwards. */
void kbuf_free(kbuf *b);

/*
 * Appends `n` bytes. Returns 0, -1 when the result would exceed `max`, or -2
 * when memory ran out; the buffer is unchanged on failure.
 */
int kbuf_append(kbuf *b, const void *p, size_t n);

/* Appends a NUL-terminated string; as kbuf_append. */
int kbuf_puts(kbuf *b, const char *s);

/* Appends printf output; as kbuf_append. */
int kbuf_printf(kbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends `s` percent-encoded (everything but A-Z a-z 0-9 - . _ ~); as kbuf_append. */
int kbuf_put_escaped(kbuf *b, const char *s);

/* Drops the first `n` bytes (n <= len), moving the rest to the front. */
void kbuf_consume(kbuf *b, size_t n);

#endif
