/* tok_table.c - see tok_table.h. */
#include "tok_table.h"

#include <stdlib.h>
#include <string.h>

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n)
        c *= 2;
    return c;
}

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

int tok_strmap_init(tok_strmap *m, size_t expected) {
    memset(m, 0, sizeof *m);
    m->cap = pow2_at_least(2 * expected + 2);
    m->keys = calloc(m->cap, sizeof *m->keys);
    m->lens = calloc(m->cap, sizeof *m->lens);
    m->vals = calloc(m->cap, sizeof *m->vals);
    if (m->keys == NULL || m->lens == NULL || m->vals == NULL) {
        tok_strmap_free(m);
        return -1;
    }
    return 0;
}

void tok_strmap_free(tok_strmap *m) {
    free(m->keys);
    free(m->lens);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

int tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t val) {
    if (m->cap == 0 || 2 * (m->n + 1) > m->cap)
        return -1;
    size_t i = fnv1a(key, len) & (m->cap - 1);
    while (m->keys[i] != NULL) {
        if (m->lens[i] == len && memcmp(m->keys[i], key, len) == 0) {
            m->vals[i] = val;
            return 0;
        }
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = key;
    m->lens[i] = len;
    m->vals[i] = val;
    m->n++;
    return 0;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len) {
    if (m->cap == 0)
        return -1;
    size_t i = fnv1a(key, len) & (m->cap - 1);
    while (m->keys[i] != NULL) {
        if (m->lens[i] == len && memcmp(m->keys[i], key, len) == 0)
            return m->vals[i];
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}

int tok_pairmap_init(tok_pairmap *m, size_t expected) {
    memset(m, 0, sizeof *m);
    m->cap = pow2_at_least(2 * expected + 2);
    m->keys = calloc(m->cap, sizeof *m->keys);
    m->rank = calloc(m->cap, sizeof *m->rank);
    m->merged = calloc(m->cap, sizeof *m->merged);
    if (m->keys == NULL || m->rank == NULL || m->merged == NULL) {
        tok_pairmap_free(m);
        return -1;
    }
    return 0;
}

void tok_pairmap_free(tok_pairmap *m) {
    free(m->keys);
    free(m->rank);
    free(m->merged);
    memset(m, 0, sizeof *m);
}

static uint64_t pair_key(int32_t l, int32_t r) {
    return (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1;
}

int tok_pairmap_put(tok_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t merged) {
    if (m->cap == 0 || 2 * (m->n + 1) > m->cap)
        return -1;
    uint64_t k = pair_key(left, right);
    size_t i = mix64(k) & (m->cap - 1);
    while (m->keys[i] != 0) {
        if (m->keys[i] == k) {
            m->rank[i] = rank;
            m->merged[i] = merged;
            return 0;
        }
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = k;
    m->rank[i] = rank;
    m->merged[i] = merged;
    m->n++;
    return 0;
}

int32_t tok_pairmap_get(const tok_pairmap *m, int32_t left, int32_t right, int32_t *merged) {
    if (m->cap == 0)
        return -1;
    uint64_t k = pair_key(left, right);
    size_t i = mix64(k) & (m->cap - 1);
    while (m->keys[i] != 0) {
        if (m->keys[i] == k) {
            *merged = m->merged[i];
            return m->rank[i];
        }
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}
