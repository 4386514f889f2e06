/*
 * keyset.c - see areal/operator/keyset.h. FNV-1a hashing; the table doubles at
 * 1/2 load so probes stay short; deletion shifts later entries of the same
 * cluster back, keeping every key reachable from its home slot.
 */
#include "areal/operator/keyset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_key(const char *k) {
    uint64_t h = 1469598103934665603ULL;
    for (; *k; k++) {
        h ^= (unsigned char)*k;
        h *= 1099511628211ULL;
    }
    return h;
}

void keyset_init(keyset *s) {
    s->slots = NULL;
    s->cap = 0;
    s->len = 0;
}

void keyset_free(keyset *s) {
    for (size_t i = 0; i < s->cap; i++)
        free(s->slots[i].key);
    free(s->slots);
    keyset_init(s);
}

static size_t find(const keyset *s, const char *key) {
    size_t mask = s->cap - 1, i = (size_t)hash_key(key) & mask;
    while (s->slots[i].key != NULL && strcmp(s->slots[i].key, key) != 0)
        i = (i + 1) & mask;
    return i;
}

static int grow(keyset *s) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    keyset_slot *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return -1;
    keyset old = *s;
    s->slots = slots;
    s->cap = cap;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.slots[i].key != NULL) {
            size_t j = find(s, old.slots[i].key);
            s->slots[j] = old.slots[i];
        }
    }
    free(old.slots);
    return 0;
}

int keyset_add(keyset *s, const char *key) {
    if ((s->len + 1) * 2 > s->cap && grow(s) != 0)
        return -1;
    size_t i = find(s, key);
    if (s->slots[i].key != NULL)
        return 0;
    char *copy = strdup(key);
    if (copy == NULL)
        return -1;
    s->slots[i].key = copy;
    s->slots[i].value = 0;
    s->len++;
    return 1;
}

bool keyset_has(const keyset *s, const char *key) {
    return s->cap != 0 && s->slots[find(s, key)].key != NULL;
}

long *keyset_value(keyset *s, const char *key) {
    if (s->cap == 0)
        return NULL;
    size_t i = find(s, key);
    return s->slots[i].key != NULL ? &s->slots[i].value : NULL;
}

bool keyset_remove(keyset *s, const char *key) {
    if (s->cap == 0)
        return false;
    size_t mask = s->cap - 1, i = find(s, key);
    if (s->slots[i].key == NULL)
        return false;
    free(s->slots[i].key);
    s->slots[i].key = NULL;
    s->len--;
    /* Backward-shift: move later members of the cluster into the hole when
     * their home slot does not lie (cyclically) between the hole and them. */
    for (size_t j = (i + 1) & mask; s->slots[j].key != NULL; j = (j + 1) & mask) {
        size_t home = (size_t)hash_key(s->slots[j].key) & mask;
        bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            s->slots[i] = s->slots[j];
            s->slots[j].key = NULL;
            i = j;
        }
    }
    return true;
}
