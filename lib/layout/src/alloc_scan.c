/*
 * alloc_scan.c - the byte-level scanner of the allocation-string parser.
 *
 * Design: every read goes through alloc_scan_byte_at(), which checks the
 * position against the known length, so no caller can read out of bounds.
 * Character classes are spelled out by hand (no <ctype.h>): the grammar is
 * ASCII and must not depend on the locale. Numbers are accumulated only while
 * they stay at or below the caller's maximum; further digits are consumed but
 * no longer multiplied, so arbitrarily long digit runs cannot overflow.
 */
#include "alloc_scan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The longest digit run quoted in a message before it is cut with "...". */
#define QUOTE_MAX 24

void alloc_scan_init(alloc_scan *sc, const char *text, int len) {
    sc->text = text;
    sc->len = len;
    sc->pos = 0;
}

int alloc_scan_byte_at(const alloc_scan *sc, int pos) {
    if (pos < 0 || pos >= sc->len)
        return -1;
    return (unsigned char)sc->text[pos];
}

int alloc_scan_peek(const alloc_scan *sc) {
    return alloc_scan_byte_at(sc, sc->pos);
}

bool alloc_scan_is_space(int c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

static bool is_digit(int c) {
    return c >= '0' && c <= '9';
}

bool alloc_scan_is_word_start(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool alloc_scan_is_word_char(int c) {
    return alloc_scan_is_word_start(c) || is_digit(c);
}

void alloc_scan_skip_space(alloc_scan *sc) {
    while (alloc_scan_is_space(alloc_scan_peek(sc)))
        sc->pos++;
}

bool alloc_scan_accept(alloc_scan *sc, char c) {
    alloc_scan_skip_space(sc);
    if (alloc_scan_peek(sc) != (unsigned char)c)
        return false;
    sc->pos++;
    return true;
}

int alloc_scan_word(alloc_scan *sc) {
    int start = sc->pos;
    if (!alloc_scan_is_word_start(alloc_scan_peek(sc)))
        return 0;
    while (alloc_scan_is_word_char(alloc_scan_peek(sc)))
        sc->pos++;
    return sc->pos - start;
}

bool alloc_scan_word_is(const alloc_scan *sc, const char *word) {
    int n = (int)strlen(word);
    if (n > sc->len - sc->pos || memcmp(sc->text + sc->pos, word, (size_t)n) != 0)
        return false;
    return !alloc_scan_is_word_char(alloc_scan_byte_at(sc, sc->pos + n));
}

/* Copies the bytes [start, end) for a message, cut to QUOTE_MAX with "...". */
static void quote_run(const alloc_scan *sc, int start, int end, char *buf, int cap) {
    int n = end - start;
    if (n > QUOTE_MAX)
        snprintf(buf, (size_t)cap, "%.*s...", QUOTE_MAX, sc->text + start);
    else
        snprintf(buf, (size_t)cap, "%.*s", n, sc->text + start);
}

int alloc_scan_number(alloc_scan *sc, char letter, int max, int *value, areal_error *err) {
    int start = sc->pos;
    long acc = 0;
    bool too_big = false;
    char quoted[QUOTE_MAX + 4];

    if (!is_digit(alloc_scan_peek(sc))) {
        char found[16];
        alloc_scan_describe(sc, start, found, sizeof found);
        return alloc_fail(err, start, "expected a number after '%c', found %s; example: %c4",
                          letter, found, letter);
    }
    while (is_digit(alloc_scan_peek(sc))) {
        if (acc <= max)
            acc = acc * 10 + (alloc_scan_peek(sc) - '0');
        if (acc > max)
            too_big = true;
        sc->pos++;
    }
    quote_run(sc, start, sc->pos, quoted, sizeof quoted);
    if (sc->text[start] == '0')
        return alloc_fail(err, start,
                          "sizes start at 1 and have no leading zeros, found '%c%s'; example: %c4",
                          letter, quoted, letter);
    if (too_big)
        return alloc_fail(err, start, "size '%c%s' is too large: at most %d", letter, quoted, max);
    *value = (int)acc;
    return AREAL_OK;
}

void alloc_scan_describe(const alloc_scan *sc, int pos, char *buf, int cap) {
    int c = alloc_scan_byte_at(sc, pos);
    if (c < 0)
        snprintf(buf, (size_t)cap, "end of input");
    else if (c >= 0x21 && c <= 0x7e && c != '\'')
        snprintf(buf, (size_t)cap, "'%c'", c);
    else
        snprintf(buf, (size_t)cap, "byte 0x%02x", (unsigned)c);
}

int alloc_fail(areal_error *err, int pos, const char *fmt, ...) {
    char detail[AREAL_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return areal_error_set(err, AREAL_EINVAL, pos, "at %d: %s", pos, detail);
}
