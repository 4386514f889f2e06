/*
 * kv_blocks.c - block allocation, reference counts, the prefix index and LRU
 * eviction of kv_blocks.h.
 *
 * The index is a chained hash table over block ids (bucket heads plus one
 * next link per block), sized to a power of two >= the block count, so an
 * insertion never allocates and a lookup walks a chain of about one entry.
 * The LRU list is intrusive (prev / next per block) for O(1) removal when a
 * lookup revives a cached block. An open-addressing table was the other
 * choice; deleting entries on eviction would need tombstones there.
 */
#include <stdlib.h>
#include <string.h>

#include "kv_blocks.h"

int kvb_init(kv_blocks *k, int n, int bt, areal_error *err) {
    memset(k, 0, sizeof *k);
    k->n = n;
    k->bt = bt;
    k->n_buckets = 1;
    while (k->n_buckets < n)
        k->n_buckets <<= 1;
    size_t N = (size_t)n;
    k->ref = calloc(N, sizeof *k->ref);
    k->hash = calloc(N, sizeof *k->hash);
    k->parent = calloc(N, sizeof *k->parent);
    k->indexed = calloc(N, 1);
    k->toks = calloc(N * (size_t)bt, sizeof *k->toks);
    k->lru_prev = malloc(N * sizeof(int));
    k->lru_next = malloc(N * sizeof(int));
    k->free_stack = malloc(N * sizeof(int));
    k->chain = malloc(N * sizeof(int));
    k->bucket = malloc((size_t)k->n_buckets * sizeof(int));
    if (!k->ref || !k->hash || !k->parent || !k->indexed || !k->toks || !k->lru_prev ||
        !k->lru_next || !k->free_stack || !k->chain || !k->bucket) {
        kvb_free(k);
        return areal_error_set(err, AREAL_ENOMEM, -1, "kv blocks: no memory for %d blocks", n);
    }
    for (int i = 0; i < n; i++)
        k->free_stack[i] = n - 1 - i; /* block 0 first */
    k->n_free = n;
    for (int i = 0; i < k->n_buckets; i++)
        k->bucket[i] = -1;
    k->lru_head = k->lru_tail = -1;
    return AREAL_OK;
}

void kvb_free(kv_blocks *k) {
    free(k->ref);
    free(k->hash);
    free(k->parent);
    free(k->indexed);
    free(k->toks);
    free(k->lru_prev);
    free(k->lru_next);
    free(k->free_stack);
    free(k->chain);
    free(k->bucket);
    memset(k, 0, sizeof *k);
}

int kvb_available(const kv_blocks *k) {
    return k->n_free + k->n_cached;
}

static void lru_remove(kv_blocks *k, int b) {
    int p = k->lru_prev[b], n = k->lru_next[b];
    if (p >= 0)
        k->lru_next[p] = n;
    else
        k->lru_head = n;
    if (n >= 0)
        k->lru_prev[n] = p;
    else
        k->lru_tail = p;
    k->n_cached--;
}

static void lru_push(kv_blocks *k, int b) {
    k->lru_prev[b] = k->lru_tail;
    k->lru_next[b] = -1;
    if (k->lru_tail >= 0)
        k->lru_next[k->lru_tail] = b;
    else
        k->lru_head = b;
    k->lru_tail = b;
    k->n_cached++;
}

static void index_remove(kv_blocks *k, int b) {
    int *at = &k->bucket[k->hash[b] & (uint64_t)(k->n_buckets - 1)];
    while (*at != b)
        at = &k->chain[*at];
    *at = k->chain[b];
    k->indexed[b] = 0;
}

static void take_ref(kv_blocks *k, int b) {
    if (k->ref[b] == 1)
        k->n_shared++;
    if (k->ref[b]++ == 0) {
        k->n_used++;
        if (k->n_used > k->peak_used)
            k->peak_used = k->n_used;
    }
}

int kvb_alloc(kv_blocks *k) {
    int b;
    if (k->n_free > 0) {
        b = k->free_stack[--k->n_free];
    } else if (k->lru_head >= 0) {
        b = k->lru_head;
        lru_remove(k, b);
        index_remove(k, b);
    } else {
        return -1;
    }
    take_ref(k, b);
    return b;
}

void kvb_ref(kv_blocks *k, int b) {
    if (k->ref[b] == 0)
        lru_remove(k, b);
    take_ref(k, b);
}

void kvb_unref(kv_blocks *k, int b) {
    if (k->ref[b] == 2)
        k->n_shared--;
    if (--k->ref[b] > 0)
        return;
    k->n_used--;
    if (k->indexed[b])
        lru_push(k, b);
    else
        k->free_stack[k->n_free++] = b;
}

uint64_t kvb_hash(uint64_t parent, const int32_t *toks, int bt) {
    uint64_t h = parent ^ 0xcbf29ce484222325ull;
    for (int i = 0; i < bt; i++) {
        h ^= (uint32_t)toks[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

int kvb_lookup(const kv_blocks *k, uint64_t parent, const int32_t *toks) {
    uint64_t h = kvb_hash(parent, toks, k->bt);
    for (int b = k->bucket[h & (uint64_t)(k->n_buckets - 1)]; b >= 0; b = k->chain[b])
        if (k->hash[b] == h && k->parent[b] == parent &&
            memcmp(k->toks + (size_t)b * k->bt, toks, sizeof(int32_t) * (size_t)k->bt) == 0)
            return b;
    return -1;
}

void kvb_register(kv_blocks *k, int b, uint64_t parent, const int32_t *toks) {
    if (k->indexed[b] || kvb_lookup(k, parent, toks) >= 0)
        return;
    uint64_t h = kvb_hash(parent, toks, k->bt);
    k->hash[b] = h;
    k->parent[b] = parent;
    memcpy(k->toks + (size_t)b * k->bt, toks, sizeof(int32_t) * (size_t)k->bt);
    int *head = &k->bucket[h & (uint64_t)(k->n_buckets - 1)];
    k->chain[b] = *head;
    *head = b;
    k->indexed[b] = 1;
}

void kvb_flush(kv_blocks *k) {
    while (k->lru_head >= 0) {
        int b = k->lru_head;
        lru_remove(k, b);
        index_remove(k, b);
        k->free_stack[k->n_free++] = b;
    }
    for (int b = 0; b < k->n; b++)
        if (k->indexed[b])
            index_remove(k, b);
}
