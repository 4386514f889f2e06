/*
 * keyset.c - see areal/keyset.h. The table doubles before it passes 1/2 load;
 * deletion shifts later members of the same cluster back into the hole when
 * their home slot does not lie (cyclically) between the hole and them, so
 * every key stays reachable from its home slot without tombstones.
 */
#include "areal/keyset.h"

#include <stdlib.h>
#include <string.h>

#include "areal/error.h"

static uint64_t fnv1a(const void *key, size_t len) {
    const unsigned char *k = key;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= k[i];
        h *= 1099511628211ULL;
    }
    return h;
}

void areal_keyset_init(areal_keyset *s) {
    s->slots = NULL;
    s->cap = 0;
    s->len = 0;
}

void areal_keyset_free(areal_keyset *s) {
    for (size_t i = 0; i < s->cap; i++)
        free(s->slots[i].key);
    free(s->slots);
    areal_keyset_init(s);
}

/* The slot of the key, or the empty slot where it would go. cap > 0. */
static size_t find(const areal_keyset *s, const void *key, size_t len, uint64_t h) {
    size_t mask = s->cap - 1, i = (size_t)h & mask;
    while (s->slots[i].key != NULL && !(s->slots[i].hash == h && s->slots[i].len == len &&
                                        memcmp(s->slots[i].key, key, len) == 0))
        i = (i + 1) & mask;
    return i;
}

static int resize(areal_keyset *s, size_t cap) {
    areal_keyset_slot *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return AREAL_ENOMEM;
    areal_keyset old = *s;
    s->slots = slots;
    s->cap = cap;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.slots[i].key != NULL) {
            size_t mask = cap - 1, j = (size_t)old.slots[i].hash & mask;
            while (slots[j].key != NULL)
                j = (j + 1) & mask;
            slots[j] = old.slots[i];
        }
    }
    free(old.slots);
    return AREAL_OK;
}

int areal_keyset_reserve(areal_keyset *s, size_t n) {
    size_t cap = s->cap ? s->cap : 16;
    while (n * 2 > cap) {
        if (cap > ((size_t)-1) / 2 / sizeof(areal_keyset_slot))
            return AREAL_ENOMEM;
        cap *= 2;
    }
    return cap == s->cap ? AREAL_OK : resize(s, cap);
}

int areal_keyset_addn(areal_keyset *s, const void *key, size_t len) {
    if (areal_keyset_reserve(s, s->len + 1) != AREAL_OK)
        return AREAL_ENOMEM;
    uint64_t h = fnv1a(key, len);
    size_t i = find(s, key, len, h);
    if (s->slots[i].key != NULL)
        return 0;
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return AREAL_ENOMEM;
    if (len > 0)
        memcpy(copy, key, len);
    copy[len] = '\0';
    s->slots[i] = (areal_keyset_slot){.key = copy, .len = len, .hash = h, .value = 0};
    s->len++;
    return 1;
}

int areal_keyset_add(areal_keyset *s, const char *key) {
    return areal_keyset_addn(s, key, strlen(key));
}

static areal_keyset_slot *lookup(const areal_keyset *s, const void *key, size_t len) {
    if (s->cap == 0)
        return NULL;
    size_t i = find(s, key, len, fnv1a(key, len));
    return s->slots[i].key != NULL ? &s->slots[i] : NULL;
}

bool areal_keyset_has(const areal_keyset *s, const char *key) {
    return lookup(s, key, strlen(key)) != NULL;
}

int64_t *areal_keyset_valuen(areal_keyset *s, const void *key, size_t len) {
    areal_keyset_slot *slot = lookup(s, key, len);
    return slot ? &slot->value : NULL;
}

int64_t *areal_keyset_value(areal_keyset *s, const char *key) {
    return areal_keyset_valuen(s, key, strlen(key));
}

bool areal_keyset_getn(const areal_keyset *s, const void *key, size_t len, int64_t *value) {
    const areal_keyset_slot *slot = lookup(s, key, len);
    if (slot == NULL)
        return false;
    *value = slot->value;
    return true;
}

bool areal_keyset_removen(areal_keyset *s, const void *key, size_t len) {
    if (s->cap == 0)
        return false;
    size_t mask = s->cap - 1, i = find(s, key, len, fnv1a(key, len));
    if (s->slots[i].key == NULL)
        return false;
    free(s->slots[i].key);
    s->slots[i].key = NULL;
    s->len--;
    for (size_t j = (i + 1) & mask; s->slots[j].key != NULL; j = (j + 1) & mask) {
        size_t home = (size_t)s->slots[j].hash & mask;
        bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            s->slots[i] = s->slots[j];
            s->slots[j].key = NULL;
            i = j;
        }
    }
    return true;
}

bool areal_keyset_remove(areal_keyset *s, const char *key) {
    return areal_keyset_removen(s, key, strlen(key));
}
