/*
 * cache.c - see areal/operator/cache.h. Objects live in a slot array; a key
 * set maps each key to its slot and freed slots are reused, so updates are
 * O(1) expected and iteration is a scan of the array.
 */
#include "areal/operator/cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/operator/keyset.h"

struct obj_cache {
    pthread_mutex_t mu;
    cache_prune_fn prune;
    keyset index; /* key -> slot */
    json_t **slot;
    size_t n_slot, cap_slot;
    size_t *free_slots;
    size_t n_free;
    size_t len;
    bool synced;
};

obj_cache *cache_new(cache_prune_fn prune) {
    obj_cache *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    pthread_mutex_init(&c->mu, NULL);
    c->prune = prune;
    keyset_init(&c->index);
    return c;
}

static void clear_locked(obj_cache *c) {
    for (size_t i = 0; i < c->n_slot; i++)
        json_decref(c->slot[i]);
    free(c->slot);
    free(c->free_slots);
    keyset_free(&c->index);
    c->slot = NULL;
    c->free_slots = NULL;
    c->n_slot = c->cap_slot = c->n_free = c->len = 0;
}

void cache_free(obj_cache *c) {
    if (c == NULL)
        return;
    clear_locked(c);
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

/* Stores `v` (a reference the cache takes) at `key`; lock held. */
static int put_locked(obj_cache *c, const char *key, json_t *v) {
    long *at = keyset_value(&c->index, key);
    if (at != NULL) {
        json_decref(c->slot[*at]);
        c->slot[*at] = v;
        return 0;
    }
    size_t s;
    if (c->n_free > 0) {
        s = c->free_slots[--c->n_free];
    } else {
        if (c->n_slot == c->cap_slot) {
            size_t cap = c->cap_slot ? 2 * c->cap_slot : 64;
            json_t **grown = realloc(c->slot, cap * sizeof *grown);
            size_t *fgrown = realloc(c->free_slots, cap * sizeof *fgrown);
            if (grown != NULL)
                c->slot = grown;
            if (fgrown != NULL)
                c->free_slots = fgrown;
            if (grown == NULL || fgrown == NULL) {
                json_decref(v);
                return -1;
            }
            c->cap_slot = cap;
        }
        s = c->n_slot++;
    }
    if (keyset_add(&c->index, key) < 0) {
        c->free_slots[c->n_free++] = s;
        c->slot[s] = NULL;
        json_decref(v);
        return -1;
    }
    *keyset_value(&c->index, key) = (long)s;
    c->slot[s] = v;
    c->len++;
    return 0;
}

static void remove_locked(obj_cache *c, const char *key) {
    long *at = keyset_value(&c->index, key);
    if (at == NULL)
        return;
    size_t s = (size_t)*at;
    json_decref(c->slot[s]);
    c->slot[s] = NULL;
    c->free_slots[c->n_free++] = s;
    keyset_remove(&c->index, key);
    c->len--;
}

static json_t *pruned(obj_cache *c, const json_t *obj) {
    return c->prune ? c->prune(obj) : json_deep_copy(obj);
}

int cache_apply(obj_cache *c, const json_t *obj, bool deleted) {
    char key[512];
    if (!cache_key(obj, key, sizeof key))
        return -1;
    json_t *v = deleted ? NULL : pruned(c, obj);
    if (!deleted && v == NULL)
        return -1;
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    if (deleted)
        remove_locked(c, key);
    else
        rc = put_locked(c, key, v);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int cache_replace(obj_cache *c, const json_t *list) {
    pthread_mutex_lock(&c->mu);
    clear_locked(c);
    int rc = 0;
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(list, "items"), i, item) {
        char key[512];
        json_t *v;
        if (!cache_key(item, key, sizeof key) || (v = pruned(c, item)) == NULL ||
            put_locked(c, key, v) != 0)
            rc = -1;
    }
    c->synced = true;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

json_t *cache_get(obj_cache *c, const char *key) {
    pthread_mutex_lock(&c->mu);
    long *at = keyset_value(&c->index, key);
    json_t *v = at ? json_incref(c->slot[*at]) : NULL;
    pthread_mutex_unlock(&c->mu);
    return v;
}

void cache_each(obj_cache *c, void (*fn)(void *ud, const json_t *obj), void *ud) {
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_slot; i++)
        if (c->slot[i] != NULL)
            fn(ud, c->slot[i]);
    pthread_mutex_unlock(&c->mu);
}

size_t cache_len(obj_cache *c) {
    pthread_mutex_lock(&c->mu);
    size_t n = c->len;
    pthread_mutex_unlock(&c->mu);
    return n;
}

bool cache_synced(obj_cache *c) {
    pthread_mutex_lock(&c->mu);
    bool s = c->synced;
    pthread_mutex_unlock(&c->mu);
    return s;
}

/* ---- pruning ------------------------------------------------------------ */

/* Copies src[key] into dst when present. */
static void keep(json_t *dst, const json_t *src, const char *key) {
    json_t *v = json_object_get(src, key);
    if (v != NULL)
        json_object_set_new(dst, key, json_deep_copy(v));
}

static json_t *prune_meta(const json_t *meta) {
    json_t *m = json_object();
    static const char *const fields[] = {"name",       "namespace",         "uid",
                                         "labels",     "annotations",       "resourceVersion",
                                         "generation", "deletionTimestamp", NULL};
    for (int i = 0; fields[i]; i++)
        keep(m, meta, fields[i]);
    return m;
}

/* The list src[key] with only fields `a` and `b` of each element kept. */
static json_t *keep_each(const json_t *src, const char *key, const char *a, const char *b) {
    json_t *out = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(src, key), i, e) {
        json_t *kept = json_object();
        keep(kept, e, a);
        keep(kept, e, b);
        json_array_append_new(out, kept);
    }
    return out;
}

