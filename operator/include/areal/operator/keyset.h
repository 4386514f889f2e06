/*
 * keyset.h - a set of string keys ("namespace/name") with O(1) expected
 * insert, lookup and removal, and an optional integer per key.
 *
 * Open addressing with linear probing and backward-shift deletion (no
 * tombstones, so a long-running queue never degrades). The set owns copies of
 * its keys. Not thread-safe: the work queue guards it with its own mutex.
 */
#ifndef AREAL_OPERATOR_KEYSET_H
#define AREAL_OPERATOR_KEYSET_H

#include <stdbool.h>
#include <stddef.h>

typedef struct keyset_slot {
    char *key; /* NULL = empty */
    long value;
} keyset_slot;

typedef struct keyset {
    keyset_slot *slots;
    size_t cap; /* a power of two, or 0 */
    size_t len;
} keyset;

void keyset_init(keyset *s);
void keyset_free(keyset *s);

/* Adds `key` (copied) with value 0 if absent. 1 if added, 0 if present, -1 on ENOMEM. */
int keyset_add(keyset *s, const char *key);
bool keyset_has(const keyset *s, const char *key);
/* Removes `key`; true if it was present. */
bool keyset_remove(keyset *s, const char *key);
/* The value slot of a present key, or NULL. */
long *keyset_value(keyset *s, const char *key);

#endif
