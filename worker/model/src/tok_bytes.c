/*
 * tok_bytes.c - the byte-level alphabet of GPT-2 style tokenizers.
 *
 * Printable Latin-1 bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for
 * themselves; the other 68 bytes (0x00..0x20, 0x7F..0xA0, 0xAD) are given code
 * points 256, 257, ... in byte order. This is a rule, computed with a few
 * comparisons, not a Unicode table.
 */
#include "tok_internal.h"

uint32_t tok_byte_to_cp(uint8_t b) {
    if (b <= 0x20)
        return 256u + b;
    if (b >= 0x7f && b <= 0xa0)
        return 256u + 33u + (b - 0x7fu);
    if (b == 0xad)
        return 256u + 67u;
    return b;
}

int tok_cp_to_byte(uint32_t cp) {
    if (cp < 256)
        return tok_byte_to_cp((uint8_t)cp) == cp ? (int)cp : -1;
    uint32_t k = cp - 256;
    if (k < 33)
        return (int)k;
    if (k < 67)
        return (int)(0x7f + (k - 33));
    return k == 67 ? 0xad : -1;
}

size_t tok_byte_spell(uint8_t b, char *out) {
    uint32_t cp = tok_byte_to_cp(b);
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}
