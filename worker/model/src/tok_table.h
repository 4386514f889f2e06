/*
 * tok_table.h - the two hash tables of the tokenizer: token string -> id and
 * (left id, right id) -> (merge rank, merged id).
 *
 * Open addressing with linear probing at load factor <= 1/2, FNV-1a for
 * strings and a 64-bit mix for id pairs. Both are filled once at load and
 * only read afterwards, which is what makes the tokenizer safe to share
 * between threads. Keys of the string table are borrowed: the caller keeps
 * them alive (they live in the tokenizer's id -> string array).
 */
#ifndef AREAL_MODEL_TOK_TABLE_H
#define AREAL_MODEL_TOK_TABLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct tok_strmap {
    const char **keys;
    size_t *lens;
    int32_t *vals;
    size_t cap, n;
} tok_strmap;

/* Allocates room for `expected` keys. Returns 0 or -1 (no memory). */
int tok_strmap_init(tok_strmap *m, size_t expected);
void tok_strmap_free(tok_strmap *m);
/* Inserts or overwrites; returns 0, or -1 when the table is full. */
int tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t val);
/* The value of key, or -1. */
int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len);

typedef struct tok_pairmap {
    uint64_t *keys; /* (left << 32 | right) + 1; 0 marks an empty slot */
    int32_t *rank, *merged;
    size_t cap, n;
} tok_pairmap;

int tok_pairmap_init(tok_pairmap *m, size_t expected);
void tok_pairmap_free(tok_pairmap *m);
/* Inserts or overwrites (a pair listed twice keeps its last rank, as `tokenizers` does);
 * 0, or -1 when full. */
int tok_pairmap_put(tok_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t merged);
/* The rank of (left, right) with *merged set, or -1 when the pair never merges. */
int32_t tok_pairmap_get(const tok_pairmap *m, int32_t left, int32_t right, int32_t *merged);

#endif
