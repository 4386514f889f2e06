/*
 * tok_bytes.c - the byte-level alphabet of GPT-2 style tokenizers.
 *
 * Printable Latin-1 bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for
 * themselves; the other 68 bytes are given code points 256, 257, ... in byte
 * order. This is a rule, computed on the fly, not a Unicode table.
 */
#include "tok_internal.h"

static bool printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
}

uint32_t tok_byte_to_cp(uint8_t b) {
    if (printable(b))
        return b;
    uint32_t k = 0;
    for (unsigned x = 0; x < b; x++)
        k += !printable(x);
    return 256 + k;
}

int tok_cp_to_byte(uint32_t cp) {
    if (cp < 256)
        return printable(cp) ? (int)cp : -1;
    uint32_t k = cp - 256;
    for (unsigned x = 0; x < 256; x++) {
        if (!printable(x) && k-- == 0)
            return (int)x;
    }
    return -1;
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
