/*
 * fuzz_tokenizer_json.c - libFuzzer target for the tokenizer.json loader.
 *
 * The input up to the first NUL byte is a tokenizer.json; what follows it (or
 * a fixed mixed-script sample) is text. When the file loads, the merge count
 * must be non-zero, the text must encode to ids inside the vocabulary, and
 * those ids must decode. Invalid UTF-8 text must be refused, never crash.
 * On a refused file the tokenizer pointer must stay NULL with a message set.
 */
#include <stdlib.h>
#include <string.h>

#include "areal/model/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char sample[] = "Hello, world! 你好 <|im_end|> x=42 😀\n\tdon't";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    const char *text = nul ? (const char *)nul + 1 : sample;
    size_t text_len = nul ? size - json_len - 1 : sizeof sample - 1;
    areal_tokenizer *tok = NULL;
    areal_error err;
    areal_error_clear(&err);
    int rc = areal_tokenizer_parse((const char *)data, json_len, "fuzz.json", &tok, &err);
    if (rc != AREAL_OK) {
        if (tok != NULL || err.msg[0] == '\0')
            abort();
        return 0;
    }
    if (areal_tokenizer_merges(tok) == 0)
        abort();
    int32_t *ids;
    size_t n;
    if (areal_tokenizer_encode(tok, text, text_len, &ids, &n, &err) == AREAL_OK) {
        for (size_t i = 0; i < n; i++) {
            if (ids[i] < 0 || (size_t)ids[i] >= areal_tokenizer_size(tok))
                abort();
        }
        char *back;
        size_t blen;
        if (areal_tokenizer_decode(tok, ids, n, false, &back, &blen, &err) != AREAL_OK)
            abort();
        free(back);
        free(ids);
    }
    areal_tokenizer_free(tok);
    return 0;
}
