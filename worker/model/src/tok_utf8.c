/*
 * tok_utf8.c - invalid UTF-8 replaced the way Python and HF do it.
 *
 * The rule is Unicode's "maximal subpart" practice (Unicode 15, 3.9, U+FFFD
 * substitution), which both CPython's decoder and Rust's from_utf8_lossy
 * (used by `tokenizers`) follow: at a position that does not start a valid
 * sequence, take the longest prefix that could still begin one (a lead byte
 * and the continuation bytes allowed after it, with the narrowed second-byte
 * ranges of E0, ED, F0 and F4) and replace that prefix with one U+FFFD, or
 * the single byte when not even that. So "84 E3 81" is two replacements (84;
 * then E3 81, a truncated character), not three. Rejected: one U+FFFD per
 * invalid byte (what this file replaced) - it differs from HF's text.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/tokenizer.h"

/* Length of the well-formed character at s, or 0; *sub gets the maximal invalid subpart. */
static size_t utf8_char(const uint8_t *s, size_t n, size_t *sub) {
    uint8_t b = s[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF;
    *sub = 1;
    if (b < 0x80)
        return 1;
    if (b >= 0xC2 && b <= 0xDF)
        need = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        need = 3;
        lo = b == 0xE0 ? 0xA0 : 0x80;
        hi = b == 0xED ? 0x9F : 0xBF;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 4;
        lo = b == 0xF0 ? 0x90 : 0x80;
        hi = b == 0xF4 ? 0x8F : 0xBF;
    } else
        return 0;
    size_t i = 1;
    for (; i < need && i < n; i++) {
        uint8_t lo_i = i == 1 ? lo : 0x80, hi_i = i == 1 ? hi : 0xBF;
        if (s[i] < lo_i || s[i] > hi_i)
            break;
    }
    if (i == need)
        return need;
    *sub = i;
    return 0;
}

char *areal_utf8_replace(const char *s, size_t n, size_t *out_len) {
    const uint8_t *u = (const uint8_t *)s;
    char *out = malloc(n * 3 + 1);
    if (out == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t sub, l = utf8_char(u + i, n - i, &sub);
        if (l == 0) {
            memcpy(out + k, "\xEF\xBF\xBD", 3);
            k += 3;
            i += sub;
        } else {
            memcpy(out + k, s + i, l);
            k += l;
            i += l;
        }
    }
    out[k] = '\0';
    *out_len = k;
    return out;
}
