/*
 * escape.h - one-line messages: the escaping every program uses for the bytes
 * of its input that it echoes in an error line (see README "Exit status").
 *
 * A control byte echoed raw (a newline inside an allocation string, an escape
 * sequence in a file name) would split an error into two lines or drive the
 * terminal, so the messages of the programs go through areal_escape, which
 * writes \n, \r, \t, \\ and \xNN for the other bytes below 0x20 and 0x7f.
 * Bytes >= 0x80 pass unchanged: a user's UTF-8 stays readable. Rejected:
 * escaping only the quoted input at each call site (one forgotten site, or a
 * library message that embeds the input, breaks the one-line promise);
 * areal_print_line escapes the whole formatted line instead.
 */
#ifndef AREAL_ESCAPE_H
#define AREAL_ESCAPE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/*
 * Writes the escaped form of in[0..n) to out (cap >= 4 bytes, always
 * NUL-terminated). When it does not fit, it is cut at a whole escape and ends
 * with "...". Returns out.
 */
char *areal_escape(char *out, size_t cap, const char *in, size_t n);

/*
 * Formats `fmt`, drops one trailing newline, escapes the rest (areal_escape)
 * and writes it to `f` as exactly one line; longer than 4 KiB is cut with
 * "...". For the error lines of the programs.
 */
void areal_print_line(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void areal_vprint_line(FILE *f, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/*
 * The length (1 to 4) of the well-formed UTF-8 sequence at s[0..n), or 0
 * when s does not start one (a stray continuation byte, an overlong form, a
 * surrogate, past U+10FFFF, cut short). n >= 1.
 */
size_t areal_utf8_seq_len(const unsigned char *s, size_t n);

#endif
