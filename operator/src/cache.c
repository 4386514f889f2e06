/*
 * cache.c - see areal/operator/cache.h. Entries live in a slot array; a key
 * set maps each key to its slot and freed slots are reused, so updates are
 * O(1) expected and iteration is a scan of the array. A paged replace builds
 * a second such store and swaps it in under the lock; the old store is freed
 * after the lock is released, so readers wait only for the swap.
 * Rejected: clearing the live store at the start of a relist (readers would
 * see an empty cluster while the list is being read, and plan against it).
 *
 * Secondary indexes (issue 11: "no step scans the whole cluster per job"):
 * per index, a key set maps each index key to a bucket (the slots of its
 * entries and the sums of their weights), kept on every put and remove of
 * the store, so a store and its indexes always agree and swap together. A
 * bucket's slots are a small array (a job's or a node's pods: removal is a
 * scan of tens); an emptied bucket's key goes and its array is reused. Every
 * allocation of a put is made before anything changes, so an out-of-memory
 * put leaves store and indexes as they were.
 * Rejected: a generic "index by any field" API (two indexes are needed) and
 * summing on read (the per-node room would walk every pod of the node).
 */
#include "areal/operator/cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/operator/cached.h"
#include "areal/keyset.h"

typedef struct bucket {
    size_t *slots; /* slots of the entries under this key */
    size_t n, cap;
    long long sum[CACHE_SUMS];
} bucket;

typedef struct sec_index {
    areal_keyset keys; /* index key -> bucket id */
    bucket *buckets;
    size_t n_buckets, cap_buckets;
    size_t *free_buckets; /* ids of emptied buckets (their arrays kept) */
    size_t n_free;
} sec_index;

typedef struct store {
    areal_keyset index; /* key -> slot */
    void **slot;
    size_t n_slot, cap_slot;
    size_t *free_slots;
    size_t n_free;
    size_t len;
    sec_index sec[CACHE_MAX_INDEXES];
} store;

struct obj_cache {
    pthread_mutex_t mu;
    const cache_ops *ops;
    store live;
    store staging; /* a paged replace in progress (informer thread only) */
    bool synced;
    size_t visits; /* entries handed to readers (under mu) */
};

struct cache_view {
    obj_cache *c;
};

/* ---- the entry forms ----------------------------------------------------- */

static void *json_convert(const json_t *obj) {
    return json_deep_copy(obj);
}
static void *json_retain(void *e) {
    return json_incref(e);
}
static void json_release(void *e) {
    json_decref(e);
}
static void *pod_convert(const json_t *obj) {
    return cached_pod_new(obj);
}
static void *pod_retain(void *e) {
    return cached_pod_retain(e);
}
static void pod_release(void *e) {
    cached_pod_release(e);
}
static void *node_convert(const json_t *obj) {
    return cached_node_new(obj);
}
static void *node_retain(void *e) {
    return cached_node_retain(e);
}
static void node_release(void *e) {
    cached_node_release(e);
}

const char *cache_pod_room(const cached_pod *p, long long w[CACHE_SUMS]) {
    const char *node = p->node_name;
    if (node == NULL && p->planned_node != NULL && p->deletion_timestamp == NULL && p->job)
        node = p->planned_node;
    bool holds = node != NULL && p->requests_ok && p->phase != CACHED_PHASE_SUCCEEDED &&
                 p->phase != CACHED_PHASE_FAILED;
    w[0] = holds ? p->gpus : 0;
    w[1] = holds ? p->cpu_milli : 0;
    w[2] = holds ? p->mem_bytes : 0;
    return node;
}

static bool pod_index_key(const void *e, int which, char *buf) {
    const cached_pod *p = e;
    if (which == CACHE_POD_BY_JOB) {
        if (p->ns == NULL || p->job == NULL)
            return false;
        int n = snprintf(buf, CACHE_INDEX_KEY, "%s/%s", p->ns, p->job);
        return n > 0 && n < CACHE_INDEX_KEY;
    }
    long long w[CACHE_SUMS];
    const char *node = cache_pod_room(p, w);
    if (node == NULL)
        return false;
    int n = snprintf(buf, CACHE_INDEX_KEY, "%s", node);
    return n > 0 && n < CACHE_INDEX_KEY;
}

