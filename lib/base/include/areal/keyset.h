/*
 * keyset.h - the project's hash table: a set of byte-string keys, each with
 * an int64 value, with O(1) expected insert, lookup and removal.
 *
 * Open addressing with linear probing at load <= 1/2 and backward-shift
 * deletion (no tombstones, so a long-running work queue never degrades);
 * FNV-1a hashes, kept per slot so growing and probing rarely compare keys.
 * The set owns copies of its keys, which may hold any bytes (the *n functions
 * take a length; the others a NUL-terminated string). Not thread-safe for
 * writers; concurrent readers of a set nobody writes are fine (the
 * tokenizer's vocabulary). Rejected: chaining (a pointer chase and an
 * allocation per key) and Robin Hood probing (more code for loads this low).
 */
#ifndef AREAL_KEYSET_H
#define AREAL_KEYSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct areal_keyset_slot {
    char *key; /* NULL = empty; owned, NUL-terminated after its len bytes */
    size_t len;
    uint64_t hash;
    int64_t value;
} areal_keyset_slot;

typedef struct areal_keyset {
    areal_keyset_slot *slots;
    size_t cap; /* a power of two, or 0 */
    size_t len; /* keys present */
} areal_keyset;

/* An empty set. Allocates nothing. */
void areal_keyset_init(areal_keyset *s);

/* Frees every key and the table; the set is empty and reusable. */
void areal_keyset_free(areal_keyset *s);

/* Makes room for `n` keys in all, so that adding them allocates only the key
 * copies. AREAL_OK or AREAL_ENOMEM (the set unchanged). */
int areal_keyset_reserve(areal_keyset *s, size_t n);

/*
 * Adds the key (copied) with value 0 if absent. Returns 1 if added, 0 if it
 * was present (its value untouched), AREAL_ENOMEM (the set unchanged).
 */
int areal_keyset_add(areal_keyset *s, const char *key);
int areal_keyset_addn(areal_keyset *s, const void *key, size_t len);

bool areal_keyset_has(const areal_keyset *s, const char *key);

/* Removes the key; true if it was present. */
bool areal_keyset_remove(areal_keyset *s, const char *key);
bool areal_keyset_removen(areal_keyset *s, const void *key, size_t len);

/* The value slot of a present key (valid until the next add or remove), or NULL. */
int64_t *areal_keyset_value(areal_keyset *s, const char *key);
int64_t *areal_keyset_valuen(areal_keyset *s, const void *key, size_t len);

/* Reads the value of a present key into *value; false (and *value untouched) if absent. */
bool areal_keyset_getn(const areal_keyset *s, const void *key, size_t len, int64_t *value);

#endif
