/*
 * tok_internal.h - the tokenizer's representation, shared by its loader,
 * encoder and decoder.
 *
 * Vocabulary strings are kept in their byte-level spelling (the GPT-2
 * bytes_to_unicode alphabet: byte b is one code point), so lookups match the
 * file; BPE itself runs on ids: each input byte starts as the id of its
 * one-character token and merges are looked up by id pair.
 */
#ifndef AREAL_MODEL_TOK_INTERNAL_H
#define AREAL_MODEL_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stdint.h>

#include "areal/model/tokenizer.h"
#include "tok_table.h"

#define TOK_MAX_ID     (1 << 24) /* ids beyond this are refused at load */
#define TOK_MAX_STAGES 4         /* Split stages before ByteLevel */
#define TOK_MAX_ADDED  65536

typedef struct tok_added {
    char *content;
    size_t len;
    int32_t id;
    bool special;
    bool normalized; /* matched in normalised text (only refused when a normalizer is set) */
} tok_added;

struct areal_tokenizer {
    char **id_str; /* id -> spelling (vocab: byte-level form; added: content) or NULL */
    size_t *id_len;
    uint8_t *id_added; /* 0: vocab, 1: added, 2: added special */
    size_t n_ids;      /* one past the largest id */
    tok_strmap vocab;  /* spelling -> id, vocab and added tokens */
    tok_pairmap merges;
    size_t n_merges;
    int32_t byte_id[256]; /* id of the one-byte token of each byte, or -1 */
    int32_t unk_id;       /* -1 when the model has no unk_token */
    bool ignore_merges;
    bool nfc;
    bool add_prefix_space;
    pcre2_code *stages[TOK_MAX_STAGES];
    int n_stages;
    tok_added *added; /* sorted by length, longest first */
    size_t n_added;
    bool added_first[256]; /* bytes some added token starts with (skips most positions) */
};

/* The code point byte b is spelled with in byte-level vocabularies. */
uint32_t tok_byte_to_cp(uint8_t b);
/* The byte spelled by code point cp, or -1 when cp is not in the alphabet. */
int tok_cp_to_byte(uint32_t cp);
/* Appends the UTF-8 spelling of byte b's code point to out (1 or 2 bytes); returns the count. */
size_t tok_byte_spell(uint8_t b, char *out);

#endif
