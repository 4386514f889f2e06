/*
 * tok_decode.c - ids -> bytes (the ByteLevel decoder).
 *
 * A vocabulary token is spelled in the byte-level alphabet; each code point
 * maps back to one byte. A token with a code point outside the alphabet
 * (possible in hand-edited vocabularies) is emitted as its UTF-8 spelling, as
 * `tokenizers` does. Added tokens are emitted verbatim. Ids the tokenizer
 * does not hold (the padding rows of a model whose vocab_size exceeds the
 * tokenizer, holes in the id range) spell nothing, as in `tokenizers`: a
 * sampled padding id must not cost the text of the rest of the sequence.
 */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

typedef struct bytes_buf {
    char *p;
    size_t n, cap;
} bytes_buf;

static int put(bytes_buf *b, const void *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (q == NULL)
            return -1;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

/* Decodes one UTF-8 code point of s (valid input); returns its length. */
static size_t utf8_next(const uint8_t *s, size_t n, uint32_t *cp) {
    if (s[0] < 0x80 || n < 2) {
        *cp = s[0];
        return 1;
    }
    if ((s[0] & 0xe0) == 0xc0) {
        *cp = ((uint32_t)(s[0] & 0x1f) << 6) | (s[1] & 0x3f);
        return 2;
    }
    *cp = 0x110000; /* 3 and 4 byte sequences are all outside the byte alphabet */
    return (s[0] & 0xf0) == 0xe0 ? 3 : 4;
}

static int put_token(bytes_buf *b, const char *tokstr, size_t len) {
    const uint8_t *s = (const uint8_t *)tokstr;
    char tmp[256];
    size_t k = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t step = utf8_next(s + i, len - i, &cp);
        int byte = tok_cp_to_byte(cp);
        if (byte < 0) /* not a byte-level spelling: the token's own UTF-8 */
            return put(b, tokstr, len);
        if (k == sizeof tmp) {
            if (put(b, tmp, k))
                return -1;
            k = 0;
        }
        tmp[k++] = (char)byte;
        i += step;
    }
    return put(b, tmp, k);
}

int areal_tokenizer_decode(const areal_tokenizer *tok, const int32_t *ids, size_t n,
                           bool skip_special, char **text, size_t *len, areal_error *err) {
    *text = NULL;
    *len = 0;
    bytes_buf b = {0};
    int rc = put(&b, "", 0) ? AREAL_ENOMEM : AREAL_OK;
    for (size_t i = 0; i < n && rc == AREAL_OK; i++) {
        int32_t id = ids[i];
        if (id < 0) {
            rc = areal_error_set(err, AREAL_ERANGE, (int)i,
                                 "token id %d at position %zu is negative", (int)id, i);
            break;
        }
        if ((size_t)id >= tok->n_ids || tok->id_str[id] == NULL)
            continue; /* padding rows of the model past the tokenizer: HF skips them too */
        if (tok->id_added[id] == 2 && skip_special)
            continue;
        int bad = tok->id_added[id] ? put(&b, tok->id_str[id], tok->id_len[id])
                                    : put_token(&b, tok->id_str[id], tok->id_len[id]);
        if (bad)
            rc = areal_error_set(err, AREAL_ENOMEM, -1, "out of memory while decoding");
    }
    if (rc != AREAL_OK) {
        free(b.p);
        return rc;
    }
    *text = b.p;
    *len = b.n;
    return AREAL_OK;
}
