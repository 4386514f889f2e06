/*
 * alloc_scan.h - the byte-level scanner of the allocation-string parser
 * (internal to the layout library; see areal/alloc.h for the grammar).
 *
 * The scanner walks a NUL-terminated string whose length is already known
 * and bounded, so every position fits an int and every read is in bounds:
 * alloc_scan_peek() returns -1 at the end instead of reading past it.
 * It knows the lexical shapes of the grammar (whitespace, words, numbers) and
 * how to describe the byte at a position in a one-line error message; it
 * knows nothing about backends or rules. Nothing here allocates.
 */
#ifndef AREAL_ALLOC_SCAN_H
#define AREAL_ALLOC_SCAN_H

#include <stdbool.h>

#include "areal/error.h"

typedef struct alloc_scan {
    const char *text; /* the whole allocation string */
    int len;          /* its length in bytes (text[len] == '\0') */
    int pos;          /* the next byte to read */
} alloc_scan;

void alloc_scan_init(alloc_scan *sc, const char *text, int len);

/* The byte at the cursor as 0..255, or -1 at the end of the string. */
int alloc_scan_peek(const alloc_scan *sc);

/* The byte at `pos` as 0..255, or -1 when `pos` is outside the string. */
int alloc_scan_byte_at(const alloc_scan *sc, int pos);

/* Skips the whitespace the grammar ignores between tokens (space, \t, \n, \r, \f). */
void alloc_scan_skip_space(alloc_scan *sc);

/* Skips whitespace, then consumes `c` if it is next; reports whether it did. */
bool alloc_scan_accept(alloc_scan *sc, char c);

/* True for the whitespace the grammar ignores (space, \t, \n, \r, \f). */
bool alloc_scan_is_space(int c);

/* True for [A-Za-z_] and for [A-Za-z0-9_] respectively. */
bool alloc_scan_is_word_start(int c);
bool alloc_scan_is_word_char(int c);

/*
 * Reads a word [A-Za-z_][A-Za-z0-9_]* at the cursor (no whitespace skipped)
 * and returns its length; 0, and nothing consumed, when no word starts here.
 */
int alloc_scan_word(alloc_scan *sc);

/* True when the word at the cursor is exactly `word` (not a prefix of a longer word). */
bool alloc_scan_word_is(const alloc_scan *sc, const char *word);

/*
 * Reads NUMBER := [1-9][0-9]* at the cursor into `*value`. A missing number,
 * 0, a leading zero or a value above `max` is an AREAL_EINVAL error at the
 * number's first byte; `letter` names the dimension in the message. Never
 * overflows, however many digits follow.
 */
int alloc_scan_number(alloc_scan *sc, char letter, int max, int *value, areal_error *err);

/*
 * Writes what is at `pos` for a "found ..." message: 'x' for a printable
 * byte, "byte 0x01" otherwise, "end of input" at the end.
 */
void alloc_scan_describe(const alloc_scan *sc, int pos, char *buf, int cap);

/*
 * Records an AREAL_EINVAL error at byte `pos` with the message
 * "at POS: <fmt...>" and returns AREAL_EINVAL.
 */
int alloc_fail(areal_error *err, int pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