static void pod_weigh(const void *e, int which, long long w[CACHE_SUMS]) {
    if (which == CACHE_POD_BY_NODE) {
        cache_pod_room(e, w);
        return;
    }
    for (int i = 0; i < CACHE_SUMS; i++)
        w[i] = 0;
}

const cache_ops cache_ops_json = {"object", json_convert, json_retain, json_release, 0, NULL, NULL};
const cache_ops cache_ops_pod = {"pod", pod_convert,   pod_retain, pod_release,
                                 2,     pod_index_key, pod_weigh};
const cache_ops cache_ops_node = {"node", node_convert, node_retain, node_release, 0, NULL, NULL};

/* ---- secondary indexes ------------------------------------------------------ */

static void sec_clear(sec_index *x) {
    for (size_t i = 0; i < x->n_buckets; i++)
        free(x->buckets[i].slots);
    free(x->buckets);
    free(x->free_buckets);
    areal_keyset_free(&x->keys);
    memset(x, 0, sizeof *x);
    areal_keyset_init(&x->keys);
}

/* The bucket id of `key`, made (empty) when absent, with room for one more
 * slot; -1 when out of memory (nothing changed but maybe an empty bucket,
 * which sec_drop_empty removes). */
static long sec_reserve(sec_index *x, const char *key) {
    int64_t *at = areal_keyset_value(&x->keys, key);
    size_t id;
    if (at != NULL) {
        id = (size_t)*at;
    } else {
        if (x->n_free == 0 && x->n_buckets == x->cap_buckets) {
            size_t cap = x->cap_buckets ? 2 * x->cap_buckets : 16;
            bucket *grown = realloc(x->buckets, cap * sizeof *grown);
            if (grown == NULL)
                return -1;
            x->buckets = grown;
            size_t *fgrown = realloc(x->free_buckets, cap * sizeof *fgrown);
            if (fgrown == NULL)
                return -1;
            x->free_buckets = fgrown;
            x->cap_buckets = cap;
        }
        if (areal_keyset_add(&x->keys, key) < 0)
            return -1;
        if (x->n_free > 0) {
            id = x->free_buckets[--x->n_free];
        } else {
            id = x->n_buckets++;
            memset(&x->buckets[id], 0, sizeof x->buckets[id]);
        }
        bucket *b = &x->buckets[id];
        b->n = 0;
        memset(b->sum, 0, sizeof b->sum);
        *areal_keyset_value(&x->keys, key) = (int64_t)id;
    }
    bucket *b = &x->buckets[id];
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 4;
        size_t *grown = realloc(b->slots, cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        b->slots = grown;
        b->cap = cap;
    }
    return (long)id;
}

/* Removes the bucket of `key` if it is empty (its array is kept for reuse). */
static void sec_drop_empty(sec_index *x, const char *key) {
    int64_t *at = areal_keyset_value(&x->keys, key);
    if (at == NULL || x->buckets[*at].n > 0)
        return;
    x->free_buckets[x->n_free++] = (size_t)*at;
    areal_keyset_remove(&x->keys, key);
}

static void sec_add(sec_index *x, long id, size_t slot, const long long w[CACHE_SUMS]) {
    bucket *b = &x->buckets[id];
    b->slots[b->n++] = slot;
    for (int i = 0; i < CACHE_SUMS; i++)
        b->sum[i] += w[i];
}

static void sec_del(sec_index *x, const char *key, size_t slot, const long long w[CACHE_SUMS]) {
    int64_t *at = areal_keyset_value(&x->keys, key);
    if (at == NULL)
        return;
    bucket *b = &x->buckets[*at];
    for (size_t i = 0; i < b->n; i++)
        if (b->slots[i] == slot) {
            b->slots[i] = b->slots[--b->n];
            break;
        }
    for (int i = 0; i < CACHE_SUMS; i++)
        b->sum[i] -= w[i];
    sec_drop_empty(x, key);
}

