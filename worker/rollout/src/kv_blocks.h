/*
 * kv_blocks.h - bookkeeping of the paged KV cache's blocks (internal to the
 * rollout engine): allocation, reference counts, the prefix-cache index and
 * LRU eviction. The floats themselves live in an areal_paged_kv; this file
 * only decides which block id holds what.
 *
 * A block is in exactly one of three states: free (on the free stack),
 * referenced (ref > 0, held by sequences' block tables), or cached (ref 0 but
 * indexed by its prefix hash, on the LRU list, reusable by a lookup until an
 * allocation evicts it). A full block is indexed by the chain hash of every
 * token up to and including it, plus its own tokens and its parent's hash to
 * make a false hit need two 64-bit collisions on equal tokens. Used only by
 * the scheduler thread; no locks.
 */
#ifndef AREAL_ROLLOUT_KV_BLOCKS_H
#define AREAL_ROLLOUT_KV_BLOCKS_H

#include <stdbool.h>
#include <stdint.h>

#include "areal/error.h"

#define KVB_ROOT_HASH 0x6a09e667f3bcc908ull /* parent hash of a sequence's first block */

typedef struct kv_blocks {
    int n, bt;
    int *ref;
    uint64_t *hash, *parent; /* valid where indexed */
    uint8_t *indexed;
    int32_t *toks;            /* [n][bt]: the tokens of indexed blocks */
    int *lru_prev, *lru_next; /* cached blocks, least recent at lru_head */
    int lru_head, lru_tail;
    int *free_stack, n_free;
    int *bucket, n_buckets, *chain; /* hash index: bucket heads, per-block next */
    int n_used, n_shared, n_cached, peak_used;
} kv_blocks;

/* n blocks of bt tokens, all free. Returns 0 or AREAL_ENOMEM. */
int kvb_init(kv_blocks *k, int n, int bt, areal_error *err);
void kvb_free(kv_blocks *k);

/* Blocks an allocation could get now (free + cached). */
int kvb_available(const kv_blocks *k);

/* A block with ref 1 (a free one, else the least recently used cached one,
 * evicted from the index), or -1 when every block is referenced. */
int kvb_alloc(kv_blocks *k);

/* Adds a reference (a cached block leaves the LRU list). */
void kvb_ref(kv_blocks *k, int b);

/* Drops a reference; at 0 an indexed block becomes cached (most recent),
 * any other block free. */
void kvb_unref(kv_blocks *k, int b);

/* The chain hash of a block of bt tokens after a block whose hash is parent. */
uint64_t kvb_hash(uint64_t parent, const int32_t *toks, int bt);

/* The indexed block of (parent, toks) or -1; no reference is taken. */
int kvb_lookup(const kv_blocks *k, uint64_t parent, const int32_t *toks);

/* Indexes referenced block b as (parent, toks), unless an equal block is
 * already indexed (then b stays unindexed and is freed at its last unref). */
void kvb_register(kv_blocks *k, int b, uint64_t parent, const int32_t *toks);

/* Frees every cached block and unindexes the referenced ones. */
void kvb_flush(kv_blocks *k);

#endif
