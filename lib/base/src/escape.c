/*
 * escape.c - see areal/escape.h. The line is formatted into a fixed buffer
 * (error lines are short; a longer one is cut, never allocated, so printing
 * an out-of-memory error cannot itself fail).
 */
#include "areal/escape.h"

#include <stdbool.h>
#include <string.h>

#define LINE_MAX_BYTES 4096

/* The escape of byte c into e (at most 4 bytes); returns its length. */
static size_t escape_byte(unsigned char c, char *e) {
    static const char hex[] = "0123456789abcdef";
    const char *named = c == '\n'   ? "n"
                        : c == '\r' ? "r"
                        : c == '\t' ? "t"
                        : c == '\\' ? "\\"
                                    : NULL;
    if (named != NULL) {
        e[0] = '\\';
        e[1] = named[0];
        return 2;
    }
    if (c < 0x20 || c == 0x7f) {
        e[0] = '\\';
        e[1] = 'x';
        e[2] = hex[c >> 4];
        e[3] = hex[c & 15];
        return 4;
    }
    e[0] = (char)c;
    return 1;
}

char *areal_escape(char *out, size_t cap, const char *in, size_t n) {
    char e[4];
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += escape_byte((unsigned char)in[i], e);
    /* when it does not fit, keep room for "..." and stop before the escape that crosses it */
    size_t limit = total + 1 <= cap ? total : cap - 4;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = escape_byte((unsigned char)in[i], e);
        if (k + len > limit)
            break;
        memcpy(out + k, e, len);
        k += len;
    }
    if (limit < total) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
    return out;
}

void areal_vprint_line(FILE *f, const char *fmt, va_list ap) {
    char raw[LINE_MAX_BYTES], esc[LINE_MAX_BYTES];
    int n = vsnprintf(raw, sizeof raw, fmt, ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof raw ? (size_t)n : sizeof raw - 1;
    if (len > 0 && raw[len - 1] == '\n')
        len--;
    bool cut = n >= 0 && (size_t)n >= sizeof raw;
    areal_escape(esc, cut ? sizeof esc - 3 : sizeof esc, raw, len);
    if (cut && strcmp(esc + strlen(esc) - (strlen(esc) >= 3 ? 3 : 0), "...") != 0)
        strcat(esc, "...");
    fprintf(f, "%s\n", esc);
}

void areal_print_line(FILE *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    areal_vprint_line(f, fmt, ap);
    va_end(ap);
}

size_t areal_utf8_seq_len(const unsigned char *s, size_t n) {
    size_t len = s[0] < 0x80                    ? 1
                 : s[0] >= 0xC2 && s[0] <= 0xDF ? 2
                 : (s[0] & 0xF0) == 0xE0        ? 3
                 : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4
                                                : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if (len == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0)))
        return 0; /* overlong or surrogate */
    if (len == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90)))
        return 0; /* overlong or past U+10FFFF */
    return len;
}