/* The Ready condition of a status, alone in a list (the only condition read). */
static json_t *ready_condition(const json_t *status) {
    json_t *conds = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(status, "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && strcmp(t, "Ready") == 0)
            json_array_append_new(conds, json_pack("{s:s,s:O}", "type", "Ready", "status",
                                                   json_object_get(c, "status")));
    }
    return conds;
}

json_t *cache_prune_pod(const json_t *pod) {
    json_t *out = json_object();
    json_object_set_new(out, "metadata", prune_meta(json_object_get(pod, "metadata")));
    const json_t *spec = json_object_get(pod, "spec");
    json_t *s = json_object();
    keep(s, spec, "nodeName");
    keep(s, spec, "schedulerName");
    json_object_set_new(s, "containers", keep_each(spec, "containers", "name", "resources"));
    json_object_set_new(out, "spec", s);
    const json_t *status = json_object_get(pod, "status");
    json_t *st = json_object();
    keep(st, status, "phase");
    keep(st, status, "podIP");
    json_object_set_new(st, "conditions", ready_condition(status));
    json_object_set_new(st, "containerStatuses",
                        keep_each(status, "containerStatuses", "name", "state"));
    json_object_set_new(out, "status", st);
    return out;
}

json_t *cache_prune_node(const json_t *node) {
    json_t *out = json_object();
    const json_t *meta = json_object_get(node, "metadata");
    json_t *m = json_object();
    keep(m, meta, "name");
    keep(m, meta, "labels");
    keep(m, meta, "resourceVersion");
    json_object_set_new(out, "metadata", m);
    json_t *s = json_object();
    keep(s, json_object_get(node, "spec"), "unschedulable");
    keep(s, json_object_get(node, "spec"), "taints");
    json_object_set_new(out, "spec", s);
    const json_t *status = json_object_get(node, "status");
    json_t *st = json_object();
    keep(st, status, "allocatable");
    keep(st, status, "capacity");
    json_object_set_new(st, "conditions", ready_condition(status));
    json_object_set_new(out, "status", st);
    return out;
}
