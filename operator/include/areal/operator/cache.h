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
 * Indexes: a cache may keep secondary indexes (cache_ops.n_indexes; the pod
 * cache: by job and by node) with per-key sums, maintained on every add,
 * update, delete and relist, so a reconcile reads its own job's pods and
 * each node's used room without walking every pod of the cluster.
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

#include "areal/operator/cached.h"

typedef struct obj_cache obj_cache;

#define CACHE_MAX_INDEXES 2
#define CACHE_SUMS        3 /* weights an index adds up per key (pods: GPUs, CPU, memory) */
#define CACHE_INDEX_KEY   512

/* How a cache keeps its objects. */
typedef struct cache_ops {
    const char *what; /* "pod", "node", "object" */
    /* A new entry (one reference) for API object `obj`; NULL when out of memory. */
    void *(*convert)(const json_t *obj);
    void *(*retain)(void *entry); /* returns `entry` with one more reference */
    void (*release)(void *entry); /* drops one reference */
    /*
     * Secondary indexes (optional; n_indexes 0 for none): index_key writes
     * the key of `entry` in index `which` into buf (CACHE_INDEX_KEY bytes) and
     * returns true, or false when the entry is not in that index. weigh (may
     * be NULL) gives the entry's CACHE_SUMS weights in index `which`; the
     * cache keeps their sums per key, so a reader asks "what do the entries
     * under this key add up to" without visiting them. Both are pure
     * functions of the entry (entries are immutable).
     */
    int n_indexes;
    bool (*index_key)(const void *entry, int which, char *buf);
    void (*weigh)(const void *entry, int which, long long w[CACHE_SUMS]);
} cache_ops;

/* The pod cache's indexes (cache_ops_pod). */
enum {
    /* "namespace/job" of label areal.io/job: a job's own pods */
    CACHE_POD_BY_JOB = 0,
    /* the node whose room the pod holds: spec.nodeName, or, for an unbound
     * pod of a job that is not being deleted, its planned node (annotation
     * areal.io/planned-node: created, to be bound there). Sums: the GPUs,
     * milli-CPUs and memory bytes of the pods that hold room (not Succeeded
     * or Failed, requests readable). */
    CACHE_POD_BY_NODE = 1,
};

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

/* Stores obj's conversion at its key when there is an entry there and
 * `replace(entry, obj)` says so, or, with `add`, when there is none (the
 * check and the store are one step under the lock: an entry removed
 * meanwhile is not brought back without `add`, and a newer one is not
 * overwritten). 1 stored, 0 not, -1 no name or out of memory. */
int cache_update_if(obj_cache *c, const json_t *obj,
                    bool (*replace)(const void *entry, const json_t *obj), bool add);

/* A new reference to the entry at `key`, or NULL; give it back with cache_release. */
void *cache_get(obj_cache *c, const char *key);
void cache_release(obj_cache *c, void *entry); /* NULL is allowed */

/* Calls fn on every entry (borrowed, under the lock). */
void cache_each(obj_cache *c, void (*fn)(void *ud, const void *entry), void *ud);

/* Calls fn on every entry with key `key` in index `which` (borrowed, under
 * the lock); no other entry is visited. */
void cache_each_in(obj_cache *c, int which, const char *key,
                   void (*fn)(void *ud, const void *entry), void *ud);

/*
 * Atomic reads: fn runs once under the cache's lock with a view through
 * which it may read entries, index buckets and sums (all consistent with
 * each other, as no write happens meanwhile). fn must be quick and must not
 * call other functions of this cache.
 */
typedef struct cache_view cache_view;
void cache_read(obj_cache *c, void (*fn)(void *ud, cache_view *v), void *ud);
/* The entry at `key` (borrowed, valid during the read) or NULL. */
const void *cache_view_get(cache_view *v, const char *key);
/* As cache_each_in, inside a read. */
void cache_view_each_in(cache_view *v, int which, const char *key,
                        void (*fn)(void *ud, const void *entry), void *ud);
/* The sums of index `which` under `key` into sums (zeros when no entry has it). */
void cache_view_sums(cache_view *v, int which, const char *key, long long sums[CACHE_SUMS]);

/* Entries handed out (cache_get, cache_each, cache_each_in, cache_view_get and
 * _each_in) since the cache was made: how much a reader walked, for tests
 * that check a reconcile reads only its own job's pods. */
size_t cache_visits(obj_cache *c);

size_t cache_len(obj_cache *c);
bool cache_synced(obj_cache *c);

/* The node whose room pod `p` holds (as CACHE_POD_BY_NODE indexes it; NULL:
 * none) and, in w, the GPUs, milli-CPUs and memory bytes it holds there
 * (zeros for a finished pod or one whose requests cannot be read). */
const char *cache_pod_room(const cached_pod *p, long long w[CACHE_SUMS]);

/* "ns/name" (or "name" when cluster-scoped) of an object, into buf; false if it has no name. */
bool cache_key(const json_t *obj, char *buf, size_t cap);

#endif
