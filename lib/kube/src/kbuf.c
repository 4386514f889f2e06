/* kbuf.c - see kbuf.h. */
#include "kbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kbuf_init(kbuf *b, size_t max) {
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

void kbuf_free(kbuf *b) {
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

static int reserve(kbuf *b, size_t extra) {
    if (extra > b->max || b->len > b->max - extra)
        return -1;
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > ((size_t)-1) / 2 ? need : cap * 2;
    char *p = realloc(b->data, cap);
    if (p == NULL)
        return -2;
    b->data = p;
    b->cap = cap;
    return 0;
}

int kbuf_append(kbuf *b, const void *p, size_t n) {
    int rc = reserve(b, n);
    if (rc != 0)
        return rc;
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int kbuf_puts(kbuf *b, const char *s) {
    return kbuf_append(b, s, strlen(s));
}

int kbuf_printf(kbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -2;
    int rc = reserve(b, (size_t)n);
    if (rc != 0)
        return rc;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

int kbuf_put_escaped(kbuf *b, const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    size_t start = b->len;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int rc;
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            rc = kbuf_append(b, p, 1);
        } else {
            char enc[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            rc = kbuf_append(b, enc, 3);
        }
        if (rc != 0) {
            b->len = start;
            if (b->data)
                b->data[start] = '\0';
            return rc;
        }
    }
    return 0;
}

void kbuf_consume(kbuf *b, size_t n) {
    if (n >= b->len) {
        b->len = 0;
    } else {
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
    }
    if (b->data)
        b->data[b->len] = '\0';
}
