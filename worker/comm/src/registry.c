/*
 * registry.c - the rollout-server registry over the store (see
 * areal/comm/registry.h). Only check-then-get is used on keys that may be
 * absent: a get that times out is an error, and a check answers at once.
 */
#include "areal/comm/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int key_of(const char *name, char *key, size_t cap, areal_error *err) {
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n >= AREAL_REGISTRY_NAME_MAX)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "registry: a server name must be 1..%d bytes, not %zu",
                               AREAL_REGISTRY_NAME_MAX - 1, n);
    snprintf(key, cap, "%s%s", AREAL_REGISTRY_PREFIX, name);
    return AREAL_OK;
}

int areal_registry_announce(areal_store *st, const char *name, const char *value,
                            areal_error *err) {
    char key[AREAL_REGISTRY_NAME_MAX + 32], slot[64];
    int rc = key_of(name, key, sizeof key, err);
    if (rc == AREAL_OK)
        rc = areal_store_set(st, key, value, strlen(value), err);
    int64_t n = 0;
    if (rc == AREAL_OK)
        rc = areal_store_add(st, AREAL_REGISTRY_INDEX, 1, &n, err);
    if (rc == AREAL_OK) {
        snprintf(slot, sizeof slot, "%s/%lld", AREAL_REGISTRY_INDEX, (long long)n);
        rc = areal_store_set(st, slot, name, strlen(name), err);
    }
    return rc;
}

int areal_registry_update(areal_store *st, const char *name, const char *value, areal_error *err) {
    char key[AREAL_REGISTRY_NAME_MAX + 32];
    int rc = key_of(name, key, sizeof key, err);
    return rc == AREAL_OK ? areal_store_set(st, key, value, strlen(value), err) : rc;
}

int areal_registry_present(areal_store *st, const char *name, bool *present, areal_error *err) {
    char key[AREAL_REGISTRY_NAME_MAX + 32];
    int exists = 0;
    int rc = key_of(name, key, sizeof key, err);
    if (rc == AREAL_OK)
        rc = areal_store_check(st, key, &exists, err);
    *present = rc == AREAL_OK && exists;
    return rc;
}

int areal_registry_remove(areal_store *st, const char *name, areal_error *err) {
    char key[AREAL_REGISTRY_NAME_MAX + 32];
    int rc = key_of(name, key, sizeof key, err);
    return rc == AREAL_OK ? areal_store_delete(st, key, NULL, err) : rc;
}

/* The value of key when it exists: 1 (buf filled, NUL-terminated), 0 absent, < 0 error. */
static int get_if(areal_store *st, const char *key, char *buf, size_t cap, areal_error *err) {
    int exists = 0;
    if (areal_store_check(st, key, &exists, err) != AREAL_OK)
        return -1;
    if (!exists)
        return 0;
    size_t n = 0;
    int rc = areal_store_get(st, key, 1000, buf, cap - 1, &n, err);
    if (rc == AREAL_ERANGE)
        n = 0; /* longer than any registration: read as empty */
    else if (rc != AREAL_OK)
        return -1;
    buf[n] = '\0';
    return 1;
}

int areal_registry_list(areal_store *st, areal_registry_reader *r,
                        void (*cb)(void *ctx, const char *name, const char *value), void *ctx,
                        areal_error *err) {
    int64_t count = 0;
    if (areal_store_add(st, AREAL_REGISTRY_INDEX, 0, &count, err) != AREAL_OK)
        return err ? err->code : AREAL_EIO;
    char name[AREAL_REGISTRY_NAME_MAX], slot[64];
    while (r->read < count) {
        snprintf(slot, sizeof slot, "%s/%ld", AREAL_REGISTRY_INDEX, r->read + 1);
        int got = get_if(st, slot, name, sizeof name, err);
        if (got < 0)
            return err ? err->code : AREAL_EIO;
        if (got == 0)
            break; /* its announcer has not written it yet */
        r->read++;
        bool known = name[0] == '\0';
        for (int i = 0; i < r->n && !known; i++)
            known = strcmp(r->names[i], name) == 0;
        if (known)
            continue;
        if (r->n == r->cap) {
            int cap = r->cap ? 2 * r->cap : 16;
            void *p = realloc(r->names, (size_t)cap * sizeof *r->names);
            if (p == NULL)
                return areal_error_set(err, AREAL_ENOMEM, -1, "registry: out of memory");
            r->names = p;
            r->cap = cap;
        }
        snprintf(r->names[r->n++], sizeof r->names[0], "%s", name);
    }
    char key[AREAL_REGISTRY_NAME_MAX + 32], value[4096];
    for (int i = 0; i < r->n; i++) {
        snprintf(key, sizeof key, "%s%s", AREAL_REGISTRY_PREFIX, r->names[i]);
        int got = get_if(st, key, value, sizeof value, err);
        if (got < 0)
            return err ? err->code : AREAL_EIO;
        if (got > 0 && cb != NULL)
            cb(ctx, r->names[i], value);
    }
    return AREAL_OK;
}

void areal_registry_reader_free(areal_registry_reader *r) {
    free(r->names);
    memset(r, 0, sizeof *r);
}
