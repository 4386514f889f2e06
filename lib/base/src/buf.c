/* buf.c - see areal/buf.h. Capacity doubles from 256 bytes (amortised O(1)
 * appends); the maximum is checked before any allocation. */
#include "areal/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/error.h"

void areal_buf_init(areal_buf *b, size_t max) {
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
    b->err = AREAL_OK;
}

void areal_buf_free(areal_buf *b) {
    free(b->data);
    areal_buf_init(b, b->max);
}

void areal_buf_clear(areal_buf *b) {
    b->len = 0;
    b->err = AREAL_OK;
    if (b->data)
        b->data[0] = '\0';
}

static int fail(areal_buf *b, int code) {
    if (b->err == AREAL_OK)
        b->err = code;
    return code;
}

static int reserve(areal_buf *b, size_t extra) {
    if (extra > b->max || b->len > b->max - extra)
        return fail(b, AREAL_ERANGE);
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return AREAL_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > ((size_t)-1) / 2 ? need : cap * 2;
    char *p = realloc(b->data, cap);
    if (p == NULL)
        return fail(b, AREAL_ENOMEM);
    b->data = p;
    b->cap = cap;
    return AREAL_OK;
}

int areal_buf_append(areal_buf *b, const void *p, size_t n) {
    int rc = reserve(b, n);
    if (rc != AREAL_OK)
        return rc;
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return AREAL_OK;
}

int areal_buf_puts(areal_buf *b, const char *s) {
    return areal_buf_append(b, s, strlen(s));
}

int areal_buf_printf(areal_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return fail(b, AREAL_ENOMEM); /* an encoding error: nothing sensible to append */
    int rc = reserve(b, (size_t)n);
    if (rc != AREAL_OK)
        return rc;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return AREAL_OK;
}

int areal_buf_put_pct(areal_buf *b, const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    size_t start = b->len;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int rc;
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            rc = areal_buf_append(b, p, 1);
        } else {
            char enc[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            rc = areal_buf_append(b, enc, 3);
        }
        if (rc != AREAL_OK) {
            b->len = start;
            if (b->data)
                b->data[start] = '\0';
            return rc;
        }
    }
    return AREAL_OK;
}

void areal_buf_consume(areal_buf *b, size_t n) {
    if (n >= b->len) {
        b->len = 0;
    } else {
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
    }
    if (b->data)
        b->data[b->len] = '\0';
}
