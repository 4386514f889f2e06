/*
 * tokenizer.h - byte-level BPE from a HuggingFace tokenizer.json, as Qwen2 and
 * Qwen3 use it (chat templates: areal/model/chat.h).
 *
 * Encoding follows the `tokenizers` pipeline: added/special tokens are split
 * out of the raw text first (leftmost, longest match), each remaining segment
 * is NFC-normalised (if the file says so), split by the pre-tokenizer regex
 * (PCRE2 with Unicode properties, "Isolated" behaviour), mapped to bytes and
 * merged by BPE rank. The result is the ids `tokenizers` gives for
 * encode(text) with a null or ByteLevel post-processor. Decoding maps ids back
 * to bytes (added tokens verbatim).
 *
 * Supported file shapes (anything else is refused with the field named):
 * model BPE (merges as "a b" strings or [a, b] pairs, never empty; no
 * dropout, subword prefix/suffix or byte fallback); normalizer null, NFC or a
 * Sequence of NFC; pre_tokenizer ByteLevel, or a Sequence of Split(Regex,
 * Isolated) stages ending in ByteLevel; decoder ByteLevel; post_processor null
 * or ByteLevel; added tokens without lstrip/rstrip/single_word, and with
 * normalized: true only when there is no normalizer (under NFC such a token
 * is refused, naming it).
 *
 * A loaded tokenizer is immutable: encode and decode may run concurrently.
 */
#ifndef AREAL_MODEL_TOKENIZER_H
#define AREAL_MODEL_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/error.h"

typedef struct areal_tokenizer areal_tokenizer;

/*
 * Builds a tokenizer from tokenizer.json text; `name` (the file) goes into
 * messages. Returns 0 and *out (free with areal_tokenizer_free), or
 * AREAL_EINVAL / AREAL_ENOMEM with *out NULL.
 */
int areal_tokenizer_parse(const char *json, size_t len, const char *name, areal_tokenizer **out,
                          areal_error *err);

/* Reads the file at `path` and parses it; adds AREAL_EIO. */
int areal_tokenizer_load(const char *path, areal_tokenizer **out, areal_error *err);

void areal_tokenizer_free(areal_tokenizer *tok);

/* One past the largest token id (vocabulary and added tokens). */
size_t areal_tokenizer_size(const areal_tokenizer *tok);

/* Number of BPE merges loaded (never 0 for a loaded tokenizer). */
size_t areal_tokenizer_merges(const areal_tokenizer *tok);

/* The id of a vocabulary or added token spelled exactly `token`, or -1. */
int32_t areal_tokenizer_token_id(const areal_tokenizer *tok, const char *token);

/*
 * Encodes len bytes of UTF-8 text. *ids is a new array of *n ids (caller
 * frees; non-NULL even when *n is 0). Returns 0, AREAL_EINVAL (text not valid
 * UTF-8, or the regex engine gave up) or AREAL_ENOMEM.
 */
int areal_tokenizer_encode(const areal_tokenizer *tok, const char *text, size_t len, int32_t **ids,
                           size_t *n, areal_error *err);

/*
 * Decodes ids into a new NUL-terminated byte string (*text, length *len;
 * caller frees). skip_special drops added tokens marked special; ids the
 * tokenizer does not hold (>= its size, or holes) are skipped, as HF does for
 * the padding rows of a padded vocabulary. The bytes are what the tokens
 * spell; they are valid UTF-8 whenever the ids came from encode (see
 * areal_utf8_replace). Returns 0, AREAL_ERANGE (a negative id) or
 * AREAL_ENOMEM.
 */
int areal_tokenizer_decode(const areal_tokenizer *tok, const int32_t *ids, size_t n,
                           bool skip_special, char **text, size_t *len, areal_error *err);

/*
 * Copies n bytes into a new NUL-terminated string with every invalid UTF-8
 * sequence replaced by U+FFFD exactly as Python's bytes.decode("utf-8",
 * errors="replace") and Rust's from_utf8_lossy do: one U+FFFD per maximal
 * invalid subpart (a truncated but well-begun sequence is one subpart; a
 * byte that cannot start or continue one is one each). Returns the string
 * (length *out_len) or NULL when out of memory.
 */
char *areal_utf8_replace(const char *s, size_t n, size_t *out_len);

#endif
