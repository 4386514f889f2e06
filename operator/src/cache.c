/*
 * cache.c - see areal/operator/cache.h. Entries live in a slot array; a key
 * set maps each key to its slot and freed slots are reused, so updates are
 * O(1) expected and iteration is a scan of the array. A paged replace builds
 * a second such store and swaps it in under the lock; the old store is freed
 * after the lock is released, so readers wait only for the swap.
 * Rejected: clearing the live store at the start of a relist (readers would
 * see an empty cluster while the list is being read, and plan against it).
 */
#include "areal/operator/cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/operator/cached.h"
#include "areal/keyset.h"

typedef struct store {
    areal_keyset index; /* key -> slot */
    void **slot;
    size_t n_slot, cap_slot;
    size_t *free_slots;
    size_t n_free;
    size_t len;
} store;

struct obj_cache {
    pthread_mutex_t mu;
    const cache_ops *ops;
    store live;
    store staging; /* a paged replace in progress (informer thread only) */
    bool synced;
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

const cache_ops cache_ops_json = {"object", json_convert, json_retain, json_release};
const cache_ops cache_ops_pod = {"pod", pod_convert, pod_retain, pod_release};
const cache_ops cache_ops_node = {"node", node_convert, node_retain, node_release};

/* ---- one store ------------------------------------------------------------- */

static void store_clear(store *s, const cache_ops *ops) {
    for (size_t i = 0; i < s->n_slot; i++)
        if (s->slot[i] != NULL)
            ops->release(s->slot[i]);
    free(s->slot);
    free(s->free_slots);
    areal_keyset_free(&s->index);
    memset(s, 0, sizeof *s);
    areal_keyset_init(&s->index);
}

/* Stores `v` (a reference the store takes) at `key`. */
static int store_put(store *s, const cache_ops *ops, const char *key, void *v) {
    int64_t *at = areal_keyset_value(&s->index, key);
    if (at != NULL) {
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
    if (areal_keyset_add(&s->index, key) < 0) {
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
    return c;
}

void cache_free(obj_cache *c) {
    if (c == NULL)
        return;
    store_clear(&c->live, c->ops);
    store_clear(&c->staging, c->ops);
    areal_keyset_free(&c->live.index);
    areal_keyset_free(&c->staging.index);
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
        if (c->live.slot[i] != NULL)
            fn(ud, c->live.slot[i]);
    pthread_mutex_unlock(&c->mu);
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