/* The key and weights of entry e in index `which`; false when not in it. */
static bool sec_of(const cache_ops *ops, const void *e, int which, char *key,
                   long long w[CACHE_SUMS]) {
    for (int i = 0; i < CACHE_SUMS; i++)
        w[i] = 0;
    if (e == NULL || !ops->index_key(e, which, key))
        return false;
    if (ops->weigh != NULL)
        ops->weigh(e, which, w);
    return true;
}

/*
 * Moves slot `slot` from old entry `was` (NULL: none) to new entry `now`
 * (NULL: none) in every index. With `now`, every allocation is made first:
 * -1 when out of memory, and then nothing changed.
 */
static int sec_update(store *s, const cache_ops *ops, size_t slot, const void *was,
                      const void *now) {
    char ok[CACHE_MAX_INDEXES][CACHE_INDEX_KEY], nk[CACHE_MAX_INDEXES][CACHE_INDEX_KEY];
    long long ow[CACHE_MAX_INDEXES][CACHE_SUMS], nw[CACHE_MAX_INDEXES][CACHE_SUMS];
    bool has_o[CACHE_MAX_INDEXES], has_n[CACHE_MAX_INDEXES];
    long id[CACHE_MAX_INDEXES];
    int n = ops->n_indexes < CACHE_MAX_INDEXES ? ops->n_indexes : CACHE_MAX_INDEXES;
    for (int k = 0; k < n; k++) {
        has_o[k] = sec_of(ops, was, k, ok[k], ow[k]);
        has_n[k] = sec_of(ops, now, k, nk[k], nw[k]);
        id[k] = -1;
    }
    for (int k = 0; k < n; k++) {
        if (!has_n[k])
            continue;
        id[k] = sec_reserve(&s->sec[k], nk[k]);
        if (id[k] < 0) {
            for (int u = 0; u <= k; u++)
                if (has_n[u])
                    sec_drop_empty(&s->sec[u], nk[u]);
            return -1;
        }
    }
    for (int k = 0; k < n; k++) {
        /* remove first: a bucket reserved for the same key keeps its id (it is
         * not empty while the old slot is in it, and re-reserving is not needed) */
        if (has_o[k] && has_n[k] && strcmp(ok[k], nk[k]) == 0) {
            bucket *b = &s->sec[k].buckets[id[k]];
            for (int i = 0; i < CACHE_SUMS; i++)
                b->sum[i] += nw[k][i] - ow[k][i];
            continue;
        }
        if (has_o[k])
            sec_del(&s->sec[k], ok[k], slot, ow[k]);
        if (has_n[k])
            sec_add(&s->sec[k], id[k], slot, nw[k]);
    }
    return 0;
}

/* ---- one store ------------------------------------------------------------- */

static void store_clear(store *s, const cache_ops *ops) {
    for (size_t i = 0; i < s->n_slot; i++)
        if (s->slot[i] != NULL)
            ops->release(s->slot[i]);
    free(s->slot);
    free(s->free_slots);
    areal_keyset_free(&s->index);
    for (int k = 0; k < CACHE_MAX_INDEXES; k++)
        sec_clear(&s->sec[k]);
    s->slot = NULL;
    s->free_slots = NULL;
    s->n_slot = s->cap_slot = s->n_free = s->len = 0;
    areal_keyset_init(&s->index);
}

/* Stores `v` (a reference the store takes) at `key`. */
static int store_put(store *s, const cache_ops *ops, const char *key, void *v) {
    int64_t *at = areal_keyset_value(&s->index, key);
    if (at != NULL) {
        if (sec_update(s, ops, (size_t)*at, s->slot[*at], v) != 0) {
            ops->release(v);
            return -1;
        }
        ops->release(s->slot[*at]);
        s->slot[*at] = v;
        return 0;
    }
    size_t i;
    if (s->n_free > 0) {
        i = s->free_slots[--s->n_free];
    } else {
        if (s->n_slot == s->cap_slot) {
            size_t cap = s->cap_slot ? 2 * s->cap_slot : 64;
            void **grown = realloc(s->slot, cap * sizeof *grown);
            if (grown != NULL)
                s->slot = grown;
            size_t *fgrown = grown ? realloc(s->free_slots, cap * sizeof *fgrown) : NULL;
            if (fgrown != NULL)
                s->free_slots = fgrown;
            if (grown == NULL || fgrown == NULL) {
                ops->release(v);
                return -1;
            }
            s->cap_slot = cap;
        }
        i = s->n_slot++;
    }
    if (areal_keyset_add(&s->index, key) < 0 || sec_update(s, ops, i, NULL, v) != 0) {
        areal_keyset_remove(&s->index, key); /* when added */
        s->free_slots[s->n_free++] = i;
        s->slot[i] = NULL;
        ops->release(v);
        return -1;
    }
    *areal_keyset_value(&s->index, key) = (int64_t)i;
    s->slot[i] = v;
    s->len++;
    return 0;
}

