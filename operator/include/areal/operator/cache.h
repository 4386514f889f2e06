/*
 * cache.h - an informer's local store: the objects of one resource keyed by
 * "namespace/name" (or "name" when cluster-scoped), each kept in the form its
 * cache_ops builds from the API object.
 *
 * Forms: pods and nodes as the compact entries of areal/operator/cached.h
 * (only what reconcile and placement read; 10,000 pods and 4,000 nodes take a
 * few MB), AReaLJobs as whole jansson objects (few, and reconcile reads their
 * whole spec). Entries are immutable and reference counted: a reader that
 * took one with cache_get keeps a consistent object while the cache replaces
 * it (a newer version replaces the entry, it never edits it).
 *
 * A list may arrive page by page (cache_replace_begin / _items / _end): the
 * new contents are built beside the old ones, each page's JSON can be freed as
 * soon as it is converted, and readers switch to the new contents at once
 * when the list ends; an aborted list leaves the old contents in place.
 *
 * Thread-safe: one mutex guards the live contents; callbacks of cache_each run
 * under it and must not call back into the cache. A paged replace must be
 * driven by one thread (the informer's).
 */
#ifndef AREAL_OPERATOR_CACHE_H
#define AREAL_OPERATOR_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

typedef struct obj_cache obj_cache;

/* How a cache keeps its objects. */
typedef struct cache_ops {
    const char *what; /* "pod", "node", "object" */
    /* A new entry (one reference) for API object `obj`; NULL when out of memory. */
    void *(*convert)(const json_t *obj);
    void *(*retain)(void *entry); /* returns `entry` with one more reference */
    void (*release)(void *entry); /* drops one reference */
} cache_ops;

extern const cache_ops cache_ops_json; /* json_t deep copies (AReaLJobs) */
extern const cache_ops cache_ops_pod;  /* cached_pod */
extern const cache_ops cache_ops_node; /* cached_node */

/* A new empty cache keeping entries of `ops` (borrowed; static). NULL when out of memory. */
obj_cache *cache_new(const cache_ops *ops);
void cache_free(obj_cache *c); /* NULL is allowed */

/* Replaces every object with the items of `list` (a List object); marks the
 * cache synced. -1 when an item could not be stored (the others are). */
int cache_replace(obj_cache *c, const json_t *list);

/* Paged replace: begin, then the `items` array of each page (borrowed; free it
 * after the call), then end. end(commit = true) makes the new contents live
 * and marks the cache synced; end(false) drops them. _items returns -1 when an
 * item could not be stored (the others are). */
void cache_replace_begin(obj_cache *c);
int cache_replace_items(obj_cache *c, const json_t *items);
void cache_replace_end(obj_cache *c, bool commit);

/* Adds or updates (`deleted` false) or removes (`deleted` true) one object.
 * -1 when it has no name or when out of memory (the cache is unchanged). */
int cache_apply(obj_cache *c, const json_t *obj, bool deleted);

/* A new reference to the entry at `key`, or NULL; give it back with cache_release. */
void *cache_get(obj_cache *c, const char *key);
void cache_release(obj_cache *c, void *entry); /* NULL is allowed */

/* Calls fn on every entry (borrowed, under the lock). */
void cache_each(obj_cache *c, void (*fn)(void *ud, const void *entry), void *ud);

size_t cache_len(obj_cache *c);
bool cache_synced(obj_cache *c);

/* "ns/name" (or "name" when cluster-scoped) of an object, into buf; false if it has no name. */
bool cache_key(const json_t *obj, char *buf, size_t cap);

#endif
