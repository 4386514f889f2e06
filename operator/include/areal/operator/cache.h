/*
 * cache.h - an informer's local store: the objects of one resource keyed by
 * "namespace/name", kept as pruned jansson values.
 *
 * Pruning keeps only the fields the operator reads (for pods: identity,
 * labels, annotations, node, requests, phase, readiness, exit codes; for
 * nodes: what placement needs), which is what keeps 10,000 pods and 4,000
 * nodes within a few tens of MB. Objects handed out are new references to
 * immutable values: readers never see a value change under them (a newer
 * version replaces the reference, it does not edit the object).
 * Thread-safe: one mutex; callbacks of cache_each run under it and must not
 * call back into the cache.
 */
#ifndef AREAL_OPERATOR_CACHE_H
#define AREAL_OPERATOR_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

typedef struct obj_cache obj_cache;

/* Returns a new reference to the pruned copy of `obj` (or NULL when out of memory). */
typedef json_t *(*cache_prune_fn)(const json_t *obj);

/* A new empty cache; `prune` may be NULL to keep whole objects. */
obj_cache *cache_new(cache_prune_fn prune);
void cache_free(obj_cache *c);

/* Replaces every object with the items of `list` (a List object); marks the cache synced. */
int cache_replace(obj_cache *c, const json_t *list);

/* Adds or updates (`deleted` false) or removes (`deleted` true) one object. */
int cache_apply(obj_cache *c, const json_t *obj, bool deleted);

/* A new reference to the object at `key` ("ns/name" or "name"), or NULL. */
json_t *cache_get(obj_cache *c, const char *key);

/* Calls fn on every object (borrowed, under the lock). */
void cache_each(obj_cache *c, void (*fn)(void *ud, const json_t *obj), void *ud);

size_t cache_len(obj_cache *c);
bool cache_synced(obj_cache *c);

/* "ns/name" (or "name" when cluster-scoped) of an object, into buf; false if it has no name. */
bool cache_key(const json_t *obj, char *buf, size_t cap);

/* The pruners of the operator's resources. */
json_t *cache_prune_pod(const json_t *pod);
json_t *cache_prune_node(const json_t *node);

#endif