static void store_remove(store *s, const cache_ops *ops, const char *key) {
    int64_t *at = areal_keyset_value(&s->index, key);
    if (at == NULL)
        return;
    size_t i = (size_t)*at;
    sec_update(s, ops, i, s->slot[i], NULL); /* removals allocate nothing */
    ops->release(s->slot[i]);
    s->slot[i] = NULL;
    s->free_slots[s->n_free++] = i;
    areal_keyset_remove(&s->index, key);
    s->len--;
}

/* ---- the cache ---------------------------------------------------------------- */

obj_cache *cache_new(const cache_ops *ops) {
    obj_cache *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    pthread_mutex_init(&c->mu, NULL);
    c->ops = ops;
    areal_keyset_init(&c->live.index);
    areal_keyset_init(&c->staging.index);
    for (int k = 0; k < CACHE_MAX_INDEXES; k++) {
        areal_keyset_init(&c->live.sec[k].keys);
        areal_keyset_init(&c->staging.sec[k].keys);
    }
    return c;
}

void cache_free(obj_cache *c) {
    if (c == NULL)
        return;
    store_clear(&c->live, c->ops);
    store_clear(&c->staging, c->ops);
    areal_keyset_free(&c->live.index);
    areal_keyset_free(&c->staging.index);
    for (int k = 0; k < CACHE_MAX_INDEXES; k++) {
        areal_keyset_free(&c->live.sec[k].keys);
        areal_keyset_free(&c->staging.sec[k].keys);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

bool cache_key(const json_t *obj, char *buf, size_t cap) {
    const json_t *meta = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *ns = json_string_value(json_object_get(meta, "namespace"));
    if (name == NULL || name[0] == '\0')
        return false;
    int n = ns && ns[0] ? snprintf(buf, cap, "%s/%s", ns, name) : snprintf(buf, cap, "%s", name);
    return n > 0 && (size_t)n < cap;
}

int cache_apply(obj_cache *c, const json_t *obj, bool deleted) {
    char key[512];
    if (!cache_key(obj, key, sizeof key))
        return -1;
    void *v = deleted ? NULL : c->ops->convert(obj);
    if (!deleted && v == NULL)
        return -1;
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    if (deleted)
        store_remove(&c->live, c->ops, key);
    else
        rc = store_put(&c->live, c->ops, key, v);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int cache_update_if(obj_cache *c, const json_t *obj,
                    bool (*replace)(const void *entry, const json_t *obj), bool add) {
    char key[512];
    if (!cache_key(obj, key, sizeof key))
        return -1;
    void *v = c->ops->convert(obj);
    if (v == NULL)
        return -1;
    pthread_mutex_lock(&c->mu);
    int64_t *at = areal_keyset_value(&c->live.index, key);
    int rc = 0;
    if (at != NULL ? replace(c->live.slot[*at], obj) : add) {
        rc = store_put(&c->live, c->ops, key, v) == 0 ? 1 : -1; /* takes v */
        v = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    if (v != NULL)
        c->ops->release(v);
    return rc;
}

void cache_replace_begin(obj_cache *c) {
    store_clear(&c->staging, c->ops);
}

int cache_replace_items(obj_cache *c, const json_t *items) {
    int rc = 0;
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item) {
        char key[512];
        void *v;
        if (!cache_key(item, key, sizeof key) || (v = c->ops->convert(item)) == NULL ||
            store_put(&c->staging, c->ops, key, v) != 0)
            rc = -1;
    }
    return rc;
}

void cache_replace_end(obj_cache *c, bool commit) {
    if (!commit) {
        store_clear(&c->staging, c->ops);
        return;
    }
    pthread_mutex_lock(&c->mu);
    store old = c->live;
    c->live = c->staging;
    c->synced = true;
    pthread_mutex_unlock(&c->mu);
    c->staging = old;
    store_clear(&c->staging, c->ops);
}

int cache_replace(obj_cache *c, const json_t *list) {
    cache_replace_begin(c);
    int rc = cache_replace_items(c, json_object_get(list, "items"));
    cache_replace_end(c, true);
    return rc;
}

void *cache_get(obj_cache *c, const char *key) {
    pthread_mutex_lock(&c->mu);
    int64_t *at = areal_keyset_value(&c->live.index, key);
    void *v = at ? c->ops->retain(c->live.slot[*at]) : NULL;
    c->visits += v != NULL;
    pthread_mutex_unlock(&c->mu);
    return v;
}

void cache_release(obj_cache *c, void *entry) {
    if (entry != NULL)
        c->ops->release(entry);
}

void cache_each(obj_cache *c, void (*fn)(void *ud, const void *entry), void *ud) {
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->live.n_slot; i++)
        if (c->live.slot[i] != NULL) {
            c->visits++;
            fn(ud, c->live.slot[i]);
        }
    pthread_mutex_unlock(&c->mu);
}

/* The bucket of `key` in index `which` of the live store, or NULL. Locked. */
static const bucket *live_bucket(obj_cache *c, int which, const char *key) {
    if (which < 0 || which >= c->ops->n_indexes || which >= CACHE_MAX_INDEXES || key == NULL)
        return NULL;
    sec_index *x = &c->live.sec[which];
    int64_t *at = areal_keyset_value(&x->keys, key);
    return at ? &x->buckets[*at] : NULL;
}

static void each_in_locked(obj_cache *c, int which, const char *key,
                           void (*fn)(void *ud, const void *entry), void *ud) {
    const bucket *b = live_bucket(c, which, key);
    for (size_t i = 0; b != NULL && i < b->n; i++) {
        c->visits++;
        fn(ud, c->live.slot[b->slots[i]]);
    }
}

void cache_each_in(obj_cache *c, int which, const char *key,
                   void (*fn)(void *ud, const void *entry), void *ud) {
    pthread_mutex_lock(&c->mu);
    each_in_locked(c, which, key, fn, ud);
    pthread_mutex_unlock(&c->mu);
}

void cache_read(obj_cache *c, void (*fn)(void *ud, cache_view *v), void *ud) {
    cache_view v = {c};
    pthread_mutex_lock(&c->mu);
    fn(ud, &v);
    pthread_mutex_unlock(&c->mu);
}

const void *cache_view_get(cache_view *v, const char *key) {
    int64_t *at = areal_keyset_value(&v->c->live.index, key);
    if (at == NULL)
        return NULL;
    v->c->visits++;
    return v->c->live.slot[*at];
}

void cache_view_each_in(cache_view *v, int which, const char *key,
                        void (*fn)(void *ud, const void *entry), void *ud) {
    each_in_locked(v->c, which, key, fn, ud);
}

void cache_view_sums(cache_view *v, int which, const char *key, long long sums[CACHE_SUMS]) {
    const bucket *b = live_bucket(v->c, which, key);
    for (int i = 0; i < CACHE_SUMS; i++)
        sums[i] = b ? b->sum[i] : 0;
}

size_t cache_visits(obj_cache *c) {
    pthread_mutex_lock(&c->mu);
    size_t n = c->visits;
    pthread_mutex_unlock(&c->mu);
    return n;
}

size_t cache_len(obj_cache *c) {
    pthread_mutex_lock(&c->mu);
    size_t n = c->live.len;
    pthread_mutex_unlock(&c->mu);
    return n;
}

bool cache_synced(obj_cache *c) {
    pthread_mutex_lock(&c->mu);
    bool s = c->synced;
    pthread_mutex_unlock(&c->mu);
    return s;
}
